package import PermissionsModel

/// A decision store that keeps nothing on disk, for unit tests of the service: the
/// same answers as `DecisionStore`, and writes that can be told to fail, to reach
/// the StorageFailed paths.
///
/// Not thread-safe: used on one queue, as the service uses its store.
package final class InMemoryDecisionStore: DecisionStoring {
    package struct WriteFailed: Error, CustomStringConvertible {
        package var description: String { "writes fail (InMemoryDecisionStore.failWrites)" }
    }

    private var index: [DecisionKey: StoredDecision] = [:]
    private var epoch: Int64 = 0
    package var degradedReason: String?
    /// While true every write throws `WriteFailed` and changes nothing.
    package var failWrites = false

    package init(degradedReason: String? = nil) {
        self.degradedReason = degradedReason
    }

    package func decision(app: String, permission: String, now: Int64) -> StoredDecision? {
        guard let stored = index[DecisionKey(app, permission)] else { return nil }
        if let expires = stored.expiresAt, expires <= now { return nil }
        return stored
    }

    package func list(app: String?) -> [StoredDecision] {
        let rows = app.map { app in index.filter { $0.key.app.utf8.elementsEqual(app.utf8) } } ?? index
        return rows.sorted { $0.key < $1.key }.map(\.value)
    }

    package func expired(now: Int64) -> [StoredDecision] {
        index.values.filter { $0.expiresAt.map { $0 <= now } ?? false }
    }

    package func nextExpiry() -> Int64? {
        index.values.compactMap(\.expiresAt).min()
    }

    package func set(app: String, permission: String, decision: Decision, setBy: String, expiresAt: Int64?) throws {
        if failWrites { throw WriteFailed() }
        index[DecisionKey(app, permission)] = StoredDecision(appID: app, permission: permission, decision: decision,
                                                             setAt: currentMicroseconds(), setBy: setBy,
                                                             expiresAt: expiresAt)
    }

    package func remove(_ decision: StoredDecision) throws {
        if failWrites { throw WriteFailed() }
        let key = DecisionKey(decision.appID, decision.permission)
        if index[key]?.setAt == decision.setAt { index[key] = nil }
    }

    package func reset(app: String, permissions: [String]) throws -> Int {
        if failWrites { throw WriteFailed() }
        let keys = permissions.isEmpty ? index.keys.filter { $0.app.utf8.elementsEqual(app.utf8) }
                                       : Set(permissions.map { DecisionKey(app, $0) }).filter { index[$0] != nil }
        for key in keys { index[key] = nil }
        return keys.count
    }

    package func nextEpoch(atLeast: Int64) throws -> Int64 {
        if failWrites { throw WriteFailed() }
        epoch = max(epoch + 1, atLeast)
        return epoch
    }
}
