import DBusKit
import Foundation
import Testing
import PermissionsTestSupport
import SystemPrimitives

/// A flood of large calls: 10 `Request`s sent at once from one connection, each
/// with a 1 000 000-key options dictionary (about 24 MB on the wire, under the
/// bus's 32 MiB message limit). The daemon runs as it runs when installed: the
/// release build (when scripts/test made one, else this build), with its own
/// allocator settings (none of FuzzTests' MALLOC_* variables).
///
/// Must hold: each flood call is answered InvalidArgument quoting the limit it
/// broke; the daemon's peak RSS (VmHWM, reset just before the flood) stays within
/// `peakBoundKiB` (64 MiB) in all (libdbus holds each 24 MB message twice while it
/// reads it: the loader's buffer and the message's copy); afterwards its RSS comes
/// back within `settledBoundKiB` (2 MiB) of that, polled for up to 5 s; and the
/// daemon answers a caller on another connection throughout (its longest wait for a
/// GetStatus during the flood is printed, and how many of its calls the bus
/// itself refused, its queue for the daemon full).
@Suite(.serialized) struct FloodTests {
    static let peakBoundKiB = 64 * 1024
    static let settledBoundKiB = 2 * 1024
    static let calls = 10
    static let keys = 1_000_000
    /// The bus's refusal of a message to a connection whose queue there is full.
    static let busQueueFull = "org.freedesktop.DBus.Error.LimitsExceeded: Rejected: destination has a full message queue"

    /// `Request("location", options)` with `keys` keys, each mapped to a uint32.
    static func floodCall(_ options: DBusValue) throws -> Message {
        try BusClient.serviceCall("Request", [.string("location"), options])
    }

    @Test(.hangGuard) func largeOptionsFloodLeavesMemoryAsItWas() throws {
        let bus = try TestBus()
        let build = releaseBinDir ?? binDir
        let daemon = try DaemonUnderTest(bus: bus, config: "[location]\nno-agent=denied\n",
                                         pluginDirectories: [pluginDirectory("flood-plugins", with: ["location", "notifications"], from: build)],
                                         start: false)
        daemon.programDirectory = build
        try daemon.start()
        let pid = try #require(daemon.pid)
        let flooder = try BusClient(bus: bus, label: "flooder")
        let other = try BusClient(bus: bus, label: "other")
        defer {
            flooder.close()
            other.close()
        }
        // Warm-up: the other caller identified, every path of a small Request taken
        // once. The flooder's first calls are the flood: its identity is asked for
        // behind its own 240 MB.
        #expect(try other.call("Request", [.string("location"), .vardict([("reason", .string("warm-up"))])])
            .get().first?.stringValue == "denied")
        let options = DBusValue.vardict((0..<Self.keys).map { (String(format: "k%06d", $0), .uint32(0)) })
        let first = try Self.floodCall(options)
        let messages = [first] + (1..<Self.calls).map { _ in first.copy() }

        let baseline = ProcessFigures.residentKiB(pid)
        try ProcessFigures.resetPeak(pid)
        let busPID = try #require(bus.processIdentifier)
        let (daemonCPU, busCPU) = (ProcessFigures.cpuSeconds(pid), ProcessFigures.cpuSeconds(busPID))

        // The other caller asks throughout; its longest wait is what the flood costs it.
        let flooding = Locked(true)
        let waits = Locked<[Double]>([])
        let otherErrors = Locked<[String]>([])
        let otherDone = DispatchSemaphore(value: 0)
        Thread {
            while flooding.withLock({ $0 }) {
                let started = Date()
                let result = other.call("GetStatus", [.string("location")], timeoutMilliseconds: 60_000)
                waits.withLock { $0.append(-started.timeIntervalSinceNow) }
                if case .failure(let error) = result { otherErrors.withLock { $0.append("\(error)") } }
            }
            otherDone.signal()
        }.start()

        let started = Date()
        let answers = flooder.sendAll(messages, timeoutMilliseconds: 120_000)
        let floodSeconds = -started.timeIntervalSinceNow
        flooding.withLock { $0 = false }
        otherDone.wait()
        let peak = ProcessFigures.peakResidentKiB(pid)
        let (daemonFloodCPU, busFloodCPU) = (ProcessFigures.cpuSeconds(pid) - daemonCPU,
                                             ProcessFigures.cpuSeconds(busPID) - busCPU)

        // Settled: RSS polled until it is back within the bound, for up to 5 s.
        var settled = ProcessFigures.residentKiB(pid)
        let deadline = Date().addingTimeInterval(5)
        while settled - baseline > Self.settledBoundKiB, Date() < deadline {
            usleep(50_000)  // a sampling interval, not a synchronisation
            settled = ProcessFigures.residentKiB(pid)
        }

        for answer in answers {
            let error = answer.error
            #expect(error?.name == "org.example.Permissions.Error.InvalidArgument", "\(answer)")
            #expect(error?.message.contains("the limit is") == true, "\(answer)")
        }
        // The daemon answered every call of the other caller's that reached it. The
        // bus itself may refuse some while the flood fills the 127 MiB it holds for
        // the daemon (max_outgoing_bytes): counted, not the daemon's doing.
        let refusedByBus = otherErrors.withLock { $0 }.filter { $0.hasPrefix(Self.busQueueFull) }
        #expect(refusedByBus.count == otherErrors.withLock { $0 }.count,
                "\(otherErrors.withLock { $0 }.filter { !$0.hasPrefix(Self.busQueueFull) })")
        #expect(try other.call("GetStatus", [.string("location")]).get().first?.stringValue == "not-determined")
        #expect(daemon.isRunning)
        #expect(peak <= Self.peakBoundKiB,
                "the flood took the daemon's RSS from \(baseline) KiB to a peak of \(peak) KiB")
        #expect(settled - baseline <= Self.settledBoundKiB,
                "RSS \(settled) KiB 5 s after the flood, \(baseline) KiB before it")
        let sortedWaits = waits.withLock { $0 }.sorted()
        let longest = sortedWaits.last ?? 0
        let median = sortedWaits.isEmpty ? 0 : sortedWaits[sortedWaits.count / 2]
        reportFigures("large-options-flood", [
            "build": build == binDir ? "this" : "release", "calls": Self.calls, "keys": Self.keys, "rss-before-kib": baseline, "peak-rss-kib": peak,
            "peak-growth-kib": peak - baseline, "peak-bound-kib": Self.peakBoundKiB, "settled-rss-kib": settled,
            "settled-growth-kib": settled - baseline, "settled-bound-kib": Self.settledBoundKiB,
            "flood-seconds": String(format: "%.2f", floodSeconds),
            "daemon-cpu-seconds": String(format: "%.2f", daemonFloodCPU),
            "bus-cpu-seconds": String(format: "%.2f", busFloodCPU), "other-calls": sortedWaits.count,
            "other-refused-by-bus": refusedByBus.count, "other-median-ms": String(format: "%.1f", median * 1000),
            "other-longest-ms": String(format: "%.1f", longest * 1000),
            "first-answer": answers.first.map { "\($0.error?.name ?? "a return")" } ?? "none",
        ])
    }
}

extension BusClient {
    /// Sends every message at once (pipelined: none waits for another's reply) and
    /// waits for all the replies, in the order sent.
    func sendAll(_ messages: [Message], timeoutMilliseconds: Int32) -> [Result<Message, BusError>] {
        let group = DispatchGroup()
        let results = Locked([Result<Message, BusError>](repeating: .failure(BusError(BusError.noReply, "no reply")),
                                                         count: messages.count))
        let connection = self.connection
        for _ in messages { group.enter() }
        queue.async {
            for (index, message) in messages.enumerated() {
                connection.call(message, timeoutMilliseconds: timeoutMilliseconds) { result in
                    results.withLock { $0[index] = result }
                    group.leave()
                }
            }
        }
        group.wait()
        return results.withLock { $0 }
    }
}

extension ProcessFigures {
    /// CPU time `pid` has used, user and system (/proc/PID/stat), in seconds.
    static func cpuSeconds(_ pid: Int32) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let end = stat.lastIndex(of: ")") else { return -1 }
        // After "pid (comm) ", field 3 is the state; utime and stime are fields 14 and 15.
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return -1 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Resets `pid`'s peak RSS (VmHWM) to its RSS now (clear_refs 5, Linux 4.0).
    static func resetPeak(_ pid: Int32) throws {
        try "5".write(toFile: "/proc/\(pid)/clear_refs", atomically: false, encoding: .utf8)
    }
}
