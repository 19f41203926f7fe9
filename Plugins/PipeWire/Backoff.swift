/// The delays between attempts to reach a PipeWire: 50 ms, doubling, at most 2 s.
///
/// Bounded at 2 s so that a PipeWire that starts after the daemon (or comes back
/// after a crash) is noticed within 2 s, while one that never appears costs one
/// failed connect(2) every 2 s. Reset once a connection has completed its first
/// registry round trip, so a PipeWire that accepts connections and then drops
/// them at once is not hammered.
///
/// A user's PipeWire (`attempts` set) is found by inotify instead: its socket
/// appearing starts a fresh backoff, and a few attempts cover the moment between
/// PipeWire's bind(2), which inotify reports, and its listen(2); after them the
/// remote waits for the socket to be made again, and nothing is retried on a timer.
struct Backoff {
    static let first: UInt64 = 50_000_000  // nanoseconds
    static let limit: UInt64 = 2_000_000_000
    /// A user's PipeWire: 50 ms to 1.6 s, about 3 s in all.
    static let userAttempts = 6

    private var upcoming = first
    /// Attempts left after the first, or nil for no end.
    private let attempts: Int?
    private var left: Int?

    init(attempts: Int? = nil) {
        self.attempts = attempts
        left = attempts
    }

    /// The delay before the next attempt (each call doubles the one after it), or
    /// nil when no more are made until `reset`.
    mutating func next() -> UInt64? {
        if let l = left {
            guard l > 0 else { return nil }
            left = l - 1
        }
        defer { upcoming = min(upcoming * 2, Self.limit) }
        return upcoming
    }

    mutating func reset() {
        upcoming = Self.first
        left = attempts
    }

    /// How the next attempts are made, for the outage's log line.
    var retryNote: String {
        attempts == nil ? "retrying every \(Self.limit / 1_000_000_000) s at most"
                        : "trying again when its socket is made"
    }
}
