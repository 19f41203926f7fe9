import Testing
@testable import PermissionsModel
@testable import PermissionsStore

/// The names in memory are those of the rows in memory: a user let go takes the
/// app ids, permissions and setters only they held with them (Interner's
/// references), so memory follows the users loaded, not every user ever loaded.
@Suite("Decision index names")
struct DecisionIndexNamesTests {
    let dir: TempDirectory
    var path: String { dir.url("decisions.db") }

    init() throws { dir = try TempDirectory() }

    @Test func aNameGoesWithItsLastReferenceAndItsNumberIsGivenAgain() {
        var names = Interner()
        let a = names.retain("org.a")
        let b = names.retain("org.b")
        #expect(names.retain("org.a") == a)
        names.release(a)
        #expect(names.number(of: "org.a") == a)  // one reference left
        names.release(a)
        #expect(names.number(of: "org.a") == nil)
        #expect(names.count == 1)
        let c = names.retain("org.c")
        #expect(c == a)
        #expect(names[c] == "org.c")
        #expect(names[b] == "org.b")
    }

    @Test func aUserLetGoTakesTheNamesOnlyTheyHeld() throws {
        let store = try DecisionStore(path: path)
        for n in 0..<100 {
            try store.set(DecisionKey(uid: 1, "org.one.app\(n)", "camera"), decision: .denied, setBy: "uid 1")
            try store.set(DecisionKey(uid: 2, "org.two.app\(n)", "camera"), decision: .authorized, setBy: "uid 2")
        }
        try store.set(DecisionKey(uid: 1, "org.shared", "location"), decision: .denied, setBy: "uid 1")
        try store.set(DecisionKey(uid: 2, "org.shared", "location"), decision: .authorized, setBy: "uid 2")
        // A store used on one queue loads a user to write; let go, only the file has them.
        #expect(store.namesInMemory == 201 + 2 + 2)
        store.evict(uid: 1)
        store.evict(uid: 2)
        #expect(store.namesInMemory == 0)

        try store.load(uid: 1)
        #expect(store.namesInMemory == 101 + 2 + 1)  // apps, camera and location, "uid 1"
        try store.load(uid: 2)
        #expect(store.namesInMemory == 201 + 2 + 2)
        store.evict(uid: 1)
        #expect(store.namesInMemory == 101 + 2 + 1)
        // What user 1 shared with user 2 is still there for user 2.
        #expect(store.decision(DecisionKey(uid: 2, "org.shared", "location"))?.decision == .authorized)
        store.evict(uid: 2)
        #expect(store.namesInMemory == 0)

        // Loaded again in the other order, on numbers given again: every row reads as stored.
        try store.load(uid: 2)
        try store.load(uid: 1)
        for n in [0, 57, 99] {
            #expect(store.decision(DecisionKey(uid: 1, "org.one.app\(n)", "camera"))?.decision == .denied)
            #expect(store.decision(DecisionKey(uid: 2, "org.two.app\(n)", "camera"))?.setBy == "uid 2")
            #expect(store.decision(DecisionKey(uid: 1, "org.two.app\(n)", "camera")) == nil)
        }
        #expect(store.list().count == 202)
        #expect(store.list(app: "org.shared").map(\.setBy) == ["uid 1", "uid 2"])
    }

    @Test func manyUsersComingAndGoingLeaveOnlyTheLoadedOnesNames() throws {
        let store = try DecisionStore(path: path)
        for uid in UInt32(1)...40 {
            for n in 0..<25 {
                try store.set(DecisionKey(uid: uid, "org.user\(uid).app\(n)", "microphone"), decision: .denied,
                              setBy: "uid \(uid)")
            }
            store.evict(uid: uid)
        }
        #expect(store.namesInMemory == 0)
        for uid in UInt32(1)...40 {
            try store.load(uid: uid)
            if uid > 1 { store.evict(uid: uid - 1) }
            #expect(store.namesInMemory == 25 + 1 + 1, "with user \(uid) loaded alone")
            #expect(store.decision(DecisionKey(uid: uid, "org.user\(uid).app24", "microphone"))?.setBy == "uid \(uid)")
        }
        store.evict(uid: 40)
        #expect(store.namesInMemory == 0)
    }

    @Test func aRowReplacedOrDeletedLetsGoOfTheNamesNoOtherRowHolds() throws {
        let store = try DecisionStore(path: path)
        try store.load(uid: testUID)
        try store.set(DecisionKey(uid: testUID, "org.a", "camera"), decision: .denied, setBy: "first")
        try store.set(DecisionKey(uid: testUID, "org.b", "camera"), decision: .denied, setBy: "first")
        #expect(store.namesInMemory == 2 + 1 + 1)
        try store.set(DecisionKey(uid: testUID, "org.a", "camera"), decision: .authorized, setBy: "second")
        #expect(store.namesInMemory == 2 + 1 + 2)  // "first" still set org.b's
        try store.set(DecisionKey(uid: testUID, "org.b", "camera"), decision: .authorized, setBy: "second")
        #expect(store.namesInMemory == 2 + 1 + 1)  // "first" is in no row now
        #expect(try store.reset(uid: testUID, app: "org.a", permissions: []) == 1)
        #expect(store.namesInMemory == 1 + 1 + 1)
        #expect(store.decision(DecisionKey(uid: testUID, "org.b", "camera"))?.setBy == "second")
        #expect(try store.reset(uid: testUID, app: "org.b", permissions: []) == 1)
        #expect(store.namesInMemory == 0)
        #expect(store.list().isEmpty)
    }

    /// A key twice in one load (only a damaged file returns one): the last row
    /// stands, and only the rows that stand hold references (found by a reviewer:
    /// a setter held by the row replaced was forgotten while a later row held it).
    @Test(arguments: [["s", "s", "s"], ["s1", "s2", "s1"]])
    func aKeyTwiceInALoadLeavesTheLastRowAndItsNames(setters: [String]) {
        func row(_ app: String, _ setBy: String, _ at: Int64) -> StoredDecision {
            StoredDecision(uid: 1, appID: app, permission: "camera", decision: .denied, setAt: at, setBy: setBy)
        }
        var index = DecisionIndex()
        index.install(1, [row("org.a", setters[0], 1), row("org.a", setters[1], 2), row("org.b", setters[2], 3)])
        #expect(index.namesHeld == 2 + 1 + Set(setters[1...]).count)
        #expect(index[DecisionKey(uid: 1, "org.b", "camera")]?.setBy == setters[2])
        index[DecisionKey(uid: 1, "org.c", "camera")] = row("org.c", "new setter", 4)
        #expect(index[DecisionKey(uid: 1, "org.a", "camera")]?.setBy == setters[1])
        #expect(index[DecisionKey(uid: 1, "org.b", "camera")]?.setBy == setters[2])
        index.evict(1)
        #expect(index.namesHeld == 0)
    }
}
