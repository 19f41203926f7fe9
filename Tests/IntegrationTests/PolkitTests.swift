import Foundation
import Testing
import PermissionsTestSupport
import DBusKit

// Admin methods on the system bus are authorized through polkit: permissionsd runs
// with --system on a stand-in system bus, next to python-dbusmock's polkitd
// template, and real clients call it as root and as nobody.

@Suite("Polkit on the system bus", .serialized)
struct PolkitTests {
    private let bus: PolkitTestSystemBus
    private let polkit: PolkitTestMock
    private let daemon: PolkitTestDaemon

    private static let manage = "org.example.permissions.manage"
    private static let manageOwn = "org.example.permissions.manage-own"
    private static let agent = "org.example.permissions.agent"

    init() throws {
        bus = try TestBus(type: "system")
        polkit = try PolkitTestMock(bus: bus)
        daemon = try PolkitTestDaemon(bus: bus, config: "[location]\nno-agent=denied\n[notifications]\nno-agent=denied\n")
    }

    /// Every user's decisions (ListAllDecisions), as root.
    private func decisions() throws -> String {
        let r = try daemon.call("ListAllDecisions", "s", "")
        #expect(r.status == 0, "ListAllDecisions as root: \(r.stderr)")
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
        expectRefused(r, "SetDecision", reason: "polkit refused \(Self.manageOwn)")
        // The D-Bus error is NotAuthorized.
        let g = try daemon.gdbusCall("SetDecision", "org.example.Refused", "location", "authorized", asNobody: true)
        #expect(g.status != 0)
        #expect(g.stderr.contains("org.example.Permissions.Error.NotAuthorized"), "\(g.stderr)")
        // Resetting one's own likewise; another user's, or everyone's list, need manage.
        expectRefused(try daemon.call("ResetDecisions", "sas", "org.example.X", "0", asNobody: true),
                      "ResetDecisions", reason: "polkit refused \(Self.manageOwn)")
        expectRefused(try daemon.call("SetDecisionForUser", "usss", "0", "org.example.X", "location", "denied",
                                      asNobody: true),
                      "SetDecisionForUser for uid 0", reason: "polkit refused \(Self.manage)")
        expectRefused(try daemon.call("ListAllDecisions", "s", "", asNobody: true), "ListAllDecisions",
                      reason: "polkit refused \(Self.manage)")
        // Reading one's own needs nothing.
        #expect(try daemon.call("ListDecisions", "s", "", asNobody: true).stdout == "a(sssxs) 0\n")
        #expect(try daemon.call("GetStatusForApp", "ss", "org.example.X", "location", asNobody: true).stdout
                == "s \"not-determined\"\n")
        #expect(!(try decisions()).contains("org.example.Refused"))
        // Nobody may still ask for its own status.
        #expect(try daemon.call("GetStatus", "s", "location", asNobody: true).stdout == "s \"not-determined\"\n")
    }

    @Test func nobodyChangesOwnDecisionsOnceAllowedTheManageOwnAction() throws {
        try polkit.setAllowed([Self.manageOwn])
        let r = try setDecisionAsNobody("org.example.Allowed")
        #expect(r.status == 0, "SetDecision as nobody: \(r.stderr)")
        #expect(try decisions().contains("65534 \"org.example.Allowed\" \"location\" \"authorized\""))
        let status = try daemon.call("GetStatusForApp", "ss", "org.example.Allowed", "location", asNobody: true)
        #expect(status.stdout == "s \"authorized\"\n", "\(status.stderr)")
        // Root's own status of the app is not nobody's decision.
        #expect(try daemon.call("GetStatusForApp", "ss", "org.example.Allowed", "location").stdout
                == "s \"not-determined\"\n")
        // manage-own is not enough for another user's.
        expectRefused(try daemon.call("SetDecisionForUser", "usss", "0", "org.example.Allowed", "location", "denied",
                                      asNobody: true),
                      "SetDecisionForUser for uid 0", reason: "polkit refused \(Self.manage)")
        // Taking the action away again refuses the next call (nothing is cached).
        try polkit.setAllowed([])
        expectRefused(try setDecisionAsNobody("org.example.Later", "denied"), "SetDecision",
                      reason: "polkit refused \(Self.manageOwn)")
        #expect(!(try decisions()).contains("org.example.Later"))
    }

    @Test func theManageActionChangesAnotherUsersDecisions() throws {
        try polkit.setAllowed([Self.manage])
        let r = try daemon.call("SetDecisionForUser", "usss", "0", "org.example.ForRoot", "location", "denied",
                                asNobody: true)
        #expect(r.status == 0, "SetDecisionForUser as nobody: \(r.stderr)")
        #expect(try daemon.call("GetStatusForApp", "ss", "org.example.ForRoot", "location").stdout == "s \"denied\"\n")
        #expect(try decisions().contains("0 \"org.example.ForRoot\" \"location\" \"denied\""))
    }

    @Test func theAgentActionDoesNotAllowManaging() throws {
        try polkit.setAllowed([Self.agent])
        expectRefused(try setDecisionAsNobody("org.example.AgentOnly"), "SetDecision",
                      reason: "polkit refused \(Self.manageOwn)")
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
        try polkit.setAllowed([Self.manage, Self.manageOwn, Self.agent])
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
