// Who owns which bus name, and since when: the benchmarks time a start-up to the
// moment the bus announces the new owner, and wait for a killed process's name to
// be released before the next start.
import DBusKit
import Foundation
import PermissionsTestSupport
import SystemPrimitives

/// NameOwnerChanged as seen by a connection that subscribed before anything was
/// started, with the CLOCK_MONOTONIC time its handler ran.
///
/// `@unchecked Sendable`: the connection is only touched on `queue`; `events` locks
/// itself.
final class CoreNameWatcher: @unchecked Sendable {
    struct Event {
        let name: String
        let newOwner: String
        let at: UInt64
    }

    private let events = Timeline<Event>()
    private let queue = Queue(label: "core.names")
    private var connection: Connection?

    init(address: String) {
        let opened: Result<Connection, BusError> = queue.sync {
            do throws(BusError) {
                let c = try Connection.open(.address(address), queue: queue)
                c.subscribe(SignalMatch(sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                        interface: "org.freedesktop.DBus", member: "NameOwnerChanged")) {
                    [unowned self] message in
                    let at = monotonicNanoseconds()
                    let args = message.arguments().map { $0.stringValue ?? "" }
                    guard args.count == 3, !args[0].hasPrefix(":") else { return }
                    self.events.record(Event(name: args[0], newOwner: args[2], at: at))
                }
                return .success(c)
            } catch {
                return .failure(error)
            }
        }
        guard case .success(let c) = opened else { fail("cannot connect the name watcher to the bus") }
        connection = c
        pingBus([c])
    }

    /// Events so far; pass it to `wait(from:)` to see only what comes next.
    var mark: Int { events.count }

    /// The first event from index `from` on for `name`, owned (`owned`) or released.
    func wait(from: Int, name: String, owned: Bool, seconds: Double = 20) -> Event? {
        events.first(from: from, timeout: seconds) { e in e.name == name && e.newOwner.isEmpty != owned ? e : nil }
    }

    func close() {
        queue.sync { connection?.close(); connection = nil }
    }
}
