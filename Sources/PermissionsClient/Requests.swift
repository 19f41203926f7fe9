import DBusKit
import PermissionsModel
internal import SystemPrimitives

extension PermissionsClient {
    /// Asks for `permission` as this app (`Request`) and returns the answer. When
    /// the status is `not-determined`, the user's agent prompts, and this waits as
    /// long as the user takes: the call has no timeout.
    ///
    /// It is made as `StartRequest`, whose answer comes as its handle's `Response`
    /// signal, so no call waits on the prompt; a service without it gets `Request`.
    ///
    /// Cancelling the calling task cancels the prompt: the request's handle is
    /// closed (`Close`, sent when the handle comes if the task was cancelled
    /// before it did), the service tells the agent `Cancel` and stores nothing, and
    /// this throws `CancellationError` (at once, without asking, if the task was
    /// cancelled already). When the service leaves the bus while this waits,
    /// it throws `.serviceRestarted` and does not ask again (a second request could
    /// prompt twice; ask again if the user still wants to).
    ///
    /// - Parameters:
    ///   - reason: shown in the prompt ("to scan a document"); may be empty.
    /// - Throws: `CancellationError` when the task was cancelled; otherwise a
    ///   `PermissionsClientError`: `.unknownPermission`, `.storageFailed` (the
    ///   user's answer could not be stored), `.serviceRestarted`, `.unavailable`, ….
    public func request(_ permission: Permission, reason: String = "") async throws -> PermissionStatus {
        let reply = try await ask("Request", [.string(permission.rawValue), Self.options(reason)])
        return PermissionStatus(word: reply.first?.stringValue ?? "")
    }

    /// Asks for each of `permissions` in turn, as `request(_:reason:)` does, and
    /// yields each answer as it comes: the next prompt starts only after the
    /// previous one was answered. Ends after the last one, or with the first error
    /// (a `PermissionsClientError`). Cancelling the consuming task (or dropping
    /// the stream) cancels the prompt under way and asks nothing more; the stream
    /// then ends as any cancelled `AsyncThrowingStream` does, without an error.
    public func request(_ permissions: [Permission], reason: String = "")
        -> AsyncThrowingStream<PermissionUpdate, any Error>
    {
        AsyncThrowingStream { continuation in
            let sequence = RequestSequence(client: self, permissions: permissions, options: Self.options(reason),
                                           continuation: continuation)
            continuation.onTermination = { _ in sequence.cancel() }
            sequence.next()
        }
    }

    static func options(_ reason: String) -> DBusValue {
        .vardict(reason.isEmpty ? [] : [("reason", .string(reason))])
    }

    /// One call that may wait for a prompt (see `PendingRequest`), as an async call
    /// whose task's cancellation cancels it (and throws `CancellationError`).
    func ask(_ member: String, _ arguments: [DBusValue]) async throws -> [DBusValue] {
        try Task.checkCancellation()
        let pending = PendingRequest(client: self)
        let outcome = await withTaskCancellationHandler {
            await withCheckedContinuation { done in
                pending.start(member, arguments) { done.resume(returning: $0) }
            }
        } onCancel: {
            pending.cancel()
        }
        switch outcome {
        case .answered(let reply): return reply
        case .failed(let error): throw error
        case .cancelled: throw CancellationError()
        }
    }

    /// An idle request connection, or a new one (a blocking Hello: called off the
    /// caller's task, on a dispatch thread).
    func takeRequestConnection() throws(PermissionsClientError) -> RequestConnection {
        if let idle = idleRequestConnections.withLock({ $0.popLast() }) { return idle }
        return try RequestConnection(bus: bus, timers: timers)
    }
}

/// `request(_:reason:)` for several permissions: one request after another,
/// driven by their callbacks on dispatch queues, so that it needs no task of its
/// own to make progress.
///
/// `@unchecked Sendable`: `state` is behind its lock; the rest is immutable.
final class RequestSequence: @unchecked Sendable {
    private let client: PermissionsClient
    private let permissions: [Permission]
    private let options: DBusValue
    private let continuation: AsyncThrowingStream<PermissionUpdate, any Error>.Continuation
    private struct State: Sendable {
        var next = 0
        var cancelled = false
        var current: PendingRequest?
    }
    private let state = Locked(State())

    init(client: PermissionsClient, permissions: [Permission], options: DBusValue,
         continuation: AsyncThrowingStream<PermissionUpdate, any Error>.Continuation) {
        self.client = client
        self.permissions = permissions
        self.options = options
        self.continuation = continuation
    }

    /// Asks for the next permission, or ends the stream after the last.
    func next() {
        let step = state.withLock { state -> (Permission, PendingRequest)?? in
            guard !state.cancelled else { return .some(nil) }
            guard state.next < permissions.count else { return nil }
            let pending = PendingRequest(client: client)
            state.current = pending
            state.next += 1
            return (permissions[state.next - 1], pending)
        }
        guard let step else { return continuation.finish() }
        guard let (permission, pending) = step else { return }  // cancelled: the stream has ended
        pending.start("Request", [.string(permission.rawValue), options]) { [self] outcome in
            switch outcome {
            case .answered(let reply):
                continuation.yield(PermissionUpdate(permission, PermissionStatus(word: reply.first?.stringValue ?? "")))
                next()
            case .failed(let error):
                continuation.finish(throwing: error)
            case .cancelled:
                continuation.finish()  // the stream was terminated: this changes nothing
            }
        }
    }

    func cancel() {
        state.withLock { state -> PendingRequest? in
            state.cancelled = true
            return state.current
        }?.cancel()
    }
}

/// A connection that requests are sent on, with its own queue.
///
/// `@unchecked Sendable`: `connection`, `closed` and `tokens` are used only on `queue`.
final class RequestConnection: @unchecked Sendable {
    let queue = Queue(label: "permissions-client.request")
    let connection: Connection
    private var closed = false
    /// The last handle_token number used on this connection (PendingRequest).
    var tokens = 0

    init(bus: PermissionsClient.Bus, timers: any Timers) throws(PermissionsClientError) {
        do {
            connection = try Connection.open(bus.dbusKit, queue: queue, timers: timers)
        } catch {
            throw PermissionsClientError(.unavailable, name: error.name, message: "cannot connect to the bus: \(error.message)")
        }
    }

    /// Leaves the bus (on the queue): a prompt still waiting for this connection
    /// alone is cancelled by the service.
    func close() {
        queue.async { self.closeNow() }
    }

    func closeNow() {
        queue.assertCurrent()
        guard !closed else { return }
        closed = true
        connection.close()
    }
}

/// One request under way: its reply, the service leaving, or a cancellation,
/// whichever comes first, ends it once. It takes a request connection (an idle one
/// or a new one) and gives it back when the call was answered; otherwise
/// (cancelled, service gone) it closes it, which is what tells the service that
/// nobody waits any more. Everything runs on dispatch queues.
///
/// How one request ended.
enum RequestOutcome: Sendable {
    /// The reply's arguments.
    case answered([DBusValue])
    case failed(PermissionsClientError)
    /// Its task was cancelled (or its stream dropped).
    case cancelled
}

/// `@unchecked Sendable`: `shared` is behind its lock; `done` is set, and every
/// other `var` (`finished`, the watches, `handle`, `startInFlight`,
/// `closeWhenStarted`) used, only on the link's queue, where the connection's
/// replies and signals and `cancel`'s finish run.
final class PendingRequest: @unchecked Sendable {
    typealias Done = @Sendable (RequestOutcome) -> Void
    private let client: PermissionsClient
    private struct Shared: Sendable {
        var cancelled = false
        var link: RequestConnection?
    }
    private let shared = Locked(Shared())
    private var done: Done?
    private var finished = false
    private var ownerWatch: Int?
    /// A StartRequest's Response subscription, and its handle once the reply came
    /// (path, service): what Close is sent to when the task is cancelled.
    private var responseWatch: Int?
    private var handle: (path: String, service: String)?
    /// A StartRequest sent and not yet answered; and a cancellation that came
    /// meanwhile, whose Close waits for the handle the reply brings.
    private var startInFlight = false
    private var closeWhenStarted = false
    /// The handle tokens of this request's connection: one request at a time uses
    /// it, and a number never comes back, so no token is ever in use twice.
    private var nextToken: Int {
        get { link.map { $0.tokens } ?? 0 }
        set { link?.tokens = newValue }
    }
    private var link: RequestConnection? { shared.withLock { $0.link } }

    init(client: PermissionsClient) { self.client = client }

    /// Sends `member` and calls `done` once with the answer or the error.
    func start(_ member: String, _ arguments: [DBusValue], done: @escaping Done) {
        // Taking a connection may connect (a blocking Hello): never on the app's
        // shared global queue, where it would hold back what the app queued there.
        Queue.runOnItsOwn(label: "permissions-client.request-start") { [self] in
            if shared.withLock({ $0.cancelled }) { return done(.cancelled) }
            let link: RequestConnection
            do throws(PermissionsClientError) {
                link = try client.takeRequestConnection()
            } catch {
                return done(.failed(error))
            }
            shared.withLock { $0.link = link }
            link.queue.async { [self] in
                self.done = done
                if shared.withLock({ $0.cancelled }) { return finish(link, .cancelled) }
                send(member, arguments, on: link)
            }
        }
    }

    /// Watches the service's owner, asks for it, and sends the call to that unique
    /// name: a call queued for a daemon that has since left is never delivered
    /// to the next one.
    private func send(_ member: String, _ arguments: [DBusValue], on link: RequestConnection) {
        let connection = link.connection
        var owner: String?
        ownerWatch = connection.subscribe(
            SignalMatch(sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus",
                        member: "NameOwnerChanged", arg0: BusNames.busName),
            added: { [self] error in if let error { finish(link, .failed(PermissionsClientError(error))) } }
        ) { [self] message in
            let args = message.arguments()
            guard args.count == 3, let old = args[1].stringValue, let new = args[2].stringValue else { return }
            if let owner, old == owner { return finish(link, .failed(.serviceLeft(owner))) }
            if owner == nil, old.isEmpty, !new.isEmpty { owner = new }  // started by activation
        }
        connection.callBus("GetNameOwner", [.string(BusNames.busName)]) { [self] result in
            // Not running: the well-known name, so that the bus may start it (D-Bus
            // activation); its owner then comes in NameOwnerChanged.
            if case .failure(let error) = result, error.name != BusError.nameHasNoOwner {
                return finish(link, .failed(error))
            }
            if case .success(let reply) = result { owner = reply.first?.stringValue }
            guard member == "Request" else { return callBlocking(member, arguments, owner: owner, on: link) }
            startRequest(arguments, owner: { owner }, on: link)
        }
    }

    /// The call itself, waiting for the reply; DBUS_TIMEOUT_INFINITE: a prompt
    /// takes as long as the user does. What an older service without StartRequest gets.
    private func callBlocking(_ member: String, _ arguments: [DBusValue], owner: String?, on link: RequestConnection) {
        link.connection.callService(member, arguments, destination: owner ?? BusNames.busName,
                                    timeout: Int32.max) { [self] result in
            switch result {
            case .success(let reply): finish(link, .answered(reply))
            case .failure(let error): finish(link, .failed(error))
            }
        }
    }

    /// A Request (permission, options) made as StartRequest: the handle at once,
    /// the answer in its Response, so that no call waits on the prompt. Its
    /// Response is subscribed to before the call when the service's owner is
    /// known, else (D-Bus activation) in the reply's handler, which runs before the
    /// Response is dispatched (both come on this connection's queue, in order).
    /// An older service without StartRequest (UnknownMethod) gets Request.
    private func startRequest(_ arguments: [DBusValue], owner: @escaping () -> String?, on link: RequestConnection) {
        let connection = link.connection
        let permission = arguments[0].stringValue ?? ""
        nextToken += 1
        let token = "swift\(nextToken)"
        let path = RequestHandlePath.path(sender: connection.uniqueName, token: token)
        var options = arguments[1].stringKeyedEntries ?? []
        options.append(("handle_token", .variant(.string(token))))
        func subscribe(_ sender: String) {
            responseWatch = connection.subscribe(
                .unicast(to: connection.uniqueName, sender: sender, path: path,
                         interface: BusNames.requestHandleInterfaceName, member: "Response")
            ) { [self] message in
                handle = nil
                finish(link, Self.outcome(of: message, permission))
            }
        }
        if let owner = owner() { subscribe(owner) }
        startInFlight = true
        connection.callService("StartRequest", [.strings([permission]), .dictionary(
            keySignature: "s", valueSignature: "v", options.map { DBusValue.DictEntry(.string($0.0), $0.1) })],
                               // Answered at once; no timeout all the same, so that no
                               // clock (a busy machine, a test's) can give up on it.
                               destination: owner() ?? BusNames.busName, timeout: Int32.max) { [self] result in
            startInFlight = false
            if closeWhenStarted {
                // Cancelled before the handle came (the task has thrown already): the
                // handle is closed now, as it would have been then.
                guard case .success = result else { return link.closeNow() }
                return closeHandle((path, owner() ?? BusNames.busName), on: link)
            }
            switch result {
            case .success:
                guard !finished else { return }
                handle = (path, owner() ?? BusNames.busName)
                if responseWatch == nil, let owner = owner() { subscribe(owner) }
            case .failure(let error) where error.name == BusError.unknownMethod:
                if let responseWatch { connection.unsubscribe(responseWatch) }
                responseWatch = nil
                callBlocking("Request", arguments, owner: owner(), on: link)
            case .failure(let error):
                finish(link, .failed(error))
            }
        }
    }

    /// A Response as Request's reply: the permission's status; its error, if it
    /// failed (StorageFailed, Cancelled). A dismissal or a timeout answers the
    /// status unchanged, as Request does.
    private static func outcome(of response: Message, _ permission: String) -> RequestOutcome {
        let args = response.arguments()
        let results = Dictionary((args.count == 2 ? args[1].stringKeyedEntries : nil) ?? [],
                                 uniquingKeysWith: { a, _ in a })
        if case .variant(.string(let name))? = results["error"] {
            let message = if case .variant(.string(let text))? = results["message"] { text } else { "" }
            return .failed(PermissionsClientError(name: name, message: message))
        }
        let statuses = results["statuses"].flatMap { value -> [(String, DBusValue)]? in
            if case .variant(let inner) = value { return inner.stringKeyedEntries }
            return value.stringKeyedEntries
        } ?? []
        let status = statuses.first { $0.0 == permission }?.1.stringValue ?? ""
        return .answered([.string(status)])
    }

    func cancel() {
        let link = shared.withLock { shared -> RequestConnection? in
            shared.cancelled = true
            return shared.link
        }
        // Without a link yet, `start` sees the flag.
        link?.queue.async { [self] in finish(link!, .cancelled) }
    }

    private func finish(_ link: RequestConnection, _ outcome: RequestOutcome) {
        guard let done, !finished else { return }
        finished = true
        if let responseWatch { link.connection.unsubscribe(responseWatch) }
        responseWatch = nil
        if case .cancelled = outcome, let handle {
            // Close, then the connection is idle again: the service cancels the
            // prompt unless another request waits for it, and stores nothing.
            self.handle = nil
            closeHandle(handle, on: link)
        } else if case .cancelled = outcome, startInFlight {
            // Its handle is on its way: Close it when it comes (startRequest), rather
            // than leave the bus, so that the service is told the same way either way.
            closeWhenStarted = true
        } else if case .answered = outcome {
            if let ownerWatch { link.connection.unsubscribe(ownerWatch) }
            client.idleRequestConnections.withLock { $0.append(link) }
        } else {
            link.closeNow()
        }
        done(outcome)
    }

    /// Sends Close to an open handle; the connection goes back to the idle ones
    /// once it is answered, or leaves the bus (which closes it too) if it is not.
    private func closeHandle(_ handle: (path: String, service: String), on link: RequestConnection) {
        guard let message = try? Message.methodCall(destination: handle.service, path: handle.path,
                                                    interface: BusNames.requestHandleInterfaceName, member: "Close")
        else { return link.closeNow() }
        link.connection.call(message) { [self] result in
            guard case .success = result else { return link.closeNow() }
            if let ownerWatch { link.connection.unsubscribe(ownerWatch) }
            client.idleRequestConnections.withLock { $0.append(link) }
        }
    }
}
