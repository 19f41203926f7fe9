package import PermissionsModel

/// What the service needs of a decision store: `DecisionStore` (SQLite) in the
/// daemon, `InMemoryDecisionStore` in unit tests. Reads never fail (they come from
/// memory); a write that throws has changed nothing.
///
/// Rows are keyed by (uid, app, permission); `uid` nil is an unassigned row (see
/// DecisionStore: migrated from a store without users).
package protocol DecisionStoring: AnyObject {
    /// Why start-up found the store damaged (see DecisionStore); nil when it was not.
    var degradedReason: String? { get }
    /// The row of exactly this key, if it is in force (not expired) at `now`.
    func decision(_ key: DecisionKey, now: Int64) -> StoredDecision?
    /// Every row of every owner, or of one app, in `DecisionKey` order.
    func list(app: String?) -> [StoredDecision]
    func expired(now: Int64) -> [StoredDecision]
    func nextExpiry() -> Int64?
    func set(_ key: DecisionKey, decision: Decision, setBy: String, expiresAt: Int64?) throws
    func remove(_ decision: StoredDecision) throws
    /// Removes one owner's rows of `app` for `permissions` (all when empty); how many went.
    func reset(uid: UInt32?, app: String, permissions: [String]) throws -> Int
    /// Gives the unassigned rows of `app` for `permissions` (all when empty) to `uid`;
    /// a row the user has of their own for the same pair stays, and the unassigned
    /// one goes. How many unassigned rows were settled.
    func assign(app: String, permissions: [String], to uid: UInt32) throws -> Int
    func nextEpoch(atLeast: Int64) throws -> Int64
}

extension DecisionStoring {
    package func decision(_ key: DecisionKey) -> StoredDecision? {
        decision(key, now: currentMicroseconds())
    }

    package func list() -> [StoredDecision] { list(app: nil) }

    package func expired() -> [StoredDecision] { expired(now: currentMicroseconds()) }

    package func set(_ key: DecisionKey, decision: Decision, setBy: String) throws {
        try set(key, decision: decision, setBy: setBy, expiresAt: nil)
    }
}

extension DecisionStore: DecisionStoring {}
