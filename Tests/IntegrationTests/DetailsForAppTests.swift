import Foundation
import Testing
import PermissionsTestSupport

/// GetDetailsForApp: what a settings page shows for one app of the caller's own
/// user, read back from a real daemon through busctl.
@Suite struct DetailsForAppTests {
    let bus: TestBus
    let daemon: DaemonUnderTest

    init() throws {
        bus = try TestBus()
        daemon = try DaemonUnderTest(bus: bus, config: """
            [location]
            deny=org.example.Locked

            [notifications]
            enabled=false
            """)
    }

    /// The details as "key value" lines of `busctl --json=short`'s a{sv}.
    func details(_ app: String, _ permission: String, asNobody: Bool = false) throws -> [String: Any] {
        let r = try daemon.busctl(["--json=short", "call", "org.example.Permissions", "/org/example/Permissions",
                                   "org.example.Permissions", "GetDetailsForApp", "ss", app, permission],
                                  asNobody: asNobody)
        try #require(r.status == 0, "\(r.stderr)")
        let json = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
        let dict = try #require((json?["data"] as? [Any])?.first as? [String: [String: Any]])
        return dict.mapValues { $0["data"] as Any }
    }

    @Test func aStoredGrantWithItsScopeAndWhoSetIt() throws {
        #expect(try daemon.ctl("grant", "org.example.Maps", "location").status == 0)
        let d = try details("org.example.Maps", "location")
        #expect(d["app-id"] as? String == "org.example.Maps")
        #expect(d["status"] as? String == "authorized")
        #expect(d["decision"] as? String == "authorized")
        #expect(d["decision-scope"] as? String == "always")
        #expect((d["decision-set-by"] as? String)?.hasPrefix("uid 0 ") == true)
        #expect((d["decision-set-at"] as? Int ?? 0) > 1_700_000_000_000_000)
        #expect(d["decision-expires-at"] == nil)
        #expect(d["uid"] as? Int == 0)
        #expect(d["service-state"] as? String == "available")
        #expect(d["disabled-by"] == nil)
        // Named, not identified: no identity of its own.
        #expect(d["identity-kind"] == nil)
    }

    /// Another user's GetDetailsForApp reads their own decisions: root's grant is
    /// not theirs.
    @Test func onlyTheCallersOwnUser() throws {
        #expect(try daemon.ctl("grant", "org.example.Maps", "location").status == 0)
        let d = try details("org.example.Maps", "location", asNobody: true)
        #expect(d["uid"] as? Int == 65534)
        #expect(d["decision"] as? String == "none")
        #expect(d["status"] as? String == "not-determined")
    }

    @Test func theAdminsLockAndSwitch() throws {
        let locked = try details("org.example.Locked", "location")
        #expect(locked["policy"] as? String == "restricted")
        #expect(locked["status"] as? String == "restricted")
        let off = try details("org.example.Maps", "notifications")
        #expect(off["service-state"] as? String == "disabled")
        #expect(off["disabled-by"] as? String == "configuration")
        #expect(off["status"] as? String == "disabled")
    }

    @Test func badInputIsNamed() throws {
        let r = try daemon.call("GetDetailsForApp", "ss", "org.example.Maps", "teleport")
        #expect(r.status != 0)
        #expect(r.stderr.contains("teleport"))
        let app = try daemon.call("GetDetailsForApp", "ss", "../etc/x", "location")
        #expect(app.status != 0)
        #expect(app.stderr.contains("../etc/x"))
    }
}
