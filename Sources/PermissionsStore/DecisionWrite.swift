
/// One change to the stored decisions. A write is committed to the file first
/// (`DecisionStore.write`) and then applied to memory (`DecisionIndex.apply`), each
/// side on its own: what a write touches is decided by the rows as they are when it
/// runs, never by a list taken when it was made, so that writes queued behind one
/// another (group commit) do to the file and to memory the same thing, in order.
package enum DecisionWrite: Sendable {
    /// Stores the row (replacing the row of the same key).
    case set(StoredDecision)
    /// Deletes the row of this key if it is still this one (same `setAt`): an expiry
    /// must not remove a newer decision made meanwhile.
    case remove(StoredDecision)
    /// Deletes one owner's rows of `app` among `permissions` (all when empty).
    case reset(uid: UInt32?, app: String, permissions: [String])
    /// Gives the unassigned rows of `app` among `permissions` (all when empty) to
    /// `uid`; where the user has a row of their own for the same pair, theirs stays
    /// and the unassigned one goes.
    case assign(app: String, permissions: [String], to: UInt32)
}

extension DecisionWrite {
    /// Whether the write may change rows of user `uid` (an assignment changes the
    /// unassigned rows too, which are never let go).
    func touches(uid: UInt32) -> Bool {
        switch self {
        case .set(let row), .remove(let row): row.uid == uid
        case .reset(let owner, _, _): owner == uid
        case .assign(_, _, let to): to == uid
        }
    }
}

extension DecisionIndex {
    /// Applies a committed write to memory; returns how many rows it touched (for
    /// a reset, the rows that went; for an assignment, the unassigned rows settled).
    mutating func apply(_ write: DecisionWrite) -> Int {
        switch write {
        case .set(let row):
            self[row.key] = row
            return 1
        case .remove(let row):
            let present = self[row.key]?.setAt == row.setAt
            remove(row)
            return present ? 1 : 0
        case .reset(let uid, let app, let permissions):
            let keys = keys(uid: uid, app: app, permissions: permissions)
            for key in keys { self[key] = nil }
            return keys.count
        case .assign(let app, let permissions, let uid):
            let keys = keys(uid: nil, app: app, permissions: permissions)
            assign(keys, to: uid)
            return keys.count
        }
    }
}
