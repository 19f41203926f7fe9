import Foundation

/// Events with their times, recorded from several threads (a PipeWire loop, a bus
/// listener's queue) and searched by the bench's main thread.
///
/// `@unchecked Sendable`: `events` is only touched under `condition`'s lock.
final class Timeline<Event>: @unchecked Sendable {
    private let condition = NSCondition()
    private var events: [Event] = []

    func record(_ event: Event) {
        condition.lock()
        events.append(event)
        condition.broadcast()
        condition.unlock()
    }

    var count: Int {
        condition.lock()
        defer { condition.unlock() }
        return events.count
    }

    /// Waits (`timeout` seconds at most) for the first event from index `from` on
    /// that `match` accepts, and returns what it returned, or nil. The lock is
    /// released before returning, so a caller may fail the bench with it free
    /// (PipeWire's thread may need it to finish).
    func first<T>(from: Int, timeout: TimeInterval, _ match: (Event) -> T?) -> T? {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        var scanned = from
        while true {
            while scanned < events.count {
                if let found = match(events[scanned]) { return found }
                scanned += 1
            }
            if !condition.wait(until: deadline) { return nil }
        }
    }
}
