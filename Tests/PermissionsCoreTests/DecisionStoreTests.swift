import Foundation
import Testing
@testable import PermissionsModel
@testable import PermissionsStore

@Suite("Decision store")
struct DecisionStoreTests {
    let dir: TempDirectory
    var path: String { dir.url("decisions.db") }

    init() throws { dir = try TempDirectory() }

    private func nowMicroseconds() -> Int64 { Int64(Date().timeIntervalSince1970 * 1_000_000) }

    @Test func newStoreIsEmpty() throws {
        let store = try DecisionStore(path: path)
        #expect(store.path == path)
        #expect(store.list().isEmpty)
        #expect(store.list(app: "org.gnome.Maps").isEmpty)
        #expect(store.decision(DecisionKey(uid: testUID, "org.gnome.Maps", "camera")) == nil)
        #expect(FileManager.default.fileExists(atPath: path))
    }

    @Test func setThenGet() throws {
        let store = try DecisionStore(path: path)
        let before = nowMicroseconds()
        try store.set(DecisionKey(uid: testUID, "org.gnome.Maps", "location"), decision: .authorized, setBy: "uid 1000 (:1.42)")
        let after = nowMicroseconds()
        let stored = try #require(store.decision(DecisionKey(uid: testUID, "org.gnome.Maps", "location")))
        #expect(stored.appID == "org.gnome.Maps")
        #expect(stored.permission == "location")
        #expect(stored.decision == .authorized)
        #expect(stored.setBy == "uid 1000 (:1.42)")
        // Microseconds since the epoch, taken during the call (1 ms slack for clock rounding).
        #expect(stored.setAt >= before - 1000 && stored.setAt <= after + 1000,
                "setAt \(stored.setAt) not in \(before)...\(after)")
        #expect(store.decision(DecisionKey(uid: testUID, "org.gnome.Maps", "camera")) == nil)
        #expect(store.decision(DecisionKey(uid: testUID, "org.gnome.Map", "location")) == nil)
    }

    @Test func setReplacesTheEarlierDecision() throws {
        let store = try DecisionStore(path: path)
        try store.set(DecisionKey(uid: testUID, "org.a", "camera"), decision: .authorized, setBy: "first")
        let first = try #require(store.decision(DecisionKey(uid: testUID, "org.a", "camera")))
        try store.set(DecisionKey(uid: testUID, "org.a", "camera"), decision: .denied, setBy: "second")
        let second = try #require(store.decision(DecisionKey(uid: testUID, "org.a", "camera")))
        #expect(second.decision == .denied)
        #expect(second.setBy == "second")
        #expect(second.setAt >= first.setAt)
        #expect(store.list() == [second])
    }

    @Test func listIsSortedAndFiltered() throws {
        let store = try DecisionStore(path: path)
        let rows: [(String, String, Decision)] = [
            ("org.z", "camera", .denied), ("/usr/bin/x", "microphone", .authorized),
            ("org.a", "microphone", .authorized), ("org.a", "camera", .denied), ("org.m", "location", .authorized),
        ]
        for (app, permission, decision) in rows {
            try store.set(DecisionKey(uid: testUID, app, permission), decision: decision, setBy: "test")
        }
        let all = store.list()
        #expect(all.map { "\($0.appID) \($0.permission) \($0.decision.rawValue)" } == [
            "/usr/bin/x microphone authorized",
            "org.a camera denied",
            "org.a microphone authorized",
            "org.m location authorized",
            "org.z camera denied",
        ])
        #expect(store.list(app: "org.a").map(\.permission) == ["camera", "microphone"])
        #expect(store.list(app: "org.nothing").isEmpty)
    }

    @Test func resetAllOfOneApp() throws {
        let store = try DecisionStore(path: path)
        for permission in ["camera", "microphone", "location"] {
            try store.set(DecisionKey(uid: testUID, "org.a", permission), decision: .denied, setBy: "t")
        }
        try store.set(DecisionKey(uid: testUID, "org.b", "camera"), decision: .authorized, setBy: "t")
        #expect(try store.reset(uid: testUID, app: "org.a", permissions: []) == 3)
        #expect(store.list(app: "org.a").isEmpty)
        #expect(store.list().map(\.appID) == ["org.b"])
        #expect(try store.reset(uid: testUID, app: "org.a", permissions: []) == 0)
    }

    @Test func resetSomePermissions() throws {
        let store = try DecisionStore(path: path)
        for permission in ["camera", "microphone", "location"] {
            try store.set(DecisionKey(uid: testUID, "org.a", permission), decision: .authorized, setBy: "t")
        }
        try store.set(DecisionKey(uid: testUID, "org.b", "camera"), decision: .authorized, setBy: "t")
        #expect(try store.reset(uid: testUID, app: "org.a", permissions: ["camera", "location", "bluetooth", "camera"]) == 2)
        #expect(store.list(app: "org.a").map(\.permission) == ["microphone"])
        #expect(store.decision(DecisionKey(uid: testUID, "org.b", "camera"))?.decision == .authorized)
        #expect(try store.reset(uid: testUID, app: "org.a", permissions: ["camera"]) == 0)
        // The store still takes writes after the transactions.
        try store.set(DecisionKey(uid: testUID, "org.a", "camera"), decision: .denied, setBy: "t")
        #expect(store.decision(DecisionKey(uid: testUID, "org.a", "camera"))?.decision == .denied)
    }

    @Test func hostileTextIsStoredVerbatim() throws {
        let store = try DecisionStore(path: path)
        let app = "/opt/My App/bin/it's \"quoted\""
        let setBy = "'); DROP TABLE decisions; -- ✓"
        try store.set(DecisionKey(uid: testUID, app, "camera"), decision: .denied, setBy: setBy)
        let stored = try #require(store.decision(DecisionKey(uid: testUID, app, "camera")))
        #expect(stored.appID == app)
        #expect(stored.setBy == setBy)
        #expect(store.decision(DecisionKey(uid: testUID, "%", "camera")) == nil)
        #expect(store.list().count == 1)
    }

    @Test func decisionsSurviveReopening() throws {
        var expected: [StoredDecision] = []
        do {
            let store = try DecisionStore(path: path)
            try store.set(DecisionKey(uid: testUID, "org.a", "camera"), decision: .authorized, setBy: "uid 0")
            try store.set(DecisionKey(uid: testUID, "org.b", "location"), decision: .denied, setBy: "uid 1000")
            _ = try store.reset(uid: testUID, app: "org.b", permissions: ["camera"])  // a no-op
            expected = store.list()
        }
        #expect(expected.count == 2)
        let reopened = try DecisionStore(path: path)
        try reopened.load(uid: testUID)  // as the service loads a user before reading
        #expect(reopened.list() == expected)
        #expect(try dir.contents().filter { $0.contains(".corrupt-") }.isEmpty)
    }

    @Test func corruptFileIsMovedAsideAndTheStoreStartsEmpty() throws {
        // 4 KiB that are not an SQLite database (no "SQLite format 3" header).
        let garbage = (0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 151 &+ 7) }
        try dir.write("decisions.db", bytes: garbage)

        do {
            let store = try DecisionStore(path: path)
            #expect(store.list().isEmpty)
            let aside = try dir.contents().filter { $0.hasPrefix("decisions.db.corrupt-") }
            #expect(aside.count == 1)
            if let name = aside.first {
                // Kept for inspection, byte for byte.
                let kept = try Data(contentsOf: URL(fileURLWithPath: dir.url(name)))
                #expect(Array(kept) == garbage)
                // Degraded, saying where the old decisions are.
                let reason = try #require(store.degradedReason)
                #expect(reason.contains(dir.url(name)), "\(reason)")
            }
            // Usable, and durable.
            try store.set(DecisionKey(uid: testUID, "org.a", "camera"), decision: .denied, setBy: "t")
            #expect(store.decision(DecisionKey(uid: testUID, "org.a", "camera"))?.decision == .denied)
        }
        do {
            let reopened = try DecisionStore(path: path)
            try reopened.load(uid: testUID)  // as the service loads a user before reading
            #expect(reopened.decision(DecisionKey(uid: testUID, "org.a", "camera"))?.decision == .denied)
            // Readable now, but the denies of the file moved aside are still out of
            // force: degraded while it is there, naming it.
            let reason = try #require(reopened.degradedReason)
            let aside = try dir.contents().filter { $0.hasPrefix("decisions.db.corrupt-") }
            #expect(aside.count == 1)
            #expect(reason.hasPrefix(dir.url(aside.first ?? "?") + " holds a decision store moved aside"), "\(reason)")
            for name in aside { #expect(unlink(dir.url(name)) == 0) }
        }
        // Removed: the next open is no longer degraded.
        let cleared = try DecisionStore(path: path)
        try cleared.load(uid: testUID)
        #expect(cleared.degradedReason == nil)
        #expect(cleared.decision(DecisionKey(uid: testUID, "org.a", "camera"))?.decision == .denied)
    }

    /// Of several stores moved aside (and their WALs), the reason names the newest
    /// by the time in its name, and counts the others.
    @Test func degradedReasonNamesTheNewestStoreMovedAside() throws {
        for name in ["decisions.db.corrupt-900", "decisions.db.corrupt-1000-wal", "decisions.db.corrupt-1000",
                     "decisions.db.corrupt-999-wal", "decisions.db.corrupts", "other.db.corrupt-2000"] {
            try dir.write(name, "x")
        }
        let store = try DecisionStore(path: path)
        let reason = try #require(store.degradedReason)
        #expect(reason.hasPrefix(dir.url("decisions.db.corrupt-1000") + " holds "), "\(reason)")
        #expect(reason.contains("(and 3 other files like it)"), "\(reason)")
    }

    @Test func truncatedStoreStillOpensUsable() throws {
        do {
            let store = try DecisionStore(path: path)
            for i in 0..<200 {
                try store.set(DecisionKey(uid: testUID, "org.app\(i)", "camera"), decision: .denied, setBy: "t")
            }
        }
        let whole = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(whole.count > 4096)
        try dir.write("decisions.db", bytes: Array(whole.prefix(whole.count / 2 + 100)))

        let store = try DecisionStore(path: path)
        try store.set(DecisionKey(uid: testUID, "org.new", "camera"), decision: .authorized, setBy: "t")
        #expect(store.decision(DecisionKey(uid: testUID, "org.new", "camera"))?.decision == .authorized)
    }
}
