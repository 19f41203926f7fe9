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
    let cycles = cyclesOption(arguments, default: 100,
                              usage: "usage: permissions-bench local-network [--cycles N] [--smoke]")
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
    printTransitions(bench: "local-network", title: "local-network: link change in the kernel -> StatusChanged "
                     + "received, \(cycles) cycles (ms)", fields: [("cycles", .int(cycles))], [
        Transition(label: "peer down -> unsupported", key: "down", samples: Samples(down)),
        Transition(label: "peer up -> available", key: "up", samples: Samples(up)),
        Transition(label: "both", key: "all", samples: Samples(down + up)),
    ])
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

/// The bus, the daemon in its namespace, the helper and the listening connection.
///
/// `@unchecked Sendable`: used from the main thread only; the listener touches
/// only `timeline`, which is Sendable.
private final class LNWorld: @unchecked Sendable {
    let timeline = Timeline<(String, UInt64)>()
    let root: String
    var bus: TestBus?
    var daemon: Child?
    var helper: Child?
    /// The bench's ends of the helper's stdin and stdout.
    var helperIn: Int32 = -1
    var helperOut: Int32 = -1
    var listener: (Connection, Queue)?

    init() {
        root = makeRunDirectory()
    }

    func start() {
        makeDaemonDirectories(root, plugin: "local-network")
        bus = startBus()
        let address = bus!.address

        let queue = Queue(label: "bench.listen")
        let timeline = timeline
        let connection: Connection = queue.sync {
            let c = openConnection(address, queue: queue)
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
        pingBus([connection])

        daemon = startDaemon(root: root, address: address, wrapper: ["/usr/bin/unshare", "-n", "--"])
        let pid = String(daemon!.pid)
        for args in [["link", "add", "lan0", "type", "veth", "peer", "name", "lan1"],
                     ["address", "add", "192.0.2.1/24", "dev", "lan0"], ["link", "set", "lan0", "up"]] {
            guard SpawnSpec("/usr/bin/nsenter", ["-t", pid, "-n", "/usr/sbin/ip"] + args).run() == 0 else {
                fail("ip \(args) failed")
            }
        }
        let input = ChildPipe()
        let output = ChildPipe()
        let spec = SpawnSpec("/usr/bin/nsenter", ["-t", pid, "-n", selfExecutable, "link-helper"],
                             log: root + "/link-helper.log")
        spec.stdinFD = input.read
        spec.stdoutFD = output.write
        helper = spec.spawn().0
        close(input.read)
        close(output.write)
        helperIn = input.write
        helperOut = output.read
        _ = switchLink(up: true, expect: "not-determined")
    }

    func cycle() -> (Double, Double) {
        (switchLink(up: false, expect: "unsupported"), switchLink(up: true, expect: "not-determined"))
    }

    private func switchLink(up: Bool, expect status: String) -> Double {
        let from = timeline.count
        let command = up ? "up\n" : "down\n"
        guard write(helperIn, command, command.utf8.count) == command.utf8.count else { fail("the link helper exited") }
        guard let line = readChildLine(helperOut, seconds: 10) else { fail("the link helper did not answer") }
        guard let switched = UInt64(line) else { fail("link helper said \(line)") }
        guard let received = timeline.first(from: from, timeout: 10, { $0.0 == status ? $0.1 : nil }) else {
            fail("no StatusChanged local-network \(status) within 10 s")
        }
        return Double(Int64(bitPattern: received &- switched)) / 1_000_000
    }

    func tearDown() {
        if let (connection, queue) = listener { queue.sync { connection.close() } }
        close(helperIn)  // the helper exits at the end of its input
        helper?.wait()
        daemon?.kill(SIGTERM)
        bus?.kill()
        Children.shared.killAll()
    }
}
