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
    /// The write's outcome, set on the writer queue; read there too (writer.sync).
    var outcome: Result<Void, any Error>?

    init(_ value: UInt32) { self.value = value }
}

extension DecisionCommitter {
    /// Takes this start's epoch (see `StartEpoch`) and starts storing it. Throws
    /// `SerialEpochError.outOfRange` when the stored epoch has no next one.
    package func beginStartEpoch(clockSeconds: Int64) throws {
        let next = try writer.sync { try store.epochAfter(clockSeconds: clockSeconds) }
        let start = StartEpoch(next)
        startEpoch = start
        writer.async { start.outcome = Result { try self.store.storeEpoch(next) } }
    }

    /// Waits for `beginStartEpoch`'s write; throws its `SerialEpochError` if it failed.
    package func startEpochStored() throws {
        guard let start = startEpoch else { return }
        try writer.sync { start.outcome }?.get()
    }
}
