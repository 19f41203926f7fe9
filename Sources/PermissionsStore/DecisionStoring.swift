package import PermissionsModel

/// What the service needs of a decision store: `DecisionStore` (SQLite) in the
/// daemon, `InMemoryDecisionStore` in unit tests. Reads never fail (they come from
/// memory); a write that throws has changed nothing.
package protocol DecisionStoring: AnyObject {
    /// Why start-up found the store damaged (see DecisionStore); nil when it was not.
    var degradedReason: String? { get }
    func decision(app: String, permission: String, now: Int64) -> StoredDecision?
    func list(app: String?) -> [StoredDecision]
    func expired(now: Int64) -> [StoredDecision]
    func nextExpiry() -> Int64?
    func set(app: String, permission: String, decision: Decision, setBy: String, expiresAt: Int64?) throws
    func remove(_ decision: StoredDecision) throws
    func reset(app: String, permissions: [String]) throws -> Int
    func nextEpoch(atLeast: Int64) throws -> Int64
}

extension DecisionStoring {
    package func decision(app: String, permission: String) -> StoredDecision? {
        decision(app: app, permission: permission, now: currentMicroseconds())
    }

    package func list() -> [StoredDecision] { list(app: nil) }

    package func expired() -> [StoredDecision] { expired(now: currentMicroseconds()) }

    package func set(app: String, permission: String, decision: Decision, setBy: String) throws {
        try set(app: app, permission: permission, decision: decision, setBy: setBy, expiresAt: nil)
    }
}

extension DecisionStore: DecisionStoring {}
