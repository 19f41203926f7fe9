import PipeWireAccess
internal import CPipeWire
internal import CPipeWireShims
internal import Glibc
internal import SystemPrimitives
internal import PluginKit

/// Whose PipeWire a connection follows: the one libpipewire's own rules find (a
/// daemon serving one user), or user UID's at ROOT/UID/pipewire-0.
enum Owner: Hashable, Comparable {
    case environment
    case user(UInt32)

    /// "PipeWire" or "user 1000's PipeWire", for log lines.
    var name: String {
        switch self {
        case .environment: "PipeWire"
        case .user(let uid): "user \(uid)'s PipeWire"
        }
    }
}

/// One connection to one PipeWire: connecting, the first listing, the registry's
/// nodes, losing the connection, trying again. All on the watcher's loop thread
/// (the callbacks run there, with its lock held), except `tearDown`, which `stop`
/// also calls after that thread has been joined. Every remote shares the watcher's
/// loop and context: many users cost sockets, not threads.
///
/// Nothing of an earlier connection survives into the next one: each starts from
/// an empty table and its own complete listing (xdg-desktop-portal #2143).
final class PipeWireRemote {
    enum Phase: String {
        case unreachable  // no connection
        case connecting  // connected; the first registry listing is not complete
        case connected  // the registry is followed
    }

    unowned let watcher: PipeWireWatcher
    let owner: Owner
    /// The socket, absolute; nil: libpipewire's rules (PIPEWIRE_REMOTE, else
    /// pipewire-0 in PIPEWIRE_RUNTIME_DIR or XDG_RUNTIME_DIR).
    let socket: String?
    var core: OpaquePointer?
    var registry: OpaquePointer?
    let coreListener: Listener<pw_core_events>
    let registryListener: Listener<pw_registry_events>
    /// Fires the next connection attempt (and tears down a lost connection first).
    var retryTimer: UnsafeMutablePointer<spa_source>?
    /// The seq of the `pw_core_sync` that marks the end of the first listing.
    var syncSeq: Int32 = -1
    private(set) var phase = Phase.unreachable
    var devices = DeviceTable()
    /// What enforcement needs of the graph (Graph.swift).
    var graph = Graph()
    var backoff: Backoff
    /// One log line per outage, not one per attempt.
    var outageLogged = false

    /// The pointer PipeWire passes back to the callbacks: unretained, because the
    /// watcher holds its remotes until their timers and listeners are gone.
    var me: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    init(watcher: PipeWireWatcher, owner: Owner, socket: String?, backoff: Backoff) {
        self.watcher = watcher
        self.owner = owner
        self.socket = socket
        self.backoff = backoff
        var coreEvents = pw_core_events()
        coreEvents.version = UInt32(PW_VERSION_CORE_EVENTS)
        coreEvents.done = pipewireCoreDone
        coreEvents.error = pipewireCoreError
        coreListener = Listener(coreEvents)
        var registryEvents = pw_registry_events()
        registryEvents.version = UInt32(PW_VERSION_REGISTRY_EVENTS)
        registryEvents.global = pipewireRegistryGlobal
        registryEvents.global_remove = pipewireRegistryGlobalRemove
        registryListener = Listener(registryEvents)
        retryTimer = cpw_loop_add_timer(watcher.loop, pipewireRetryTimer, me)
    }

    /// Where libpipewire connects: this remote's socket, or what its rules find.
    var socketPath: String? { socket ?? Self.environmentSocketPath() }

    /// Where libpipewire would connect with no properties given: PIPEWIRE_REMOTE (a
    /// path, or a name), else "pipewire-0", in PIPEWIRE_RUNTIME_DIR, else
    /// XDG_RUNTIME_DIR, else USERPROFILE, else /run/pipewire (libpipewire 0.3's
    /// native protocol module, which a daemon without a session's environment, a
    /// system service, reaches by the last).
    static func environmentSocketPath() -> String {
        func env(_ name: String) -> String? {
            getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
        }
        let name = env("PIPEWIRE_REMOTE") ?? "pipewire-0"
        if name.hasPrefix("/") { return name }
        let directory = env("PIPEWIRE_RUNTIME_DIR") ?? env("XDG_RUNTIME_DIR") ?? env("USERPROFILE") ?? "/run/pipewire"
        return directory + "/" + name
    }

    /// Try now (the socket appeared, or this remote is new), with a fresh backoff.
    func attemptSoon() {
        backoff.reset()
        armRetry(after: 0)
    }

    /// The retry timer: tear down a lost connection (not inside its own error
    /// callback, which PipeWire is still running when it reports the loss), then
    /// try again.
    func retryTimerFired() {
        if core != nil { tearDown() }
        attempt()
    }

    /// One attempt. By path it never blocks: PipeWire's client socket is
    /// non-blocking, and connect(2) to a Unix socket succeeds or fails at once. A
    /// user's PipeWire on a host with connect_user_socket (ABI 1.3) comes through
    /// the host instead, verified to be that user's and reached with the
    /// connector's help when the daemon's own privileges fall short: that call
    /// holds this loop's thread (every user's remote) for up to about a second
    /// (a full backlog, a connector slow to answer), usually a few milliseconds.
    private func attempt() {
        if let path = socketPath, access(path, F_OK) != 0 {
            return attemptFailed(errno, "\(owner.name) is not reachable at \(path)")
        }
        guard let context = watcher.makeContext() else {
            return attemptFailed(errno, "cannot create a PipeWire context")
        }
        let connected: OpaquePointer?
        switch owner {
        case .user(let uid) where watcher.host.connectsUserSockets:
            switch watcher.host.connectUserSocket(uid: uid, name: UserRuntimeDirectories.socketName) {
            case .failure(let error): return attemptFailed(error.rawValue, "\(owner.name) is not reachable")
            // The core owns the fd from here, and closes it on failure too.
            case .success(let fd): connected = pw_context_connect_fd(context, fd, nil, 0)
            }
        default:
            connected = socket.map { cpw_context_connect_path(context, $0) } ?? pw_context_connect(context, nil, 0)
        }
        guard let core = connected else {
            return attemptFailed(errno, "\(owner.name) is not reachable")
        }
        self.core = core
        let data = me
        coreListener.register { cpw_core_add_listener(core, $0, $1, data) }
        guard let registry = pw_core_get_registry(core, UInt32(PW_VERSION_REGISTRY), 0) else {
            return attemptFailed(errno, "cannot get the registry of \(owner.name)")
        }
        self.registry = registry
        registryListener.register { cpw_registry_add_listener(registry, $0, $1, data) }
        syncSeq = cpw_core_sync(core, UInt32(PW_ID_CORE), 0)
        setPhase(.connecting)
    }

    /// Stay unsupported and try again after the next delay, if the backoff has one.
    private func attemptFailed(_ code: Int32, _ what: String) {
        if !outageLogged {
            outageLogged = true
            watcher.host.log(.info, "\(what): \(errnoName(code)); its camera and microphone are unsupported "
                             + "until it is; \(backoff.retryNote)")
        }
        if core != nil { tearDown() }
        if let delay = backoff.next() { armRetry(after: delay) }
    }

    private func armRetry(after delay: UInt64) {
        if let retryTimer { _ = cpw_loop_arm_timer(watcher.loop, retryTimer, delay) }
    }

    /// Errors on the core object that mean the socket is gone (PipeWire reports
    /// them as "connection error"). Others, about a request of ours, are logged and
    /// the connection kept: reconnecting for them would tell every app
    /// "unsupported" for nothing.
    private static let connectionErrors: Set<Int32> = [
        EPIPE, ECONNRESET, ECONNREFUSED, ECONNABORTED, ENOTCONN, ETIMEDOUT, EHOSTDOWN, EIO,
    ]

    func coreError(id: UInt32, res: Int32, message: String) {
        let reason = "\(message): \(errnoName(-res))"
        if id != UInt32(PW_ID_CORE), watcher.managerError(proxyID: id, on: self) { return }
        guard id == UInt32(PW_ID_CORE), Self.connectionErrors.contains(-res) else {
            watcher.host.log(.warning, "\(owner.name): error on object \(id): \(reason)")
            return
        }
        guard phase != .unreachable else { return }
        watcher.host.log(.info, "lost the connection to \(owner.name): \(reason); its camera and microphone are "
                         + "unsupported until it is back")
        outageLogged = true
        devices.removeAll()
        watcher.managerLost(self)
        graph = Graph()
        setPhase(.unreachable)
        backoff.reset()
        armRetry(after: 0)  // the teardown, outside this callback, and a first new attempt
    }

    func coreDone(id: UInt32, seq: Int32) {
        guard id == UInt32(PW_ID_CORE) else { return }
        watcher.managerSynced(seq, on: self)
        guard seq == syncSeq, phase == .connecting else { return }
        backoff.reset()
        outageLogged = false
        watcher.host.log(.info, "following the registry of \(owner.name): "
                         + "\(devices.devices(for: .camera).count) camera(s), "
                         + "\(devices.devices(for: .microphone).count) microphone(s)")
        setPhase(.connected)
    }

    private func setPhase(_ new: Phase) {
        phase = new
        DevicePermission.allCases.forEach { watcher.publish($0, of: self) }
    }

    // MARK: The registry's node events. Nothing is logged per node: a client that
    // churns nodes would run into the host's log limit, and GetDetails lists the
    // devices anyway.

    /// A global of type Node appeared; `device` is nil unless it is a camera or a
    /// microphone. Before the first listing completes, devices are only collected.
    func nodeAppeared(id: UInt32, device: Device?, node: Graph.Node) {
        guard phase != .unreachable else { return }
        graph.nodes[id] = node
        watcher.graphChanged(on: self)
        var changed = Set<DevicePermission>()
        // An id is reused only after its global_remove, so this finds nothing; were
        // it ever to, the old node must not stay counted under the new one's id.
        if let old = devices.remove(id: id) { changed.insert(old.permission) }
        if let device {
            devices.insert(device, id: id)
            changed.insert(device.permission)
        }
        if phase == .connected { changed.forEach { watcher.publish($0, of: self) } }
    }

    func globalRemoved(id: UInt32) {
        guard phase != .unreachable else { return }
        if graph.remove(id) {
            watcher.appClientRemoved(id, on: self)
            watcher.graphChanged(on: self)
        }
        guard let old = devices.remove(id: id) else { return }
        if phase == .connected { watcher.publish(old.permission, of: self) }
    }

    /// A global other than a node that enforcement follows appeared.
    func otherGlobalAppeared(id: UInt32, _ change: (inout Graph) -> Void) {
        guard phase != .unreachable else { return }
        change(&graph)
        watcher.graphChanged(on: self)
    }

    /// A client with our access value appeared (AppRemotes.swift).
    func ourClientAppeared(id: UInt32, name: String) {
        guard phase != .unreachable else { return }
        graph.ourClients[id] = name
        watcher.appClientAppeared(id, name: name, on: self)
    }

    /// Removes the listeners and proxies and closes the socket.
    func tearDown() {
        watcher.managerLost(self)
        graph = Graph()
        registryListener.unregister()
        coreListener.unregister()
        if let registry { pw_proxy_destroy(registry) }
        registry = nil
        if let core { pw_core_disconnect(core) }
        core = nil
        syncSeq = -1
    }

    /// Closes the connection and removes the timer: the remote is done with.
    func close() {
        tearDown()
        if let retryTimer { cpw_loop_destroy_source(watcher.loop, retryTimer) }
        retryTimer = nil
        devices.removeAll()
        phase = .unreachable
    }
}
