internal import SystemPrimitives

/// Start-up's serial epoch. Its value is known as soon as the store is open, but
/// storing it takes a commit (two fsyncs, the WAL's header and the commit's) and
/// then a checkpoint (two or three more): milliseconds on an idle disk, tens of
/// them beside other writers. So start-up takes the value at once (the service's
/// first `nextEpoch` gets it) and the write runs on the writer queue while the
/// plugins load; the daemon waits for the commit (`startEpochStored`) before
/// anything could send a serial of the epoch, and refuses to start if it failed,
/// as it did when the write came first. The checkpoint follows on the writer
/// queue, and the name does not wait for it: the commit alone makes the epoch
/// durable. What else runs on the writer queue waits behind what is left of it,
/// as behind any write: a user's first call (its rows are loaded there), a write,
/// ListAllDecisions' read. None of them waits longer than when the name waited
/// for the checkpoint, and a call that needs none of them (of a user already
/// loaded, or one the store has no part in) no longer waits at all.
final class StartEpoch: @unchecked Sendable {
    let value: UInt32
    /// Set once the service's `nextEpoch` took the value (on the serving queue).
    var handedOut = false
    /// The commit's outcome, set on the writer queue. Behind a lock, so that
    /// start-up can read an outcome already there without a turn of the writer
    /// queue (a thread woken, about 0.15 ms just before the name is requested).
    let outcome = Locked<Result<Void, any Error>?>(nil)
    /// Signalled once `outcome` is set: the commit is waited for, not the
    /// checkpoint queued behind it.
    let committed = Semaphore(value: 0)

    init(_ value: UInt32) { self.value = value }
}

extension DecisionCommitter {
    /// Takes this start's epoch (see `StartEpoch`) and starts storing it. Throws
    /// `SerialEpochError.outOfRange` when the stored epoch has no next one.
    package func beginStartEpoch(clockSeconds: Int64) throws {
        let next = try writer.sync { try store.epochAfter(clockSeconds: clockSeconds) }
        let start = StartEpoch(next)
        startEpoch = start
        writer.async {
            let outcome = Result { try self.store.commitEpoch(next) }
            start.outcome.withLock { $0 = outcome }
            start.committed.signal()
            if case .success = outcome { self.store.checkpointAfterEpoch() }
        }
    }

    /// Waits for `beginStartEpoch`'s commit (not its checkpoint); throws its
    /// `SerialEpochError` if it failed.
    package func startEpochStored() throws {
        guard let start = startEpoch else { return }
        if let done = start.outcome.withLock({ $0 }) { return try done.get() }
        // Not yet: wait for the commit alone (a turn of the writer queue would
        // wait for the checkpoint too).
        start.committed.wait()
        try start.outcome.withLock { $0 }?.get()
    }
}
