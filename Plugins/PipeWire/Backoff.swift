/// The delays between attempts to reach PipeWire: 50 ms, doubling, at most 2 s.
///
/// Bounded at 2 s so that a PipeWire that starts after the daemon (or comes back
/// after a crash) is noticed within 2 s, while one that never appears costs one
/// failed connect(2) every 2 s. Reset once a connection has completed its first
/// registry round trip, so a PipeWire that accepts connections and then drops
/// them at once is not hammered.
struct Backoff {
    static let first: UInt64 = 50_000_000  // nanoseconds
    static let limit: UInt64 = 2_000_000_000

    private var upcoming = first

    /// The delay before the next attempt; each call doubles the one after it.
    mutating func next() -> UInt64 {
        defer { upcoming = min(upcoming * 2, Self.limit) }
        return upcoming
    }

    mutating func reset() {
        upcoming = Self.first
    }
}
