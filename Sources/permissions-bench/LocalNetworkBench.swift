// permissions-bench local-network: the time from a link change in the kernel to
// the StatusChanged("", local-network, …) a D-Bus subscriber receives.
//
// It starts a private dbus-daemon and permissionsd with only the local-network
// plugin of this build, in a network namespace of its own (`unshare -n`), makes a
// veth pair there (lan0 with an address, its peer lan1), and per cycle takes lan1
// down (lan0 loses its carrier: -> "unsupported") and up again (-> "not-determined").
// The link is switched by a helper, this same executable run inside the namespace
// (`nsenter -n … permissions-bench link-helper`), which reads "up"/"down" lines and
// answers each with the CLOCK_MONOTONIC time taken just before its SIOCSIFFLAGS
// ioctl; "received" is when the bench's connection dispatches StatusChanged. Both
// clocks are the machine's one monotonic clock.
import DBusKit
import Foundation
import PermissionsTestSupport
import SystemPrimitives

func runLocalNetworkBench(_ arguments: [String]) {
    let cycles = cyclesOption(arguments, default: 100, usage: "usage: permissions-bench local-network [--cycles N]") { lnFail($0, code: $1) }
    let world = LNWorld()
    defer { world.tearDown() }
    world.start()
    for _ in 0..<3 { _ = world.cycle() }  // unmeasured: warm
    var down: [Double] = []
    var up: [Double] = []
    for _ in 0..<cycles {
        let (a, b) = world.cycle()
        down.append(a)
        up.append(b)
    }
    func ms(_ v: Double) -> String { String(format: "%.3f", v) }
    func pad(_ s: String, _ width: Int) -> String { String(repeating: " ", count: max(0, width - s.count)) + s }
    print("local-network: link change in the kernel -> StatusChanged received, \(cycles) cycles (ms)")
    print("transition".padding(toLength: 28, withPad: " ", startingAt: 0)
          + pad("n", 6) + ["p50", "p99", "min", "max", "mean"].map { pad($0, 9) }.joined())
    var json: [String] = []
    for (name, key, values) in [("peer down -> unsupported", "down", down), ("peer up -> available", "up", up),
                                ("both", "all", down + up)] {
        let s = values.sorted()
        func rank(_ p: Double) -> Double { s[max(0, Int((p * Double(s.count)).rounded(.up)) - 1)] }
        let mean = s.reduce(0, +) / Double(s.count)
        print(name.padding(toLength: 28, withPad: " ", startingAt: 0) + pad(String(s.count), 6)
              + [rank(0.5), rank(0.99), s.first!, s.last!, mean].map { pad(ms($0), 9) }.joined())
        json.append("\"\(key)\":{\"n\":\(s.count),\"p50\":\(ms(rank(0.5))),\"p99\":\(ms(rank(0.99))),"
                    + "\"min\":\(ms(s.first!)),\"max\":\(ms(s.last!)),\"mean\":\(ms(mean))}")
    }
    print("{\"bench\":\"local-network\",\"cycles\":\(cycles),\"unit\":\"ms\"," + json.joined(separator: ",") + "}")
    fflush(nil)
}

/// Inside the namespace: switches lan1 up or down per input line and prints the
/// monotonic time taken just before the ioctl.
func runLinkHelper() {
    let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    guard fd >= 0 else { exit(1) }
    while let line = readLine() {
        var request = ifreq()
        withUnsafeMutableBytes(of: &request.ifr_ifrn.ifrn_name) { name in
            for (i, byte) in "lan1".utf8.enumerated() { name[i] = byte }
        }
        guard ioctl(fd, UInt(SIOCGIFFLAGS), &request) == 0 else { exit(1) }
        let upFlag = Int16(IFF_UP)
        request.ifr_ifru.ifru_flags = line == "up" ? request.ifr_ifru.ifru_flags | upFlag
                                                   : request.ifr_ifru.ifru_flags & ~upFlag
        let at = monotonicNanoseconds()
        guard ioctl(fd, UInt(SIOCSIFFLAGS), &request) == 0 else { exit(1) }
        print(at)
        fflush(nil)
    }
}

private func lnFail(_ message: String, code: Int32 = 1) -> Never {
    FileHandle.standardError.write(("permissions-bench local-network: " + message + "\n").data(using: .utf8)!)
    exit(code)
}

/// The bus, the daemon in its namespace, the helper and the listening connection.
///
/// `@unchecked Sendable`: used from the main thread only; the listener touches
/// only `timeline`, which is Sendable.
private final class LNWorld: @unchecked Sendable {
    let timeline = Timeline<(String, UInt64)>()
    let root: String
    var bus: TestBus?
    var daemon: Process?
    var helper: Process?
    var helperIn: FileHandle?
    var helperOut: FileHandle?
    var listener: (Connection, DispatchQueue)?

    init() {
        do { root = try makeTemporaryDirectory("permissions-bench-local-network") } catch { lnFail("\(error)") }
    }

    func start() {
        makeDaemonDirectories(root, plugin: "local-network") { lnFail($0) }
        do { bus = try TestBus(diesWithParent: true) } catch { lnFail("dbus-daemon: \(error)") }
        let address = bus!.address

        let queue = DispatchQueue(label: "bench.listen")
        let timeline = timeline
        let connection: Connection = queue.sync {
            let c: Connection
            do { c = try Connection.open(.address(address), queue: queue) } catch { lnFail("\(error)") }
            c.subscribe(SignalMatch(sender: "org.example.Permissions", path: "/org/example/Permissions",
                                    interface: "org.example.Permissions", member: "StatusChanged")) { message in
                let at = monotonicNanoseconds()
                let a = message.arguments().map { $0.stringValue ?? "" }
                guard a.count >= 3, a[0].isEmpty, a[1] == "local-network" else { return }
                timeline.record((a[2], at))
            }
            return c
        }
        listener = (connection, queue)
        guard busAnswers(connection, on: queue) else { lnFail("the bus did not answer") }

        let log = FileHandle(forWritingAtPath: { _ = FileManager.default.createFile(atPath: root + "/permissionsd.log", contents: nil)
                                                 return root + "/permissionsd.log" }())!
        daemon = launch("/usr/bin/unshare", ["-n", "--", benchBinDirectory + "/permissionsd", "--address", address,
                                             "--config-dir", root + "/config", "--state-dir", root + "/state",
                                             "--plugin-dir", root + "/plugins"], stderr: log)
        let wait = launch("/usr/bin/gdbus", ["wait", "--address", address, "--timeout", "20", "org.example.Permissions"])
        wait.waitUntilExit()
        guard wait.terminationStatus == 0 else { lnFail("permissionsd did not start (see \(root)/permissionsd.log)") }
        let pid = String(daemon!.processIdentifier)
        for args in [["link", "add", "lan0", "type", "veth", "peer", "name", "lan1"],
                     ["address", "add", "192.0.2.1/24", "dev", "lan0"], ["link", "set", "lan0", "up"]] {
            let ip = launch("/usr/bin/nsenter", ["-t", pid, "-n", "/usr/sbin/ip"] + args)
            ip.waitUntilExit()
            guard ip.terminationStatus == 0 else { lnFail("ip \(args) failed") }
        }
        let input = Pipe()
        let output = Pipe()
        helper = launch("/usr/bin/nsenter", ["-t", pid, "-n", CommandLine.arguments[0], "link-helper"],
                        stdin: input, stdout: output)
        helperIn = input.fileHandleForWriting
        helperOut = output.fileHandleForReading
        _ = switchLink(up: true, expect: "not-determined")
    }

    func cycle() -> (Double, Double) {
        (switchLink(up: false, expect: "unsupported"), switchLink(up: true, expect: "not-determined"))
    }

    private func switchLink(up: Bool, expect status: String) -> Double {
        let from = timeline.count
        helperIn!.write((up ? "up\n" : "down\n").data(using: .utf8)!)
        var line = Data()
        while true {
            let byte = helperOut!.readData(ofLength: 1)
            if byte.isEmpty { lnFail("the link helper exited") }
            if byte.first == UInt8(ascii: "\n") { break }
            line.append(byte)
        }
        guard let switched = UInt64(String(decoding: line, as: UTF8.self)) else { lnFail("link helper said \(line)") }
        guard let received = timeline.first(from: from, timeout: 10, { $0.0 == status ? $0.1 : nil }) else {
            lnFail("no StatusChanged local-network \(status) within 10 s")
        }
        return Double(Int64(bitPattern: received &- switched)) / 1_000_000
    }

    private func launch(_ path: String, _ arguments: [String], stdin: Pipe? = nil, stdout: Pipe? = nil,
                        stderr: FileHandle? = nil) -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = arguments
        p.standardInput = stdin ?? FileHandle.nullDevice
        p.standardOutput = stdout ?? FileHandle.nullDevice
        p.standardError = stderr ?? FileHandle.nullDevice
        do { try p.run() } catch { lnFail("cannot run \(path): \(error)") }
        return p
    }

    func tearDown() {
        if let (connection, queue) = listener { queue.sync { connection.close() } }
        try? helperIn?.close()
        for p in [helper, daemon].compactMap({ $0 }) where p.isRunning {
            kill(p.processIdentifier, SIGTERM)
            p.waitUntilExit()
        }
        bus?.kill()
        try? FileManager.default.removeItem(atPath: root)
    }
}
