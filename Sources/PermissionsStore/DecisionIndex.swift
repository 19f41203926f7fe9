import PermissionsModel

/// The rows in memory, of the owners loaded (see DecisionStore: the unassigned
/// rows always, a user's from the first time they are needed until they are let
/// go): what both stores answer reads from, and how they find the rows a write
/// touches.
///
/// Compact: names are interned (`Interner`), so a row is a 24-byte `Row` under an
/// 8-byte (app, permission) number in its owner's table, with no String and no
/// heap object of its own; about 50 bytes a row with the tables' spare room,
/// against about 350 when each row held its three strings. An owner's table goes
/// whole when they are let go, and with it every name no other row in memory
/// holds (each row holds a reference on its three names).
///
/// An owner is loaded when it has a table, even an empty one: a user with no rows
/// is loaded as surely as one with a thousand. A write applied to an owner not
/// loaded changes nothing here: the file holds it, and the owner's next load reads it.
///
/// A value type owned by its store; not shared.
struct DecisionIndex {
    /// One stored row without its key.
    struct Row: Sendable {
        var setAt: Int64
        /// Meaningful only when `expires`.
        var expiresAt: Int64
        var setter: UInt32
        var decision: Decision
        var expires: Bool
    }

    private var apps = Interner()
    private var permissions = Interner()
    private var setters = Interner()
    /// Each loaded owner's rows by (app, permission) number (`pair`); nil is the
    /// unassigned rows' owner, loaded always.
    private var owners: [UInt32?: [UInt64: Row]] = [nil: [:]]

    private static func pair(_ app: UInt32, _ permission: UInt32) -> UInt64 { UInt64(app) << 32 | UInt64(permission) }

    /// The (app, permission) number of a key, if both names were ever seen (a name
    /// never seen is in no row).
    private func pair(of key: DecisionKey) -> UInt64? {
        guard let app = apps.number(of: key.app), let permission = permissions.number(of: key.permission) else {
            return nil
        }
        return Self.pair(app, permission)
    }

    private func stored(_ owner: UInt32?, _ pair: UInt64, _ row: Row) -> StoredDecision {
        StoredDecision(uid: owner, appID: apps[UInt32(truncatingIfNeeded: pair >> 32)],
                       permission: permissions[UInt32(truncatingIfNeeded: pair)], decision: row.decision,
                       setAt: row.setAt, setBy: setters[row.setter], expiresAt: row.expires ? row.expiresAt : nil)
    }

    // MARK: Owners

    func isLoaded(_ owner: UInt32?) -> Bool { owners[owner] != nil }

    /// The users loaded, in order (not the unassigned rows' owner).
    var loadedUsers: [UInt32] { owners.keys.compactMap { $0 }.sorted() }

    /// Rows in memory, of every owner loaded.
    var rowCount: Int { owners.values.reduce(0) { $0 + $1.count } }

    /// Makes `rows` (all of them one owner's, as read from the file) that owner's
    /// rows in memory, in place of any it had.
    mutating func install(_ owner: UInt32?, _ rows: [StoredDecision]) {
        var packed = PackedRows()
        for row in rows { packed.append(row) }
        install(owner, packed)
    }

    /// The same from rows packed as they were read: each name of theirs is
    /// interned here once, not once a row.
    mutating func install(_ owner: UInt32?, _ rows: PackedRows) {
        let appNumbers = rows.apps.strings.map { apps.intern($0) }
        let permissionNumbers = rows.permissions.strings.map { permissions.intern($0) }
        let setterNumbers = rows.setters.strings.map { setters.intern($0) }
        var table: [UInt64: Row] = [:]
        table.reserveCapacity(rows.rows.count)
        for entry in rows.rows {
            var row = entry.row
            row.setter = setterNumbers[Int(row.setter)]
            // A key twice (only from a damaged file): the last row stands.
            table[Self.pair(appNumbers[Int(entry.app)], permissionNumbers[Int(entry.permission)])] = row
        }
        // The references of the rows that stand, taken once the table is whole, and
        // before the old rows' go, so that a name in both is kept, not forgotten
        // and made again.
        for (pair, row) in table {
            apps.retain(UInt32(truncatingIfNeeded: pair >> 32))
            permissions.retain(UInt32(truncatingIfNeeded: pair))
            setters.retain(row.setter)
        }
        if let old = owners.updateValue(table, forKey: owner) { release(old) }
    }

    /// Lets a user's rows go, and the names only they held; the unassigned rows stay.
    mutating func evict(_ uid: UInt32) {
        if let table = owners.removeValue(forKey: uid) { release(table) }
    }

    /// The references of a table's rows on their names.
    private mutating func release(_ table: [UInt64: Row]) {
        for (pair, row) in table { release(pair, row) }
    }

    private mutating func release(_ pair: UInt64, _ row: Row) {
        apps.release(UInt32(truncatingIfNeeded: pair >> 32))
        permissions.release(UInt32(truncatingIfNeeded: pair))
        setters.release(row.setter)
    }

    /// Distinct names in memory (app ids, permissions and setters), for tests and
    /// the benchmarks: those of the rows in memory, and no others.
    var namesHeld: Int { apps.count + permissions.count + setters.count }

    /// The row of `row`, holding a reference on its setter.
    private mutating func packed(_ row: StoredDecision) -> Row {
        Row(setAt: row.setAt, expiresAt: row.expiresAt ?? 0, setter: setters.retain(row.setBy), decision: row.decision,
            expires: row.expiresAt != nil)
    }

    // MARK: Rows

    subscript(key: DecisionKey) -> StoredDecision? {
        get {
            guard let pair = pair(of: key), let row = owners[key.uid]?[pair] else { return nil }
            return stored(key.uid, pair, row)
        }
        set {
            // Not loaded: the file has it (see the type's comment).
            guard isLoaded(key.uid) else { return }
            guard let newValue else {
                guard let pair = pair(of: key), let old = owners[key.uid]!.removeValue(forKey: pair) else { return }
                return release(pair, old)
            }
            let app = apps.retain(key.app), permission = permissions.retain(key.permission)
            let pair = Self.pair(app, permission)
            // The new row's references first (its names may be the old row's).
            let row = packed(newValue)
            if let old = owners[key.uid]!.updateValue(row, forKey: pair) { release(pair, old) }
        }
    }

    /// The row of exactly this key, unless it has expired at `now`.
    func decision(_ key: DecisionKey, now: Int64) -> StoredDecision? {
        guard let pair = pair(of: key), let row = owners[key.uid]?[pair] else { return nil }
        if row.expires, row.expiresAt <= now { return nil }
        return stored(key.uid, pair, row)
    }

    /// Every loaded row, or one app's, in `DecisionKey` order.
    func list(app: String?) -> [StoredDecision] {
        var result: [StoredDecision] = []
        if let app {
            guard let number = apps.number(of: app) else { return [] }
            for (owner, table) in owners {
                for (pair, row) in table where UInt32(truncatingIfNeeded: pair >> 32) == number {
                    result.append(stored(owner, pair, row))
                }
            }
        } else {
            for (owner, table) in owners { for (pair, row) in table { result.append(stored(owner, pair, row)) } }
        }
        return result.sorted { $0.key < $1.key }
    }

    func expired(now: Int64) -> [StoredDecision] {
        owners.flatMap { owner, table in
            table.filter { $0.value.expires && $0.value.expiresAt <= now }.map { stored(owner, $0.key, $0.value) }
        }
    }

    /// A plain loop: the lazy flatMap, filter and map it replaces made the runtime
    /// build the metadata of four generic iterator types at the first call, half
    /// a million instructions of every start-up (doc/performance.md, "Start-up's
    /// own work, counted").
    func nextExpiry() -> Int64? {
        var soonest: Int64?
        for table in owners.values {
            for row in table.values where row.expires {
                if let known = soonest, known <= row.expiresAt { continue }
                soonest = row.expiresAt
            }
        }
        return soonest
    }

    /// The keys of one owner's rows of `app` among `permissions` (all when empty)
    /// that exist, in order.
    func keys(uid: UInt32?, app: String, permissions wanted: [String]) -> [DecisionKey] {
        guard let table = owners[uid], let number = apps.number(of: app) else { return [] }
        let names = Set(wanted.compactMap { permissions.number(of: $0) })
        if !wanted.isEmpty, names.isEmpty { return [] }
        return table.keys.filter { pair in
            UInt32(truncatingIfNeeded: pair >> 32) == number
                && (wanted.isEmpty || names.contains(UInt32(truncatingIfNeeded: pair)))
        }.map { DecisionKey(uid: uid, app, permissions[UInt32(truncatingIfNeeded: $0)]) }.sorted()
    }

    /// Removes a row if it is still the one given (an expiry must not remove a
    /// newer decision made meanwhile).
    mutating func remove(_ decision: StoredDecision) {
        let key = decision.key
        if self[key]?.setAt == decision.setAt { self[key] = nil }
    }

    /// Gives the unassigned rows at `keys` to `uid`; where the user has a row of
    /// their own for the same permission, theirs stays and the unassigned one goes.
    /// (A user not loaded gets nothing here: the file has the rows.)
    mutating func assign(_ keys: [DecisionKey], to uid: UInt32) {
        for key in keys {
            guard var row = self[key] else { continue }
            self[key] = nil
            guard self[key.owned(by: uid)] == nil else { continue }
            row.uid = uid
            self[row.key] = row
        }
    }
}

/// One owner's rows as a load reads them, off the serving queue: names interned
/// in tables of their own (`DecisionIndex.install` maps them to the index's), rows
/// packed. A load of a million rows holds a million 32-byte entries and each
/// distinct name once, never a million `StoredDecision`s with their strings.
struct PackedRows: Sendable {
    fileprivate(set) var apps = Interner()
    fileprivate(set) var permissions = Interner()
    fileprivate(set) var setters = Interner()
    fileprivate(set) var rows: [(app: UInt32, permission: UInt32, row: DecisionIndex.Row)] = []

    var count: Int { rows.count }

    mutating func append(_ row: StoredDecision) {
        rows.append((apps.intern(row.appID), permissions.intern(row.permission),
                     DecisionIndex.Row(setAt: row.setAt, expiresAt: row.expiresAt ?? 0, setter: setters.intern(row.setBy),
                                       decision: row.decision, expires: row.expiresAt != nil)))
    }
}
