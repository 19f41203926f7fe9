/// Keeps the plugin's publications well under the host's flood limit (more than
/// 1000 in one second makes a plugin unavailable for good): a token bucket that
/// lets bursts of up to 100 through at once and refills at 500 a second, so no
/// one-second window can hold more than 600. Device hotplug never comes near it;
/// a client creating and destroying Video/Source nodes in a loop might, and then
/// the rest wait on a timer and go out coalesced to the latest state, as the host
/// itself coalesces publications that outrun it.
struct PublishThrottle {
    static let burst = 100.0
    static let perSecond = 500.0

    private var tokens = burst
    private var refilledAt: UInt64?

    /// Takes a token if there is one.
    mutating func take(now: UInt64) -> Bool {
        refill(now)
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }

    /// Nanoseconds until the next token.
    mutating func wait(now: UInt64) -> UInt64 {
        refill(now)
        return tokens >= 1 ? 0 : UInt64((1 - tokens) / Self.perSecond * 1e9) + 1
    }

    private mutating func refill(_ now: UInt64) {
        if let refilledAt, now > refilledAt {
            tokens = min(Self.burst, tokens + Double(now - refilledAt) / 1e9 * Self.perSecond)
        }
        refilledAt = now
    }
}
