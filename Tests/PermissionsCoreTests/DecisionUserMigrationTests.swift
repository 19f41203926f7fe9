import Foundation
import Testing
@testable import PermissionsModel
@testable import PermissionsStore

/// A store written before decisions had users (issue 13): the schema exactly as
/// the daemon up to commit d97d104 wrote it, migrated at open, failing closed.
@Suite struct DecisionUserMigrationTests {
    let dir: TempDirectory
    var path: String { dir.url("decisions.sqlite") }

    init() throws { dir = try TempDirectory() }

    private func sqlite(_ sql: String) throws -> String { try sqlite3(path, sql) }

    /// Tests/fixtures/store/before-users.sql: the tables of the store before users,
    /// with a deny, a grant and a grant that expires.
    private func writeStoreWithoutUsers() throws {
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("fixtures/store/before-users.sql").path
        _ = try sqlite(".read '\(fixture)'")
    }

    @Test func everyRowBecomesUnassignedAndNothingIsLost() throws {
        try writeStoreWithoutUsers()
        do {
            let store = try DecisionStore(path: path)
            #expect(store.list().map { "\($0.uid.map(String.init) ?? "-") \($0.appID) \($0.permission) \($0.decision.rawValue)" }
                    == ["- /usr/bin/busctl location denied", "- /usr/bin/gdbus camera authorized",
                        "- /usr/bin/gdbus location authorized"])
            #expect(store.list()[1].expiresAt == 4_102_444_800_000_000)
            #expect(store.decision(DecisionKey(uid: 1000, "/usr/bin/gdbus", "location")) == nil)
            // The serial epoch survives the migration.
            #expect(try store.nextEpoch(atLeast: 0) == 1_800_000_001)
        }
        #expect(try sqlite("SELECT uid, app_id, permission FROM decisions ORDER BY app_id, permission")
                == "-1|/usr/bin/busctl|location\n-1|/usr/bin/gdbus|camera\n-1|/usr/bin/gdbus|location\n")
        #expect(try sqlite("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name") == "decisions\nmeta\n")
        // Opened again, nothing is migrated twice.
        let reopened = try DecisionStore(path: path)
        #expect(reopened.list().count == 3)
        #expect(reopened.list().allSatisfy { $0.uid == nil })
    }

    @Test func assignedRowsBelongToTheirUserAcrossRestarts() throws {
        try writeStoreWithoutUsers()
        do {
            let store = try DecisionStore(path: path)
            try store.set(DecisionKey(uid: 1000, "/usr/bin/gdbus", "location"), decision: .denied, setBy: "test")
            // The unassigned grant replaces the user's own row of the same pair.
            #expect(try store.assign(app: "/usr/bin/gdbus", permissions: ["location"], to: 1000) == 1)
            #expect(store.decision(DecisionKey(uid: 1000, "/usr/bin/gdbus", "location"))?.decision == .authorized)
            #expect(store.decision(DecisionKey(uid: nil, "/usr/bin/gdbus", "location")) == nil)
            #expect(try store.reset(uid: nil, app: "/usr/bin/busctl", permissions: []) == 1)
        }
        let reopened = try DecisionStore(path: path)
        #expect(reopened.list().map { "\($0.uid.map(String.init) ?? "-") \($0.appID) \($0.permission)" }
                == ["- /usr/bin/gdbus camera", "1000 /usr/bin/gdbus location"])
    }

    @Test func aRowOfAnImpossibleOwnerIsRefusedAndLeftAlone() throws {
        _ = try DecisionStore(path: path)
        _ = try sqlite("PRAGMA ignore_check_constraints=ON; INSERT INTO decisions VALUES (-7, 'org.a', 'camera', 'denied', 1, 'x', NULL)")
        #expect(throws: StoreError.self) { try DecisionStore(path: path) }
        #expect(try sqlite("SELECT count(*) FROM decisions") == "1\n")
    }
}
