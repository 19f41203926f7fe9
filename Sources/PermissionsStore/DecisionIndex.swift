import PermissionsModel

/// Every stored row in memory, keyed by (uid, app, permission): what both stores
/// answer reads from, and how they find the rows a write touches.
///
/// A value type owned by its store; not shared.
struct DecisionIndex {
    private(set) var rows: [DecisionKey: StoredDecision] = [:]

    /// Room for `count` rows, so that a store's load does not grow the table step by step.
    mutating func reserve(_ count: Int) {
        rows.reserveCapacity(count)
    }

    subscript(key: DecisionKey) -> StoredDecision? {
        get { rows[key] }
        set { rows[key] = newValue }
    }

    /// The row of exactly this key, unless it has expired at `now`.
    func decision(_ key: DecisionKey, now: Int64) -> StoredDecision? {
        guard let stored = rows[key] else { return nil }
        if let expires = stored.expiresAt, expires <= now { return nil }
        return stored
    }

    func list(app: String?) -> [StoredDecision] {
        let chosen = app.map { app in rows.filter { $0.key.app.utf8.elementsEqual(app.utf8) } } ?? rows
        return chosen.sorted { $0.key < $1.key }.map(\.value)
    }

    func expired(now: Int64) -> [StoredDecision] {
        rows.values.filter { $0.expiresAt.map { $0 <= now } ?? false }
    }

    func nextExpiry() -> Int64? {
        rows.values.compactMap(\.expiresAt).min()
    }

    /// The keys of one owner's rows of `app` among `permissions` (all when empty)
    /// that exist, in order.
    func keys(uid: UInt32?, app: String, permissions: [String]) -> [DecisionKey] {
        let wanted = Set(permissions)
        return rows.keys.filter {
            $0.uid == uid && $0.app.utf8.elementsEqual(app.utf8) && (wanted.isEmpty || wanted.contains($0.permission))
        }.sorted()
    }

    /// Removes a row if it is still the one given (an expiry must not remove a
    /// newer decision made meanwhile).
    mutating func remove(_ decision: StoredDecision) {
        let key = decision.key
        if rows[key]?.setAt == decision.setAt { rows[key] = nil }
    }

    /// Gives the unassigned rows at `keys` to `uid`; where the user has a row of
    /// their own for the same permission, theirs stays and the unassigned one goes.
    mutating func assign(_ keys: [DecisionKey], to uid: UInt32) {
        for key in keys {
            guard var row = rows.removeValue(forKey: key), rows[key.owned(by: uid)] == nil else { continue }
            row.uid = uid
            rows[row.key] = row
        }
    }
}
