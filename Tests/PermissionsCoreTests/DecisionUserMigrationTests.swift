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
            #expect(try store.nextEpoch(clockSeconds: 0) == 1_800_000_001)
        }
        #expect(try sqlite("SELECT uid, app_id, permission FROM user_decisions ORDER BY app_id, permission")
                == "-1|/usr/bin/busctl|location\n-1|/usr/bin/gdbus|camera\n-1|/usr/bin/gdbus|location\n")
        #expect(try sqlite("SELECT type, name FROM sqlite_master WHERE type IN ('table', 'view') ORDER BY name")
                == "view|decisions\ntable|meta\ntable|user_decisions\n")
        // Opened again, nothing is migrated twice.
        let reopened = try DecisionStore(path: path)
        try reopened.load(uid: testUID)  // as the service loads a user before reading
        #expect(reopened.list().count == 3)
        #expect(reopened.list().allSatisfy { $0.uid == nil })
    }

    @Test func assignedRowsBelongToTheirUserAcrossRestarts() throws {
        try writeStoreWithoutUsers()
        do {
            let store = try DecisionStore(path: path)
            try store.set(DecisionKey(uid: 1000, "/usr/bin/gdbus", "location"), decision: .denied, setBy: "test")
            // The user's own row (made later) stays; the unassigned grant of the pair goes.
            #expect(try store.assign(app: "/usr/bin/gdbus", permissions: [], to: 1000) == 2)
            #expect(store.decision(DecisionKey(uid: 1000, "/usr/bin/gdbus", "location"))?.decision == .denied)
            #expect(store.decision(DecisionKey(uid: 1000, "/usr/bin/gdbus", "camera"))?.decision == .authorized)
            #expect(store.decision(DecisionKey(uid: nil, "/usr/bin/gdbus", "location")) == nil)
            #expect(try store.reset(uid: nil, app: "/usr/bin/busctl", permissions: []) == 1)
        }
        let reopened = try DecisionStore(path: path)
        try reopened.load(uid: testUID)  // as the service loads a user before reading
        #expect(reopened.list().map { "\($0.uid.map(String.init) ?? "-") \($0.appID) \($0.permission) \($0.decision.rawValue)" }
                == ["1000 /usr/bin/gdbus camera authorized", "1000 /usr/bin/gdbus location denied"])
    }

    /// An older daemon reads the table `decisions`, which is now a view holding one
    /// row with a decision word it does not know: by its own rule it refuses to start
    /// and leaves the file alone, instead of taking every user's rows as everybody's.
    /// (These are the statements the daemon of d97d104 ran, in its order.)
    @Test func anOlderDaemonRefusesTheMigratedStore() throws {
        try writeStoreWithoutUsers()
        _ = try DecisionStore(path: path)
        let olderDaemon = try sqlite("""
            CREATE TABLE IF NOT EXISTS decisions (app_id TEXT NOT NULL, permission TEXT NOT NULL,
                decision TEXT NOT NULL CHECK (decision IN ('authorized', 'denied')), set_at INTEGER NOT NULL,
                set_by TEXT NOT NULL, expires_at INTEGER, PRIMARY KEY (app_id, permission)) WITHOUT ROWID;
            SELECT name FROM pragma_table_info('decisions') WHERE name = 'expires_at';
            DROP INDEX IF EXISTS decisions_expiry;
            SELECT decision FROM decisions;
            """)
        #expect(olderDaemon == "expires_at\nneeds-a-permissionsd-with-users\n")
        #expect(Decision(rawValue: "needs-a-permissionsd-with-users") == nil)
        // And this daemon still opens it, with every row.
        #expect(try DecisionStore(path: path).list().count == 3)
    }

    @Test func theTripwireIsMadeAgainIfDropped() throws {
        _ = try DecisionStore(path: path)
        _ = try sqlite("DROP VIEW decisions")
        _ = try DecisionStore(path: path)
        #expect(try sqlite("SELECT decision FROM decisions") == "needs-a-permissionsd-with-users\n")
    }

    @Test func aRowOfAnImpossibleOwnerIsRefusedAndLeftAlone() throws {
        _ = try DecisionStore(path: path)
        _ = try sqlite("PRAGMA ignore_check_constraints=ON; INSERT INTO user_decisions VALUES (-7, 'org.a', 'camera', 'denied', 1, 'x', NULL)")
        // No user's load reads it (no uid is -7); the list of every row refuses it.
        let store = try DecisionStore(path: path)
        #expect(throws: StoreError.self) { try store.readAll(app: nil) }
        store.close()
        #expect(try sqlite("SELECT count(*) FROM user_decisions") == "1\n")
    }
}
