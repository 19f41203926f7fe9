import DBusKit
import Foundation
import Testing
import PermissionsModel
import PermissionsTestSupport

/// One user holding more pending polkit checks than the bus lets the daemon wait
/// for does not change another user's answers.
///
/// The bus has Debian's own system policy (/usr/share/dbus-1/system.conf, which
/// also sets max_replies_per_connection 128 for the daemon's one connection). A
/// polkit stand-in (Tests/testenv/polkitd-holding.py) answers at once for every
/// uid but the held one, and never for it: a user whose authentication agent
/// never finishes. The held user (uid 1) sends 200 SetDecision calls at once from
/// 10 connections; the daemon sends polkit its share of them (16) and answers
/// the rest LimitExceeded, quoting the share. Meanwhile the other user (uid 2)
/// changes decisions (12 at once, then one), registers an agent and gets a prompt
/// answered, as if nothing were held. Without the shares the daemon's 129th check failed with the
/// bus's LimitsExceeded, and from then on every user's check did.
@Suite(.serialized) struct PendingCallsTests {
    static let heldUser: UInt32 = 1
    static let otherUser: UInt32 = 2
    static let connections = 10
    static let callsPerConnection = 20
    /// The default share ([service] outgoing-calls-per-user).
    static let share = CallLimits().outgoingCallsPerUser

    @Test(.hangGuard) func oneUsersHeldChecksDoNotStarveAnother() throws {
        let bus = try DebianSystemBus.start()
        let polkit = try PolkitTestMock(bus: bus, template: packageRoot + "/Tests/testenv/polkitd-holding.py")
        try polkit.setAllowed(["org.example.permissions.manage-own", "org.example.permissions.agent"])
        try polkit.mock("HoldUser", "u", String(Self.heldUser))
        let daemon = try PolkitTestDaemon(bus: bus, config: "[location]\nno-agent=denied\n")

        // The held user's calls, all at once.
        let total = Self.connections * Self.callsPerConnection
        let held = try RunningProgram("/usr/bin/python3", [
            packageRoot + "/Tests/testenv/call-many.py", bus.address, String(Self.connections),
            String(Self.callsPerConnection), "SetDecision", "org.example.Held", "location", "authorized",
        ], asUser: Self.heldUser)
        let refusedEarly = try held.lines.wait(timeout: 60, what: "the held user's calls over its share refused") {
            $0.filter { $0.hasPrefix("error ") }.count >= total - Self.share
        }.filter { $0.hasPrefix("error ") }
        try polkit.waitForHeld(Self.share)

        // The other user, while those wait: decisions, as many at once as its own
        // share allows (a burst past it would be refused too, as its own doing) ...
        let burst = Self.share - 4
        let others = try RunningProgram("/usr/bin/python3", [
            packageRoot + "/Tests/testenv/call-many.py", bus.address, "2", String(burst / 2), "SetDecision",
            "org.example.Other", "location", "denied",
        ], asUser: Self.otherUser)
        let otherAnswers = try others.lines.wait(timeout: 60, what: "the other user's calls answered") {
            $0.contains("done")
        }.filter { $0 != "done" && !$0.hasPrefix("sent ") }
        #expect(otherAnswers == Array(repeating: "return", count: burst), "\(otherAnswers)")
        let one = try daemon.gdbusCall("SetDecision", "org.example.One", "location", "authorized", asUser: Self.otherUser)
        #expect(one.status == 0, "\(one.stderr)")
        // ... one by one, an agent of theirs, and a prompt it answers.
        let agent = try RunningProgram(binDir + "/permissionsctl", ["--address", bus.address, "agent"],
                                       asUser: Self.otherUser)
        _ = try agent.lines.next { $0.hasPrefix("Agent registered at ") }
        let request = try RunningProgram("/usr/bin/busctl", [
            "--address=\(bus.address)", "--timeout=60", "call", "org.example.Permissions", "/org/example/Permissions",
            "org.example.Permissions", "Request", "sa{sv}", "location", "0",
        ], asUser: Self.otherUser)
        _ = try agent.lines.next { $0.hasPrefix("Prompt ") }
        agent.answer("a")
        #expect(try request.lines.next { !$0.isEmpty } == "s \"authorized\"")
        #expect(try daemon.call("GetStatus", "s", "location", asUser: Self.otherUser).stdout == "s \"authorized\"\n")

        // The held user: refused past its share, one named error quoting it; the
        // share still waiting for polkit.
        #expect(refusedEarly.count == total - Self.share)
        for line in refusedEarly {
            #expect(line.hasPrefix("error org.example.Permissions.Error.LimitExceeded: "), "\(line)")
            #expect(line.contains("the limit is \(Self.share) per user"), "\(line)")
        }
        #expect(!held.lines.all.contains("return"))
        #expect(try polkit.heldCount() == Self.share)
        // Logged once for the stretch, not once a call.
        let warning = "uid \(Self.heldUser) has \(Self.share) calls of the daemon's pending to polkit or its agents"
        #expect(daemon.log.components(separatedBy: warning).count - 1 == 1, "\(daemon.log)")

        // Released, polkit refuses them; every call had one answer.
        try polkit.mock("ReleaseHeld", "")
        let all = try held.lines.wait(timeout: 60, what: "every held call answered") { $0.contains("done") }
        let answers = all.filter { $0 != "done" && !$0.hasPrefix("sent ") }
        #expect(answers.count == total)
        #expect(answers.filter { $0.hasPrefix("error org.example.Permissions.Error.NotAuthorized: ") }.count == Self.share,
                "\(answers.filter { !$0.contains("LimitExceeded") })")
        #expect(daemon.isRunning)
        reportFigures("pending-checks", [
            "held-user-calls": total, "sent-to-polkit": Self.share, "refused-limit-exceeded": refusedEarly.count,
            "other-user-calls": otherAnswers.count + 2, "other-user-failures": otherAnswers.filter { $0 != "return" }.count,
        ])
    }

    /// What one connection, and one user's connections together, may have waiting
    /// ([service] pending-calls-per-connection=, pending-calls-per-user=): 3
    /// connections of the held user send 5 SetDecisions each. Each connection's
    /// fifth is refused before its caller is identified (4 per connection); of the
    /// 12 left, 6 wait for polkit (6 per user) and 6 are refused once identified.
    @Test(.hangGuard) func pendingCallsAreCappedPerConnectionAndPerUser() throws {
        let bus = try DebianSystemBus.start()
        let polkit = try PolkitTestMock(bus: bus, template: packageRoot + "/Tests/testenv/polkitd-holding.py")
        try polkit.setAllowed(["org.example.permissions.manage-own"])
        try polkit.mock("HoldUser", "u", String(Self.heldUser))
        let daemon = try PolkitTestDaemon(bus: bus, config: """
            [service]
            pending-calls-per-connection=4
            pending-calls-per-user=6
            outgoing-calls-per-user=100
            """)
        let held = try RunningProgram("/usr/bin/python3", [
            packageRoot + "/Tests/testenv/call-many.py", bus.address, "3", "5", "SetDecision", "org.example.Held",
            "location", "authorized",
        ], asUser: Self.heldUser)
        let errors = try held.lines.wait(timeout: 60, what: "9 calls refused") {
            $0.filter { $0.hasPrefix("error ") }.count >= 9
        }.filter { $0.hasPrefix("error ") }
        try polkit.waitForHeld(6)
        let perConnection = errors.filter { $0.contains("calls waiting in the daemon; the limit is 4 per connection") }
        let perUser = errors.filter { $0.contains("uid 1 has 6 calls waiting in the daemon; the limit is 6 per user") }
        #expect(perConnection.count == 3, "\(errors)")
        #expect(perUser.count == 6, "\(errors)")
        #expect(errors.allSatisfy { $0.hasPrefix("error org.example.Permissions.Error.LimitExceeded: SetDecision: ") })
        // The other user is not counted with them.
        #expect(try daemon.gdbusCall("GetStatusForApp", "org.example.Held", "location", asUser: Self.otherUser).status == 0)
        try polkit.mock("ReleaseHeld", "")
        _ = try held.lines.wait(timeout: 60, what: "every call answered") { $0.contains("done") }
        #expect(try polkit.heldCount() == 0)
    }
}

extension PolkitTestMock {
    /// Calls a method of the mock's own interface with busctl.
    @discardableResult
    func mock(_ method: String, _ signature: String, _ arguments: String...) throws -> String {
        let r = try run("/usr/bin/busctl", ["--address=\(bus.address)", "call", "org.freedesktop.PolicyKit1",
                                            "/org/freedesktop/PolicyKit1/Authority", "org.freedesktop.DBus.Mock",
                                            method] + (signature.isEmpty ? [] : [signature] + arguments))
        guard r.status == 0 else { throw HarnessError(description: "\(method) failed: \(r.stderr)") }
        return r.stdout
    }

    /// The checks the holding template holds now.
    func heldCount() throws -> Int {
        let out = try mock("HeldCount", "")
        guard out.hasPrefix("u "), let count = Int(out.dropFirst(2).trimmingCharacters(in: .whitespacesAndNewlines))
        else { throw HarnessError(description: "HeldCount answered \(out)") }
        return count
    }

    /// Waits (up to 30 s) until the template holds `count` checks.
    func waitForHeld(_ count: Int) throws {
        let deadline = Date().addingTimeInterval(30)
        while try heldCount() < count {
            if Date() > deadline { throw HarnessError(description: "polkit holds \(try heldCount()) checks, not \(count)") }
        }
    }
}

/// A bus with Debian's own system bus configuration (StockSystemBusConfig: the
/// machine's /usr/share/dbus-1/system.conf, its policy and limits exactly) on a
/// socket of the test's, with this checkout's policy file, polkit's, and one rule
/// of the test's as its system.d: python-dbusmock's polkitd runs as root, and
/// polkit's own file lets only the polkitd user own the name.
enum DebianSystemBus {
    static let testRules = """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <policy user="root">
            <allow own="org.freedesktop.PolicyKit1"/>
          </policy>
        </busconfig>
        """

    static func start() throws -> TestBus {
        // Restartable: the socket at a path of its own, as StockSystemBusConfig listens.
        try TestBus(type: "system", restartable: true) { directory, _ in
            let policies = directory + "/system.d"
            try FileManager.default.createDirectory(atPath: policies, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: packageRoot + "/dbus/org.example.Permissions.conf",
                                             toPath: policies + "/org.example.Permissions.conf")
            try FileManager.default.copyItem(atPath: "/usr/share/dbus-1/system.d/org.freedesktop.PolicyKit1.conf",
                                             toPath: policies + "/org.freedesktop.PolicyKit1.conf")
            try testRules.write(toFile: policies + "/test.conf", atomically: true, encoding: .utf8)
            return try StockSystemBusConfig.text(socket: directory + "/bus_socket", policyDirectory: policies,
                                                 serviceDirectory: nil)
        }
    }
}
