internal import Glibc
internal import PermissionsSupport
package import SystemPrimitives

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
/// Order: writes are committed in the order they are in the line, and applied to
/// memory and answered in that order too, so memory is always what the file held
/// after some prefix of the line, and a write queued behind another sees its effect
/// (DecisionWrite names rows by what they are, not by a list taken in advance).
/// `afterWrites` takes a place in the line: its body runs when everything before
/// it is applied and nothing after it has been, and the writes it makes take its
/// place, ahead of the writes made after it was called; so a check of memory and a
/// write made on it are one step, as they were when commits were synchronous.
///
/// Stop (`close`): the commit in progress ends, and its writes get their real
/// outcome; writes still in the line are not made (the service answers them
/// Cancelled). A commit that does not end within a bound (a hung disk) does not
/// hold the stop: its writes are answered that they may or may not be stored.
///
/// Loads: a user's rows are read on the writer queue too (the one SQLite
/// connection is the writer queue's), between commits, and put in memory on the
/// serving queue. Both hops are in order (one serial queue to another), so a
/// commit and a load reach memory in the order they reached the file: a load that
/// read after a commit lands after that commit's `apply`, which, for a user not
/// loaded yet, changed nothing in memory (DecisionIndex); a load that read before
/// it lands before it, and the `apply` then changes the rows it put there.
///
/// `@unchecked Sendable`: the `DecisionStore` is shared by two queues that touch
/// disjoint parts of it: the writer queue only its SQLite connection (`write`,
/// `readRows`, `readAll`, `nextEpoch`, `close`), the serving queue only its
/// memory (the reads, `apply`, `install`, `evict`). `line`, `inCommit`, `insertAt` and `stopped` are the serving queue's;
/// `committed` is written on the writer queue and read by `close` only after a
/// semaphore the writer queue signals after it.
package final class DecisionCommitter: DecisionStoring, @unchecked Sendable {
    private typealias Around = () -> (Result<Int, any Error>) -> Void

    private enum Entry {
        case write(DecisionWrite, Around)
        case barrier(() -> Void)
    }

    let store: DecisionStore
    private let queue: Queue
    let writer = Queue(label: "org.example.Permissions.decision-writer")
    /// This start's epoch, being stored in the background (StartEpoch.swift).
    var startEpoch: StartEpoch?
    /// What waits for the running commit to end, in order: the next groups.
    private var line: [Entry] = []
    /// The group being committed on the writer queue (empty when none is).
    private var inCommit: [(write: DecisionWrite, around: Around)] = []
    /// While a barrier's body runs: where the writes it makes go in the line.
    private var insertAt: Int?
    /// The outcome of the last group the writer queue committed, for `close`: it
    /// runs inside the stop, which holds the serving queue until the process ends,
    /// so the `finishCommit` the writer queue sends never runs.
    private var committed: Result<[Int], any Error>?
    /// Set by `close`: no commit starts after it.
    private var stopped = false

    /// `queue` is the serving queue: reads and `commit` are made on it, and the
    /// outcomes come on it.
    package init(_ store: DecisionStore, queue: Queue) {
        self.store = store
        self.queue = queue
    }

    package var degradedReason: String? { store.degradedReason }

    package func decision(_ key: DecisionKey, now: Int64) -> StoredDecision? { store.decision(key, now: now) }

    package func list(app: String?) -> [StoredDecision] { store.list(app: app) }

    package func expired(now: Int64) -> [StoredDecision] { store.expired(now: now) }

    package func nextExpiry() -> Int64? { store.nextExpiry() }

    package var writesInFlight: Bool { !inCommit.isEmpty || !line.isEmpty }

    package func writesInFlight(for uid: UInt32) -> Bool {
        inCommit.contains { $0.write.touches(uid: uid) } || line.contains { entry in
            switch entry {
            case .write(let write, _): write.touches(uid: uid)
            case .barrier: true
            }
        }
    }

    package func isLoaded(uid: UInt32) -> Bool { store.isLoaded(uid: uid) }

    package var loadedUsers: [UInt32] { store.loadedUsers }

    /// Rows in memory, for diagnostics and logs.
    package var rowsInMemory: Int { store.rowsInMemory }

    package func load(uid: UInt32, done: @escaping (Result<Void, any Error>) -> Void) {
        queue.assertCurrent()
        // `done` is called on the serving queue only, where it was given.
        let done = QueueConfined(done)
        let read: @Sendable () -> Void = { [self] in
            writer.async { [self] in
                let rows = Result { try store.readRows(uid: uid) }
                queue.async { [self] in
                    if case .success(let rows) = rows { store.install(uid: uid, rows: rows) }
                    done.value(rows.map { _ in () })
                }
            }
        }
        #if DEBUG
        // Held on a thread of its own, not on the writer queue: a load held there
        // holds neither the commits nor the other users' loads.
        if let gate = Self.loadGate { return Queue.runOnItsOwn(label: "load-gate") { gate.wait(); read() } }
        #endif
        read()
    }

    package func evict(uid: UInt32) {
        queue.assertCurrent()
        precondition(!writesInFlight(for: uid), "a user's rows let go while a write of theirs is in flight")
        store.evict(uid: uid)
    }

    package func readAll(app: String?, done: @escaping (Result<[StoredDecision], any Error>) -> Void) {
        queue.assertCurrent()
        // On the writer queue: after every commit handed to it, so after every write
        // acknowledged (a write in the line is not acknowledged yet).
        let done = QueueConfined(done)
        writer.async { [self] in
            let rows = Result { try store.readAll(app: app) }
            queue.async { done.value(rows) }
        }
    }

    package func commit(_ write: DecisionWrite, around: @escaping () -> (Result<Int, any Error>) -> Void) {
        queue.assertCurrent()
        enqueue(.write(write, around))
    }

    package func afterWrites(_ body: @escaping () -> Void) {
        queue.assertCurrent()
        guard writesInFlight else { return body() }
        enqueue(.barrier(body))
    }

    private func enqueue(_ entry: Entry) {
        if let index = insertAt {
            line.insert(entry, at: index)
            insertAt = index + 1
            return  // advance() goes on once the barrier's body returns
        }
        line.append(entry)
        advance()
    }

    /// With no commit running: runs the barriers at the head of the line, then
    /// hands the writes up to the next barrier to the writer queue as one group.
    private func advance() {
        guard !stopped, inCommit.isEmpty, insertAt == nil else { return }
        while case .barrier(let body)? = line.first {
            line.removeFirst()
            insertAt = 0
            body()
            insertAt = nil
        }
        let end = line.firstIndex { if case .barrier = $0 { true } else { false } } ?? line.count
        guard end > 0 else { return }
        inCommit = line[..<end].map { entry in
            guard case .write(let write, let around) = entry else { preconditionFailure("a barrier in a group") }
            return (write, around)
        }
        line.removeFirst(end)
        let writes = inCommit.map(\.write)
        writer.async { [self] in
            #if DEBUG
            Self.waitAtTestGate()
            #endif
            let outcome: Result<[Int], any Error>
            do {
                outcome = .success(try store.write(writes))
            } catch {
                outcome = .failure(error)
            }
            committed = outcome
            queue.async { [self] in finishCommit(outcome) }
        }
    }

    /// On the serving queue: applies the group to memory and gives each write its
    /// outcome, in order; then goes on with the line.
    private func finishCommit(_ outcome: Result<[Int], any Error>) {
        deliver(outcome)
        advance()
    }

    /// `outcome`: how many rows of the file each write changed, or the failure.
    private func deliver(_ outcome: Result<[Int], any Error>) {
        // inCommit stays set until every outcome is given: a write made by one of
        // them joins the line, behind the writes made before it.
        for (index, (write, around)) in inCommit.enumerated() {
            let finish = around()
            switch outcome {
            case .success(let counts): finish(.success(store.apply(write, rowsInFile: counts[index])))
            case .failure(let error): finish(.failure(error))
            }
        }
        inCommit = []
    }

    /// One write per daemon start, before serving: on the writer queue, which owns
    /// the SQLite connection.
    package func nextEpoch(clockSeconds: Int64) throws -> UInt32 {
        if let start = startEpoch, !start.handedOut {
            start.handedOut = true
            return start.value
        }
        return try writer.sync { try store.nextEpoch(clockSeconds: clockSeconds) }
    }

    /// How long a stop waits for the commit in progress and the close after it.
    package static let stopWait = 5

    /// For a stop, on the serving queue, which the stop holds to the end (so
    /// `finishCommit` never runs again): waits at most `stopWait` seconds for the
    /// commit in progress, if any, and for the checkpoint and close of the file
    /// after it (DecisionStore.close), then gives the commit's writes their outcome:
    /// the real one, or, if the commit has not ended, `UnfinishedCommit`. Writes
    /// still in the line are not made and get no outcome: the stop answers their
    /// calls Cancelled. No commit starts after this.
    package func close() {
        queue.assertCurrent()
        guard !stopped else { return }
        stopped = true
        #if DEBUG
        // For tests, which release a commit held at the gate once the stop waits for
        // it. Not in release builds: nothing that can block (a log line to a full
        // pipe) comes before the store is closed.
        if !inCommit.isEmpty { logInfo("stopping: waiting for the commit of \(inCommit.count) write(s)") }
        #endif
        // The writer queue is serial: the first block runs once the commit in
        // progress has ended (and has set `committed`), the second after the close.
        let commitEnded = Semaphore(value: 0)
        let closed = Semaphore(value: 0)
        writer.async { commitEnded.signal() }
        writer.async { [self] in
            store.close()
            closed.signal()
        }
        let deadline = Deadline.now() + .seconds(Self.stopWait)
        let ended = commitEnded.wait(timeout: deadline) == .success
        if !ended || closed.wait(timeout: deadline) == .timedOut {
            logWarning("the decision store did not \(ended ? "close" : "end its commit") within "
                       + "\(Self.stopWait) s (is the disk hung?); stopping without it")
        }
        guard !inCommit.isEmpty else { return }
        deliver((ended ? committed : nil) ?? .failure(UnfinishedCommit(seconds: Self.stopWait)))
    }

    /// The outcome of a write whose commit had not ended when the daemon stopped.
    package struct UnfinishedCommit: Error, CustomStringConvertible {
        let seconds: Int
        package var description: String {
            "the daemon stopped while this was being committed, and the commit did not end within "
                + "\(seconds) s: it may or may not be stored"
        }
    }

    #if DEBUG
    /// Debug builds only, for tests: with PERMISSIONS_DEBUG_COMMIT_GATE naming a Unix
    /// socket a test listens on, each commit, before it begins, waits there until the
    /// test lets it go (TestGate).
    private static let testGate = TestGate(environment: "PERMISSIONS_DEBUG_COMMIT_GATE")

    private static func waitAtTestGate() {
        testGate?.wait()
    }

    /// Debug builds only, for tests: with PERMISSIONS_DEBUG_LOAD_GATE naming a Unix
    /// socket, each load of a user's rows, before it reads, waits there until the
    /// test lets it go (TestGate), as a slow disk would hold it.
    private static let loadGate = TestGate(environment: "PERMISSIONS_DEBUG_LOAD_GATE")
    #endif
}
