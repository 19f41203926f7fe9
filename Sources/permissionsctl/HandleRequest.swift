import DBusKit
import Glibc
import PermissionsModel
internal import SystemPrimitives

/// `permissionsctl request`: one StartRequest, then its handle's Response. No call
/// waits on the prompt, so no method-call timeout can give up on a user who takes
/// their time. The Response is unicast to this connection alone, and this
/// connection leaving the bus closes the request: the answer has to be waited for
/// here, on the connection that asked.
///
/// Ctrl-C (SIGINT) sends Close, so the agent closes the prompt and nothing is
/// stored, before the command exits.
///
/// `@unchecked Sendable`: every mutable property is touched only on `queue`.
final class HandleRequest: @unchecked Sendable {
    enum Outcome: Sendable {
        /// The handle's Response: its code (0 answered, 1 dismissed, 2 ended
        /// otherwise) and its results.
        case response(UInt32, [(String, DBusValue)])
        case failed(BusError)
        /// Ctrl-C: the handle was closed (or the request never got one).
        case interrupted
        /// A service older than interface version 3: no StartRequest.
        case noStartRequest
    }

    /// One request per connection, so one fixed token never meets one still open.
    static let token = "permissionsctl"
    let queue = Queue(label: "permissionsctl.request")
    let connection: Connection
    let path: String
    /// The service's unique name: the one sender whose Response counts (any peer
    /// can send a unicast signal), and where Close goes.
    private var owner: String?
    private var responseWatch: Int?
    private var interruptSource: SignalSource?
    private var closing = false
    private var done: ((Outcome) -> Void)?

    init(bus: Bus) throws(BusError) {
        connection = try Connection.open(bus, queue: queue)
        path = RequestHandlePath.path(sender: connection.uniqueName, token: Self.token)
    }

    /// Asks for `permissions` and waits for how the request ended.
    func run(_ permissions: [String], options: [(String, DBusValue)]) -> Outcome {
        let result = Locked<Outcome?>(nil)
        let finished = Semaphore(value: 0)
        queue.async { [self] in
            done = { outcome in
                result.withLock { $0 = outcome }
                finished.signal()
            }
            start(permissions, options)
        }
        finished.wait()
        return result.withLock { $0 }!
    }

    private func start(_ permissions: [String], _ options: [(String, DBusValue)]) {
        // Ignored as a signal, taken as an event on the queue: the handle is closed
        // on the connection's own queue, in order with everything else sent on it.
        signal(SIGINT, SIG_IGN)
        let source = SignalSource(signal: SIGINT, queue: queue)
        source.setEventHandler { [unowned self] in interrupt() }
        source.resume()
        interruptSource = source
        connection.onDisconnect = { [unowned self] in
            finish(.failed(BusError(BusError.disconnected, "the bus closed the connection before the answer came")))
        }
        // The service leaving before the Response: none will come. A service that
        // D-Bus activation starts shows up here first (no owner before).
        connection.subscribe(SignalMatch(sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus",
                                         member: "NameOwnerChanged", arg0: BusNames.busName)) { [unowned self] message in
            let args = message.arguments()
            guard args.count == 3, let old = args[1].stringValue, let new = args[2].stringValue else { return }
            if let owner, old == owner {
                return finish(.failed(BusError(BusError.noReply, "the service left the bus before it answered")))
            }
            if owner == nil, old.isEmpty, !new.isEmpty { subscribeResponse(from: new) }
        }
        callBus("GetNameOwner", [.string(BusNames.busName)]) { [unowned self] result in
            switch result {
            case .success(let reply): if let name = reply.arguments().first?.stringValue { subscribeResponse(from: name) }
            // Not running: StartRequest goes to the well-known name, so that the bus
            // may start the service; its owner comes with NameOwnerChanged or the reply.
            case .failure(let error) where error.name == BusError.nameHasNoOwner: break
            case .failure(let error): return finish(.failed(error))
            }
            startRequest(permissions, options)
        }
    }

    /// Subscribed to before StartRequest is sent whenever the owner is known, as
    /// the interface asks: a Response may follow the reply at once. (Unicast, it is
    /// delivered whatever the match rules; the rule is for the pattern's sake, and
    /// the local filter is what checks the sender.)
    private func subscribeResponse(from sender: String) {
        guard owner == nil else { return }
        owner = sender
        responseWatch = connection.subscribe(
            .unicast(to: connection.uniqueName, sender: sender, path: path,
                     interface: BusNames.requestHandleInterfaceName, member: "Response")
        ) { [unowned self] message in
            let args = message.arguments()
            finish(.response(args.first?.uint32Value ?? 2, (args.count == 2 ? args[1].stringKeyedEntries : nil) ?? []))
        }
    }

    private func startRequest(_ permissions: [String], _ options: [(String, DBusValue)]) {
        let entries = (options + [("handle_token", .string(Self.token))]).map {
            DBusValue.DictEntry(.string($0.0), .variant($0.1))
        }
        do {
            let message = try Message.methodCall(destination: owner ?? BusNames.busName, path: BusNames.objectPath,
                                                 interface: BusNames.interfaceName, member: "StartRequest")
            try message.append(.strings(permissions), .dictionary(keySignature: "s", valueSignature: "v", entries))
            // Answered at once; no timeout all the same, so that a busy machine
            // cannot make a request that was made look like one that failed.
            connection.call(message, timeoutMilliseconds: Client.noTimeout) { [unowned self] result in
                switch result {
                case .success(let reply):
                    // Under D-Bus activation the reply may be the first word from
                    // the owner; it is dispatched before the Response that follows it.
                    if let sender = reply.sender { subscribeResponse(from: sender) }
                case .failure(let error) where error.name == BusError.unknownMethod:
                    finish(.noStartRequest)
                case .failure(let error):
                    finish(.failed(error))
                }
            }
        } catch {
            finish(.failed(error))
        }
    }

    /// Close, whether or not the handle exists yet: a StartRequest the service has
    /// not answered makes Close fail (UnknownObject), and then this connection
    /// leaving the bus, as the command exits, closes the request all the same.
    /// A second Ctrl-C does not wait for Close's reply.
    private func interrupt() {
        guard !closing else { return finish(.interrupted) }
        closing = true
        guard let close = try? Message.methodCall(destination: owner ?? BusNames.busName, path: path,
                                                  interface: BusNames.requestHandleInterfaceName, member: "Close")
        else { return finish(.interrupted) }
        connection.call(close) { [unowned self] _ in finish(.interrupted) }
    }

    private func finish(_ outcome: Outcome) {
        guard let done else { return }
        self.done = nil
        if let responseWatch { connection.unsubscribe(responseWatch) }
        responseWatch = nil
        done(outcome)
    }

    private func callBus(_ member: String, _ arguments: [DBusValue], reply: @escaping (Result<Message, BusError>) -> Void) {
        do {
            let message = try Message.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                                 interface: "org.freedesktop.DBus", member: member)
            try message.append(arguments)
            connection.call(message, reply: reply)
        } catch {
            reply(.failure(error))
        }
    }
}
