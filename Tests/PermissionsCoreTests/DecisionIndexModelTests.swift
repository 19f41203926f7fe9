import Foundation
import Testing
import PermissionsTestSupport
@testable import PermissionsModel
@testable import PermissionsStore

/// DecisionIndex and DecisionStore against a plain dictionary model of the file,
/// through seeded random sequences of every write, load and eviction, with a small
/// alphabet of names (the same word as app, permission and setter; "é" in two
/// normal forms) so that interned numbers are freed and given again: every read
/// and `namesHeld` are checked after each step. (Written by a reviewer of the
/// names' references.)
@Suite("Decision index against a model")
struct DecisionIndexModelTests {
    static let owners: [UInt32?] = [nil, 1, 2, 3]
    static let apps = ["a", "b", "x", "é", "e\u{301}", ""]
    static let perms = ["camera", "x", "location", "a"]
    static let setters = ["s1", "s2", "", "a", "x"]

    /// Seeds 0..<iterations, the same at every run: a failure names its seed and step.
    static let base: UInt64 = 0
    static let iterations = 40

    /// Byte-exact comparison (StoredDecision's == compares Strings canonically).
    static func same(_ a: StoredDecision?, _ b: StoredDecision?) -> Bool {
        guard let a, let b else { return a == nil && b == nil }
        return a.key == b.key && a.decision == b.decision && a.setAt == b.setAt
            && a.setBy.utf8.elementsEqual(b.setBy.utf8) && a.expiresAt == b.expiresAt
    }

    static func describe(_ r: StoredDecision?) -> String {
        guard let r else { return "nil" }
        return "(\(r.uid.map(String.init) ?? "-"),\(Array(r.appID.utf8)),\(r.permission),\(r.decision),\(r.setAt),"
            + "\(Array(r.setBy.utf8)),\(r.expiresAt.map(String.init) ?? "-"))"
    }

    struct Model {
        var file: [DecisionKey: StoredDecision] = [:]
        var loaded: Set<UInt32> = []
        func inMemory(_ owner: UInt32?) -> Bool { owner.map { loaded.contains($0) } ?? true }
        var memory: [StoredDecision] { file.values.filter { inMemory($0.uid) }.sorted { $0.key < $1.key } }

        /// Applies a write to the file; returns how many rows of the file it changed
        /// (for a reset: removed; for an assign: unassigned rows settled).
        mutating func apply(_ write: DecisionWrite) -> Int {
            switch write {
            case .set(let row): file[row.key] = row; return 1
            case .remove(let row):
                guard file[row.key]?.setAt == row.setAt else { return 0 }
                file[row.key] = nil
                return 1
            case .reset(let uid, let app, let perms):
                let keys = file.keys.filter { k in k.uid == uid && k.app.utf8.elementsEqual(app.utf8)
                    && (perms.isEmpty || perms.contains { p in p.utf8.elementsEqual(k.permission.utf8) }) }
                for k in keys { file[k] = nil }
                return keys.count
            case .assign(let app, let perms, let uid):
                let keys = file.keys.filter { k in k.uid == nil && k.app.utf8.elementsEqual(app.utf8)
                    && (perms.isEmpty || perms.contains { p in p.utf8.elementsEqual(k.permission.utf8) }) }
                for k in keys {
                    var row = file.removeValue(forKey: k)!
                    if file[k.owned(by: uid)] == nil { row.uid = uid; file[row.key] = row }
                }
                return keys.count
            }
        }
    }

    struct Gen {
        var rng: SeededRandom
        var clock: Int64 = 1_000
        mutating func pick<T>(_ xs: [T]) -> T { xs[Int.random(in: 0..<xs.count, using: &rng)] }
        mutating func perms() -> [String] {
            let n = Int.random(in: 0...2, using: &rng)
            return (0..<n).map { _ in pick(DecisionIndexModelTests.perms + ["unknown"]) }
        }
        mutating func row(_ owner: UInt32?) -> StoredDecision {
            clock += 1
            return StoredDecision(uid: owner, appID: pick(DecisionIndexModelTests.apps),
                                  permission: pick(DecisionIndexModelTests.perms),
                                  decision: Bool.random(using: &rng) ? .authorized : .denied, setAt: clock,
                                  setBy: pick(DecisionIndexModelTests.setters),
                                  expiresAt: Int.random(in: 0..<4, using: &rng) == 0 ? clock + Int64.random(in: -5...50, using: &rng) : nil)
        }
        mutating func write(_ model: Model) -> DecisionWrite {
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<5: return .set(row(pick(DecisionIndexModelTests.owners)))
            case 5:
                if let existing = model.file.values.sorted(by: { $0.key < $1.key }).randomElement(using: &rng),
                   Bool.random(using: &rng) { return .remove(existing) }
                return .remove(row(pick(DecisionIndexModelTests.owners)))
            case 6..<9:
                return .reset(uid: pick(DecisionIndexModelTests.owners), app: pick(DecisionIndexModelTests.apps),
                              permissions: perms())
            default:
                return .assign(app: pick(DecisionIndexModelTests.apps), permissions: perms(),
                               to: pick(DecisionIndexModelTests.owners.compactMap { $0 }))
            }
        }
    }

    /// Every read of the index against the model's rows in memory.
    static func check(_ index: DecisionIndex, _ model: Model, _ context: @autoclosure () -> String) -> Bool {
        let memory = model.memory
        var ok = true
        func fail(_ what: String) { Issue.record(Comment(rawValue: "\(context()): \(what)")); ok = false }
        let listed = index.list(app: nil)
        if listed.count != memory.count || !zip(listed, memory).allSatisfy({ same($0, $1) }) {
            fail("list: \(listed.map { describe($0) }) != model \(memory.map { describe($0) })")
        }
        if index.rowCount != memory.count { fail("rowCount \(index.rowCount) != \(memory.count)") }
        for app in apps + ["zz"] {
            let want = memory.filter { $0.appID.utf8.elementsEqual(app.utf8) }
            let got = index.list(app: app)
            if got.count != want.count || !zip(got, want).allSatisfy({ same($0, $1) }) {
                fail("list(app: \(Array(app.utf8))): \(got.map { describe($0) }) != \(want.map { describe($0) })")
            }
            for owner in owners {
                for wanted in [[], ["camera"], ["x", "a"], ["unknown"], perms] {
                    let keys = index.keys(uid: owner, app: app, permissions: wanted)
                    let wantKeys = model.inMemory(owner) ? want.filter {
                        $0.uid == owner && (wanted.isEmpty || wanted.contains($0.permission))
                    }.map(\.key) : []
                    if keys != wantKeys { fail("keys(\(String(describing: owner)), \(app), \(wanted)): \(keys) != \(wantKeys)") }
                }
                for perm in perms + ["unknown"] {
                    let key = DecisionKey(uid: owner, app, perm)
                    let want = model.inMemory(owner) ? model.file[key] : nil
                    if !same(index[key], want) { fail("index[\(key)]: \(describe(index[key])) != \(describe(want))") }
                    let now: Int64 = 1_000 + 30
                    let wantNow = want.flatMap { $0.isInForce(at: now) ? $0 : nil }
                    if !same(index.decision(key, now: now), wantNow) { fail("decision(\(key))") }
                }
            }
        }
        let names = Set(memory.map { ByteString(value: $0.appID) }).count
            + Set(memory.map { ByteString(value: $0.permission) }).count
            + Set(memory.map { ByteString(value: $0.setBy) }).count
        if index.namesHeld != names { fail("namesHeld \(index.namesHeld) != distinct names \(names)") }
        return ok
    }

    @Test func indexMatchesAModel() {
        for seed in Self.base..<(Self.base + UInt64(Self.iterations)) {
            var gen = Gen(rng: SeededRandom(seed: seed))
            var model = Model()
            var index = DecisionIndex()
            var log: [String] = []
            for step in 0..<200 {
                let op = Int.random(in: 0..<20, using: &gen.rng)
                switch op {
                case 0..<2:  // install a user's rows from the file (replacing any it has)
                    let uid = gen.pick(Self.owners)
                    var rows = model.file.values.filter { $0.uid == uid }
                    rows.shuffle(using: &gen.rng)
                    index.install(uid, rows)
                    if let uid { model.loaded.insert(uid) }
                    log.append("install \(String(describing: uid)) \(rows.count) rows")
                case 2..<4:
                    let uid = gen.pick(Self.owners.compactMap { $0 })
                    index.evict(uid)
                    model.loaded.remove(uid)
                    log.append("evict \(uid)")
                case 4:
                    for row in index.expired(now: gen.clock) {
                        let m = model.apply(.remove(row))
                        let n = index.apply(.remove(row))
                        if m != n { Issue.record("seed \(seed) step \(step): expiry count \(n) != \(m)") }
                    }
                    log.append("expire at \(gen.clock)")
                default:
                    let write = gen.write(model)
                    let inMemoryBefore = model.memory.count
                    let fileCount = model.apply(write)
                    let count = index.apply(write)
                    log.append("\(write)")
                    if case .reset(let uid, _, _) = write, model.inMemory(uid), count != fileCount {
                        Issue.record("seed \(seed) step \(step): reset count \(count) != \(fileCount)")
                    }
                    _ = inMemoryBefore
                }
                if !Self.check(index, model, "seed \(seed) step \(step) after \(log.suffix(3))") { return }
            }
        }
    }

    /// The same through DecisionStore and its SQLite file, writes committed in groups
    /// (`write` then `apply(_:rowsInFile:)`, as the committer does), users loaded and
    /// let go at random, and each reset's count checked against the file model.
    @Test func storeMatchesAModel() throws {
        let dir = try TempDirectory()
        for seed in Self.base..<(Self.base + UInt64(max(Self.iterations / 10, 1))) {
            let path = dir.url("d\(seed).db")
            var store = try DecisionStore(path: path)
            var gen = Gen(rng: SeededRandom(seed: 1_000 + seed))
            var model = Model()
            for step in 0..<120 {
                switch Int.random(in: 0..<12, using: &gen.rng) {
                case 0:
                    let uid = gen.pick(Self.owners.compactMap { $0 })
                    try store.load(uid: uid)
                    model.loaded.insert(uid)
                case 1:
                    let uid = gen.pick(Self.owners.compactMap { $0 })
                    store.evict(uid: uid)
                    model.loaded.remove(uid)
                case 2:
                    // Reopen: only the unassigned rows in memory.
                    store.close()
                    store = try DecisionStore(path: path)
                    model.loaded = []
                default:
                    let writes = (0..<Int.random(in: 1...4, using: &gen.rng)).map { _ in gen.write(model) }
                    let counts = try store.write(writes)
                    for (write, fileCount) in zip(writes, counts) {
                        let expected = model.apply(write)
                        let got = store.apply(write, rowsInFile: fileCount)
                        if case .reset = write, got != expected {
                            Issue.record("seed \(seed) step \(step): \(write) counted \(got), file model \(expected)")
                        }
                    }
                }
                let fileRows = try store.readAll(app: nil)
                let want = model.file.values.sorted { $0.key < $1.key }
                if fileRows.count != want.count || !zip(fileRows, want).allSatisfy({ Self.same($0, $1) }) {
                    let message = "seed \(seed) step \(step): file \(fileRows.map { Self.describe($0) }) != \(want.map { Self.describe($0) })"
                    Issue.record(Comment(rawValue: message))
                    return
                }
                let memory = model.memory
                let listed = store.list()
                if listed.count != memory.count || !zip(listed, memory).allSatisfy({ Self.same($0, $1) }) {
                    let message = "seed \(seed) step \(step): memory \(listed.map { Self.describe($0) }) != \(memory.map { Self.describe($0) })"
                    Issue.record(Comment(rawValue: message))
                    return
                }
                let names = Set(memory.map { ByteString(value: $0.appID) }).count
                    + Set(memory.map { ByteString(value: $0.permission) }).count
                    + Set(memory.map { ByteString(value: $0.setBy) }).count
                if store.namesInMemory != names {
                    Issue.record("seed \(seed) step \(step): namesInMemory \(store.namesInMemory) != \(names)")
                    return
                }
            }
            store.close()
        }
    }

    /// The lookup table rebuilt smaller keeps every name held.
    @Test func internerShrinkKeepsNames() {
        var names = Interner()
        let numbers = (0..<1000).map { names.retain("n\($0)") }
        for n in 0..<1000 where n % 50 != 0 { names.release(numbers[n]) }
        #expect(names.count == 20)
        for n in stride(from: 0, to: 1000, by: 50) {
            #expect(names.number(of: "n\(n)") == numbers[n])
            #expect(names[numbers[n]] == "n\(n)")
        }
        let fresh = (0..<300).map { names.retain("m\($0)") }
        #expect(Set(fresh).count == 300 && Set(fresh).isDisjoint(with: stride(from: 0, to: 1000, by: 50).map { numbers[$0] }))
        for (k, n) in fresh.enumerated() { #expect(names[n] == "m\(k)" && names.number(of: "m\(k)") == n) }
    }
}

private extension StoredDecision {
    func with(uid: UInt32?) -> StoredDecision { var r = self; r.uid = uid; return r }
}
