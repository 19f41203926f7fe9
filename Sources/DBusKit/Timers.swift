package import SystemPrimitives

// Where the package's timers come from: libdbus's timeouts (MainLoop.swift), and
// the retries and polls of code above DBusKit. Production uses dispatch timers,
// which follow the machine's clock; a test hands in a `ManualClock` instead, which
// moves only when the test advances it, so that it can show what 40 s of waiting
// do (a call's timeout expiring, a poll not happening) without waiting 40 s, and
// at exact instants rather than "after about that long".

/// Arms timers whose handlers run on a given queue.
package protocol Timers: Sendable {
    /// Runs `handler` on `queue` once `milliseconds` have passed, and then every
    /// `repeating` milliseconds when that is given, until the returned timer is
    /// cancelled.
    func schedule(after milliseconds: Int, repeating: Int?, on queue: Queue,
                  _ handler: @escaping @Sendable () -> Void) -> any ArmedTimer
}

/// One timer `Timers.schedule` armed.
package protocol ArmedTimer: AnyObject, Sendable {
    /// Called on the timer's queue: its handler does not run again.
    func cancel()
}

/// Dispatch timers: what production uses.
package struct DispatchTimers: Timers {
    package init() {}

    package func schedule(after milliseconds: Int, repeating: Int?, on queue: Queue,
                          _ handler: @escaping @Sendable () -> Void) -> any ArmedTimer {
        let timer = TimerSource(queue: queue)
        if let repeating {
            timer.schedule(deadline: .now() + .milliseconds(milliseconds), repeating: .milliseconds(repeating))
        } else {
            timer.schedule(deadline: .now() + .milliseconds(milliseconds))
        }
        timer.setEventHandler(handler: handler)
        timer.resume()
        return ArmedDispatchTimer(timer)
    }
}

/// `@unchecked Sendable`: it holds one immutable reference to a dispatch source,
/// and dispatch sources may be cancelled from any thread.
private final class ArmedDispatchTimer: ArmedTimer, @unchecked Sendable {
    let source: TimerSource
    init(_ source: TimerSource) { self.source = source }
    func cancel() { source.cancel() }
}

/// A clock for tests: time stands still until `advance(by:)` moves it, and then
/// every timer that falls due runs, in deadline order, each on its own queue and
/// waited for, so that when `advance` returns, all they did has been done.
///
/// Call `advance` from a thread that is none of the timers' queues (it waits for
/// each of them).
package final class ManualClock: Timers {
    /// One timer as a test sees it: how long until it fires, and its period.
    package struct Pending: Sendable, Equatable {
        package let remaining: Int
        package let repeating: Int?

        package init(remaining: Int, repeating: Int?) {
            self.remaining = remaining
            self.repeating = repeating
        }
    }

    private struct Entry: Sendable {
        var deadline: Int
        let repeating: Int?
        let queue: Queue
        let handler: @Sendable () -> Void
    }

    private struct State: Sendable {
        /// Milliseconds since the clock was made.
        var now = 0
        var nextID = 0
        var entries: [Int: Entry] = [:]
    }

    private let state = Locked(State())
    /// Signalled whenever a timer is armed or cancelled, for `waitUntil`.
    private let changed = Semaphore(value: 0)

    package init() {}

    /// Milliseconds since the clock was made.
    package var now: Int { state.withLock { $0.now } }

    /// The timers armed now, soonest first.
    package var pending: [Pending] {
        state.withLock { s in
            s.entries.values.sorted { $0.deadline < $1.deadline }
                .map { Pending(remaining: $0.deadline - s.now, repeating: $0.repeating) }
        }
    }

    package func schedule(after milliseconds: Int, repeating: Int?, on queue: Queue,
                          _ handler: @escaping @Sendable () -> Void) -> any ArmedTimer {
        let id = state.withLock { s in
            s.nextID += 1
            s.entries[s.nextID] = Entry(deadline: s.now + max(milliseconds, 0), repeating: repeating.map { max($0, 1) },
                                        queue: queue, handler: handler)
            return s.nextID
        }
        changed.signal()
        return ManualTimer(clock: self, id: id)
    }

    fileprivate func cancel(_ id: Int) {
        state.withLock { _ = $0.entries.removeValue(forKey: id) }
        changed.signal()
    }

    /// Moves the clock on by `duration` (whole milliseconds), running each timer
    /// that falls due on the way at its own instant; a repeating timer runs once
    /// for each period that ends within the step.
    package func advance(by duration: Duration) {
        let (seconds, attoseconds) = duration.components
        let end = state.withLock { $0.now } + Int(seconds) * 1_000 + Int(attoseconds / 1_000_000_000_000_000)
        while let (id, queue) = state.withLock({ s -> (Int, Queue)? in
            guard let (id, entry) = s.entries.filter({ $0.value.deadline <= end })
                .min(by: { ($0.value.deadline, $0.key) < ($1.value.deadline, $1.key) })
            else {
                s.now = max(s.now, end)
                return nil
            }
            s.now = entry.deadline
            return (id, entry.queue)
        }) {
            queue.sync {
                // On the timer's queue, where it is cancelled: one cancelled after it
                // was picked above does not run.
                let handler = state.withLock { s -> (@Sendable () -> Void)? in
                    guard let entry = s.entries[id] else { return nil }
                    if let period = entry.repeating {
                        s.entries[id]!.deadline += period
                    } else {
                        s.entries[id] = nil
                    }
                    return entry.handler
                }
                handler?()
            }
        }
    }

    /// Waits (in real time, up to `timeout`) until the armed timers satisfy
    /// `predicate`: for a test to know that the code under test has armed what it
    /// arms before it moves the clock. False on timeout.
    package func waitUntil(timeout: Duration = .seconds(10), _ predicate: ([Pending]) -> Bool) -> Bool {
        let (seconds, attoseconds) = timeout.components
        let deadline = Deadline.now() + .milliseconds(Int(seconds) * 1_000 + Int(attoseconds / 1_000_000_000_000_000))
        while true {
            if predicate(pending) { return true }
            if changed.wait(timeout: deadline) == .timedOut { return predicate(pending) }
        }
    }
}

/// `Sendable`: both stored properties are immutable and Sendable.
private final class ManualTimer: ArmedTimer {
    let clock: ManualClock
    let id: Int
    init(clock: ManualClock, id: Int) {
        self.clock = clock
        self.id = id
    }
    func cancel() { clock.cancel(id) }
}
