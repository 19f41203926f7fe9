// permissions-bench floor-service: the DBusKit floor, reported beside the C floor
// (Benchmarks/floor/floor.c, which the limits judge by) to show what our own framework
// costs. A D-Bus service doing next to nothing on libdbus: one thread, one
// unattached connection, `dbus_connection_read_write_dispatch` in a loop, and
// DBusKit's router. `Status(s) -> s` has GetStatus's shape (one string in, one
// string out) and answers on DBusKit's fast path with a constant word, without
// looking at anything: what libdbus and the bus cost for a GetStatus, with no
// service behind it. That shape matters: libdbus validates a call's body walking
// its signature with list nodes from a pool under a global lock, which a Ping,
// having no body, never pays. The router also answers org.freedesktop.DBus.Peer.Ping
// (DBusKit has libdbus route Peer calls to its filter), the cheapest method call
// DBusKit has, printed beside the floor as a reference. `Emit(s)` emits the plain signal
// org.example.BenchFloor.Tick(s) and replies, the floor for broadcast fan-out;
// `Subscribe()` adds the caller to a list and `EmitEach(s)` sends Tick(s) to each
// caller on it, one unicast signal per subscriber (marshalled once and copied), then
// replies: the floor for unicast fan-out (permissionsd's per-user StatusChanged).
import DBusKit
import Foundation

let coreFloorBusName = "org.example.BenchFloor"
/// The bus name of the C floor (Benchmarks/floor/floor.c): the same path, interface
/// and answer as this one, so that both serve in one run.
let coreCFloorBusName = "org.example.BenchFloorC"
let coreFloorPath = "/org/example/BenchFloor"
let coreFloorInterface = "org.example.BenchFloor"
/// The floor's answer to Status(s): as long as permissionsd's answer for the bench's
/// `location` (enabled by the bench's config, no policy, no decision: "not-determined").
let coreFloorStatusWord = "not-determined"

func runCoreFloorService(_ arguments: [String]) -> Never {
    guard arguments.count == 2, arguments[0] == "--address" else {
        fail("usage: permissions-bench floor-service --address ADDRESS", code: 2)
    }
    do throws(BusError) {
        let connection = try Connection.open(.address(arguments[1]))
        try connection.enableRouting()
        let emit = Method("Emit", input: "s") { call in
            try? connection.emitSignal(path: coreFloorPath, interface: coreFloorInterface, member: "Tick",
                                       [call.arguments[0]])
            call.reply()
        }
        var subscribers: [String] = []
        let subscribe = Method("Subscribe") { call in
            subscribers.append(call.sender)
            call.reply()
        }
        let emitEach = Method("EmitEach", input: "s") { call in
            // The cheapest N sends libdbus has: one message marshalled, copied per subscriber.
            if let tick = try? Message.signal(path: coreFloorPath, interface: coreFloorInterface, member: "Tick"),
               (try? tick.append([call.arguments[0]])) != nil {
                try? connection.sendCopies(of: tick, to: subscribers)
            }
            call.reply()
        }
        let unsubscribeAll = Method("UnsubscribeAll") { call in
            subscribers.removeAll()
            call.reply()
        }
        // The ordinary way, for what the fast path declines (nothing it is sent here).
        let status = Method("Status", input: "s") { call in call.reply([.string(coreFloorStatusWord)]) }
        let methods = [emit, subscribe, emitEach, unsubscribeAll, status]
        connection.export(ExportedObject(path: coreFloorPath, interfaces: [Interface(coreFloorInterface, methods: methods)],
                                         introspection: ""))
        connection.addFastMethod(path: coreFloorPath, interface: coreFloorInterface, member: "Status",
                                 signature: "s") { call in
            // Read as permissionsd reads its argument, then answered without looking.
            _ = call.firstString
            return call.reply(string: coreFloorStatusWord)
        }
        guard try connection.requestName(coreFloorBusName) == .primaryOwner else {
            fail("\(coreFloorBusName) is taken")
        }
        while connection.readWriteDispatch(timeoutMilliseconds: -1) {}
        exit(0)
    } catch {
        fail("\(error)")
    }
}
