import Foundation
import Testing
import PermissionsTestSupport

// Admin methods on the system bus are authorized through polkit: permissionsd runs
// with --system on a stand-in system bus, next to python-dbusmock's polkitd
// template, and real clients call it as root and as nobody.

/// The stand-in system bus of these tests.
private typealias PolkitTestSystemBus = TestBus

private extension TestBus {
    /// The test runner's environment with this bus as the system bus.
    var environment: [String: String] { asSystemBusEnvironment }

    /// Waits (gdbus, with a deadline) until `name` has an owner on this bus.
    func waitForName(_ name: String) throws {
        let waited = try run("/usr/bin/gdbus", ["wait", "--system", "--timeout", "20", name], environment: environment)
        guard waited.status == 0 else { throw HarnessError(description: "\(name) did not appear: \(waited.stderr)") }
    }

    /// Waits (up to `timeout` seconds) until `name` has no owner on this bus.
    func waitForNameToGo(_ name: String, timeout: TimeInterval = 15) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let r = try run("/usr/bin/busctl", ["--address=\(address)", "call", "org.freedesktop.DBus",
                                                "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner", "s", name])
            if r.stdout == "b false\n" { return }
            if Date() > deadline { throw HarnessError(description: "\(name) still owned after \(timeout) s: \(r)") }
        }
    }
}

/// python-dbusmock's polkitd on the stand-in system bus. It starts allowing nothing.
private final class PolkitTestMock {
    private let bus: PolkitTestSystemBus
    private var process: Process?

    init(bus: PolkitTestSystemBus) throws {
        self.bus = bus
        let process = Process()
        // Not the pyenv python3 on PATH: only the system one has dbusmock.
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-m", "dbusmock", "--system", "-t", "polkitd"]
        process.environment = bus.environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        try bus.waitForName("org.freedesktop.PolicyKit1")
    }

    /// The actions polkit allows from now on (the mock's SetAllowed).
    func setAllowed(_ actions: [String]) throws {
        let r = try run("/usr/bin/busctl", ["--address=\(bus.address)", "call", "org.freedesktop.PolicyKit1",
                                            "/org/freedesktop/PolicyKit1/Authority", "org.freedesktop.DBus.Mock",
                                            "SetAllowed", "as", String(actions.count)] + actions)
        guard r.status == 0 else { throw HarnessError(description: "SetAllowed failed: \(r.stderr)") }
    }

    /// SIGKILL, and wait until the bus has dropped its name.
    func kill() throws {
        guard let process else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        self.process = nil
        try bus.waitForNameToGo("org.freedesktop.PolicyKit1")
    }

    deinit { try? kill() }
}

/// permissionsd with --system on the stand-in bus (DaemonUnderTest always passes
/// --address, which makes the daemon treat its own uid as admin and never ask polkit).
private final class PolkitTestDaemon {
    let bus: PolkitTestSystemBus
    let root: String
    var logFile: String { root + "/permissionsd.log" }
    private var process: Process?

    init(bus: PolkitTestSystemBus, config: String = "") throws {
        self.bus = bus
        root = try makeTemporaryDirectory("permissionsd-system")
        try FileManager.default.createDirectory(atPath: root + "/config", withIntermediateDirectories: true)
        try config.write(toFile: root + "/config/permissions.conf", atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binDir + "/permissionsd")
        process.arguments = ["--system", "--config-dir", root + "/config", "--state-dir", root + "/state",
                             "--plugin-dir", corePluginDirectory, "--verbose"]
        process.environment = bus.environment
        FileManager.default.createFile(atPath: logFile, contents: nil)
        let logHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: logFile))
        process.standardOutput = logHandle
        process.standardError = logHandle
        process.standardInput = FileHandle.nullDevice
        try process.run()
        self.process = process
        let waited = try run("/usr/bin/gdbus", ["wait", "--system", "--timeout", "20", "org.example.Permissions"],
                             environment: bus.environment)
        guard waited.status == 0, process.isRunning else {
            throw HarnessError(description: "permissionsd did not take its name on the system bus; log:\n\(self.log)")
        }
    }

    var isRunning: Bool { process?.isRunning ?? false }
    var log: String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }

    deinit {
        if let process, process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: root)
    }

    /// `busctl call` on the service object and interface, through the stand-in bus.
    func call(_ member: String, _ signatureAndArguments: String..., asNobody: Bool = false) throws -> CommandResult {
        try run("/usr/bin/busctl", ["--address=\(bus.address)", "call", "org.example.Permissions",
                                    "/org/example/Permissions", "org.example.Permissions", member]
                + signatureAndArguments, asNobody: asNobody)
    }

    /// The same through gdbus, whose error output names the D-Bus error.
    func gdbusCall(_ method: String, _ arguments: String..., asNobody: Bool = false) throws -> CommandResult {
        try run("/usr/bin/gdbus", ["call", "--address", bus.address, "--dest", "org.example.Permissions",
                                   "--object-path", "/org/example/Permissions",
                                   "--method", "org.example.Permissions." + method] + arguments, asNobody: asNobody)
    }
}

@Suite("Polkit on the system bus", .serialized)
struct PolkitTests {
    private let bus: PolkitTestSystemBus
    private let polkit: PolkitTestMock
    private let daemon: PolkitTestDaemon

    private static let manage = "org.example.permissions.manage"
    private static let agent = "org.example.permissions.agent"

    init() throws {
        bus = try TestBus(type: "system")
        polkit = try PolkitTestMock(bus: bus)
        daemon = try PolkitTestDaemon(bus: bus, config: "[location]\nno-agent=denied\n[notifications]\nno-agent=denied\n")
    }

    /// ListDecisions for every app, as root.
    private func decisions() throws -> String {
        let r = try daemon.call("ListDecisions", "s", "")
        #expect(r.status == 0, "ListDecisions as root: \(r.stderr)")
        return r.stdout
    }

    private func setDecisionAsNobody(_ app: String, _ decision: String = "authorized") throws -> CommandResult {
        try daemon.call("SetDecision", "sss", app, "location", decision, asNobody: true)
    }

    private func expectRefused(_ r: CommandResult, _ member: String, reason: String,
                               sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(r.status != 0, "\(member) was not refused: \(r.stdout)", sourceLocation: sourceLocation)
        #expect(r.stderr.contains("\(member) is not allowed: \(reason)"), "\(member): \(r.stderr)",
                sourceLocation: sourceLocation)
    }

    @Test func nobodyIsRefusedWhilePolkitAllowsNothing() throws {
        let r = try setDecisionAsNobody("org.example.Refused")
        expectRefused(r, "SetDecision", reason: "polkit refused \(Self.manage)")
        // The D-Bus error is NotAuthorized.
        let g = try daemon.gdbusCall("SetDecision", "org.example.Refused", "location", "authorized", asNobody: true)
        #expect(g.status != 0)
        #expect(g.stderr.contains("org.example.Permissions.Error.NotAuthorized"), "\(g.stderr)")
        // The other admin methods likewise.
        expectRefused(try daemon.call("ListDecisions", "s", "", asNobody: true), "ListDecisions",
                      reason: "polkit refused \(Self.manage)")
        expectRefused(try daemon.call("GetStatusForApp", "ss", "org.example.X", "location", asNobody: true),
                      "GetStatusForApp", reason: "polkit refused \(Self.manage)")
        expectRefused(try daemon.call("ResetDecisions", "sas", "org.example.X", "0", asNobody: true),
                      "ResetDecisions", reason: "polkit refused \(Self.manage)")
        #expect(!(try decisions()).contains("org.example.Refused"))
        // Nobody may still ask for its own status.
        #expect(try daemon.call("GetStatus", "s", "location", asNobody: true).stdout == "s \"not-determined\"\n")
    }

    @Test func nobodyIsAllowedOnceAllowedTheManageAction() throws {
        try polkit.setAllowed([Self.manage])
        let r = try setDecisionAsNobody("org.example.Allowed")
        #expect(r.status == 0, "SetDecision as nobody: \(r.stderr)")
        #expect(try decisions().contains("\"org.example.Allowed\" \"location\" \"authorized\""))
        let status = try daemon.call("GetStatusForApp", "ss", "org.example.Allowed", "location", asNobody: true)
        #expect(status.stdout == "s \"authorized\"\n", "\(status.stderr)")
        // Taking the action away again refuses the next call (nothing is cached).
        try polkit.setAllowed([])
        expectRefused(try setDecisionAsNobody("org.example.Later", "denied"), "SetDecision",
                      reason: "polkit refused \(Self.manage)")
        #expect(!(try decisions()).contains("org.example.Later"))
    }

    @Test func theAgentActionDoesNotAllowManaging() throws {
        try polkit.setAllowed([Self.agent])
        expectRefused(try setDecisionAsNobody("org.example.AgentOnly"), "SetDecision",
                      reason: "polkit refused \(Self.manage)")
        #expect(!(try decisions()).contains("org.example.AgentOnly"))
    }

    @Test func registerAgentNeedsTheAgentAction() throws {
        expectRefused(try daemon.call("RegisterAgent", "o", "/org/example/TestAgent", asNobody: true), "RegisterAgent",
                      reason: "polkit refused \(Self.agent)")
        // The manage action is not enough.
        try polkit.setAllowed([Self.manage])
        expectRefused(try daemon.call("RegisterAgent", "o", "/org/example/TestAgent", asNobody: true), "RegisterAgent",
                      reason: "polkit refused \(Self.agent)")
        try polkit.setAllowed([Self.agent])
        let r = try daemon.call("RegisterAgent", "o", "/org/example/TestAgent", asNobody: true)
        #expect(r.status == 0, "RegisterAgent as nobody: \(r.stderr)")
    }

    @Test func rootIsAllowedWhateverPolkitSays() throws {
        // The mock allows nothing.
        let set = try daemon.call("SetDecision", "sss", "org.example.ByRoot", "location", "denied")
        #expect(set.status == 0, "SetDecision as root: \(set.stderr)")
        #expect(try decisions().contains("\"org.example.ByRoot\" \"location\" \"denied\""))
        let status = try daemon.call("GetStatusForApp", "ss", "org.example.ByRoot", "location")
        #expect(status.stdout == "s \"denied\"\n", "\(status.stderr)")
        let agent = try daemon.call("RegisterAgent", "o", "/org/example/RootAgent")
        #expect(agent.status == 0, "RegisterAgent as root: \(agent.stderr)")
        let reset = try daemon.call("ResetDecisions", "sas", "org.example.ByRoot", "0")
        #expect(reset.stdout == "u 1\n", "\(reset.stderr)")
    }

    @Test func withoutPolkitNobodyIsRefusedAndTheDaemonKeepsAnswering() throws {
        try polkit.setAllowed([Self.manage, Self.agent])
        try polkit.kill()
        let r = try setDecisionAsNobody("org.example.NoPolkit")
        #expect(r.status != 0, "SetDecision without polkit was not refused")
        #expect(r.stderr.contains("SetDecision is not allowed: polkit"), "\(r.stderr)")
        let g = try daemon.gdbusCall("RegisterAgent", "/org/example/TestAgent", asNobody: true)
        #expect(g.status != 0)
        #expect(g.stderr.contains("org.example.Permissions.Error.NotAuthorized"), "\(g.stderr)")
        #expect(g.stderr.contains("polkit"), "\(g.stderr)")
        // Still serving: the caller's own status, and root's admin calls.
        #expect(daemon.isRunning)
        #expect(try daemon.call("GetStatus", "s", "location", asNobody: true).stdout == "s \"not-determined\"\n")
        #expect(try daemon.call("GetStatus", "s", "notifications").stdout == "s \"not-determined\"\n")
        #expect(!(try decisions()).contains("org.example.NoPolkit"))
        #expect(try daemon.call("SetDecision", "sss", "org.example.Root", "location", "authorized").status == 0)
    }

    /// Agents are per user: `permissionsctl agent` as nobody (uid 65534) and a test
    /// agent as root each get only their own user's prompts, the newest registration
    /// of another user notwithstanding, and a user without an agent gets `no-agent`.
    @Test func agentsGetOnlyTheirOwnUsersPrompts() throws {
        try polkit.setAllowed([Self.agent])
        let nobodyAgent = Process()
        nobodyAgent.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        nobodyAgent.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups",
                                 binDir + "/permissionsctl", "--address", bus.address, "agent"]
        let input = Pipe(), output = Pipe()
        nobodyAgent.standardInput = input
        nobodyAgent.standardOutput = output
        nobodyAgent.standardError = FileHandle.nullDevice
        try nobodyAgent.run()
        defer { kill(nobodyAgent.processIdentifier, SIGKILL); nobodyAgent.waitUntilExit() }
        let lines = LineCollector(output.fileHandleForReading)
        #expect(try lines.next { $0.hasPrefix("Agent registered at ") } != "")

        // Root has no agent: nobody's is not asked; root gets location's no-agent answer at once.
        let rootAlone = try daemon.call("Request", "sa{sv}", "location", "0")
        #expect(rootAlone.stdout == "s \"denied\"\n", "\(rootAlone.stderr)")

        // Root's own agent, registered after nobody's, gets root's prompt.
        let rootAgent = try TestAgent(bus: bus, path: "/test/RootAgent")
        let rootRequest = try BackgroundCommand("/usr/bin/busctl", [
            "--address=\(bus.address)", "--timeout=60", "call", "org.example.Permissions", "/org/example/Permissions",
            "org.example.Permissions", "Request", "sa{sv}", "location", "0"])
        let rootPrompt = try rootAgent.waitForPrompt()
        #expect(rootPrompt.permission == "location")
        #expect(rootPrompt.details["uid"] == .variant(.uint32(0)))
        rootAgent.answer(rootPrompt, "allow-once")
        #expect(try rootRequest.wait().1 == "s \"authorized\"\n")

        // Nobody's request goes to nobody's agent, not to root's newer one; the first
        // prompt nobody's agent ever sees is this one (none of root's reached it).
        let nobodyRequest = try BackgroundCommand("/usr/bin/setpriv", [
            "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/busctl",
            "--address=\(bus.address)", "--timeout=60", "call", "org.example.Permissions", "/org/example/Permissions",
            "org.example.Permissions", "Request", "sa{sv}", "notifications", "0"])
        let prompt = try lines.next { $0.hasPrefix("Prompt ") }
        #expect(prompt.hasSuffix("/usr/bin/busctl asks for notifications"), "\(prompt)")
        input.fileHandleForWriting.write("o\n".data(using: .utf8)!)
        #expect(try nobodyRequest.wait().1 == "s \"authorized\"\n", "\(nobodyRequest.errorOutput)")
        #expect(rootAgent.received.count == 1)
        #expect(rootAgent.cancelled.isEmpty)
    }
}
