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

    private func sqlite(_ sql: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = [path, sql]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw StoreError(message: "sqlite3 exited with \(process.terminationStatus) for \(sql)")
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// The tables of the store before users, with a deny, a grant and a grant that expires.
    private func writeStoreWithoutUsers() throws {
        _ = try sqlite("""
            PRAGMA journal_mode=WAL;
            CREATE TABLE decisions (
                app_id TEXT NOT NULL,
                permission TEXT NOT NULL,
                decision TEXT NOT NULL CHECK (decision IN ('authorized', 'denied')),
                set_at INTEGER NOT NULL,
                set_by TEXT NOT NULL,
                expires_at INTEGER,
                PRIMARY KEY (app_id, permission)
            ) WITHOUT ROWID;
            CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
            INSERT INTO meta VALUES ('serial-epoch', 1800000000);
            INSERT INTO decisions VALUES ('org.a', 'camera', 'denied', 1, 'uid 0 (old)', NULL);
            INSERT INTO decisions VALUES ('org.b', 'camera', 'authorized', 2, 'uid 0 (old)', NULL);
            INSERT INTO decisions VALUES ('org.b', 'location', 'authorized', 3, 'user via agent :1.4', 4102444800000000);
            """)
    }

    @Test func everyRowBecomesUnassignedAndNothingIsLost() throws {
        try writeStoreWithoutUsers()
        do {
            let store = try DecisionStore(path: path)
            #expect(store.list().map { "\($0.uid.map(String.init) ?? "-") \($0.appID) \($0.permission) \($0.decision.rawValue)" }
                    == ["- org.a camera denied", "- org.b camera authorized", "- org.b location authorized"])
            #expect(store.list().last?.expiresAt == 4_102_444_800_000_000)
            #expect(store.decision(DecisionKey(uid: 1000, "org.b", "camera")) == nil)
            // The serial epoch survives the migration.
            #expect(try store.nextEpoch(atLeast: 0) == 1_800_000_001)
        }
        #expect(try sqlite("SELECT uid, app_id, permission FROM decisions ORDER BY app_id, permission")
                == "-1|org.a|camera\n-1|org.b|camera\n-1|org.b|location\n")
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
            try store.set(DecisionKey(uid: 1000, "org.b", "camera"), decision: .denied, setBy: "test")
            // The unassigned grant replaces the user's own row of the same pair.
            #expect(try store.assign(app: "org.b", permissions: ["camera"], to: 1000) == 1)
            #expect(store.decision(DecisionKey(uid: 1000, "org.b", "camera"))?.decision == .authorized)
            #expect(store.decision(DecisionKey(uid: nil, "org.b", "camera")) == nil)
            #expect(try store.reset(uid: nil, app: "org.a", permissions: []) == 1)
        }
        let reopened = try DecisionStore(path: path)
        #expect(reopened.list().map { "\($0.uid.map(String.init) ?? "-") \($0.appID) \($0.permission)" }
                == ["1000 org.b camera", "- org.b location"])
    }

    @Test func aRowOfAnImpossibleOwnerIsRefusedAndLeftAlone() throws {
        _ = try DecisionStore(path: path)
        _ = try sqlite("PRAGMA ignore_check_constraints=ON; INSERT INTO decisions VALUES (-7, 'org.a', 'camera', 'denied', 1, 'x', NULL)")
        #expect(throws: StoreError.self) { try DecisionStore(path: path) }
        #expect(try sqlite("SELECT count(*) FROM decisions") == "1\n")
    }
}
