import PipeWireAccess
internal import CPipeWire
internal import CPipeWireShims
internal import Glibc
internal import SystemPrimitives
import PluginKit

/// One connection handed to an app (OpenPipeWireRemote): a client of its user's
/// PipeWire that the plugin made, restricted by the manager connection of that
/// PipeWire (the `PipeWireRemote` that follows it) to what AppAccess allows.
///
/// The client is made with `pipewire.access` set to our own value before PipeWire
/// registers it, so module-access leaves it with no permission at all (and, being
/// busy, its socket unread) until the manager gives it its reach; only then is the
/// socket handed over (pw_core_steal_fd), so the app never holds anything wider.
final class AppRemote {
    /// Our clients' `pipewire.access`: a value of our own, which no session
    /// manager rule grants anything to (WirePlumber's drop-ins make sure).
    static let accessValue = "org.example.permissions"

    enum Phase: Equatable {
        /// Made; the manager has not yet seen its client, or not yet confirmed its reach.
        case opening
        /// The manager set its reach and PipeWire confirmed it: ready to hand over.
        case ready
        /// Handed to the app.
        case open
        case failed(Int32)
    }

    let id: UInt64
    let owner: Owner
    let permission: DevicePermission
    let app: String
    /// Random, in the client's `application.name` while it opens: how the manager
    /// tells this client from any other with our access value.
    let token: String
    /// The connection, until it is handed over.
    var core: OpaquePointer?
    /// Its client's global id, once the manager has seen it.
    var client: UInt32?
    /// The manager's proxy of that client, through which its permissions are set.
    var clientProxy: OpaquePointer?
    var granted = true
    /// The bits last set, per object: only changes are sent.
    var applied: [UInt32: UInt32] = [:]
    /// The manager's sync that confirms the first reach.
    var readySeq: Int32 = -1
    var phase = Phase.opening

    init(id: UInt64, owner: Owner, permission: DevicePermission, app: String, token: String) {
        self.id = id
        self.owner = owner
        self.permission = permission
        self.app = app
        self.token = token
    }

    /// The client's `application.name` while it opens.
    var openingName: String { "permissionsd remote \(token)" }
}

// Enforcement, in the watcher: open_remote and remote_status come from the host's
// thread for this plugin and take the loop's lock; everything else runs on the
// loop's thread. Either way, the state below is touched with the lock held.
extension PipeWireWatcher {
    /// open_remote: a connection for `request`'s app that reaches only what its
    /// permission covers, as a descriptor; or -errno. Returns within 1.5 seconds
    /// (the host's watchdog gives up at 2): the socket (the host's, up to about a
    /// second through the connector), then PipeWire's confirmation, with what is left.
    func openRemote(_ request: RemoteRequest) -> Int32 {
        let start = monotonicNanoseconds()
        guard let permission = DevicePermission(rawValue: request.permission) else { return -EINVAL }
        let owner: Owner = userRuntimeRoot == nil ? .environment : .user(request.uid)
        guard let token = randomToken() else { return -EIO }
        // A user's socket through the host (connect_user_socket: the daemon's own
        // privileges, else the connector), before the loop is locked: it may wait.
        var socket: Int32 = -1
        if case .user(let uid) = owner, host.connectsUserSockets {
            switch host.connectUserSocket(uid: uid, name: UserRuntimeDirectories.socketName) {
            case .failure(let error): return error.rawValue == ENOENT ? -ENODEV : -error.rawValue
            case .success(let fd): socket = fd
            }
        }
        pw_thread_loop_lock(threadLoop)
        defer { pw_thread_loop_unlock(threadLoop) }
        guard let manager = remotes[owner], manager.phase == .connected, let context else {
            if socket >= 0 { close(socket) }
            return -ENODEV
        }
        let remote = AppRemote(id: request.id, owner: owner, permission: permission, app: request.appID, token: token)
        let tags = [
            ("pipewire.access", AppRemote.accessValue),
            (PW_KEY_APP_NAME, remote.openingName),
            ("pipewire.access.org.example.permissions.app-id", request.appID),
            ("pipewire.access.org.example.permissions.permission", permission.rawValue),
        ]
        guard let core = connect(context, manager, socket, tags) else { return -(errno == 0 ? EIO : errno) }
        remote.core = core
        appRemotes[remote.id] = remote
        // The loop runs while this waits (the wait lets go of the lock): the manager
        // sees the new client, sets its reach, and confirms it (appClientAppeared).
        let left = max(Int64(1_500_000_000) - Int64(monotonicNanoseconds() - start), 100_000_000)
        var deadline = timespec()
        pw_thread_loop_get_time(threadLoop, &deadline, left)
        while remote.phase == .opening {
            if pw_thread_loop_timed_wait_full(threadLoop, &deadline) == -ETIMEDOUT { break }
        }
        switch remote.phase {
        case .ready:
            let fd = pw_core_steal_fd(core)
            pw_core_disconnect(core)  // the proxy only: the socket is the app's now
            remote.core = nil
            remote.phase = .open
            return fd >= 0 ? fd : -EIO
        case .failed(let code):
            dropAppRemote(remote, reason: nil)
            return -code
        default:
            host.log(.warning, "remote \(remote.id) for \(request.appID): \(owner.name) did not take it in time")
            dropAppRemote(remote, reason: nil)
            return -ETIMEDOUT
        }
    }

    /// remote_status: the app's status is now `status`; anything but "authorized"
    /// takes its devices away (and the links to them) at once.
    func remoteStatus(_ id: UInt64, _ status: String) {
        pw_thread_loop_lock(threadLoop)
        defer { pw_thread_loop_unlock(threadLoop) }
        guard let remote = appRemotes[id] else { return }
        remote.granted = status == "authorized"
        applyReach(remote)
    }

    /// The connection for an app: over `socket` (taken), or, when it is -1, a
    /// fresh one to the manager's PipeWire by its path.
    private func connect(_ context: OpaquePointer, _ manager: PipeWireRemote, _ socket: Int32,
                         _ tags: [(String, String)]) -> OpaquePointer? {
        let keys = tags.map { strdup($0.0) }, values = tags.map { strdup($0.1) }
        defer { (keys + values).forEach { free($0) } }
        let cKeys = keys.map { UnsafePointer<CChar>($0) }, cValues = values.map { UnsafePointer<CChar>($0) }
        return cKeys.withUnsafeBufferPointer { k in
            cValues.withUnsafeBufferPointer { v in
                cpw_context_connect_tagged(context, socket >= 0 ? nil : manager.socketPath, socket, k.baseAddress,
                                           v.baseAddress, UInt32(tags.count))
            }
        }
    }

    // MARK: The loop's thread (from the manager's registry and core events)

    /// A client with our access value appeared in `manager`'s registry: one being
    /// opened (its token), or one that is no one's (a daemon before this one made
    /// it, or an app that claims our value): that one is destroyed.
    func appClientAppeared(_ id: UInt32, name: String, on manager: PipeWireRemote) {
        guard let remote = appRemotes.values.first(where: {
            $0.owner == manager.owner && $0.phase == .opening && $0.client == nil && name == $0.openingName
        }) else {
            host.log(.info, "destroying client \(id) of \(manager.owner.name): it claims this service's access "
                     + "value but is none of its open connections")
            if let registry = manager.registry { _ = cpw_registry_destroy(registry, id) }
            return
        }
        remote.client = id
        guard let registry = manager.registry, let proxy = cpw_registry_bind_client(registry, id) else {
            return fail(remote, EIO)
        }
        remote.clientProxy = proxy
        applyReach(remote)
        // Once PipeWire has applied the permissions, the socket may go to the app.
        if let core = manager.core { remote.readySeq = cpw_core_sync(core, UInt32(PW_ID_CORE), 0) }
    }

    /// The manager's sync came back: a remote whose reach it confirms is ready.
    func managerSynced(_ seq: Int32, on manager: PipeWireRemote) {
        for remote in appRemotes.values where remote.owner == manager.owner && remote.readySeq == seq {
            remote.readySeq = -1
            if remote.phase == .opening {
                remote.phase = .ready
                pw_thread_loop_signal(threadLoop, false)
            }
        }
    }

    /// Sets `remote`'s client's permissions to what AppAccess allows now, and
    /// destroys the links it may not have. A client whose permissions cannot be set
    /// is disconnected (fail).
    func applyReach(_ remote: AppRemote) {
        guard let client = remote.client, let proxy = remote.clientProxy,
              let manager = remotes[remote.owner], let registry = manager.registry else { return }
        var reach = AppAccess.reach(client: client, permission: remote.permission, granted: remote.granted,
                                    graph: manager.graph)
        // Everything else explicitly 0: a session manager that changes the client's
        // default (a WirePlumber site rule) then widens nothing the manager has seen.
        for id in manager.graph.allIDs where reach[id] == nil && id != client { reach[id] = 0 }
        var changes: [(UInt32, UInt32)] = []
        for (id, bits) in reach where remote.applied[id] != bits { changes.append((id, bits)) }
        remote.applied = reach
        if !changes.isEmpty {
            let ids = changes.map(\.0), bits = changes.map(\.1)
            let rc = ids.withUnsafeBufferPointer { i in
                bits.withUnsafeBufferPointer { b in
                    cpw_client_update_permissions(proxy, UInt32(changes.count), i.baseAddress, b.baseAddress)
                }
            }
            if rc < 0 { return fail(remote, -rc) }
        }
        for link in AppAccess.forbiddenLinks(client: client, permission: remote.permission, granted: remote.granted,
                                             graph: manager.graph) {
            _ = cpw_registry_destroy(registry, link)
        }
    }

    /// Every remote of `manager`'s PipeWire, after its graph changed.
    func graphChanged(on manager: PipeWireRemote) {
        for remote in appRemotes.values where remote.owner == manager.owner { applyReach(remote) }
    }

    /// A global went from `manager`'s registry: if it was a remote's client, that
    /// remote has ended.
    func appClientRemoved(_ id: UInt32, on manager: PipeWireRemote) {
        guard let remote = appRemotes.values.first(where: { $0.owner == manager.owner && $0.client == id }) else {
            return
        }
        remote.client = nil
        if remote.phase == .opening { return fail(remote, ECONNRESET) }
        dropAppRemote(remote, reason: "its connection closed")
    }

    /// An error on one of the manager's proxies: if it is a remote's client proxy,
    /// its permissions may not be what they should: it is disconnected.
    func managerError(proxyID: UInt32, on manager: PipeWireRemote) -> Bool {
        guard let remote = appRemotes.values.first(where: {
            $0.owner == manager.owner && $0.clientProxy.map { pw_proxy_get_id($0) } == proxyID
        }) else { return false }
        fail(remote, EIO)
        return true
    }

    /// The manager lost its PipeWire (a restart, a logout): every connection to it
    /// has gone with it.
    func managerLost(_ manager: PipeWireRemote) {
        for remote in appRemotes.values where remote.owner == manager.owner {
            remote.clientProxy = nil  // destroyed with the manager's connection
            remote.client = nil
            if remote.phase == .opening { fail(remote, ECONNRESET) } else {
                dropAppRemote(remote, reason: "\(manager.owner.name) went away")
            }
        }
    }

    /// A remote that cannot be kept as it should be: its client is destroyed, and
    /// an opening one fails with `code`.
    private func fail(_ remote: AppRemote, _ code: Int32) {
        if remote.phase == .opening {
            remote.phase = .failed(code)
            pw_thread_loop_signal(threadLoop, false)
            return
        }
        host.log(.warning, "remote \(remote.id) for \(remote.app): cannot set what it reaches (\(errnoName(code))); "
                 + "disconnecting it")
        dropAppRemote(remote, reason: "it was disconnected")
    }

    /// Forgets a remote: destroys its client if it is still there, and tells the
    /// host it has ended (if the app ever had it).
    func dropAppRemote(_ remote: AppRemote, reason: String?) {
        appRemotes[remote.id] = nil
        if let core = remote.core { pw_core_disconnect(core) }
        remote.core = nil
        if let proxy = remote.clientProxy { pw_proxy_destroy(proxy) }
        remote.clientProxy = nil
        if let client = remote.client, let registry = remotes[remote.owner]?.registry {
            _ = cpw_registry_destroy(registry, client)
        }
        if reason != nil { host.remoteClosed(remote.id) }
    }

    /// At fini: every connection handed out is destroyed (nothing would narrow it
    /// any more), and the wait for PipeWire to have done so is bounded.
    func dropAllAppRemotes() {
        pw_thread_loop_lock(threadLoop)
        defer { pw_thread_loop_unlock(threadLoop) }
        var waiting: [Owner: Int32] = [:]
        for remote in Array(appRemotes.values) {
            dropAppRemote(remote, reason: nil)
            if let core = remotes[remote.owner]?.core, waiting[remote.owner] == nil {
                waiting[remote.owner] = cpw_core_sync(core, UInt32(PW_ID_CORE), 0)
            }
        }
        guard !waiting.isEmpty else { return }
        finalSyncs = Set(waiting.values)
        var deadline = timespec()
        pw_thread_loop_get_time(threadLoop, &deadline, 500_000_000)
        while !finalSyncs.isEmpty {
            if pw_thread_loop_timed_wait_full(threadLoop, &deadline) == -ETIMEDOUT { break }
        }
    }

    /// 128 random bits (the system's generator: getrandom(2)), as hex.
    private func randomToken() -> String? {
        var generator = SystemRandomNumberGenerator()
        return (0..<2).map { _ in String(generator.next() as UInt64, radix: 16).leftPadded(to: 16) }.joined()
    }
}

private extension String {
    func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
