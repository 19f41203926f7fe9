// The agent the benchmarks register for their user (request-handles, core).
import DBusKit
import SystemPrimitives
import PermissionsTestSupport

/// A user's agent, on a connection of the bench (root's). Silent (the flooding
/// user's, `answer` nil): it takes every prompt and never answers it, so that every
/// handle waiting for the prompt stays open. Answering (`answer` given, such as
/// "allow-once"): it answers each Ask at once, for the request round trip of
/// `core`. When the daemon cancels a prompt (every
/// requester has gone) it answers the Cancel, and the Ask with "dismiss", which the
/// daemon drops, so that none of the daemon's calls to it stays waiting (they
/// count against root's share of the daemon's calls, outgoing-calls-per-user).
///
/// `@unchecked Sendable`: `held` and the connection are touched only on `queue`;
/// `asks` and `cancels` lock themselves.
final class BenchAgent: @unchecked Sendable {
    static let path = "/bench/Agent"
    private let queue = Queue(label: "bench.agent")
    private var connection: Connection?
    private var held: [String: MethodCall] = [:]
    /// The prompt ids asked, and cancelled, in order.
    let asks = Timeline<String>()
    let cancels = Timeline<String>()

    /// Connects and registers (RegisterAgent is answered after the daemon's check
    /// of the agent, which the queue answers: called from here, answered there).
    init(address: String, answer: String? = nil) {
        let opened: Result<Connection, BusError> = queue.sync {
            do throws(BusError) {
                let c = try Connection.open(.address(address), queue: queue)
                c.export(ExportedObject(path: Self.path, interfaces: [
                    Interface("org.example.Permissions.Agent", methods: [
                        Method("Ask", input: "ssssa{sv}") { [unowned self] call in
                            let id = call.arguments[0].stringValue ?? ""
                            if let answer { return call.reply([.string(answer), .vardict([])]) }
                            held[id] = call
                            asks.record(id)
                        },
                        Method("Cancel", input: "s") { [unowned self] call in
                            call.reply()
                            // The empty id names no prompt: the daemon's check when the agent registers.
                            let id = call.arguments[0].stringValue ?? ""
                            guard !id.isEmpty else { return }
                            held.removeValue(forKey: id)?.reply([.string("dismiss"), .vardict([])])
                            cancels.record(id)
                        },
                    ]),
                ], introspection: ""))
                return .success(c)
            } catch {
                return .failure(error)
            }
        }
        guard case .success(let c) = opened else { fail("cannot connect the agent to the bus") }
        connection = c
        let register = CallTarget("RegisterAgent", destination: "org.example.Permissions",
                                  path: "/org/example/Permissions", interface: "org.example.Permissions",
                                  member: "RegisterAgent", [.objectPath(Self.path)]).message()
        let answered = Timeline<Result<Message, BusError>>()
        queue.async { c.call(register) { answered.record($0) } }
        guard let result = answered.first(from: 0, timeout: 30, { $0 }) else { fail("RegisterAgent got no answer") }
        if case .failure(let error) = result { fail("RegisterAgent failed: \(error)") }
    }

    func close() { queue.sync { connection?.close(); connection = nil } }
}
