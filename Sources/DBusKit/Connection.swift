internal import CDBus
public import SystemPrimitives

/// Which bus to connect to.
public enum Bus: Sendable, Equatable {
    case session
    case system
    /// A bus daemon's address, as `dbus-daemon --print-address` prints it.
    case address(String)
}

/// A private connection to a D-Bus bus daemon, through libdbus.
///
/// Two ways to use it:
/// - attached to a serial `Queue` (`open(_:queue:)` with a queue): libdbus's
///   file descriptors and timeouts become dispatch sources on that queue, incoming
///   method calls and signals are routed to exported objects and subscriptions, and
///   `call(…reply:)` never blocks. Every use of the connection must then happen on
///   that queue; the methods check it with `Queue.assertCurrent`.
/// - unattached (no queue), for command-line clients: `callBlocking` sends and waits.
///
/// `@unchecked Sendable`: all mutable state (objects, subscriptions, the libdbus
/// connection itself) is touched only on `queue` (checked), or, unattached, only by
/// the one thread that opened it.
public final class Connection: @unchecked Sendable {
    let raw: OpaquePointer
    /// The queue every use of an attached connection happens on.
    public let queue: Queue
    let attached: Bool
    public let uniqueName: String

    private var objects: [String: ExportedObject] = [:]
    private var subscriptions: [Int: Subscription] = [:]
    /// Methods answered before the router, when they can be (FastPath.swift).
    var fastMethods: [FastMethod] = []
    private var nextSubscriptionID = 0
    /// Called once if the bus daemon closes the connection, or when the connection
    /// can no longer be served (then `failure` says why).
    public var onDisconnect: (() -> Void)?
    /// Errors that have no caller to go back to, for the owner to log: a match rule
    /// the bus refused, a reply that could not be queued, the I/O thread backing
    /// off. On the queue (attached), or inside the call that failed (unattached).
    public var onError: ((BusError) -> Void)?
    /// Why the connection stopped being served, when it was not the bus that closed
    /// it (its I/O thread could not poll, say). Set before `onDisconnect` runs.
    public private(set) var failure: BusError?
    /// What arms the timers of libdbus's timeouts (MainLoop.swift).
    let timers: any Timers
    /// Serves the socket of an attached connection.
    var ioThread: IOThread?
    /// Limits on the arguments of the method calls routed to exported objects,
    /// checked before they are decoded (ArgumentLimits.swift); nil: none.
    public var argumentLimits: ArgumentLimits?

    struct Subscription {
        let match: SignalMatch
        let rule: MatchRule
        let handler: (Message) -> Void
    }

    /// Connects and says Hello: the one blocking round trip, at start-up. With a
    /// queue, call it on that queue (or before the queue runs anything else).
    public static func open(_ bus: Bus, queue: Queue? = nil) throws(BusError) -> Connection {
        try open(connect(bus), queue: queue, timers: DispatchTimers())
    }

    /// `open(_:queue:)` with libdbus's timeouts (a call's reply timeout among them)
    /// armed on `timers`: a test's `ManualClock` makes them expire when the test
    /// says, not when the machine's clock does.
    package static func open(_ bus: Bus, queue: Queue?, timers: any Timers) throws(BusError) -> Connection {
        try open(connect(bus), queue: queue, timers: timers)
    }

    /// A connection that has said Hello and is not served yet: what `connect` makes
    /// on any thread, for `open(_:queue:)` to attach on the queue. Nothing is read
    /// from its socket until then: what the bus sends meanwhile (NameAcquired)
    /// waits in the socket, and is routed after the owner's handlers are set.
    ///
    /// `@unchecked Sendable`: the libdbus connection is used by one thread at a
    /// time, the one that connects and then the one that opens (or drops) it; the
    /// hand-over between them goes through a queue, which orders the two.
    public final class Connected: @unchecked Sendable {
        fileprivate var raw: OpaquePointer?

        fileprivate init(_ raw: OpaquePointer) { self.raw = raw }

        /// Taken by `open`; a connection never opened is closed here.
        fileprivate func take() -> OpaquePointer {
            defer { raw = nil }
            return raw!
        }

        deinit {
            guard let raw else { return }
            dbus_connection_close(raw)
            dbus_connection_unref(raw)
        }
    }

    /// Connects to `bus` and says Hello, blocking; on any thread. The daemon does
    /// this beside the opening of its store, off the serving queue
    /// (doc/performance.md, "Start-up's own work, counted").
    public static func connect(_ bus: Bus) throws(BusError) -> Connected {
        guard dbus_threads_init_default() != 0 else {
            throw BusError(BusError.noMemory, "out of memory initialising libdbus's threads")
        }
        let error = CError()
        let raw: OpaquePointer?
        switch bus {
        case .session: raw = dbus_bus_get_private(DBUS_BUS_SESSION, &error.raw)
        case .system: raw = dbus_bus_get_private(DBUS_BUS_SYSTEM, &error.raw)
        case .address(let address):
            raw = dbus_connection_open_private(address, &error.raw)
            if let raw, dbus_bus_register(raw, &error.raw) == 0 {
                dbus_connection_close(raw)
                dbus_connection_unref(raw)
                throw error.busError
            }
        }
        guard let raw else { throw error.busError }
        dbus_connection_set_exit_on_disconnect(raw, 0)
        return Connected(raw)
    }

    /// Serves a `connect`ed connection: attached to `queue`, call it on that queue
    /// (or before the queue runs anything else); without one, it is for blocking
    /// calls.
    public static func open(_ connected: Connected, queue: Queue? = nil) throws(BusError) -> Connection {
        try open(connected, queue: queue, timers: DispatchTimers())
    }

    private static func open(_ connected: Connected, queue: Queue?, timers: any Timers) throws(BusError) -> Connection {
        let connection = Connection(raw: connected.take(), queue: queue, timers: timers)
        // Call from the queue itself, or before anything else uses the connection:
        // from here on, libdbus calls our watch functions, which touch queue state.
        // On failure the connection goes here, and deinit closes it.
        if queue != nil { try connection.attach() }
        return connection
    }

    private init(raw: OpaquePointer, queue: Queue?, timers: any Timers) {
        self.raw = raw
        self.timers = timers
        self.attached = queue != nil
        self.queue = queue ?? Queue(label: "dbus.unattached")
        self.uniqueName = dbus_bus_get_unique_name(raw).map { String(cString: $0) } ?? ""
    }

    /// Each libdbus call here fails only for want of memory, and a connection missing
    /// any of them would never be served: then opening fails.
    private func attach() throws(BusError) {
        let me = Unmanaged.passUnretained(self).toOpaque()
        try installFilter()
        let thread = IOThread(connection: self)
        ioThread = thread
        guard dbus_connection_set_watch_functions(raw, ioAddWatch, ioRemoveWatch, ioToggleWatch, me, nil) != 0 else {
            throw BusError(BusError.noMemory, "out of memory setting the connection's watch functions")
        }
        thread.start()
        guard dbus_connection_set_timeout_functions(raw, mainLoopAddTimeout, mainLoopRemoveTimeout,
                                                    mainLoopToggleTimeout, me, nil) != 0
        else {
            throw BusError(BusError.noMemory, "out of memory setting the connection's timeout functions")
        }
        dbus_connection_set_dispatch_status_function(raw, mainLoopDispatchStatusChanged, me, nil)
        queue.async { self.dispatchPending() }  // messages that arrived during Hello
    }

    /// The routing filter. Peer calls (Ping, GetMachineId) come to it too, instead of
    /// being answered inside libdbus, which never checks their arguments.
    private func installFilter() throws(BusError) {
        guard dbus_connection_add_filter(raw, connectionFilter, Unmanaged.passUnretained(self).toOpaque(), nil) != 0
        else {
            throw BusError(BusError.noMemory, "out of memory adding the connection's filter")
        }
        dbus_connection_set_route_peer_messages(raw, 1)
    }

    /// Takes libdbus's watch, timeout and dispatch functions away again. Removing
    /// them cannot fail (libdbus only allocates when it adds a watch or timeout), so
    /// the results are not looked at.
    private func removeMainLoopFunctions() {
        _ = dbus_connection_set_watch_functions(raw, nil, nil, nil, nil, nil)
        _ = dbus_connection_set_timeout_functions(raw, nil, nil, nil, nil, nil)
        dbus_connection_set_dispatch_status_function(raw, nil, nil, nil)
    }

    /// Closes the connection (on its queue, when attached). The object must not
    /// be used afterwards.
    public func close() {
        assertOnQueue()
        if attached {
            ioThread?.stop()
            removeMainLoopFunctions()
        }
        dbus_connection_close(raw)
    }

    /// The I/O thread cannot serve the connection any more: disconnect it the way a
    /// bus that went away would, so that pending calls fail and `onDisconnect` runs.
    func servingFailed(_ error: BusError) {
        assertOnQueue()
        guard failure == nil, dbus_connection_get_is_connected(raw) != 0 else { return }
        failure = error
        ioThread?.stop()
        removeMainLoopFunctions()
        dbus_connection_close(raw)
        // A closed connection queues libdbus's Disconnected message, which the filter
        // turns into `onDisconnect`.
        dispatchPending()
    }

    /// libdbus aborts when the last reference to an open private connection goes,
    /// so a connection nobody closed is closed here. Nothing else can use it now;
    /// removing the watch functions first cancels our dispatch sources.
    deinit {
        ioThread?.stop()
        if dbus_connection_get_is_connected(raw) != 0 {
            if attached { removeMainLoopFunctions() }
            dbus_connection_close(raw)
        }
        dbus_connection_unref(raw)
    }

    /// Whether the connection is still open: false once the bus closed it (or it
    /// was closed here), even before `onDisconnect` ran.
    public var isConnected: Bool {
        assertOnQueue()
        return dbus_connection_get_is_connected(raw) != 0
    }

    /// Runs `body` later on the connection's queue. `body` need not be `Sendable`:
    /// it is created on the queue and runs on the same queue, never concurrently.
    public func async(_ body: @escaping () -> Void) {
        let confined = QueueConfined(body)
        queue.async { confined.value() }
    }

    func assertOnQueue() {
        if attached { queue.assertCurrent() }
    }

    /// Drains libdbus's incoming queue, running filters and handlers.
    func dispatchPending() {
        while dbus_connection_get_dispatch_status(raw) == DBUS_DISPATCH_DATA_REMAINS {
            _ = dbus_connection_dispatch(raw)
        }
    }

    // MARK: Names

    public enum RequestNameResult: Sendable { case primaryOwner, inQueue, exists, alreadyOwner }

    /// Asks the bus for a well-known name without queueing: fails if it is taken.
    public func requestName(_ name: String) throws(BusError) -> RequestNameResult {
        assertOnQueue()
        try BusName.validate(name)
        let error = CError()
        let r = dbus_bus_request_name(raw, name, UInt32(DBUS_NAME_FLAG_DO_NOT_QUEUE), &error.raw)
        if r < 0 { throw error.busError }
        switch r {
        case DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER: return .primaryOwner
        case DBUS_REQUEST_NAME_REPLY_IN_QUEUE: return .inQueue
        case DBUS_REQUEST_NAME_REPLY_ALREADY_OWNER: return .alreadyOwner
        default: return .exists
        }
    }

    // MARK: Sending

    /// Queues a message; libdbus writes it when the socket is writable. Throws
    /// `NoMemory` when libdbus could not queue it (on a closed connection libdbus
    /// drops the message without an error, as the peer is gone).
    public func send(_ message: Message) throws(BusError) {
        assertOnQueue()
        guard dbus_connection_send(raw, message.raw, nil) != 0 else {
            throw BusError(BusError.noMemory, "out of memory queueing a message")
        }
    }

    /// Hands an error with no caller to go back to to `onError`.
    func report(_ error: BusError) {
        onError?(error)
    }

    /// Writes everything queued for sending, waiting for the socket: for shutdown only.
    public func flush() {
        assertOnQueue()
        dbus_connection_flush(raw)
    }

    /// Sends a method call; `reply` runs on the queue with the reply or the error
    /// (including `NoReply` after `timeoutMilliseconds`).
    public func call(_ message: Message, timeoutMilliseconds: Int32 = 25_000,
                     reply: @escaping (Result<Message, BusError>) -> Void) {
        assertOnQueue()
        var pending: OpaquePointer? = nil
        guard dbus_connection_send_with_reply(raw, message.raw, &pending, timeoutMilliseconds) != 0 else {
            let member = message.member ?? ""
            async { reply(.failure(BusError(BusError.noMemory, "out of memory sending \(member)"))) }
            return
        }
        guard let pending else {
            async { reply(.failure(BusError(BusError.disconnected, "not connected"))) }
            return
        }
        let box = Unmanaged.passRetained(ReplyBox(reply))
        guard dbus_pending_call_set_notify(pending, pendingCallNotify, box.toOpaque(), releaseReplyBox) != 0 else {
            // libdbus kept neither the function nor the box: without them the reply
            // would go nowhere, so the call is abandoned and the caller told.
            dbus_pending_call_cancel(pending)
            dbus_pending_call_unref(pending)
            box.release()
            let member = message.member ?? ""
            async { reply(.failure(BusError(BusError.noMemory, "out of memory waiting for the reply to \(member)"))) }
            return
        }
        // The reply may have arrived before the notify function was set.
        if dbus_pending_call_get_completed(pending) != 0 { pendingCallNotify(pending, box.toOpaque()) }
        dbus_pending_call_unref(pending)
    }

    /// Sends a method call and waits for the reply. For unattached connections
    /// (command-line clients) only: an attached daemon must never wait on a peer.
    public func callBlocking(_ message: Message, timeoutMilliseconds: Int32 = 25_000) throws(BusError) -> Message {
        precondition(!attached, "callBlocking on a connection attached to a queue")
        let error = CError()
        guard let reply = dbus_connection_send_with_reply_and_block(raw, message.raw, timeoutMilliseconds,
                                                                    &error.raw)
        else { throw error.busError }
        return Message(owning: reply)
    }

    /// Unattached connections: waits up to `timeoutMilliseconds` for input and
    /// dispatches it (-1 waits forever). Returns false once disconnected.
    public func readWriteDispatch(timeoutMilliseconds: Int32) -> Bool {
        precondition(!attached)
        return dbus_connection_read_write_dispatch(raw, timeoutMilliseconds) != 0
    }

    /// Unattached connections: installs the routing filter so `subscribe` and
    /// exported objects work with `readWriteDispatch`.
    public func enableRouting() throws(BusError) {
        precondition(!attached)
        try installFilter()
    }

    /// Sends a signal from an exported path.
    public func emitSignal(path: String, interface: String, member: String,
                           _ arguments: [DBusValue]) throws(BusError) {
        let message = try Message.signal(path: path, interface: interface, member: member)
        try message.append(arguments)
        try send(message)
    }

    // MARK: Signals

    /// Adds a match rule on the bus and calls `handler` for every signal matching it.
    ///
    /// Attached, the rule is added without waiting: `added` runs later on the queue
    /// with nil once the bus has accepted the rule, or with the error (a refused rule
    /// is also taken off again). Unattached, it waits for the bus and `added` runs
    /// before this returns. Without `added`, a failure goes to `onError`.
    @discardableResult
    public func subscribe(_ match: SignalMatch, added: ((BusError?) -> Void)? = nil,
                          handler: @escaping (Message) -> Void) -> Int {
        assertOnQueue()
        nextSubscriptionID += 1
        let id = nextSubscriptionID
        let done: (BusError?) -> Void = { [weak self] error in
            if error != nil { self?.subscriptions[id] = nil }
            if let added { return added(error) }
            if let error { self?.report(error) }
        }
        let rule: MatchRule
        do {
            rule = try match.rule()
        } catch {
            if attached { async { done(error) } } else { done(error) }
            return id
        }
        subscriptions[id] = Subscription(match: match, rule: rule, handler: handler)
        callBusDriver("AddMatch", rule, done: done)
        return id
    }

    public func unsubscribe(_ id: Int) {
        assertOnQueue()
        guard let sub = subscriptions.removeValue(forKey: id) else { return }
        callBusDriver("RemoveMatch", sub.rule) { [weak self] error in
            if let error { self?.report(error) }
        }
    }

    /// AddMatch or RemoveMatch: attached, as a call whose reply comes later;
    /// unattached, through libdbus, waiting for the bus.
    private func callBusDriver(_ member: String, _ rule: MatchRule, done: @escaping (BusError?) -> Void) {
        guard attached else {
            let error = CError()
            if member == "AddMatch" {
                dbus_bus_add_match(raw, rule.text, &error.raw)
            } else {
                dbus_bus_remove_match(raw, rule.text, &error.raw)
            }
            return done(error.isSet ? error.busError : nil)
        }
        do {
            let message = try Message.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                                 interface: "org.freedesktop.DBus", member: member)
            try message.append(.string(rule.text))
            call(message) { result in
                if case .failure(let error) = result {
                    done(BusError(error.name, "\(member) \(rule.text.escapedForMessage): \(error.message)"))
                } else {
                    done(nil)
                }
            }
        } catch {
            async { done(error) }
        }
    }

    // MARK: Objects

    public func export(_ object: ExportedObject) {
        assertOnQueue()
        objects[object.path] = object
    }

    /// Removes the object at `path`: calls to it get UnknownObject from now on.
    public func unexport(path: String) {
        assertOnQueue()
        objects[path] = nil
    }

    /// Called by the filter for every incoming message; true if we handled it.
    func route(_ message: Message) -> Bool {
        switch message.kind {
        case .signal:
            if message.interface == "org.freedesktop.DBus.Local", message.member == "Disconnected" {
                let handler = onDisconnect
                onDisconnect = nil
                handler?()
                return true
            }
            for sub in subscriptions.values where sub.match.matches(message) { sub.handler(message) }
            return false
        case .methodCall:
            ObjectRouter.dispatch(message, objects: objects, connection: self)
            return true
        default:
            return false
        }
    }
}

/// A signal match rule, both sent to the bus (`AddMatch`) and checked locally,
/// since one connection receives the signals of every rule it added.
public struct SignalMatch: Sendable {
    public var sender: String?
    public var path: String?
    public var interface: String?
    public var member: String?
    public var arg0: String?
    /// The unique name of this connection, for a signal sent to it alone (a
    /// service's per-subscriber stream); nil for broadcasts.
    public var destination: String?

    public init(sender: String? = nil, path: String? = nil, interface: String? = nil,
                member: String? = nil, arg0: String? = nil) {
        self.sender = sender
        self.path = path
        self.interface = interface
        self.member = member
        self.arg0 = arg0
    }

    /// A match for signals addressed to this connection alone. The bus delivers
    /// those whatever the match rules; any peer may send one, so the sender must be
    /// the unique name of the peer trusted (e.g. a service's current owner).
    public static func unicast(to destination: String, sender: String, path: String? = nil,
                               interface: String? = nil, member: String? = nil) -> SignalMatch {
        var match = SignalMatch(sender: sender, path: path, interface: interface, member: member)
        match.destination = destination
        return match
    }

    /// The rule for the bus daemon; fails only for a value with a NUL byte.
    func rule() throws(BusError) -> MatchRule {
        try MatchRule(["type": "signal", "sender": sender, "path": path, "interface": interface, "member": member,
                       "arg0": arg0, "destination": destination])
    }

    /// `sender` is compared when it is a unique name or the bus driver
    /// (org.freedesktop.DBus, the one well-known name messages carry as sender);
    /// other well-known names cannot be checked here and need the caller's own
    /// check of the owner's unique name. Signals addressed to us alone
    /// (a destination set) are taken only by a `unicast` match, whose sender is a
    /// unique name: any peer can send a unicast signal that looks like a broadcast.
    func matches(_ message: Message) -> Bool {
        if message.destination != destination { return false }
        if destination != nil, sender?.hasPrefix(":") != true { return false }
        if let sender, sender.hasPrefix(":") || sender == "org.freedesktop.DBus", message.sender != sender {
            return false
        }
        if let path, message.path != path { return false }
        if let interface, message.interface != interface { return false }
        if let member, message.member != member { return false }
        if let arg0, message.arguments().first?.stringValue != arg0 { return false }
        return true
    }
}
