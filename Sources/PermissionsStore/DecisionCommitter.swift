package import Dispatch

/// The daemon's decision store: reads answered from the `DecisionStore`'s memory on
/// the serving queue, and writes committed to its file on a queue of their own, so
/// that no read waits behind an fsync.
///
/// Group commit: the writes made while a commit runs wait, and then share the next
/// commit: one transaction, one fsync, for all of them. Nothing is acknowledged
/// before it is on disk: each write's outcome (and with it the D-Bus reply and the
/// signals) comes only after the transaction that holds it has committed with
/// `synchronous=FULL`. A transaction that fails changes nothing, in memory or on
/// disk, and every write in it gets the error (StorageFailed for the caller).
///
/// Order: writes are committed in the order they were made, and applied to memory
/// and answered in that order too, so memory is always what the file held after
/// some prefix of the writes, and a write queued behind another sees its effect
/// (DecisionWrite names rows by what they are, not by a list taken in advance).
///
/// `@unchecked Sendable`: the `DecisionStore` is shared by two queues that touch
/// disjoint parts of it: the writer queue only its SQLite connection (`write`,
/// `nextEpoch`, `close`), the serving queue only its memory (the reads and
/// `apply`). `waiting` and `inCommit` are the serving queue's.
package final class DecisionCommitter: DecisionStoring, @unchecked Sendable {
    private typealias Waiting = (write: DecisionWrite, around: () -> (Result<Int, any Error>) -> Void)

    private let store: DecisionStore
    private let queue: DispatchQueue
    private let writer = DispatchQueue(label: "org.example.Permissions.decision-writer")
    /// Writes made since the running commit began: the next group.
    private var waiting: [Waiting] = []
    /// The group being committed on the writer queue (empty when none is).
    private var inCommit: [Waiting] = []

    /// `queue` is the serving queue: reads and `commit` are made on it, and the
    /// outcomes come on it.
    package init(_ store: DecisionStore, queue: DispatchQueue) {
        self.store = store
        self.queue = queue
    }

    package var degradedReason: String? { store.degradedReason }

    package func decision(_ key: DecisionKey, now: Int64) -> StoredDecision? { store.decision(key, now: now) }

    package func list(app: String?) -> [StoredDecision] { store.list(app: app) }

    package func expired(now: Int64) -> [StoredDecision] { store.expired(now: now) }

    package func nextExpiry() -> Int64? { store.nextExpiry() }

    package var writesInFlight: Bool { !inCommit.isEmpty || !waiting.isEmpty }

    package func commit(_ write: DecisionWrite, around: @escaping () -> (Result<Int, any Error>) -> Void) {
        dispatchPrecondition(condition: .onQueue(queue))
        waiting.append((write, around))
        if inCommit.isEmpty { startCommit() }
    }

    /// Hands every waiting write to the writer queue as one transaction.
    private func startCommit() {
        inCommit = waiting
        waiting = []
        let writes = inCommit.map(\.write)
        writer.async { [self] in
            let outcome: Result<Void, any Error>
            do {
                try store.write(writes)
                outcome = .success(())
            } catch {
                outcome = .failure(error)
            }
            queue.async { [self] in finishCommit(outcome) }
        }
    }

    /// On the serving queue: applies the group to memory and gives each write its
    /// outcome, in order; then starts the next group, if writes came meanwhile.
    private func finishCommit(_ outcome: Result<Void, any Error>) {
        // inCommit stays set until every outcome is given: a write made by one of
        // them waits for the next group, behind the writes made before it.
        for (write, around) in inCommit {
            let finish = around()
            switch outcome {
            case .success: finish(.success(store.apply(write)))
            case .failure(let error): finish(.failure(error))
            }
        }
        inCommit = []
        if !waiting.isEmpty { startCommit() }
    }

    /// One write per daemon start, before serving: on the writer queue, which owns
    /// the SQLite connection.
    package func nextEpoch(atLeast: Int64) throws -> Int64 {
        try writer.sync { try store.nextEpoch(atLeast: atLeast) }
    }

    /// For a clean stop: waits for the commit in progress, if any (its outcome is
    /// not delivered: the daemon is stopping and will not reply), then checkpoints
    /// and closes the file (DecisionStore.close). Writes still waiting are not made.
    package func close() {
        writer.sync { store.close() }
    }
}
