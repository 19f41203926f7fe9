internal import SystemPrimitives

/// The clock and timer of ConfigReader's settle window: the monotonic clock and
/// dispatch's timers in the daemon; a clock moved by hand in unit tests, so that
/// a wait of the whole window takes no time.
protocol SettleClock: Sendable {
    var now: Deadline { get }
    /// Runs `body` on `queue` once `deadline` has come.
    func run(at deadline: Deadline, on queue: Queue, _ body: @escaping @Sendable () -> Void)
}

/// Real time.
struct DispatchClock: SettleClock {
    var now: Deadline { .now() }

    func run(at deadline: Deadline, on queue: Queue, _ body: @escaping @Sendable () -> Void) {
        queue.asyncAfter(deadline: deadline, execute: body)
    }
}
