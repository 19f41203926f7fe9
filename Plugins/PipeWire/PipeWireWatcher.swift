import PipeWireAccess
internal import CPipeWire
internal import CPipeWireShims
internal import Glibc
import PluginKit
import PermissionsModel
internal import SystemPrimitives

/// Follows PipeWire registries on one thread of its own and publishes the camera
/// and microphone snapshots: the one PipeWire libpipewire's rules find, on a
/// daemon that serves one user; every user's own, ROOT/UID/pipewire-0, on a daemon
/// that serves many (the host's `user_runtime_root`). Each connection is a
/// `PipeWireRemote`; they all share this loop, its thread and one context.
///
/// Threads. PipeWire objects are not thread-safe, so the mutable state here
/// belongs to the thread loop's thread: PipeWire callbacks (which run with the
/// loop's lock held) are the only code that touches it, apart from `start`, which
/// runs before that thread exists, `stop`, which runs after it has been joined,
/// and enforcement's open_remote and remote_status (AppRemotes.swift), which the
/// host calls from threads of its own and which take the loop's lock first, as
/// the callbacks hold it. The host calls init, configure and fini one at a time on its queue for
/// this plugin (`start` runs there too, or on PipeWireStart's wait queue under its
/// lock, which configure and fini then wait for); `configure` reads only what `start` set up (`loop`,
/// `configEvent`), keeps `handedOverOnce` to itself after `start`, and hands a configuration
/// over through `pendingConfig`, a Locked, before waking the loop. So the host's
/// queue never waits for PipeWire or for the loop: it starts the thread, hands
/// over configurations and joins the thread.
///
/// `@unchecked Sendable`: PipeWireStart hands it between the host's threads and its
/// wait's queue, under its lock; the discipline above is what makes each call safe.
final class PipeWireWatcher: @unchecked Sendable {
    let host: HostHandle
    let threadLoop: OpaquePointer
    let loop: UnsafeMutablePointer<pw_loop>
    /// Made with the first connection attempt (it loads libpipewire's modules and
    /// configuration, about 3 MiB), shared by every remote.
    var context: OpaquePointer?
    /// The connections, by whose PipeWire they follow.
    var remotes: [Owner: PipeWireRemote] = [:]
    /// Where users' runtime directories are (many users), or nil (one user).
    let userRuntimeRoot: String?
    var directories: UserRuntimeDirectories?
    var directoriesSource: UnsafeMutablePointer<spa_source>?
    /// Fires when throttled publications may go out.
    var throttleTimer: UnsafeMutablePointer<spa_source>?
    /// Signalled by `configure` when `pendingConfig` holds a new configuration.
    var configEvent: UnsafeMutablePointer<spa_source>?

    /// The configuration in force; nil until the first `configure` has reached
    /// the loop, and nothing but the first "unsupported" is published before it.
    var configs: [DevicePermission: SwitchConfig]?
    let pendingConfig = Locked<[DevicePermission: SwitchConfig]?>(nil)
    /// Whether `configure` has handed a configuration over (the host's queue only).
    private var handedOverOnce = false
    var lastPublished: [Target: PluginSnapshot] = [:]
    /// Connections handed to apps (AppRemotes.swift), by the host's remote id.
    var appRemotes: [UInt64: AppRemote] = [:]
    /// At fini: the manager syncs that confirm their clients' destruction.
    var finalSyncs = Set<Int32>()
    var throttle = PublishThrottle()
    /// Publications that wait for the throttle's timer.
    var throttled: Set<Target> = []

    var me: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    private init(host: HostHandle, threadLoop: OpaquePointer) {
        self.host = host
        self.threadLoop = threadLoop
        loop = pw_thread_loop_get_loop(threadLoop)
        userRuntimeRoot = host.userRuntimeRoot
    }

    // MARK: The host's queue

    /// Publishes "unsupported" for both permissions and starts the thread, whose
    /// first act is a connection attempt (one user) or a listing of the users'
    /// runtime directories (many). Never waits for PipeWire. `configs`: the
    /// configuration in force already, and `waited`: started once a socket appeared
    /// (PipeWireStart), which has said that PipeWire was not reachable, or which
    /// users' PipeWire it follows, already.
    static func start(host: HostHandle, configs: [DevicePermission: SwitchConfig]? = nil,
                      waited: Bool = false) -> Result<PipeWireWatcher, PipeWireStartError> {
        pw_init(nil, nil)
        guard let threadLoop = pw_thread_loop_new("permissions-pw", nil) else {
            let code = errno
            pw_deinit()
            return .failure(PipeWireStartError(code: code, what: "pw_thread_loop_new"))
        }
        let watcher = PipeWireWatcher(host: host, threadLoop: threadLoop)
        if let configs {
            watcher.configs = configs
            watcher.handedOverOnce = true
        }
        for permission in DevicePermission.allCases { watcher.send(Target(permission, .environment)) }
        // The loop does not run yet, so its sources may be added from this thread.
        let loop = watcher.loop
        watcher.throttleTimer = cpw_loop_add_timer(loop, pipewireThrottleTimer, watcher.me)
        watcher.configEvent = cpw_loop_add_event(loop, pipewireConfigEvent, watcher.me)
        guard watcher.throttleTimer != nil, watcher.configEvent != nil else {
            let code = errno
            watcher.stop()
            return .failure(PipeWireStartError(code: code, what: "pw_loop_add_timer/event"))
        }
        if let root = watcher.userRuntimeRoot {
            watcher.watchUsers(root: root, announce: !waited)
        } else {
            let remote = watcher.addRemote(.environment, socket: nil, backoff: Backoff())
            remote.outageLogged = waited
            remote.attemptSoon()
        }
        // A configuration taken while waiting: what its first `configure` would
        // publish (each user's own "unsupported" until followed).
        if configs != nil { watcher.publishAll() }
        let rc = pw_thread_loop_start(threadLoop)
        guard rc == 0 else {
            watcher.stop()
            return .failure(PipeWireStartError(code: -rc, what: "pw_thread_loop_start"))
        }
        return .success(watcher)
    }

    /// Validates a configuration and hands it to the loop, without waiting for it.
    /// A bad value keeps the last good configuration and returns -EINVAL; the
    /// first configuration, even a bad one, starts publication (with the defaults).
    func configure(_ entries: [PluginConfigEntry]) -> Int32 {
        let (taken, rc) = DeviceConfig.taken(entries, host: host, first: !handedOverOnce)
        guard let parsed = taken else { return rc }
        handedOverOnce = true
        pendingConfig.withLock { $0 = parsed }
        if let configEvent { _ = cpw_loop_signal_event(loop, configEvent) }
        return rc
    }

    /// Destroys the connections handed to apps, joins the thread, then frees every
    /// PipeWire object. No host call after it.
    func stop() {
        dropAllAppRemotes()
        pw_thread_loop_stop(threadLoop)  // joins: from here on, this is the only thread
        for remote in remotes.values { remote.close() }
        remotes = [:]
        for source in [throttleTimer, configEvent, directoriesSource] {
            if let source { cpw_loop_destroy_source(loop, source) }
        }
        throttleTimer = nil
        configEvent = nil
        directoriesSource = nil
        directories?.close()
        directories = nil
        if let context { pw_context_destroy(context) }
        context = nil
        pw_thread_loop_destroy(threadLoop)
        pw_deinit()  // balances pw_init (counted since 0.3.x: other users are unaffected)
    }

    // MARK: The loop's thread (and `start`, before it runs)

    /// The shared context, made on first use; nil (errno set) if it cannot be.
    func makeContext() -> OpaquePointer? {
        // Reads client.conf: the native protocol and client defaults, no RT module.
        if context == nil { context = pw_context_new(loop, nil, 0) }
        return context
    }

    @discardableResult
    func addRemote(_ owner: Owner, socket: String?, backoff: Backoff) -> PipeWireRemote {
        if let remote = remotes[owner] { return remote }
        let remote = PipeWireRemote(watcher: self, owner: owner, socket: socket, backoff: backoff)
        remotes[owner] = remote
        return remote
    }

    /// `configure` woke the loop: apply what it handed over and publish.
    func configEventFired() {
        let new = pendingConfig.withLock { pending -> [DevicePermission: SwitchConfig]? in
            defer { pending = nil }
            return pending
        }
        guard let new else { return }
        configs = new
        publishAll()
    }
}

/// Why the watcher could not start: a PipeWire call and its errno.
struct PipeWireStartError: Error {
    let code: Int32
    let what: String
}
