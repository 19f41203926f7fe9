internal import SystemPrimitives

/// Start-up's serial epoch. Its value is known as soon as the store is open, but
/// storing it takes a commit and a checkpoint, four or five fsyncs: milliseconds on
/// an idle disk, tens of them beside other writers. So start-up takes the value at
/// once (the service's first `nextEpoch` gets it) and the write runs on the writer
/// queue while the plugins load; the daemon waits for it (`startEpochStored`)
/// before anything could send a serial of the epoch, and refuses to start if it
/// failed, as it did when the write came first.
final class StartEpoch: @unchecked Sendable {
    let value: UInt32
    /// Set once the service's `nextEpoch` took the value (on the serving queue).
    var handedOut = false
    /// The write's outcome, set on the writer queue. Behind a lock, so that
    /// start-up can read an outcome already there without a turn of the writer
    /// queue (a thread woken, about 0.15 ms just before the name is requested).
    let outcome = Locked<Result<Void, any Error>?>(nil)

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
            let outcome = Result { try self.store.storeEpoch(next) }
            start.outcome.withLock { $0 = outcome }
        }
    }

    /// Waits for `beginStartEpoch`'s write; throws its `SerialEpochError` if it failed.
    package func startEpochStored() throws {
        guard let start = startEpoch else { return }
        if let done = start.outcome.withLock({ $0 }) { return try done.get() }
        // Not yet: after the writer queue's turn, the write (queued before) is over.
        try writer.sync { start.outcome.withLock { $0 } }?.get()
    }
}
