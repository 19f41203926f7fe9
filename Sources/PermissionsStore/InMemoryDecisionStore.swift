package import PermissionsModel

/// A decision store that keeps nothing on disk, for unit tests of the service: the
/// same answers as `DecisionStore`, and writes and loads that can be told to fail,
/// to reach the StorageFailed paths.
///
/// What is "stored" is every row of every owner; what is "in memory" is the
/// unassigned rows and those of the users loaded. A user is loaded by `load`, and
/// by a write of theirs (`set`, `commit`: a test's starting state, as the service
/// loads an owner before it writes), but not by a reset (which the service makes
/// of a user whose load failed too), and let go by `evict`; a read of a user not
/// loaded finds nothing, as in the daemon.
///
/// Not thread-safe: used on one queue, as the service uses its store.
package final class InMemoryDecisionStore: DecisionStoring {
    package struct WriteFailed: Error, CustomStringConvertible {
        package var description: String { "writes fail (InMemoryDecisionStore.failWrites)" }
    }

    package struct LoadFailed: Error, CustomStringConvertible {
        let uid: UInt32
        package var description: String { "cannot load uid \(uid)'s decisions (InMemoryDecisionStore.failLoads)" }
    }

    /// Every owner's rows: what a file would hold.
    private var stored = DecisionIndex()
    /// The users whose rows a read finds.
    private var resident: Set<UInt32> = []
    private var epoch: Int64 = 0
    package var degradedReason: String?
    /// While true every write throws `WriteFailed` and changes nothing.
    package var failWrites = false
    /// The users whose loads fail with `LoadFailed`.
    package var failLoads: Set<UInt32> = []
    /// How many loads have been made, for tests.
    package private(set) var loads = 0

    package init(degradedReason: String? = nil) {
        self.degradedReason = degradedReason
    }

    private func visible(_ owner: UInt32?) -> Bool { owner.map { resident.contains($0) } ?? true }

    package func decision(_ key: DecisionKey, now: Int64) -> StoredDecision? {
        visible(key.uid) ? stored.decision(key, now: now) : nil
    }

    package func list(app: String?) -> [StoredDecision] { stored.list(app: app).filter { visible($0.uid) } }

    package func expired(now: Int64) -> [StoredDecision] { stored.expired(now: now).filter { visible($0.uid) } }

    package func nextExpiry() -> Int64? { expired(now: .max).compactMap(\.expiresAt).min() }

    /// Makes `owner` one the stored rows can hold, and, for a user, loaded.
    private func own(_ owner: UInt32?) {
        guard let owner else { return }
        if !stored.isLoaded(owner) { stored.install(owner, []) }
        resident.insert(owner)
    }

    /// Stores a row directly, as a test's starting state (no outcome, no signal).
    package func set(_ key: DecisionKey, decision: Decision, setBy: String, expiresAt: Int64? = nil) throws {
        if failWrites { throw WriteFailed() }
        own(key.uid)
        _ = stored.apply(.set(StoredDecision(uid: key.uid, appID: key.app, permission: key.permission,
                                             decision: decision, setAt: currentMicroseconds(), setBy: setBy,
                                             expiresAt: expiresAt)))
    }

    /// Commits at once: the outcome comes before `commit` returns.
    package func commit(_ write: DecisionWrite, around: @escaping () -> (Result<Int, any Error>) -> Void) {
        let finish = around()
        if failWrites { return finish(.failure(WriteFailed())) }
        switch write {
        case .set(let row): own(row.uid)
        case .remove(let row): own(row.uid)
        case .reset(let uid, _, _) where uid.map({ !resident.contains($0) }) ?? false:
            // A user not loaded (their load failed: the reset of rows that cannot
            // be read): the rows go, and the user stays unloaded, as
            // `DecisionStore` removes them from the file alone.
            guard stored.isLoaded(uid) else { return finish(.success(0)) }
            return finish(.success(stored.apply(write)))
        case .reset(let uid, _, _): own(uid)
        case .assign(_, _, let uid): own(uid)
        }
        finish(.success(stored.apply(write)))
    }

    /// Users whose writes a test holds "in flight" (the store itself writes at once).
    package var writingFor: Set<UInt32> = []

    package var writesInFlight: Bool { !writingFor.isEmpty }

    package func writesInFlight(for uid: UInt32) -> Bool { writingFor.contains(uid) }

    package func afterWrites(_ body: @escaping () -> Void) { body() }

    package func isLoaded(uid: UInt32) -> Bool { resident.contains(uid) }

    package var loadedUsers: [UInt32] { resident.sorted() }

    /// Loads at once: `done` comes before `load` returns.
    package func load(uid: UInt32, done: @escaping (Result<Void, any Error>) -> Void) {
        loads += 1
        if failLoads.contains(uid) { return done(.failure(LoadFailed(uid: uid))) }
        own(uid)
        done(.success(()))
    }

    package func evict(uid: UInt32) { resident.remove(uid) }

    package func readAll(app: String?, done: @escaping (Result<[StoredDecision], any Error>) -> Void) {
        done(.success(stored.list(app: app)))
    }

    package func nextEpoch(clockSeconds: Int64) throws -> UInt32 {
        guard let next = SerialEpoch.next(after: epoch, clockSeconds: clockSeconds) else {
            throw SerialEpochError.outOfRange(epoch, path: "(in memory)")
        }
        if failWrites { throw SerialEpochError.notStored(next, path: "(in memory)", why: "\(WriteFailed())") }
        epoch = Int64(next)
        return next
    }
}
