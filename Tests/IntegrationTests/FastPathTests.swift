import DBusKit
import Foundation
internal import SystemPrimitives
import Testing
import PermissionsTestSupport

/// The fast path (DBusKit's addFastMethod; GetStatus and GetAll in the service):
/// what it answers, and that whatever it declines keeps the router's behaviour.
@Suite struct FastPathTests {
    let bus: TestBus
    let queue = Queue(label: "fast-path-test")

    init() throws {
        bus = try TestBus()
    }

    private func call(_ client: Connection, _ destination: String, interface: String?, _ member: String,
                      _ arguments: [DBusValue], noReply: Bool = false) throws -> Result<[DBusValue], BusError> {
        let m = try Message.methodCall(destination: destination, path: "/org/example/Fast", interface: interface,
                                       member: member)
        try m.append(arguments)
        do throws(BusError) {
            return .success(try client.callBlocking(m, timeoutMilliseconds: 10_000).arguments())
        } catch {
            return .failure(error)
        }
    }

    /// A service whose Echo(s) the router answers "router: ARG" and whose fast method
    /// answers "fast: ARG", except for "decline"; Pairs() is a fast a{ss}.
    @Test func fastMethodsAnswerAndDeclineToTheRouter() throws {
        let q = queue
        let address = bus.address
        let service = try q.sync { () throws(BusError) -> Connection in
            let c = try Connection.open(.address(address), queue: q)
            c.export(ExportedObject(path: "/org/example/Fast", interfaces: [Interface("org.example.Fast", methods: [
                Method("Echo", input: "s") { $0.reply([.string("router: " + ($0.arguments[0].stringValue ?? "?"))]) },
                Method("Pairs") { $0.reply([.stringDictionary([("router", "yes")])]) },
            ])], introspection: ""))
            c.addFastMethod(path: "/org/example/Fast", interface: "org.example.Fast", member: "Echo", signature: "s") {
                call in
                let argument = call.firstString
                return argument == "decline" ? false : call.reply(string: "fast: " + argument)
            }
            c.addFastMethod(path: "/org/example/Fast", interface: "org.example.Fast", member: "Pairs", signature: "") {
                call in call.reply(stringDictionary: 2) { [("a", "1"), ("b", "a longer value than fifteen bytes")][$0] }
            }
            return c
        }
        defer { q.sync { service.close() } }
        let client = try Connection.open(.address(address))
        defer { client.close() }
        let name = service.uniqueName
        #expect(try call(client, name, interface: "org.example.Fast", "Echo", [.string("hello")]).get()
                == [.string("fast: hello")])
        #expect(try call(client, name, interface: "org.example.Fast", "Echo", [.string("decline")]).get()
                == [.string("router: decline")])
        // No interface header: the router's way (it finds the method in the object's interfaces).
        #expect(try call(client, name, interface: nil, "Echo", [.string("hello")]).get() == [.string("router: hello")])
        // Another signature: the router's InvalidArgs.
        let wrong = try call(client, name, interface: "org.example.Fast", "Echo", [.string("a"), .string("b")])
        #expect(wrong.error?.name == "org.freedesktop.DBus.Error.InvalidArgs")
        let pairs = try call(client, name, interface: "org.example.Fast", "Pairs", []).get()
        #expect(pairs.first?.stringKeyedEntries?.map { "\($0.0)=\($0.1.stringValue ?? "?")" }
                == ["a=1", "b=a longer value than fifteen bytes"])
    }

    /// GetStatus and GetAll on one connection: the first call identifies the caller
    /// (the ordinary way), the later ones come from memory on the fast path, and they
    /// follow a change; an unknown permission still gets its named error.
    @Test func getStatusAndGetAllOnOneConnectionFollowChanges() throws {
        let daemon = try DaemonUnderTest(bus: bus, config: "[location]\nenabled=true\n")
        defer { daemon.stop() }
        let client = try Connection.open(.address(bus.address))
        defer { client.close() }
        func permissions(_ member: String, _ arguments: [DBusValue]) throws -> Result<[DBusValue], BusError> {
            let m = try Message.methodCall(destination: "org.example.Permissions", path: "/org/example/Permissions",
                                           interface: "org.example.Permissions", member: member)
            try m.append(arguments)
            do throws(BusError) {
                return .success(try client.callBlocking(m, timeoutMilliseconds: 10_000).arguments())
            } catch {
                return .failure(error)
            }
        }
        let app = try #require(
            permissions("GetDetails", [.string("location")]).get().first?.stringKeyedEntries?
                .first { $0.0 == "app-id" }?.1.stringValue)
        for _ in 0..<2 {
            #expect(try permissions("GetStatus", [.string("location")]).get() == [.string("not-determined")])
        }
        _ = try permissions("SetDecision", [.string(app), .string("location"), .string("denied")]).get()
        #expect(try permissions("GetStatus", [.string("location")]).get() == [.string("denied")])
        let all = try permissions("GetAll", []).get().first?.stringKeyedEntries?
            .map { "\($0.0)=\($0.1.stringValue ?? "?")" }
        #expect(all == ["location=denied", "notifications=not-determined"])
        let unknown = try permissions("GetStatus", [.string("nosuch")])
        #expect(unknown.error?.name == "org.example.Permissions.Error.UnknownPermission")
        #expect(unknown.error?.message.contains("\"nosuch\"") == true)
    }
}
