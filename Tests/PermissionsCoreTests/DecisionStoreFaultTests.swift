import Foundation
import Testing
@testable import PermissionsModel
@testable import PermissionsStore

/// The decision store under faults: reads come from memory whatever happens to the
/// files, a failed write changes nothing, and a store that cannot be read whole
/// never opens as a shorter list.
@Suite("Decision store: faults")
struct DecisionStoreFaultTests {
    let dir: TempDirectory
    var path: String { dir.url("decisions.sqlite") }

    init() throws { dir = try TempDirectory() }

    private func randomBytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255) } }

    private func bytes(_ file: String) throws -> [UInt8] { Array(try Data(contentsOf: URL(fileURLWithPath: file))) }

    private func sqlite(_ sql: String) throws {
        let r = Process()
        r.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        r.arguments = [path, sql]
        r.standardOutput = FileHandle.nullDevice
        try r.run()
        r.waitUntilExit()
        guard r.terminationStatus == 0 else { throw StoreError(message: "sqlite3 failed for \(sql)") }
    }

    @Test func readsComeFromMemoryWhateverHappensToTheFiles() throws {
        // A -shm left by an older version: removed, and none is ever made.
        try dir.write("decisions.sqlite-shm", bytes: randomBytes(32768))
        let store = try DecisionStore(path: path)
        #expect(!FileManager.default.fileExists(atPath: path + "-shm"))
        try store.set(DecisionKey(uid: testUID, "org.a", "camera"), decision: .denied, setBy: "t")
        try store.set(DecisionKey(uid: testUID, "org.b", "location"), decision: .authorized, setBy: "t")
        let before = store.list()
        #expect(!FileManager.default.fileExists(atPath: path + "-shm"))

        // Everything beside the daemon scribbled over.
        let walSize = try bytes(path + "-wal").count
        try dir.write("decisions.sqlite-wal", bytes: randomBytes(max(walSize, 4096)))
        try dir.write("decisions.sqlite-shm", bytes: randomBytes(32768))
        try dir.write("decisions.sqlite", bytes: randomBytes(8192))
        #expect(store.decision(DecisionKey(uid: testUID, "org.a", "camera"))?.decision == .denied)
        #expect(store.list() == before)
        #expect(store.list(app: "org.a") == [before[0]])
        // A write after that either works or throws; either way memory tells the truth.
        do {
            try store.set(DecisionKey(uid: testUID, "org.c", "camera"), decision: .denied, setBy: "t")
            #expect(store.decision(DecisionKey(uid: testUID, "org.c", "camera"))?.decision == .denied)
        } catch {
            #expect(store.decision(DecisionKey(uid: testUID, "org.c", "camera")) == nil)
        }
        #expect(store.decision(DecisionKey(uid: testUID, "org.a", "camera"))?.decision == .denied)
    }

    @Test func failedWriteChangesNeitherMemoryNorFile() throws {
        let expires = currentMicroseconds() + 3_600_000_000
        do {
            let store = try DecisionStore(path: path)
            try store.set(DecisionKey(uid: testUID, "org.a", "camera"), decision: .denied, setBy: "t")
            try store.set(DecisionKey(uid: testUID, "org.a", "location"), decision: .authorized, setBy: "t", expiresAt: expires)
            let epoch = try store.nextEpoch(clockSeconds: 0)
            let before = store.list()

            // SQLite refuses every write from here on (a real SQLITE_READONLY).
            try store.executeForTesting("PRAGMA query_only=ON")
            #expect(throws: StoreError.self) {
                try store.set(DecisionKey(uid: testUID, "org.a", "camera"), decision: .authorized, setBy: "t")
            }
            #expect(throws: StoreError.self) {
                try store.set(DecisionKey(uid: testUID, "org.new", "camera"), decision: .denied, setBy: "t")
            }
            #expect(throws: StoreError.self) { try store.reset(uid: testUID, app: "org.a", permissions: []) }
            #expect(throws: StoreError.self) { try store.reset(uid: testUID, app: "org.a", permissions: ["camera", "location"]) }
            #expect(throws: StoreError.self) { try store.remove(before[1]) }
            #expect(throws: SerialEpochError.self) { try store.nextEpoch(clockSeconds: 0) }
            #expect(store.list() == before)
            #expect(store.decision(DecisionKey(uid: testUID, "org.a", "camera"))?.decision == .denied)
            #expect(store.nextExpiry() == expires)

            // Writes work again once SQLite takes them, from the same state.
            try store.executeForTesting("PRAGMA query_only=OFF")
            #expect(try store.nextEpoch(clockSeconds: 0) == epoch + 1)
            #expect(try store.reset(uid: testUID, app: "org.a", permissions: ["location"]) == 1)
        }
        // The file holds what memory held.
        let reopened = try DecisionStore(path: path)
        try reopened.load(uid: testUID)  // as the service loads a user before reading
        #expect(reopened.list().map { "\($0.appID) \($0.permission) \($0.decision.rawValue)" }
                == ["org.a camera denied"])
    }

    @Test func aSecondOpenIsRefusedWhileTheStoreIsOpen() throws {
        let store = try DecisionStore(path: path)
        try store.set(DecisionKey(uid: testUID, "org.a", "camera"), decision: .denied, setBy: "t")
        let error = #expect(throws: StoreError.self) { try DecisionStore(path: path) }
        #expect(error?.isCorruption == false)
        #expect(error?.description.contains("locked") == true, "\(String(describing: error))")
        // Refused, not moved aside: the store is untouched.
        #expect(try dir.contents().allSatisfy { !$0.contains("corrupt") })
        #expect(store.decision(DecisionKey(uid: testUID, "org.a", "camera"))?.decision == .denied)
    }

    /// A damaged page in the middle of the table: the open does not read it (it
    /// reads no user's rows), and the load of the user whose rows are on it fails
    /// as damage, with the file left as it is; it never yields the rows it could
    /// read. Another user's load is not touched by it.
    @Test func damagedPageIsNeverAShortList() throws {
        do {
            let store = try DecisionStore(path: path)
            for i in 0..<400 {
                try store.set(DecisionKey(uid: testUID, "org.app\(i)", "camera"), decision: .denied, setBy: "test")
            }
            try store.set(DecisionKey(uid: 4242, "org.other", "camera"), decision: .denied, setBy: "test")
        }
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"), "closing checkpoints the WAL")
        var file = try bytes(path)
        let pages = file.count / 4096
        #expect(pages > 6)
        let page = pages / 2
        for i in (page * 4096)..<((page + 1) * 4096) { file[i] = UInt8(truncatingIfNeeded: i &* 7 &+ 13) }
        try dir.write("decisions.sqlite", bytes: file)

        let store = try DecisionStore(path: path)
        let error = #expect(throws: StoreError.self) { try store.load(uid: testUID) }
        #expect(error?.isCorruption == true, "\(String(describing: error))")
        #expect(!store.isLoaded(uid: testUID))
        #expect(store.list().isEmpty)
        try store.load(uid: 4242)
        #expect(store.decision(DecisionKey(uid: 4242, "org.other", "camera"))?.decision == .denied)
        #expect(try dir.contents().allSatisfy { !$0.contains("corrupt") })
        store.close()
        #expect(try bytes(path) == file)
    }

    /// A damaged store is moved aside with its WAL, both as they were: closing the
    /// connection that found the damage neither checkpoints the WAL into the file
    /// nor deletes it.
    @Test func damagedStoreIsMovedAsideWithItsWALUntouched() throws {
        var wal: [UInt8] = []
        do {
            let store = try DecisionStore(path: path)
            try store.set(DecisionKey(uid: testUID, "org.a", "camera"), decision: .denied, setBy: "t")
            // Written since the open's checkpoint: in the WAL until the store closes.
            wal = try bytes(path + "-wal")
        }
        #expect(wal.count > 32)
        let garbage = randomBytes(8192)
        try dir.write("decisions.sqlite", bytes: garbage)
        try dir.write("decisions.sqlite-wal", bytes: wal)

        let store = try DecisionStore(path: path)
        #expect(store.degradedReason != nil)
        let aside = try dir.contents().filter { $0.hasPrefix("decisions.sqlite.corrupt-") }
        #expect(aside.count == 2, "\(aside)")
        let moved = aside.first { !$0.hasSuffix("-wal") } ?? "?"
        #expect(try bytes(dir.url(moved)) == garbage)
        #expect(try bytes(dir.url(moved + "-wal")) == wal)
    }

    /// A store truncated to 0 bytes, or to less than SQLite's 100-byte header, is
    /// damage, not a first start: SQLite would open it as a new, empty database and
    /// every stored deny would be gone without a word. Only a missing file is new.
    @Test(arguments: [0, 1, 99])
    func truncatedStoreIsMovedAsideNotStartedAfresh(length: Int) throws {
        do {
            let store = try DecisionStore(path: path)
            try store.set(DecisionKey(uid: testUID, "org.a", "camera"), decision: .denied, setBy: "t")
        }
        let kept = Array(try bytes(path).prefix(length))
        try dir.write("decisions.sqlite", bytes: kept)

        let store = try DecisionStore(path: path)
        let reason = try #require(store.degradedReason)
        #expect(reason.contains("\(length) bytes long, shorter than a SQLite header"), "\(reason)")
        let aside = try dir.contents().filter { $0.hasPrefix("decisions.sqlite.corrupt-") && !$0.hasSuffix("-wal") }
        #expect(aside.count == 1, "\(aside)")
        if let name = aside.first { #expect(try bytes(dir.url(name)) == kept) }
        #expect(store.list().isEmpty)
    }

    @Test func missingStoreIsAFirstStart() throws {
        let store = try DecisionStore(path: path)
        #expect(store.degradedReason == nil)
        #expect(try dir.contents().filter { $0.contains(".corrupt-") }.isEmpty)
    }

    /// A decision word this version does not know may mean "deny": in an
    /// unassigned row (read at the open) the open fails; in a user's row, that
    /// user's load fails, and another user's does not. The file is left as it was.
    @Test func unknownDecisionWordFailsTheOpen() throws {
        do {
            let store = try DecisionStore(path: path)
            try store.set(DecisionKey(uid: testUID, "org.a", "camera"), decision: .denied, setBy: "t")
            try store.set(DecisionKey(uid: testUID, "org.b", "camera"), decision: .denied, setBy: "t")
            try store.set(DecisionKey(uid: 4242, "org.b", "camera"), decision: .denied, setBy: "t")
        }
        try sqlite("PRAGMA ignore_check_constraints=ON; UPDATE user_decisions SET decision = 'ask' WHERE app_id = 'org.b' "
                   + "AND uid = \(testUID)")
        let before = try bytes(path)
        do {
            let store = try DecisionStore(path: path)
            let error = #expect(throws: StoreError.self) { try store.load(uid: testUID) }
            #expect(error?.description.contains("unknown decision \"ask\" for \"org.b\" / \"camera\"") == true,
                    "\(String(describing: error))")
            try store.load(uid: 4242)
            #expect(store.decision(DecisionKey(uid: 4242, "org.b", "camera"))?.decision == .denied)
        }
        #expect(try bytes(path) == before)
        try sqlite("PRAGMA ignore_check_constraints=ON; UPDATE user_decisions SET uid = -1 WHERE decision = 'ask'")
        let unassigned = try bytes(path)
        let error = #expect(throws: StoreError.self) { try DecisionStore(path: path) }
        #expect(error?.description.contains("unknown decision \"ask\"") == true, "\(String(describing: error))")
        #expect(try bytes(path) == unassigned)
        #expect(try dir.contents().allSatisfy { !$0.contains("corrupt") })
    }

    /// The key is compared byte for byte, as SQLite does: "é" and "e" + U+0301 are
    /// two rows, in memory as in the file.
    @Test func canonicallyEquivalentAppIDsAreTwoDecisions() throws {
        let composed = "org.caf\u{e9}"
        let decomposed = "org.cafe\u{301}"
        #expect(composed == decomposed)  // Swift's String ==
        do {
            let store = try DecisionStore(path: path)
            try store.set(DecisionKey(uid: testUID, composed, "camera"), decision: .denied, setBy: "t")
            try store.set(DecisionKey(uid: testUID, decomposed, "camera"), decision: .authorized, setBy: "t")
            #expect(store.list().count == 2)
            #expect(store.decision(DecisionKey(uid: testUID, composed, "camera"))?.decision == .denied)
            #expect(store.decision(DecisionKey(uid: testUID, decomposed, "camera"))?.decision == .authorized)
        }
        let reopened = try DecisionStore(path: path)
        try reopened.load(uid: testUID)  // as the service loads a user before reading
        #expect(reopened.list().count == 2)
        #expect(reopened.decision(DecisionKey(uid: testUID, composed, "camera"))?.decision == .denied)
        #expect(try reopened.reset(uid: testUID, app: decomposed, permissions: []) == 1)
        #expect(reopened.list().map(\.decision) == [.denied])
    }

    /// Whether this machine lets a test make a directory immutable (root, and a file
    /// system with the attribute, such as ext4).
    static let canMakeImmutable: Bool = {
        guard let dir = try? TempDirectory() else { return false }
        guard chattr("+i", dir.path) else { return false }
        _ = chattr("-i", dir.path)
        return true
    }()

    @discardableResult
    static func chattr(_ flag: String, _ path: String) -> Bool {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/chattr")
        p.arguments = [flag, path]
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return false }
        p.waitUntilExit()
        return p.terminationStatus == 0
    }

    /// A damaged store that cannot be moved aside is neither deleted nor written
    /// over: the open fails, naming it.
    @Test(.enabled(if: canMakeImmutable, "needs chattr +i (root, ext4)"))
    func damagedStoreThatCannotBeMovedFailsTheOpen() throws {
        let garbage = randomBytes(8192)
        try dir.write("decisions.sqlite", bytes: garbage)
        try #require(Self.chattr("+i", dir.path))
        defer { Self.chattr("-i", dir.path) }
        let error = #expect(throws: StoreError.self) { try DecisionStore(path: path) }
        #expect(error?.description.contains("cannot be moved aside") == true, "\(String(describing: error))")
        #expect(error?.description.contains(path) == true)
        #expect(try bytes(path) == garbage)
        #expect(try dir.contents() == ["decisions.sqlite"])
    }
}
