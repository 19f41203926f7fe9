// permissions-bench request-handles: what one user's flood of request handles
// costs another user. permissionsd (the location and notifications plugins of
// the build) runs with [service] requests-per-connection= and requests-per-user=
// (the shipped 64 and 512 unless given) and agent-timeout=3600, so that no handle
// ends while the bench runs. The flooding user is root, the bench itself: its
// agent, on a connection of the bench, takes the prompt and never answers it, so
// that every StartRequest's handle stays open. Another user (uid 65534, a process
// of its own: `other-user-caller`) calls GetStatus back to back the whole time,
// while the bench, round after round, leaves an idle window, then a window in
// which the flood's connections call GetStatus(location) back to back instead
// (what as many busy connections cost the other user without any handle: the
// bus and the cores shared), then a flood window. The windows are short (12
// rounds of 1 s by default), so that bursts of other load on a shared machine
// fall on every kind alike.
//
// A flood window: requests-per-user / requests-per-connection connections, each
// on a thread of its own, call StartRequest(notifications) back to back until
// each is refused LimitExceeded for its connection; then one more connection, whose
// first call is refused for the user; then all of them keep calling, each call
// refused, until the window ends (it lasts at least until that first refusal for
// the user). The handles each connection got must be the limits exactly. Then the
// flood's connections leave the bus, which closes their handles, and the bench
// waits until the daemon has told the agent to cancel the prompt (every requester
// gone) before the next idle window. Each of the other user's calls counts in the
// window it started in; the flood window is also split at the first refusal for
// the user: filling to the limits, then held at them.
import DBusKit
import Foundation
import PermissionsTestSupport
import Synchronization
import SystemPrimitives

struct RequestHandlesOptions {
    let perConnection: Int
    let perUser: Int
    /// --window, --rounds, --keep, --smoke.
    let windows: WindowOptions

    static let usage = """
        usage: permissions-bench request-handles [--quick] [--smoke] [--per-connection N] [--per-user N] [--window S] [--rounds N] [--keep]
          --quick             a few seconds: one round (figures are rougher)
          --smoke             limits of 4 and 8, one round of 0.3 s windows, to check that the bench works (no figures)
          --per-connection N  [service] requests-per-connection= (default 64, as shipped)
          --per-user N        [service] requests-per-user= (default 512, as shipped); a multiple of --per-connection
          --window S          length of each window (default 1)
          --rounds N          rounds of an idle window, a GetStatus window and a flood window (default 12)
          --keep              keep the temporary directory (logs, configuration)
        """

    init(_ arguments: [String]) {
        var perConnection = 64, perUser = 512
        windows = WindowOptions(arguments, usage: Self.usage, window: 1, rounds: 12) { option, number in
            switch option {
            case "--quick": break
            case "--smoke": (perConnection, perUser) = (4, 8)
            case "--per-connection": perConnection = Int(number())
            case "--per-user": perUser = Int(number())
            default: return false
            }
            return true
        }
        guard perConnection > 0, perUser % perConnection == 0 else {
            usageError("--per-user (\(perUser)) must be a multiple of --per-connection (\(perConnection))",
                       usage: Self.usage)
        }
        (self.perConnection, self.perUser) = (perConnection, perUser)
    }
}

func runRequestHandlesBench(_ arguments: [String]) {
    RequestHandlesBench(RequestHandlesOptions(arguments)).run()
}

final class RequestHandlesBench {
    let options: RequestHandlesOptions
    let root: String
    private let report = Report()

    init(_ options: RequestHandlesOptions) {
        self.options = options
        root = makeRunDirectory(keep: options.windows.keep)
    }

    private var windows: WindowOptions { options.windows }
    /// The connections that fill up to requests-per-connection each, and so together to requests-per-user.
    private var fillers: Int { options.perUser / options.perConnection }

    func run() {
        let t0 = monotonicNanoseconds()
        makeDaemonDirectories(root, plugin: "location")
        makeDaemonDirectories(root, plugin: "notifications")
        let config = "[location]\nenabled=true\n\n[notifications]\nenabled=true\n\n[service]\n"
            + "requests-per-connection=\(options.perConnection)\nrequests-per-user=\(options.perUser)\nagent-timeout=3600\n"
        guard FileManager.default.createFile(atPath: root + "/config/permissions.conf", contents: Data(config.utf8)) else {
            fail("cannot write \(root)/config/permissions.conf")
        }
        let bus = startBus()
        let daemon = startDaemon(root: root, address: bus.address,
                                 environment: ["DBUS_SYSTEM_BUS_ADDRESS": bus.address,
                                               "DBUS_SESSION_BUS_ADDRESS": bus.address])
        let agent = BenchAgent(address: bus.address)

        // The other user, measuring from now until the last window has ended (a flood
        // window may outlast its length, 60 s at most, and the clean-up after it 30 s).
        let seconds = Double(3 * windows.rounds) * windows.window + Double(90 * windows.rounds) + 60
        let caller = OtherUserCaller(root: root, address: bus.address, seconds: seconds)
        let w = format(windows.window)
        print("permissions-bench request-handles: requests-per-connection=\(options.perConnection), "
              + "requests-per-user=\(options.perUser); in flood windows \(fillers + 1) connections of uid 0 (its agent "
              + "never answers) call StartRequest(notifications) back to back; \(windows.rounds) rounds of \(w) s idle + "
              + "\(w) s of the same connections calling GetStatus + \(w) s flood; GetStatus(location) back to back by uid "
              + "\(otherUserUID); \(ProcessInfo.processInfo.activeProcessorCount) cores; binaries from \(binDir)")
        fflush(nil)

        var idle: [(UInt64, UInt64)] = []
        var reading: [(UInt64, UInt64)] = []
        var reads = 0
        var flooded: [(UInt64, UInt64)] = []
        var filling: [(UInt64, UInt64)] = []
        var held: [(UInt64, UInt64)] = []
        var rounds: [[String]] = []
        var refusedForConnection = 0, refusedForUser = 0, fillMilliseconds: [Double] = []
        for round in 1...windows.rounds {
            let idleStart = monotonicNanoseconds()
            sleepSeconds(windows.window)  // the window itself: the caller measures meanwhile
            idle.append((idleStart, monotonicNanoseconds()))

            let readers = Flood(address: bus.address, fillers: fillers, reads: true)
            let readStart = readers.start()
            sleepSeconds(windows.window)
            let readEnd = monotonicNanoseconds()
            reads += readers.stop().reduce(0) { $0 + $1.accepted }
            reading.append((readStart, readEnd))

            let flood = Flood(address: bus.address, fillers: fillers)
            let cancels = agent.cancels.count
            let start = flood.start()
            guard let full = flood.waitForUserRefusal(seconds: 60) else {
                fail("round \(round): the flood was not refused for its user within 60 s; "
                     + "see \(root)/permissionsd.log (run with --keep)")
            }
            let end = max(start + UInt64(windows.window * 1e9), full)
            let now = monotonicNanoseconds()
            if end > now { sleepSeconds(Double(end - now) / 1e9) }
            let tallies = flood.stop()
            flooded.append((start, end))
            filling.append((start, full))
            held.append((full, end))
            check(tallies, round: round)
            // The flood's connections have left: once the prompt is cancelled the
            // daemon has closed every handle of theirs.
            guard agent.cancels.first(from: cancels, timeout: 30, { $0 }) != nil else {
                fail("round \(round): the prompt was not cancelled within 30 s of the flood's connections leaving")
            }
            let byConnection = tallies.reduce(0) { $0 + $1.refusedForConnection }
            let byUser = tallies.reduce(0) { $0 + $1.refusedForUser }
            let calls = tallies.reduce(0) { $0 + $1.accepted } + byConnection + byUser
            refusedForConnection += byConnection
            refusedForUser += byUser
            fillMilliseconds.append(Double(full - start) / 1e6)
            rounds.append(["\(round)", "\(tallies.reduce(0) { $0 + $1.accepted })", "\(byConnection)", "\(byUser)",
                           format(Double(full - start) / 1e6), format(Double(calls) / (Double(end - start) / 1e9))])
        }
        let calls = caller.stop()
        let i = samples(calls, within: idle)
        let r = samples(calls, within: reading)
        let f = samples(calls, within: flooded)
        let fill = samples(calls, within: filling)
        let h = samples(calls, within: held)
        let r50 = ratio(f.p50, i.p50)
        let r99 = ratio(f.p99, i.p99)
        let t = report.check(.requestHandles, r99)
        let readsPerSecond = Double(reads) / (Double(windows.rounds) * windows.window)
        var table = latencyTable("Request handles flood: GetStatus(location) by another user (µs), uid 0 flooding "
                                     + "StartRequest up to \(options.perConnection) per connection, "
                                     + "\(options.perUser) per user")
        table.add(latencyRow("idle", i))
        table.add(latencyRow("\(fillers + 1) connections calling GetStatus", r))
        table.add(latencyRow("flood", f))
        table.add(latencyRow("  filling to the limits", fill))
        table.add(latencyRow("  held at the limits", h))
        table.add(ratioRow("flood vs idle", f, i, t))
        table.add(ratioRow("flood vs GetStatus calls", f, r))
        table.print()
        var flooding = Table("The flood: StartRequest by uid 0 from \(fillers + 1) connections",
                             columns: ["round", "handles", "refused (connection)", "refused (user)",
                                       "limits reached (ms)", "calls/s"])
        for row in rounds { flooding.add(row) }
        flooding.print()
        print("the same \(fillers + 1) connections calling GetStatus(location) instead: \(format(readsPerSecond)) calls/s")
        print("every round: \(fillers) connections with \(options.perConnection) handles each, then refused for the "
              + "connection; one more refused for the user from its first call; \(agent.asks.count) prompts asked "
              + "in \(windows.rounds) rounds (the handles of a round wait for one), none answered")
        printJSONLine("request_handles", [
            ("per_connection", .int(options.perConnection)), ("per_user", .int(options.perUser)),
            ("connections", .int(fillers + 1)), ("rounds", .int(windows.rounds)),
            ("window_s", .num(windows.window)),
        ] + latencyFields("idle", i) + latencyFields("reads", r) + [("reads_calls_per_s", .num(readsPerSecond))]
          + latencyFields("flood", f) + latencyFields("filling", fill) + latencyFields("held", h) + [
            ("ratio_p50", .num(r50)), ("ratio_p99", .num(r99)), ("ratio_p99_vs_reads", .num(ratio(f.p99, r.p99))),
            ("handles_per_round", .int(options.perUser)), ("refused_for_connection", .int(refusedForConnection)),
            ("refused_for_user", .int(refusedForUser)),
            ("limits_reached_ms", .strings(fillMilliseconds.map { format($0) })), ("met", .bool(t.met)),
        ])
        report.printVerdicts(smoke: windows.smoke)
        print(String(format: "total time %.1f s", Double(monotonicNanoseconds() - t0) / 1e9))
        if windows.keep { print("kept \(root)") }
        fflush(nil)
        agent.close()
        daemon.kill()
        bus.kill()
        Children.shared.killAll()
    }

    /// Each filler got exactly requests-per-connection handles and then refusals
    /// for its connection; the last connection got no handle, refused for the user.
    private func check(_ tallies: [Flood.Tally], round: Int) {
        for (n, tally) in tallies.enumerated() {
            let last = n == tallies.count - 1
            let wanted = last ? 0 : options.perConnection
            guard tally.accepted == wanted, tally.firstRefusal == (last ? .user : .connection),
                  (last ? tally.refusedForConnection : tally.refusedForUser) == 0 else {
                fail("round \(round): connection \(n + 1) of \(tallies.count) got \(tally.accepted) handles, "
                     + "\(tally.refusedForConnection) refusals for the connection and \(tally.refusedForUser) for the "
                     + "user (the first: \(tally.firstRefusal.map { "\($0)" } ?? "none")); wanted \(wanted) handles, "
                     + "then refusals for the " + (last ? "user" : "connection") + " only")
            }
        }
    }
}

/// One flood: `fillers` connections of the bench's user, each on a thread of its
/// own, call StartRequest back to back; one more starts once each of them has
/// been refused. Every call after that is refused; they all go on until `stop`.
/// With `reads`, the same connections call GetStatus(location) back to back
/// instead, all from the start: the load of as many busy connections, without
/// the handles.
///
/// `@unchecked Sendable`: `tallies` and `userRefusedAt` are touched only under
/// `lock`; each connection only by its thread.
final class Flood: @unchecked Sendable {
    enum Refusal { case connection, user }

    /// What one connection got.
    struct Tally {
        var accepted = 0
        var refusedForConnection = 0
        var refusedForUser = 0
        var firstRefusal: Refusal?
    }

    static let startRequest = CallTarget("StartRequest", destination: "org.example.Permissions",
                                         path: "/org/example/Permissions", interface: "org.example.Permissions",
                                         member: "StartRequest", [.strings(["notifications"]), .vardict([])])
    static let getStatus = CallTarget.getStatus("location")

    private let lock = NSLock()
    private var tallies: [Tally]
    private var userRefusedAt: UInt64?
    private let userRefused = Semaphore(value: 0)
    private let stopping = Atomic<Bool>(false)
    /// Left by each thread once connected, by each filler at its first refusal, by
    /// each thread once it has made its last call, and once it has left the bus.
    private let connected = Group()
    private let filled = Group()
    private let calling = Group()
    private let finished = Group()
    private let go = Semaphore(value: 0)
    private let count: Int
    private let reads: Bool

    /// Connects every connection (each on its thread), ready to call.
    init(address: String, fillers: Int, reads: Bool = false) {
        count = fillers + 1
        self.reads = reads
        tallies = Array(repeating: Tally(), count: count)
        for n in 0..<count {
            let last = n == fillers
            connected.enter()
            calling.enter()
            finished.enter()
            if !last, !reads { filled.enter() }
            Thread { self.flood(n, last: last, address: address) }.start()
        }
        guard connected.wait(timeout: .now() + 30) == .success else { fail("the flood's connections did not connect") }
    }

    /// Lets every connection call; returns the time just before.
    func start() -> UInt64 {
        let now = monotonicNanoseconds()
        for _ in 0..<count { go.signal() }
        return now
    }

    /// The time of the first refusal for the user, once there is one.
    func waitForUserRefusal(seconds: Double) -> UInt64? {
        guard userRefused.wait(timeout: .now() + seconds) == .success else { return nil }
        return lock.withLock { userRefusedAt }
    }

    /// Stops every connection after its call under way; then each leaves the bus.
    func stop() -> [Tally] {
        stopping.store(true, ordering: .relaxed)
        guard finished.wait(timeout: .now() + 30) == .success else { fail("the flood's calls did not end within 30 s") }
        return lock.withLock { tallies }
    }

    private func flood(_ n: Int, last: Bool, address: String) {
        let connection = openBlocking(address)
        connected.leave()
        go.wait()
        if last, !reads { filled.wait() }  // the user's limit, once each connection has reached its own
        let target = reads ? Self.getStatus : Self.startRequest
        var tally = Tally()
        while !stopping.load(ordering: .relaxed) {
            do throws(BusError) {
                _ = try connection.callBlocking(target.message())
                tally.accepted += 1
            } catch where error.name == "org.example.Permissions.Error.LimitExceeded" {
                let refusal: Refusal = error.message.contains("per user") ? .user : .connection
                if refusal == .user { tally.refusedForUser += 1 } else { tally.refusedForConnection += 1 }
                guard tally.firstRefusal == nil else { continue }
                tally.firstRefusal = refusal
                if last {
                    let at = monotonicNanoseconds()
                    lock.withLock { userRefusedAt = at }
                    userRefused.signal()
                } else {
                    filled.leave()
                }
            } catch {
                fail("\(target.member) from flooding connection \(n + 1): \(error)")
            }
        }
        lock.withLock { tallies[n] = tally }
        // No connection leaves before every one has made its last call: a filler's
        // handles, closed as it leaves, would make room for the last connection's call.
        calling.leave()
        calling.wait()
        connection.close()
        finished.leave()
    }
}
