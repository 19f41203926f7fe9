import Foundation
import Testing
@testable import PermissionsModel
@testable import PermissionsStore

/// The decision store's expiry (expires_at), removal of one row, the serial
/// epoch, and the upgrade of a store file written before expires_at existed.
@Suite("Decision store: expiry and the serial epoch")
struct DecisionStoreExpiryTests {
    let dir: TempDirectory
    var path: String { dir.url("decisions.sqlite") }

    init() throws { dir = try TempDirectory() }

    private static let second: Int64 = 1_000_000

    /// Waits until the clock has moved past `t` (so that the next `set` gets a later setAt).
    private func clockPast(_ t: Int64) throws {
        let deadline = Date().addingTimeInterval(5)
        while currentMicroseconds() <= t {
            if Date() > deadline { throw StoreError(message: "the clock did not move past \(t)") }
        }
    }

    @Test func setWithExpiryIsInForceUntilThen() throws {
        let store = try DecisionStore(path: path)
        let expires = currentMicroseconds() + 3600 * Self.second
        try store.set(DecisionKey(uid: testUID, "org.gnome.Maps", "location"), decision: .authorized, setBy: "test",
                      expiresAt: expires)
        let stored = try #require(store.decision(DecisionKey(uid: testUID, "org.gnome.Maps", "location")))
        #expect(stored.decision == .authorized)
        #expect(stored.expiresAt == expires)
        #expect(store.list() == [stored])
    }

    @Test func setWithoutExpiryHasNone() throws {
        let store = try DecisionStore(path: path)
        try store.set(DecisionKey(uid: testUID, "org.a", "camera"), decision: .denied, setBy: "test")
        #expect(try #require(store.decision(DecisionKey(uid: testUID, "org.a", "camera"))).expiresAt == nil)
    }

    @Test func expiredDecisionDoesNotCount() throws {
        let store = try DecisionStore(path: path)
        let now = currentMicroseconds()
        try store.set(DecisionKey(uid: testUID, "org.a", "camera"), decision: .authorized, setBy: "test", expiresAt: now - 1)
        try store.set(DecisionKey(uid: testUID, "org.a", "location"), decision: .denied, setBy: "test",
                      expiresAt: now + 3600 * Self.second)
        #expect(store.decision(DecisionKey(uid: testUID, "org.a", "camera")) == nil)
        #expect(store.decision(DecisionKey(uid: testUID, "org.a", "location"))?.decision == .denied)
        // Still a row until the expiry timer removes it.
        #expect(store.list(app: "org.a").map(\.permission) == ["camera", "location"])
    }

    @Test func newDecisionReplacesAnExpiredOneAndItsExpiry() throws {
        let store = try DecisionStore(path: path)
        try store.set(DecisionKey(uid: testUID, "org.a", "camera"), decision: .authorized, setBy: "first",
                      expiresAt: currentMicroseconds() - Self.second)
        try store.set(DecisionKey(uid: testUID, "org.a", "camera"), decision: .denied, setBy: "second")
        let stored = try #require(store.decision(DecisionKey(uid: testUID, "org.a", "camera")))
        #expect(stored.decision == .denied)
        #expect(stored.expiresAt == nil)
        #expect(store.expired(now: Int64.max).isEmpty)
        #expect(store.nextExpiry() == nil)
    }

    @Test func expiredIsEveryRowWhoseTimeHasCome() throws {
        let store = try DecisionStore(path: path)
        let t: Int64 = 1_900_000_000 * Self.second
        try store.set(DecisionKey(uid: testUID, "org.a", "camera"), decision: .authorized, setBy: "test", expiresAt: t)
        try store.set(DecisionKey(uid: testUID, "org.b", "camera"), decision: .denied, setBy: "test", expiresAt: t + 10)
        try store.set(DecisionKey(uid: testUID, "org.c", "camera"), decision: .authorized, setBy: "test")
        #expect(store.expired(now: t - 1).isEmpty)
        // At the very microsecond of expiry it is due.
        #expect(store.expired(now: t).map(\.appID) == ["org.a"])
        #expect(Set(store.expired(now: t + 10).map(\.appID)) == ["org.a", "org.b"])
        // A decision without an expiry never is.
        #expect(Set(store.expired(now: Int64.max).map(\.appID)) == ["org.a", "org.b"])
        let row = try #require(store.expired(now: t).first)
        #expect(row.permission == "camera")
        #expect(row.decision == .authorized)
        #expect(row.expiresAt == t)
        #expect(row.setBy == "test")
    }

    @Test func expiredDefaultsToNow() throws {
        let store = try DecisionStore(path: path)
        let now = currentMicroseconds()
        try store.set(DecisionKey(uid: testUID, "org.past", "camera"), decision: .authorized, setBy: "test", expiresAt: now - 1)
        try store.set(DecisionKey(uid: testUID, "org.future", "camera"), decision: .authorized, setBy: "test",
                      expiresAt: now + 3600 * Self.second)
        #expect(store.expired().map(\.appID) == ["org.past"])
    }

    @Test func nextExpiryIsTheEarliest() throws {
        let store = try DecisionStore(path: path)
        #expect(store.nextExpiry() == nil)
        try store.set(DecisionKey(uid: testUID, "org.forever", "camera"), decision: .authorized, setBy: "test")
        #expect(store.nextExpiry() == nil)
        let now = currentMicroseconds()
        try store.set(DecisionKey(uid: testUID, "org.b", "camera"), decision: .denied, setBy: "test", expiresAt: now + 500 * Self.second)
        #expect(store.nextExpiry() == now + 500 * Self.second)
        try store.set(DecisionKey(uid: testUID, "org.a", "location"), decision: .authorized, setBy: "test",
                      expiresAt: now + 20 * Self.second)
        try store.set(DecisionKey(uid: testUID, "org.c", "camera"), decision: .denied, setBy: "test", expiresAt: now + 900 * Self.second)
        #expect(store.nextExpiry() == now + 20 * Self.second)
        // Once the earliest is gone, the next one.
        try store.remove(try #require(store.list(app: "org.a").first))
        #expect(store.nextExpiry() == now + 500 * Self.second)
    }

    /// A row that expired while the daemon was down is still reported, so that the
    /// timer armed at start-up fires at once and removes it.
    @Test func nextExpiryIncludesOneAlreadyDue() throws {
        let store = try DecisionStore(path: path)
        let now = currentMicroseconds()
        try store.set(DecisionKey(uid: testUID, "org.a", "camera"), decision: .denied, setBy: "test", expiresAt: now - 60 * Self.second)
        try store.set(DecisionKey(uid: testUID, "org.b", "camera"), decision: .denied, setBy: "test", expiresAt: now + 60 * Self.second)
        #expect(store.nextExpiry() == now - 60 * Self.second)
    }

    @Test func removeTakesOnlyThatRow() throws {
        let store = try DecisionStore(path: path)
        try store.set(DecisionKey(uid: testUID, "org.a", "camera"), decision: .authorized, setBy: "test", expiresAt: 1)
        try store.set(DecisionKey(uid: testUID, "org.a", "location"), decision: .authorized, setBy: "test", expiresAt: 1)
        try store.set(DecisionKey(uid: testUID, "org.b", "camera"), decision: .authorized, setBy: "test", expiresAt: 1)
        let row = try #require(store.list(app: "org.a").first { $0.permission == "camera" })
        try store.remove(row)
        #expect(store.list().map { "\($0.appID) \($0.permission)" } == ["org.a location", "org.b camera"])
        // Removing it again changes nothing and is no error.
        try store.remove(row)
        #expect(store.list().count == 2)
    }

    @Test func removeLeavesANewerDecisionForThePair() throws {
        let store = try DecisionStore(path: path)
        try store.set(DecisionKey(uid: testUID, "org.a", "camera"), decision: .authorized, setBy: "old",
                      expiresAt: currentMicroseconds() - 1)
        let old = try #require(store.expired().first)
        try clockPast(old.setAt)
        // The user decides again while the expiry is being handled.
        try store.set(DecisionKey(uid: testUID, "org.a", "camera"), decision: .denied, setBy: "new")
        let new = try #require(store.decision(DecisionKey(uid: testUID, "org.a", "camera")))
        #expect(new.setAt != old.setAt)
        try store.remove(old)
        #expect(store.decision(DecisionKey(uid: testUID, "org.a", "camera")) == new)
        #expect(store.list() == [new])
        try store.remove(new)
        #expect(store.list().isEmpty)
    }

    @Test func removeSurvivesReopening() throws {
        do {
            let store = try DecisionStore(path: path)
            try store.set(DecisionKey(uid: testUID, "org.a", "camera"), decision: .authorized, setBy: "test", expiresAt: 5)
            try store.set(DecisionKey(uid: testUID, "org.b", "camera"), decision: .authorized, setBy: "test", expiresAt: 5)
            try store.remove(try #require(store.list(app: "org.a").first))
        }
        let reopened = try DecisionStore(path: path)
        try reopened.load(uid: testUID)  // as the service loads a user before reading
        #expect(reopened.list().map(\.appID) == ["org.b"])
        #expect(reopened.list().first?.expiresAt == 5)
    }

    @Test func nextEpochGrowsAndPersists() throws {
        do {
            let store = try DecisionStore(path: path)
            #expect(try store.nextEpoch(clockSeconds: 0) == 1)
            #expect(try store.nextEpoch(clockSeconds: 0) == 2)
            // The larger of the stored one plus one and the clock's seconds.
            #expect(try store.nextEpoch(clockSeconds: 10) == 10)
            #expect(try store.nextEpoch(clockSeconds: 5) == 11)
        }
        let reopened = try DecisionStore(path: path)
        try reopened.load(uid: testUID)  // as the service loads a user before reading
        #expect(try reopened.nextEpoch(clockSeconds: 0) == 12)
        // The epoch is not a decision.
        #expect(reopened.list().isEmpty)
    }

    // MARK: A store from before expires_at

    private func sqlite(_ sql: String) throws -> String { try sqlite3(path, sql) }

    /// The schema and a row as the first version of the daemon wrote them.
    private func writeOldStore() throws {
        _ = try sqlite("""
            PRAGMA journal_mode=WAL;
            CREATE TABLE decisions (
                app_id TEXT NOT NULL,
                permission TEXT NOT NULL,
                decision TEXT NOT NULL CHECK (decision IN ('authorized', 'denied')),
                set_at INTEGER NOT NULL,
                set_by TEXT NOT NULL,
                PRIMARY KEY (app_id, permission)
            ) WITHOUT ROWID;
            INSERT INTO decisions VALUES ('org.old.App', 'location', 'denied', 1700000000000000, 'uid 0 (old)');
            """)
        #expect(try !sqlite("SELECT name FROM pragma_table_info('decisions')").contains("expires_at"))
    }

    @Test func storeWithTheOldSchemaOpensAndWorks() throws {
        try writeOldStore()
        do {
            let store = try DecisionStore(path: path)
            // The old row is kept, with no expiry and no owner (see DecisionUserMigrationTests).
            #expect(store.decision(DecisionKey(uid: nil, "org.old.App", "location"))
                    == StoredDecision(uid: nil, appID: "org.old.App", permission: "location", decision: .denied,
                                      setAt: 1_700_000_000_000_000, setBy: "uid 0 (old)", expiresAt: nil))
            #expect(store.nextExpiry() == nil)
            #expect(store.expired(now: Int64.max).isEmpty)
            // New rows with an expiry, and the serial epoch, work.
            let expires = currentMicroseconds() + 60 * Self.second
            try store.set(DecisionKey(uid: testUID, "org.new.App", "camera"), decision: .authorized, setBy: "test",
                          expiresAt: expires)
            #expect(store.decision(DecisionKey(uid: testUID, "org.new.App", "camera"))?.expiresAt == expires)
            #expect(store.nextExpiry() == expires)
            #expect(store.expired(now: expires).map(\.appID) == ["org.new.App"])
            #expect(try store.nextEpoch(clockSeconds: 0) == 1)
            try store.remove(try #require(store.decision(DecisionKey(uid: nil, "org.old.App", "location"))))
            #expect(store.list().map(\.appID) == ["org.new.App"])
        }
        // The file was upgraded in place, not moved aside as unreadable.
        #expect(try dir.contents().allSatisfy { !$0.contains("corrupt") })
        #expect(try sqlite("SELECT name FROM pragma_table_info('decisions')").contains("expires_at"))
        // And it opens again (the column is there now).
        let reopened = try DecisionStore(path: path)
        try reopened.load(uid: testUID)  // as the service loads a user before reading
        #expect(reopened.list().map(\.appID) == ["org.new.App"])
        #expect(try reopened.nextEpoch(clockSeconds: 0) == 2)
    }
}
