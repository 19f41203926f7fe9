import DBusKit
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

/// Waits (10 s at most) until the bus answers a Ping on `connection`, an attached
/// connection on `queue`: its match rules, sent before, are then in force.
func busAnswers(_ connection: Connection, on queue: DispatchQueue) -> Bool {
    let answered = DispatchSemaphore(value: 0)
    queue.sync {
        let ping = try! Message.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                           interface: "org.freedesktop.DBus.Peer", member: "Ping")
        connection.call(ping) { _ in answered.signal() }
    }
    return answered.wait(timeout: .now() + 10) == .success
}
