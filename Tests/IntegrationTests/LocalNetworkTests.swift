import Foundation
import Testing
import PermissionsTestSupport

/// The local-network backend against a real kernel: the daemon runs in a network
/// namespace of its own (`unshare -n`: only a loopback, down), and the test makes
/// a veth pair there (the `dummy` link type is not available on these machines).
@Suite struct LocalNetworkTests {
    let bus: TestBus
    let daemon: DaemonUnderTest

    init() throws {
        bus = try TestBus()
        daemon = try DaemonUnderTest(bus: bus, config: "[local-network]\ndeny=/usr/bin/gdbus\n",
                                     pluginDirectories: [pluginDirectory("local-network", with: ["local-network"])],
                                     start: false)
        daemon.launcher = ["/usr/bin/unshare", "-n", "--"]
        try daemon.start()
    }

    /// `ip` in the daemon's network namespace.
    func ip(_ arguments: String...) throws {
        let r = try run("/usr/bin/nsenter", ["-t", String(daemon.pid!), "-n", "/usr/sbin/ip"] + arguments)
        guard r.status == 0 else { throw HarnessError(description: "ip \(arguments): \(r.stderr)") }
    }

    func status(_ app: String) throws -> String {
        try daemon.call("GetStatusForApp", "ss", app, "local-network").stdout
    }

    @Test func followsAVethLinkUpAndDown() throws {
        let monitor = try Monitor(daemon, broadcast: true)
        #expect(try daemon.call("GetStatus", "s", "local-network").stdout == "s \"unsupported\"\n")
        #expect(try status("/usr/bin/gdbus") == "s \"unsupported\"\n")
        _ = try daemon.call("SetDecision", "sss", "/usr/bin/busctl", "local-network", "authorized")

        // An address and a carrier (both ends up): there is a local network.
        try ip("link", "add", "lan0", "type", "veth", "peer", "name", "lan1")
        try ip("address", "add", "192.0.2.1/24", "dev", "lan0")
        try ip("link", "set", "lan0", "up")
        try ip("link", "set", "lan1", "up")
        try monitor.waitFor { $0 == statusLine(app: "", "local-network", "not-determined") }
        #expect(try daemon.call("GetStatus", "s", "local-network").stdout == "s \"authorized\"\n")
        #expect(try status("/usr/bin/gdbus") == "s \"restricted\"\n")  // admin policy
        #expect(try status("/usr/bin/other") == "s \"not-determined\"\n")
        let details = try daemon.call("GetDetails", "s", "local-network").stdout
        #expect(details.contains("\"lan0\""), "\(details)")

        // The other end goes down: no carrier, no local network.
        try ip("link", "set", "lan1", "down")
        try monitor.waitFor { $0 == statusLine(app: "", "local-network", "unsupported") }
        #expect(try daemon.call("GetStatus", "s", "local-network").stdout == "s \"unsupported\"\n")
        try ip("link", "set", "lan1", "up")
        try monitor.waitFor { $0 == statusLine(app: "", "local-network", "not-determined") }
        // The link goes away altogether.
        try ip("link", "delete", "lan0")
        try monitor.waitFor { $0 == statusLine(app: "", "local-network", "unsupported") }
        #expect(monitor.statusChanges == [statusLine(app: "", "local-network", "not-determined"),
                                          statusLine(app: "", "local-network", "unsupported"),
                                          statusLine(app: "", "local-network", "not-determined"),
                                          statusLine(app: "", "local-network", "unsupported")])
        #expect(try daemon.call("GetStatus", "s", "local-network").stdout == "s \"unsupported\"\n")
    }
}
