// The benchmarks' side of D-Bus: their private bus, blocking connections and
// calls that fail the run on an error, and the round trip that puts match rules in
// force.
import DBusKit
import Foundation
import SystemPrimitives
import PermissionsTestSupport

/// A private bus (`type` "system" for a stand-in system bus), started through
/// `setpriv --pdeathsig KILL` so that even a crashed bench leaves no bus behind.
func startBus(type: String = "session") -> TestBus {
    do { return try TestBus(type: type, diesWithParent: true) } catch { fail("cannot start dbus-daemon: \(error)") }
}

/// A private bus that lets one user hold `connections` connections (dbus-daemon's
/// built-in limits allow 256 per user and 2048 in all), with the permissive policy
/// of `startBus`: for the benchmarks that open thousands of subscribers.
func startBus(connections: Int) -> TestBus {
    do {
        return try TestBus(type: "session", diesWithParent: true,
                           limits: ["max_completed_connections": connections, "max_connections_per_user": connections])
    } catch {
        fail("cannot start dbus-daemon: \(error)")
    }
}

/// Opens a connection (attached to `queue` if given; else for blocking calls only).
func openConnection(_ address: String, queue: Queue? = nil) -> Connection {
    do throws(BusError) {
        return try Connection.open(.address(address), queue: queue)
    } catch {
        fail("cannot connect to \(address): \(error)")
    }
}

/// Opens an unattached connection (blocking calls only).
func openBlocking(_ address: String) -> Connection { openConnection(address) }

/// Calls and waits for the reply; an error reply fails the bench.
@discardableResult
func busCall(_ connection: Connection, _ message: Message, timeoutMilliseconds: Int32 = 25_000) -> Message {
    do throws(BusError) {
        return try connection.callBlocking(message, timeoutMilliseconds: timeoutMilliseconds)
    } catch {
        fail("\(message.member ?? "call") to \(message.destination ?? "?") failed: \(error)")
    }
}

/// Waits until the bus has answered a Ping on each connection: every message sent
/// before (AddMatch included) has then been processed by the bus.
func pingBus(_ connections: [Connection], seconds: Double = 20) {
    let group = Group()
    for c in connections {
        group.enter()
        c.queue.async {
            let ping = try! Message.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                               interface: "org.freedesktop.DBus.Peer", member: "Ping")
            c.call(ping) { _ in group.leave() }
        }
    }
    guard group.wait(timeout: .now() + seconds) == .success else { fail("the bus did not answer a Ping") }
}
