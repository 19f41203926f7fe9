// permissions-bench floor-service: the floor that permissionsd is measured
// against. A D-Bus service doing next to nothing on libdbus: one thread, one
// unattached connection, `dbus_connection_read_write_dispatch` in a loop, and
// DBusKit's router, which also answers org.freedesktop.DBus.Peer.Ping (DBusKit has
// libdbus route Peer calls to its filter, to check their arguments), so a Ping is
// the cheapest method call DBusKit has. `Emit(s)` emits the plain signal
// org.example.BenchFloor.Tick(s) and replies, the floor for broadcast fan-out;
// `Subscribe()` adds the caller to a list and `EmitEach(s)` sends Tick(s) to each
// caller on it, one unicast signal per subscriber (marshalled once and copied), then
// replies: the floor for unicast fan-out (permissionsd's per-user StatusChanged).
import DBusKit
import Foundation

let coreFloorBusName = "org.example.BenchFloor"
let coreFloorPath = "/org/example/BenchFloor"
let coreFloorInterface = "org.example.BenchFloor"

func runCoreFloorService(_ arguments: [String]) -> Never {
    guard arguments.count == 2, arguments[0] == "--address" else {
        FileHandle.standardError.write("usage: permissions-bench floor-service --address ADDRESS\n".data(using: .utf8)!)
        exit(2)
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
        let methods = [emit, subscribe, emitEach, unsubscribeAll]
        connection.export(ExportedObject(path: coreFloorPath, interfaces: [Interface(coreFloorInterface, methods: methods)],
                                         introspection: ""))
        guard try connection.requestName(coreFloorBusName) == .primaryOwner else {
            FileHandle.standardError.write("floor-service: \(coreFloorBusName) is taken\n".data(using: .utf8)!)
            exit(1)
        }
        while connection.readWriteDispatch(timeoutMilliseconds: -1) {}
        exit(0)
    } catch {
        FileHandle.standardError.write("floor-service: \(error)\n".data(using: .utf8)!)
        exit(1)
    }
}
