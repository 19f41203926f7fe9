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

    private var index = DecisionIndex()
    private var epoch: Int64 = 0
    package var degradedReason: String?
    /// While true every write throws `WriteFailed` and changes nothing.
    package var failWrites = false

    package init(degradedReason: String? = nil) {
        self.degradedReason = degradedReason
    }

    package func decision(_ key: DecisionKey, now: Int64) -> StoredDecision? { index.decision(key, now: now) }

    package func list(app: String?) -> [StoredDecision] { index.list(app: app) }

    package func expired(now: Int64) -> [StoredDecision] { index.expired(now: now) }

    package func nextExpiry() -> Int64? { index.nextExpiry() }

    /// Stores a row directly, as a test's starting state (no outcome, no signal).
    package func set(_ key: DecisionKey, decision: Decision, setBy: String, expiresAt: Int64? = nil) throws {
        if failWrites { throw WriteFailed() }
        _ = index.apply(.set(StoredDecision(uid: key.uid, appID: key.app, permission: key.permission,
                                            decision: decision, setAt: currentMicroseconds(), setBy: setBy,
                                            expiresAt: expiresAt)))
    }

    /// Commits at once: the outcome comes before `commit` returns.
    package func commit(_ write: DecisionWrite, around: @escaping () -> (Result<Int, any Error>) -> Void) {
        let finish = around()
        if failWrites { return finish(.failure(WriteFailed())) }
        finish(.success(index.apply(write)))
    }

    package var writesInFlight: Bool { false }

    package func afterWrites(_ body: @escaping () -> Void) { body() }

    package func nextEpoch(clockSeconds: Int64) throws -> UInt32 {
        guard let next = SerialEpoch.next(after: epoch, clockSeconds: clockSeconds) else {
            throw SerialEpochError.outOfRange(epoch, path: "(in memory)")
        }
        if failWrites { throw SerialEpochError.notStored(next, path: "(in memory)", why: "\(WriteFailed())") }
        epoch = Int64(next)
        return next
    }
}
