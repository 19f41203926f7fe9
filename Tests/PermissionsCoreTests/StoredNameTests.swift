import Foundation
import Testing
@testable import PermissionsModel
@testable import PermissionsStore
@testable import PermissionsService

/// How the API names a stored row's app id and permission (StoredName), so that
/// every row, a migrated `../etc/x` included, can be listed and removed; and that
/// the service stores no row it could not name.
@Suite struct StoredNameTests {
    @Test("a stored id that is not valid is named invalid:, escaped", arguments: [
        ("../etc/x", "invalid:../etc/x"),
        ("org.foo\nbar", "invalid:org.foo\\x0abar"),
        ("a\\b", "invalid:a\\x5cb"),
        ("org.caf\u{e9}", "invalid:org.caf\\xc3\\xa9"),
        ("", "invalid:"),
        ("nul\0", "invalid:nul\\x00"),
        ("invalid:x", "invalid:invalid:x"),
        ("unverified:/usr/bin/true", "invalid:unverified:/usr/bin/true"),
        ("/a/../b", "invalid:/a/../b"),
    ])
    func invalidID(id: String, name: String) {
        #expect(StoredName.app(id) == name)
        #expect(StoredName.appID(named: name) == id)
        #expect(StoredName.namesInvalidAppID(name))
        #expect(!Validate.isAppID(name))
    }

    @Test(arguments: ["org.gnome.Maps", "/usr/bin/busctl", "/opt/My App/bin/app", "a"])
    func aValidIDIsItsOwnName(id: String) {
        #expect(StoredName.app(id) == id)
        #expect(StoredName.appID(named: id) == id)
        #expect(!StoredName.namesInvalidAppID(id))
    }

    /// One name per id: a valid id spelled as invalid:, an escape of what needs none,
    /// an escape written otherwise, a broken escape or bytes that are no UTF-8 name
    /// nothing.
    @Test(arguments: ["invalid:org.gnome.Maps", "invalid:\\x2e\\x2e/etc/x", "invalid:a\\x5Cb", "invalid:a\\b",
                      "invalid:\\x4", "invalid:\\xzz", "invalid:\\x+a", "invalid:\\xff", "invalid:\\xc3",
                      "Invalid:../etc/x", "../etc/x", "invalid:/usr/bin/true"])
    func namesOfNothing(name: String) {
        #expect(StoredName.appID(named: name) == nil)
    }

    @Test func permissionsAreNamedTheSameWay() {
        #expect(StoredName.permission("camera") == "camera")
        #expect(StoredName.permission("Camera!") == "invalid:Camera!")
        #expect(StoredName.permission(named: "invalid:Camera!") == "Camera!")
        #expect(StoredName.permission(named: "invalid:camera") == nil)
        #expect(StoredName.permission(named: "camera") == "camera")
    }

    /// Every string, of random bytes decoded as UTF-8, has a printable ASCII name that
    /// gives it back.
    @Test func everyStringHasANameThatGivesItBack() {
        for _ in 0..<2_000 {
            let bytes = (0..<Int.random(in: 0...24)).map { _ in UInt8.random(in: 0...255) }
            let id = String(decoding: bytes, as: UTF8.self)
            let name = StoredName.app(id)
            #expect(name.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7f }, "\(name)")
            #expect(StoredName.appID(named: name) == id, "\(Array(id.utf8))")
        }
    }

    /// The service's one path for storing a decision refuses a row no method could
    /// name: it fails, and nothing is stored.
    @Test(arguments: [("../etc/x", "camera"), ("org.ok.App", "Camera!"), ("unverified:/usr/bin/true", "camera")])
    func theTrackerStoresNoRowItCannotName(app: String, permission: String) {
        let store = InMemoryDecisionStore()
        let tracker = StatusTracker(store: store, source: NoSnapshots()) { _, _, _, _ in
            Issue.record("a signal for a row that was not stored")
        }
        var outcome: Result<Void, any Error>?
        tracker.setDecision(uid: 1000, app: app, permission: permission, decision: .denied, setBy: "test") {
            outcome = $0
        }
        guard case .failure(let error)? = outcome else {
            Issue.record("stored: \(String(describing: outcome))")
            return
        }
        #expect("\(error)".hasPrefix("refusing to store a decision for the app id "), "\(error)")
        #expect(store.list().isEmpty)
    }
}

/// A snapshot source with nothing in it.
private final class NoSnapshots: SnapshotSource {
    var declaredPermissions: Set<String> { [] }
    func snapshot(for permission: String) -> Snapshot? { nil }
}
