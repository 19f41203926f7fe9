import PipeWireAccess
internal import CPipeWireShims
internal import Glibc
import PluginKit
import PermissionsModel
internal import SystemPrimitives

/// The plugin's state between the host's calls: no PipeWire at all until a
/// PipeWire socket exists, then the PipeWireWatcher.
///
/// On a machine without PipeWire (a server; a desktop before its session starts)
/// the plugin neither opens libpipewire (CPipeWireShims' loader opens it at its
/// first call) nor starts PipeWire's loop and thread: it watches, with inotify,
/// where the socket would be made (one user: the path libpipewire's rules name;
/// many: ROOT/UID/pipewire-0 of any user), publishes what the watcher would
/// publish without a PipeWire, and starts the watcher once a socket is there. From
/// then on the watcher follows PipeWire as before, outages included; it never goes
/// back to waiting. When where to watch cannot be told or watched, the watcher
/// starts at once, as it always did.
///
/// Threads. The host calls init, configure and fini one at a time on one queue,
/// open_remote and remote_status on others; the wait's events come on a queue of
/// its own. `state` (a Locked) is what they share: the watcher is started under it,
/// and a configuration taken while waiting is handed to the watcher as it starts.
final class PipeWireStart: Sendable {
    private struct State {
        var watcher: PipeWireWatcher?
        var wait: SocketWait?
        /// The configuration taken while waiting; nil before the first.
        var configs: [DevicePermission: SwitchConfig]?
        var stopped = false
    }

    let host: HostHandle
    private let state = Locked(State())

    private init(host: HostHandle) {
        self.host = host
    }

    /// init: the watcher at once when a socket is there (or where to wait cannot be
    /// told); otherwise "unsupported" published and the wait begun.
    static func start(host: HostHandle) -> Result<PipeWireStart, PipeWireStartError> {
        let plugin = PipeWireStart(host: host)
        let root = host.userRuntimeRoot
        guard let wait = SocketWait.open(root: root, socket: PipeWireRemote.environmentSocketPath()) else {
            return PipeWireWatcher.start(host: host).map { watcher in
                plugin.state.withLock { $0.watcher = watcher }
                return plugin
            }
        }
        if root == nil, let path = wait.socket {
            host.log(.info, "PipeWire is not reachable at \(path): \(errnoName(ENOENT)); its camera and microphone "
                     + "are unsupported until it is; libpipewire is loaded when its socket is made")
        } else if let root {
            host.log(.info, PipeWireWatcher.followingLine(root: root) + " (none yet; libpipewire is loaded when one "
                     + "is made)")
        }
        plugin.state.withLock { $0.wait = wait }
        plugin.publish(configs: nil)
        wait.begin { [plugin] in plugin.socketMade() }
        return .success(plugin)
    }

    /// What the watcher would publish without a PipeWire: "unsupported" for each
    /// permission (machine-wide: every user's, until their own PipeWire is followed).
    private func publish(configs: [DevicePermission: SwitchConfig]?) {
        for permission in DevicePermission.allCases {
            let config = configs?[permission] ?? SwitchConfig()
            host.publish(PipeWireWatcher.snapshot(permission, config,
                                                  phase: host.userRuntimeRoot == nil ? "unreachable" : "per-user"))
        }
    }

    /// A socket was made: the watcher takes over, with the configuration in force.
    /// Started under the lock (milliseconds: libpipewire opened, the loop made), so
    /// that no configuration or stop falls between. If it cannot start, the wait
    /// goes on and the next socket event tries again.
    private func socketMade() {
        let failure = state.withLock { state -> PipeWireStartError? in
            guard !state.stopped, state.watcher == nil else { return nil }
            switch PipeWireWatcher.start(host: host, configs: state.configs, waited: true) {
            case .success(let watcher):
                state.watcher = watcher
                state.wait?.end()
                state.wait = nil
                return nil
            case .failure(let error): return error
            }
        }
        if let failure {
            let why = cpw_library_error().map { String(cString: $0) } ?? errnoName(failure.code)
            host.log(.error, "a PipeWire socket was made, but \(failure.what) failed: \(why); camera and "
                     + "microphone stay unsupported until the next try (when a socket is made again)")
        }
    }

    func configure(_ entries: [PluginConfigEntry]) -> Int32 {
        let (watcher, rc) = state.withLock { state -> (PipeWireWatcher?, Int32) in
            if let watcher = state.watcher { return (watcher, 0) }
            let (taken, rc) = DeviceConfig.taken(entries, host: host, first: state.configs == nil)
            guard let taken else { return (nil, rc) }
            state.configs = taken
            publish(configs: taken)
            return (nil, rc)
        }
        return watcher?.configure(entries) ?? rc
    }

    func openRemote(_ request: RemoteRequest) -> Int32 {
        // No PipeWire yet: nothing to connect an app to, as when it is unreachable.
        guard let watcher = state.withLock({ $0.watcher }) else { return -ENODEV }
        return watcher.openRemote(request)
    }

    func remoteStatus(_ id: UInt64, _ status: String) {
        state.withLock { $0.watcher }?.remoteStatus(id, status)
    }

    /// fini: the wait ended, or the watcher stopped (its thread joined).
    func stop() {
        let watcher = state.withLock { state -> PipeWireWatcher? in
            state.stopped = true
            state.wait?.end()
            state.wait = nil
            defer { state.watcher = nil }
            return state.watcher
        }
        watcher?.stop()
    }
}

/// Waits, with inotify, for a PipeWire socket to be made: `socket` (one user), or
/// ROOT/UID/pipewire-0 of any user (UserRuntimeDirectories). Its events are read
/// on a queue of its own (a dispatch source): no thread is kept for it.
final class SocketWait: @unchecked Sendable {
    // @unchecked Sendable: `directories` and `source` are set up by `open` and
    // `begin` on the host's queue, before the source is resumed (so before any
    // event runs on `queue`); from then on they are touched on `queue` only (the
    // events, and `end`, which cancels the source there). The fd is closed by the
    // source's cancel handler, after its last event.
    let socket: String?
    /// The inotify descriptor; -1 when the socket's directory cannot be watched
    /// (it does not exist): then the socket is looked for every 2 s instead, the
    /// one failed connect(2) the watcher would make as often, without libpipewire.
    private let fd: Int32
    private let directories: UserRuntimeDirectories?
    private let queue = Queue(label: "org.example.Permissions.pipewire-wait")
    private var source: Source?
    static let pollSeconds = 2

    private init(socket: String?, fd: Int32, directories: UserRuntimeDirectories?) {
        self.socket = socket
        self.fd = fd
        self.directories = directories
    }

    /// A wait, or nil when a socket is there already or where it would be made
    /// cannot be watched (then the watcher starts at once).
    static func open(root: String?, socket: String?) -> SocketWait? {
        if let root {
            guard case .success(let directories) = UserRuntimeDirectories.open(root: root) else { return nil }
            let wait = SocketWait(socket: nil, fd: directories.fd, directories: directories)
            guard !wait.madeAmong(directories.scan()) else {
                directories.close()
                return nil
            }
            return wait
        }
        guard let socket, socket.hasPrefix("/"), let slash = socket.lastIndex(of: "/") else { return nil }
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        let directory = slash == socket.startIndex ? "/" : String(socket[..<slash])
        // Watched before the look, so that a socket made in between is seen by one or the other.
        let watched = inotify_add_watch(fd, directory, UInt32(IN_CREATE | IN_MOVED_TO | IN_ONLYDIR)) >= 0
        if !watched { close(fd) }
        guard access(socket, F_OK) != 0 else {
            if watched { close(fd) }
            return nil
        }
        return SocketWait(socket: socket, fd: watched ? fd : -1, directories: nil)
    }

    /// Calls `made` (on the wait's queue) once a socket is there.
    func begin(_ made: @escaping @Sendable () -> Void) {
        let source: Source
        if fd >= 0 {
            let read = ReadSource(fileDescriptor: fd, queue: queue)
            let fd = self.fd
            read.setCancelHandler { close(fd) }
            source = read
        } else {
            let timer = TimerSource(queue: queue)
            timer.schedule(deadline: .now() + .seconds(Self.pollSeconds), repeating: .seconds(Self.pollSeconds))
            source = timer
        }
        source.setEventHandler { [self] in
            if isMade() { made() }
        }
        self.source = source
        source.resume()
    }

    /// Stops the wait; the descriptor is closed once no event is being read.
    func end() {
        queue.async { [self] in
            source?.cancel()
            source = nil
        }
    }

    /// Reads the queued events: whether the socket (or a user's) is there now.
    /// Also true when the directory's watch is gone (the directory removed or its
    /// file system unmounted): no event would come any more, so the watcher starts
    /// and tries every 2 s, as it did before there was a wait.
    private func isMade() -> Bool {
        if let directories { return madeAmong(directories.read()) }
        guard fd >= 0 else { return socket.map { access($0, F_OK) == 0 } ?? false }
        var watchGone = false
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(fd, &buffer, buffer.count)
            guard n > 0 else { break }
            var offset = 0
            while offset + MemoryLayout<inotify_event>.size <= n {
                let event = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: inotify_event.self) }
                if event.mask & UInt32(IN_IGNORED) != 0 { watchGone = true }
                offset += MemoryLayout<inotify_event>.size + Int(event.len)
            }
        }
        return watchGone || socket.map { access($0, F_OK) == 0 } ?? false
    }

    /// Whether one of these users' sockets is there (a listing again after an overflow).
    private func madeAmong(_ events: [UserRuntimeDirectories.Event]) -> Bool {
        guard let directories else { return false }
        for event in events {
            switch event {
            case .userAppeared(let uid), .socketAppeared(let uid):
                if access("\(directories.root)/\(uid)/\(UserRuntimeDirectories.socketName)", F_OK) == 0 { return true }
            case .userGone: continue
            case .rescan: if madeAmong(directories.scan()) { return true }
            }
        }
        return false
    }
}
