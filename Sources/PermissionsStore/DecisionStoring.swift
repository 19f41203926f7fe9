
/// What the service needs of a decision store: `DecisionCommitter` (over SQLite) in
/// the daemon, `InMemoryDecisionStore` in unit tests. Reads never fail and never
/// wait (they come from memory), but find only the rows of owners loaded: the
/// unassigned rows always, a user's once `load` has brought them in (until
/// `evict`); writes are committed with `commit`.
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
    /// Commits `write` durably, then, on the caller's queue and in the order writes
    /// were made: calls `around` just before memory changes (to take what statuses
    /// were), applies the write to memory if it was committed, and calls what
    /// `around` returned with the outcome: how many rows the write touched (see
    /// `DecisionIndex.apply`), or the error, and then nothing changed, in memory or
    /// on disk. The outcome may come before `commit` returns (a store in memory).
    func commit(_ write: DecisionWrite, around: @escaping () -> (Result<Int, any Error>) -> Void)
    /// True while a write has been made whose outcome has not come yet: memory may
    /// be about to change.
    var writesInFlight: Bool { get }
    /// True while a write that may change `uid`'s rows has not had its outcome (or
    /// a barrier, whose writes are not known yet, waits): their rows may be about
    /// to change, and must not be let go.
    func writesInFlight(for uid: UInt32) -> Bool
    /// Runs `body` on the caller's queue once every write made before this call has
    /// had its outcome (at once when none is in flight): a check of what is stored
    /// followed by a write, both in `body`, then sees every earlier write, and no
    /// write can come between them.
    func afterWrites(_ body: @escaping () -> Void)
    /// Whether `uid`'s rows are in memory. A read of a user not loaded finds no row.
    func isLoaded(uid: UInt32) -> Bool
    /// The users whose rows are in memory.
    var loadedUsers: [UInt32] { get }
    /// Reads `uid`'s rows off the caller's queue and puts them in memory; `done`
    /// comes on the caller's queue, once they are there, or with the error (the
    /// file could not be read: damage, an I/O error, a row this version does not
    /// understand), and then nothing changed. Writes committed before or while it
    /// reads are in what it puts in memory, exactly once.
    func load(uid: UInt32, done: @escaping (Result<Void, any Error>) -> Void)
    /// Lets `uid`'s rows go from memory (they stay stored). Only with no write in
    /// flight and no load of `uid` under way.
    func evict(uid: UInt32)
    /// Every stored row, of every owner (loaded or not) or of one app, in
    /// `DecisionKey` order, read from the file off the caller's queue; `done` on
    /// the caller's queue. Every write acknowledged before the call is in it.
    func readAll(app: String?, done: @escaping (Result<[StoredDecision], any Error>) -> Void)
    /// Moves the serial epoch on and stores it (see SerialEpoch.next); throws
    /// `SerialEpochError` when there is no next epoch or it cannot be stored.
    func nextEpoch(clockSeconds: Int64) throws -> UInt32
}

extension DecisionStoring {
    package func decision(_ key: DecisionKey) -> StoredDecision? {
        decision(key, now: currentMicroseconds())
    }

    package func list() -> [StoredDecision] { list(app: nil) }

    package func expired() -> [StoredDecision] { expired(now: currentMicroseconds()) }
}
