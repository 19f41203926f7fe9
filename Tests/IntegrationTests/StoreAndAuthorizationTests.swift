import Foundation
import Testing
import PermissionsTestSupport

/// Decisions persist; only administrators change them; bad input changes nothing.
@Suite struct StoreAndAuthorizationTests {
    let bus: TestBus
    let daemon: DaemonUnderTest

    init() throws {
        bus = try TestBus()
        daemon = try DaemonUnderTest(bus: bus)
    }

    func decisions() throws -> String {
        let r = try daemon.call("ListDecisions", "s", "")
        #expect(r.status == 0, "\(r.stderr)")
        return r.stdout
    }

    @Test func decisionSurvivesRestart() throws {
        #expect(try daemon.ctl("grant", "org.example.Kept", "location").status == 0)
        #expect(try daemon.ctl("deny", "/usr/bin/kept", "notifications").status == 0)
        let before = try decisions()
        daemon.stop()
        try daemon.start()
        #expect(try decisions() == before)
        #expect(try daemon.call("GetStatusForApp", "ss", "org.example.Kept", "location").stdout == "s \"authorized\"\n")
        #expect(try daemon.call("GetStatusForApp", "ss", "/usr/bin/kept", "notifications").stdout == "s \"denied\"\n")
    }

    @Test func decisionSurvivesAKill() throws {
        #expect(try daemon.ctl("grant", "org.example.Durable", "location").status == 0)
        // The reply came after the write: SIGKILL right after it loses nothing.
        daemon.kill()
        try daemon.start()
        #expect(try daemon.call("GetStatusForApp", "ss", "org.example.Durable", "location").stdout == "s \"authorized\"\n")
    }

    /// On a session bus (one user: the daemon's), another uid may read its own
    /// decisions but change none, and may not touch the daemon's user's.
    @Test func nonAdminIsRefusedAndNothingIsStored() throws {
        #expect(try daemon.ctl("grant", "org.example.X", "location").status == 0)
        let before = try decisions()
        for (member, arguments) in [("SetDecision", ["sss", "org.example.X", "location", "authorized"]),
                                    ("ResetDecisions", ["sas", "org.example.Kept", "0"]),
                                    ("SetDecisionForUser", ["usss", "0", "org.example.X", "location", "denied"]),
                                    ("ResetDecisionsForUser", ["usas", "0", "org.example.X", "0"]),
                                    ("ListDecisionsForUser", ["us", "0", ""]),
                                    ("GetStatusForUser", ["uss", "0", "org.example.X", "location"]),
                                    ("ListAllDecisions", ["s", ""])] {
            let r = try daemon.busctl(["call", "org.example.Permissions", "/org/example/Permissions",
                                       "org.example.Permissions", member] + arguments, asNobody: true)
            #expect(r.status != 0)
            #expect(r.stderr.contains("Call failed: \(member)"), "\(member): \(r.stderr)")
            #expect(r.stderr.contains(" is not allowed: uid 65534 is not the service's user"), "\(member): \(r.stderr)")
        }
        let ctl = try daemon.ctl("grant", "org.example.X", "location", asNobody: true)
        #expect(ctl.status == 1)
        #expect(ctl.stderr.hasSuffix("(org.example.Permissions.Error.NotAuthorized)\n"))
        #expect(try decisions() == before)
        // The same caller may read its own status and decisions: root's grant is not among them.
        let own = try daemon.call("GetStatus", "s", "location", asNobody: true)
        #expect(own.stdout == "s \"not-determined\"\n")
        #expect(try daemon.call("ListDecisions", "s", "", asNobody: true).stdout == "a(sssxs) 0\n")
        let app = try daemon.call("GetStatusForApp", "ss", "org.example.X", "location", asNobody: true)
        #expect(app.stdout == "s \"not-determined\"\n", "\(app.stderr)")
    }

    @Test func unknownPermissionIsNamed() throws {
        let r = try daemon.call("GetStatus", "s", "teleport")
        #expect(r.status != 0)
        #expect(r.stderr.contains("unknown permission \"teleport\""))
        let g = try daemon.gdbusCall("GetStatus", "teleport")
        #expect(g.stderr.contains("org.example.Permissions.Error.UnknownPermission"))
    }

    @Test func badInputGetsNamedErrorsAndChangesNothing() throws {
        #expect(try daemon.ctl("grant", "org.example.Kept", "location").status == 0)
        let before = try decisions()
        let cases: [([String], String)] = [
            (["GetStatus", "i", "4"], "GetStatus takes arguments of type 's', not 'i'"),
            (["GetStatus", "ss", "location", "extra"], "not 'ss'"),
            (["SetDecision", "ss", "org.example.Kept", "location"], "not 'ss'"),
            (["GetStatus", "s", "Cam/era"], "invalid permission name \"Cam/era\""),
            (["GetStatus", "s", ""], "invalid permission name \"\""),
            (["GetStatus", "s", String(repeating: "a", count: 65)], "invalid permission name"),
            (["SetDecision", "sss", "../etc/passwd", "location", "authorized"], "invalid app id \"../etc/passwd\""),
            (["SetDecision", "sss", "org.example.Kept", "location", "maybe"], "invalid decision \"maybe\""),
            (["SetDecision", "sss", "org.example.Kept", "teleport", "denied"], "unknown permission \"teleport\""),
            (["SetDecision", "sss", "line\nbreak", "location", "denied"], "invalid app id \"line\\x0abreak\""),
            (["SetDecision", "sss", String(repeating: "x", count: 4096), "location", "denied"], "invalid app id"),
            (["ResetDecisions", "sas", "org.example.Kept", "1", "Not Valid"], "invalid permission name \"Not Valid\""),
            (["ListDecisions", "s", "/a/../b"], "invalid app id \"/a/../b\""),
            (["NoSuchMethod"], "no method \"NoSuchMethod\""),
        ]
        for (arguments, message) in cases {
            let r = try daemon.busctl(["call", "org.example.Permissions", "/org/example/Permissions",
                                       "org.example.Permissions"] + arguments)
            #expect(r.status != 0, "\(arguments) succeeded")
            #expect(r.stderr.contains(message), "\(arguments): \(r.stderr)")
        }
        let wrongObject = try daemon.busctl(["call", "org.example.Permissions", "/org/example/Nope",
                                             "org.example.Permissions", "GetAll"])
        #expect(wrongObject.stderr.contains("no object at path \"/org/example/Nope\""))
        #expect(daemon.isRunning)
        #expect(try decisions() == before)
        #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"not-determined\"\n")
    }
}
