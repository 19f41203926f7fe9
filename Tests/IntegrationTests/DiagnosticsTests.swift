import DBusKit
import Foundation
import Testing
import PermissionsTestSupport

/// What GetDiagnostics and `permissionsctl doctor` tell an admin that nothing else
/// shows: an agent the daemon's calls do not reach, why a caller is `unverified`,
/// and a host whose mount namespace cannot be read.
@Suite struct DiagnosticsTests {
    let bus: TestBus

    init() throws { bus = try TestBus() }

    static let ctl = binDir + "/permissionsctl"

    /// GetDiagnostics of the caller, as busctl prints it (`--json=short`), by key.
    static func diagnostics(_ daemon: DaemonUnderTest, launcher: [String] = [], asNobody: Bool = false) throws -> [String: Any] {
        let command = launcher + ["/usr/bin/busctl", "--address=\(daemon.bus.address)", "--json=short", "call",
                                  "org.example.Permissions", "/org/example/Permissions", "org.example.Permissions",
                                  "GetDiagnostics"]
        let r = try run(command[0], Array(command.dropFirst()), asNobody: asNobody)
        #expect(r.status == 0, "\(r.stderr)")
        let reply = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let entries = try #require((reply["data"] as? [Any])?.first as? [String: Any], "\(r.stdout)")
        return entries.mapValues { ($0 as? [String: Any])?["data"] ?? $0 }
    }

    @Test func anAgentTheDaemonCannotCallIsReportedOnce() throws {
        let daemon = try DaemonUnderTest(bus: bus)
        // An agent registered at a path where its connection exports nothing: every
        // call to it fails, as under a bus policy that refuses them, but on this bus.
        let agent = try TestAgent(bus: bus, register: false)
        try agent.call("RegisterAgent", [.objectPath("/not/exported")])
        let logged = try daemon.waitForLog("cannot be reached")
        #expect(logged.contains("agent \(agent.connection.uniqueName) /not/exported of uid 0 cannot be reached: "
                                + "it does not implement org.example.Permissions.Agent at /not/exported"), "\(logged)")
        let unreachable = try #require(try Self.diagnostics(daemon)["agent-unreachable"] as? String)
        #expect(unreachable.hasPrefix("it does not implement org.example.Permissions.Agent at /not/exported ("),
                "\(unreachable)")

        let doctor = try daemon.ctl("doctor")
        #expect(doctor.status == 1)
        #expect(doctor.stdout.contains("agent: registered for uid 0\n  unreachable: \(unreachable)\n"), "\(doctor.stdout)")
        #expect(doctor.stdout.hasSuffix("problems:\n  - the agent of uid 0 cannot be reached: \(unreachable)\n"),
                "\(doctor.stdout)")

        // A request's Ask fails the same way: nothing stored, and not logged again.
        let r = try daemon.call("Request", "sa{sv}", "location", "0")
        #expect(r.stdout == "s \"not-determined\"\n", "\(r)")
        #expect(daemon.logLines(containing: "cannot be reached").count == 1, "\(daemon.log)")
    }

    @Test func anAgentThatAnswersIsReachable() throws {
        let daemon = try DaemonUnderTest(bus: bus)
        let agent = try TestAgent(bus: bus)
        try agent.waitForChecks()
        #expect(try Self.diagnostics(daemon)["agent-unreachable"] as? String == "")
        #expect(agent.cancelled.isEmpty)  // the check is no cancellation
        #expect(daemon.logLines(containing: "cannot be reached").isEmpty)
    }

    @Test func anUnverifiedCallerIsToldWhy() throws {
        let daemon = try DaemonUnderTest(bus: bus)
        // A mount namespace of its own: its executable path names a file of that
        // namespace, not necessarily the host's.
        let elsewhere = ["/usr/bin/unshare", "--mount", "--propagation", "private"]
        let host = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(getpid())/ns/mnt")
        let found = try Self.diagnostics(daemon, launcher: elsewhere)
        #expect(found["identity-kind"] as? String == "unverified")
        let reason = try #require(found["unverified-reason"] as? String)
        #expect(reason.hasPrefix("its mount namespace (mnt:[") && reason.hasSuffix(") is not the host's (PID \(getpid())'s, \(host))"),
                "\(reason)")
        let doctor = try run(elsewhere[0], Array(elsewhere.dropFirst()) + [Self.ctl, "--address", bus.address, "doctor"])
        #expect(doctor.status == 1)
        #expect(doctor.stdout.contains("\n  unverified: \(reason)\n"), "\(doctor.stdout)")
        #expect(doctor.stdout.contains("\n  - this caller is taken for unverified: \(reason)\n"), "\(doctor.stdout)")
        // A caller in the host's namespace has no reason to show.
        #expect(try Self.diagnostics(daemon)["unverified-reason"] as? String == "")
    }

    @Test func aHostNamespaceTheDaemonCannotReadIsLoggedAndReported() throws {
        // As nobody, the daemon may not read the namespace of the test runner (root),
        // which it is told is the host: as in a container whose PID 1 is not its own.
        let daemon = try DaemonUnderTest(bus: bus, start: false)
        daemon.asNobody = true
        try daemon.start()
        let problem = "the host's mount namespace cannot be read (/proc/\(getpid())/ns/mnt: Permission denied (errno 13))"
        let logged = try daemon.waitForLog("the host's mount namespace cannot be read")
        #expect(logged.hasPrefix("<4>permissionsd: \(problem), so no caller's executable path can be trusted; "), "\(logged)")
        let found = try Self.diagnostics(daemon, asNobody: true)
        let reported = try #require(found["host-namespace-problem"] as? String)
        #expect(reported.hasPrefix(problem))
        #expect(found["identity-kind"] as? String == "unverified")
        let doctor = try daemon.ctl("doctor", asNobody: true)
        #expect(doctor.status == 1)
        #expect(doctor.stdout.contains("\n  host: \(reported)\n"), "\(doctor.stdout)")
        #expect(doctor.stdout.contains("\n  - \(reported)\n"), "\(doctor.stdout)")
        // Said once: the unverified reason is the same problem.
        #expect(!doctor.stdout.contains("taken for unverified"), "\(doctor.stdout)")
    }

    /// The same from the configuration, so that a container needs no edited unit or
    /// activation file; applied live, and the option wins over it.
    @Test func hostPIDSelfFromTheConfiguration() throws {
        let daemon = try DaemonUnderTest(bus: bus, config: "[identity]\nhost-pid=self\n", start: false)
        daemon.asNobody = true
        daemon.hostPID = String(getpid())  // the test runner, which nobody cannot read
        try daemon.start()
        // The option was given: it wins, and the host cannot be read.
        _ = try daemon.waitForLog("the host's mount namespace cannot be read")
        daemon.stop()

        let configured = try DaemonUnderTest(bus: bus, config: "[identity]\nhost-pid=self\n", start: false)
        configured.asNobody = true
        configured.hostPID = ""  // no --host-pid
        try configured.start()
        #expect(try Self.diagnostics(configured, asNobody: true)["host-namespace-problem"] as? String == "")
        #expect(try Self.diagnostics(configured, asNobody: true)["identity-kind"] as? String == "executable")
        // Changed to PID 1, which nobody cannot read here (root's init); callers are
        // identified again.
        try configured.writeConfig("[identity]\nhost-pid=1\n")
        _ = try configured.waitForLog("the host's mount namespace is now PID 1's")
        let after = try Self.diagnostics(configured, asNobody: true)
        #expect((after["host-namespace-problem"] as? String)?.hasPrefix("the host's mount namespace cannot be read") == true)
        #expect(after["identity-kind"] as? String == "unverified")
        // A value that is no process id is refused, with the file and line.
        // A PID in a file outlives the boot it was true for: only 1 and self are taken.
        try configured.writeConfig("[identity]\nhost-pid=\(getpid())\n")
        _ = try configured.waitForLog("[identity] host-pid=\(getpid()): expected 1 or self")
    }

    @Test func hostPIDSelfTakesTheDaemonsNamespace() throws {
        let daemon = try DaemonUnderTest(bus: bus, start: false)
        daemon.asNobody = true
        daemon.hostPID = "self"
        try daemon.start()
        let found = try Self.diagnostics(daemon, asNobody: true)
        #expect(found["host-namespace-problem"] as? String == "")
        #expect(found["identity-kind"] as? String == "executable")
        #expect(found["app-id"] as? String == "/usr/bin/busctl")
        #expect(daemon.logLines(containing: "mount namespace cannot be read").isEmpty, "\(daemon.log)")
    }
}
