import DBusKit
import PermissionsModel
internal import SystemPrimitives

extension PermissionsClient {
    /// This app's status of `permission`: the current one first, then each real
    /// change, for as long as the stream is consumed. Changes are this app's own
    /// (its decisions, for this user) and the everyone-level ones (a device
    /// appearing, an administrator's switch); never another app's or another
    /// user's. The same status never comes twice in a row. A permission the
    /// service does not know (or no longer knows) reads `unsupported`.
    ///
    /// The service need not be running: when it is not on the bus, the stream
    /// asks the bus to start it (D-Bus activation, `StartServiceByName`), as any
    /// call would. While the service is not on the bus (not installed, or
    /// stopped after the stream began), nothing comes and `currentStatus` is nil;
    /// when it comes back (a restart), the status is read again and yielded only
    /// if it differs from the last one yielded. A missed signal (a gap in the
    /// serials) is handled the same way.
    ///
    /// The stream ends when the consuming task is cancelled (or the stream is
    /// dropped), and when the client goes away. It ends with a
    /// `PermissionsClientError` whose code is `.disconnected` when the client's
    /// connection to the bus is lost (the bus daemon stopped, or the connection
    /// could not be served): nothing could be heard on it any more, and calls of
    /// this client fail too. Make a new `PermissionsClient` then.
    ///
    /// All streams of one client share one set of match rules and one
    /// `Subscribe(scope "app")` call; the last stream to end unsubscribes.
    public func updates(for permission: Permission) -> AsyncThrowingStream<PermissionStatus, any Error> {
        AsyncThrowingStream { continuation in
            let id = hub.add(filter: permission, yield: { continuation.yield($0.status) },
                             finish: { continuation.finish(throwing: $0) })
            continuation.onTermination = { [hub] _ in hub.remove(id) }
        }
    }

    /// As `updates(for:)`, for every permission the service knows: first each
    /// one's current status (sorted by name), then each real change.
    public func updates() -> AsyncThrowingStream<PermissionUpdate, any Error> {
        AsyncThrowingStream { continuation in
            let id = hub.add(filter: nil, yield: { continuation.yield($0) }, finish: { continuation.finish(throwing: $0) })
            continuation.onTermination = { [hub] _ in hub.remove(id) }
        }
    }
}

/// The one subscription behind every `updates` stream of a client: the match
/// rules, the `Subscribe` call, the serials of both streams it follows (the
/// unicast one for this app, the broadcast one for everyone-level changes), and
/// the cache.
///
/// `@unchecked Sendable`: everything but `cache` is used only on the connection's
/// queue (`add` and `remove` hop there); `cache` is behind its lock.
final class UpdateHub: @unchecked Sendable {
    private let connection: Connection
    private let cache = Locked<[Permission: PermissionStatus]?>(nil)

    private struct Consumer {
        let filter: Permission?
        var last: [Permission: PermissionStatus] = [:]
        let yield: (PermissionUpdate) -> Void
        /// Ends the stream: with nil when the client went away, with the error
        /// when the connection was lost.
        let finish: (PermissionsClientError?) -> Void
    }
    /// Set once the connection is lost: every stream, and every later one, ends with it.
    private var lost: PermissionsClientError?

    private var consumers: [Int: Consumer] = [:]
    /// Consumer ids, handed out at once (onTermination needs one), off the queue.
    private let ids = Locked(0)
    /// The match rules while any consumer exists: NameOwnerChanged, broadcast
    /// StatusChanged, and the unicast stream of the current owner.
    private var rules: [Int] = []
    private var streamRule: Int?
    /// The service's current unique name; nil while it is not on the bus.
    private var owner: String?
    /// Bumped at every (re)attachment, so that replies for an older owner are dropped.
    private var generation = 0
    /// The last serial of the unicast stream and of the broadcast one; nil until read.
    private var streamSerial: UInt64?
    private var broadcastSerial: UInt64?
    /// True from attaching until the first GetAll answered: signals before it are
    /// covered by that read.
    private var reading = false
    /// Whether `statuses` holds a read of the current owner (GetAll answered, and
    /// its stream followed since); nothing is yielded or cached without one.
    private var haveRead = false
    private var statuses: [Permission: PermissionStatus] = [:]

    init(connection: Connection) {
        self.connection = connection
        connection.async { [weak self] in
            connection.onDisconnect = { [weak self] in self?.connectionLost() }
            // Lost before the handler was set (its Disconnected already dispatched).
            if !connection.isConnected { self?.connectionLost() }
        }
    }

    func cached(_ permission: Permission) -> PermissionStatus? {
        cache.withLock { $0?[permission] }
    }

    /// Adds a consumer; the first one starts the subscription.
    func add(filter: Permission?, yield: @escaping (PermissionUpdate) -> Void,
             finish: @escaping (PermissionsClientError?) -> Void) -> Int {
        let id = ids.withLock {
            $0 += 1
            return $0
        }
        connection.async { [self] in
            if let lost { return finish(lost) }
            consumers[id] = Consumer(filter: filter, yield: yield, finish: finish)
            if consumers.count == 1 { start() }
            else if haveRead { catchUp(id) }
        }
        return id
    }

    func remove(_ id: Int) {
        connection.async { [self] in
            guard consumers.removeValue(forKey: id) != nil, consumers.isEmpty else { return }
            stop()
        }
    }

    /// Ends the subscription (the last consumer left, or the client goes away:
    /// then the streams left end).
    func stop() {
        let left = consumers.values
        consumers = [:]
        for consumer in left { consumer.finish(nil) }
        for rule in rules { connection.unsubscribe(rule) }
        rules = []
        if let streamRule { connection.unsubscribe(streamRule) }
        streamRule = nil
        if let owner {
            connection.callService("Unsubscribe", [], destination: owner) { _ in }
        }
        detach()
    }

    /// The bus closed the connection, or it could not be served: no signal
    /// will ever come on it, so every stream ends with the error.
    private func connectionLost() {
        guard lost == nil else { return }
        let why = connection.failure.map { "the connection to the bus could not be served: \($0.message)" }
            ?? "the bus closed this client's connection (the bus daemon stopped, or dropped it)"
        lost = PermissionsClientError(.disconnected, name: BusError.disconnected, message: why)
        // Gone with the connection: nothing to take off the bus.
        rules = []
        streamRule = nil
        detach()
        let left = consumers.values
        consumers = [:]
        for consumer in left { consumer.finish(lost) }
    }

    private func start() {
        let noc = connection.subscribe(
            SignalMatch(sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus",
                        member: "NameOwnerChanged", arg0: BusNames.busName)
        ) { [weak self] message in
            let args = message.arguments()
            guard let self, args.count == 3, let new = args[2].stringValue else { return }
            if new.isEmpty { detach() } else { attach(new) }
        }
        // Broadcasts name the well-known sender in the rule; the unique name is
        // checked here (`owner`), since any peer may send a signal that looks alike.
        let broadcast = connection.subscribe(
            SignalMatch(sender: BusNames.busName, path: BusNames.objectPath, interface: BusNames.interfaceName,
                        member: "StatusChanged")
        ) { [weak self] message in
            guard let self, let owner, message.sender == owner else { return }
            broadcastChanged(message.arguments())
        }
        rules = [noc, broadcast]
        // After AddMatch: the bus applies the rule first, so an owner that comes
        // after this answer comes in NameOwnerChanged.
        connection.callBus("GetNameOwner", [.string(BusNames.busName)]) { [weak self] result in
            guard let self, !consumers.isEmpty, owner == nil else { return }
            switch result {
            case .success(let reply): if let name = reply.first?.stringValue { attach(name) }
            case .failure(let error) where error.name == BusError.nameHasNoOwner: activate()
            case .failure: return  // the connection is going: connectionLost says so
            }
        }
    }

    /// The service is not running: asks the bus to start it (D-Bus activation),
    /// as a call to its name would. Its owner comes in NameOwnerChanged. If it
    /// cannot be started (no activation file: `ServiceUnknown`; it failed to
    /// start), the streams wait for it to be started some other way.
    private func activate() {
        connection.callBus("StartServiceByName", [.string(BusNames.busName), .uint32(0)]) { _ in }
    }

    /// The service left the bus: nothing is known any more.
    private func detach() {
        generation += 1
        owner = nil
        streamSerial = nil
        broadcastSerial = nil
        reading = false
        haveRead = false
        statuses = [:]
        cache.withLock { $0 = nil }
    }

    /// A (new) owner: subscribe to its stream, read both serials, then every status.
    private func attach(_ name: String) {
        detach()
        owner = name
        reading = true
        let generation = generation
        if let streamRule { connection.unsubscribe(streamRule) }
        streamRule = connection.subscribe(
            .unicast(to: connection.uniqueName, sender: name, path: BusNames.objectPath + "/Subscription",
                     interface: BusNames.interfaceName, member: "StatusChanged")
        ) { [weak self] message in
            self?.streamChanged(message.arguments())
        }
        let scope = DBusValue.vardict([("scope", .string("app"))])
        connection.callService("Subscribe", [scope], destination: name) { [weak self] result in
            guard let self, generation == self.generation else { return }
            guard case .success(let reply) = result, let serial = reply.first?.uint64Value else {
                // Without its stream this app's own changes would go unheard, and
                // a cache would go stale: know nothing until the next owner.
                self.generation += 1
                haveRead = false
                statuses = [:]
                cache.withLock { $0 = nil }
                return
            }
            streamSerial = serial
        }
        connection.callService("Get", [.string(BusNames.interfaceName), .string("ChangeSerial")],
                               interface: "org.freedesktop.DBus.Properties", destination: name) { [weak self] result in
            guard let self, generation == self.generation, case .success(let reply) = result,
                  case .variant(let value)? = reply.first else { return }
            broadcastSerial = value.uint64Value
        }
        reread()
    }

    /// Reads every status again (GetAll) and yields what differs.
    private func reread() {
        guard let owner else { return }
        let generation = generation
        connection.callService("GetAll", [], destination: owner) { [weak self] result in
            guard let self, generation == self.generation else { return }
            guard case .success(let reply) = result else { return }
            var all: [Permission: PermissionStatus] = [:]
            for (name, value) in reply.first?.stringKeyedEntries ?? [] {
                all[Permission(name)] = PermissionStatus(word: value.stringValue ?? "")
            }
            // A permission that went away (its plugin unloaded) is unsupported now.
            for gone in statuses.keys where all[gone] == nil { all[gone] = .unsupported }
            reading = false
            haveRead = true
            statuses = all
            cache.withLock { $0 = all }
            for id in consumers.keys { catchUp(id) }
        }
    }

    /// Yields to one consumer every status that differs from what it last got.
    private func catchUp(_ id: Int) {
        guard haveRead, var consumer = consumers[id] else { return }
        let names = consumer.filter.map { [$0] } ?? statuses.keys.sorted()
        for permission in names {
            let status = statuses[permission] ?? .unsupported
            guard consumer.last[permission] != status else { continue }
            consumer.last[permission] = status
            consumer.yield(PermissionUpdate(permission, status))
        }
        consumers[id] = consumer
    }

    private func set(_ permission: Permission, _ status: PermissionStatus) {
        guard haveRead else { return }
        statuses[permission] = status
        cache.withLock { $0?[permission] = status }
        for id in consumers.keys where consumers[id]?.filter.map({ $0 == permission }) ?? true { catchUp(id) }
    }

    /// A signal of this app's stream: its own change (the status is this app's),
    /// or an everyone-level one (re-read: the word is not this app's status).
    private func streamChanged(_ args: [DBusValue]) {
        guard args.count == 4, let app = args[0].stringValue, let permission = args[1].stringValue,
              let word = args[2].stringValue, let serial = args[3].uint64Value else { return }
        guard let last = streamSerial else { return }  // before Subscribe's answer: covered by the read
        streamSerial = serial
        if serial != last &+ 1 { return reread() }  // missed something
        if reading { return }
        if app.isEmpty { reread(Permission(permission)) } else { set(Permission(permission), PermissionStatus(word: word)) }
    }

    /// A broadcast: an everyone-level change, whose word is no app's status.
    private func broadcastChanged(_ args: [DBusValue]) {
        guard args.count == 4, let permission = args[1].stringValue, let serial = args[3].uint64Value,
              let last = broadcastSerial, serial > last else { return }
        broadcastSerial = serial
        if serial != last &+ 1 { return reread() }
        if reading { return }
        reread(Permission(permission))
    }

    /// Reads one status again (GetStatus).
    private func reread(_ permission: Permission) {
        guard let owner else { return }
        let generation = generation
        connection.callService("GetStatus", [.string(permission.rawValue)], destination: owner) { [weak self] result in
            guard let self, generation == self.generation else { return }
            switch result {
            case .success(let reply): set(permission, PermissionStatus(word: reply.first?.stringValue ?? ""))
            case .failure(let error) where error.code == .unknownPermission: set(permission, .unsupported)
            case .failure: reread()
            }
        }
    }
}
