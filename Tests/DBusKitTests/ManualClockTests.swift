import DBusKit
import Testing
internal import SystemPrimitives

/// The clock that tests move by hand: timers run at their own instants, in order,
/// on their own queues, and not once cancelled.
@Suite struct ManualClockTests {
    @Test func timersRunAtTheirInstantsInOrder() {
        let clock = ManualClock()
        let queue = Queue(label: "manual-clock-test")
        let seen = Locked<[String]>([])
        let once = clock.schedule(after: 30, repeating: nil, on: queue) {
            queue.assertCurrent()
            seen.withLock { $0.append("once@\(clock.now)") }
        }
        let poll = clock.schedule(after: 20, repeating: 20, on: queue) { seen.withLock { $0.append("poll@\(clock.now)") } }
        #expect(clock.pending == [.init(remaining: 20, repeating: 20), .init(remaining: 30, repeating: nil)])
        clock.advance(by: .milliseconds(19))
        #expect(seen.withLock { $0 }.isEmpty)
        clock.advance(by: .milliseconds(41))
        #expect(seen.withLock { $0 } == ["poll@20", "once@30", "poll@40", "poll@60"])
        #expect(clock.pending == [.init(remaining: 20, repeating: 20)])
        queue.sync { poll.cancel() }
        clock.advance(by: .seconds(10))
        #expect(seen.withLock { $0 }.count == 4)
        #expect(clock.pending.isEmpty)
        #expect(clock.now == 10_060)
        _ = once
    }

    /// A timer armed by a handler counts from the instant that handler ran.
    @Test func aTimerArmedByAHandlerCountsFromThen() {
        let clock = ManualClock()
        let queue = Queue(label: "manual-clock-test")
        let fired = Locked<[Int]>([])
        let keep = Locked<[any ArmedTimer]>([])
        let first = clock.schedule(after: 10, repeating: nil, on: queue) {
            fired.withLock { $0.append(clock.now) }
            let second = clock.schedule(after: 5, repeating: nil, on: queue) { fired.withLock { $0.append(clock.now) } }
            keep.withLock { $0.append(second) }
        }
        clock.advance(by: .milliseconds(100))
        #expect(fired.withLock { $0 } == [10, 15])
        _ = first
    }
}
