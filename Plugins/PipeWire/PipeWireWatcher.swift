internal import CPipeWire
internal import CPipeWireShims
internal import Glibc
import PluginKit
import Synchronization
import PermissionsModel

/// Follows the user's PipeWire registry on a thread of its own and publishes the
/// camera and microphone snapshots.
///
/// Threads. PipeWire objects are not thread-safe, so the mutable state here
/// belongs to the thread loop's thread: PipeWire callbacks (which run with the
/// loop's lock held) are the only code that touches it, apart from `start`, which
/// runs before that thread exists, and `stop`, which runs after it has been
/// joined. The host calls init, configure and fini one at a time on its queue for
/// this plugin; `configure` reads only what `start` set up (`loop`,
/// `configEvent`), keeps `handedOverOnce` to itself, and hands a configuration
/// over through `pendingConfig`, a Mutex, before waking the loop. So the host's
/// queue never waits for PipeWire or for the loop: it starts the thread, hands
/// over configurations and joins the thread.
///
/// Connection (PipeWireWatcher+Connection.swift): connect, list the registry and
/// `pw_core_sync`; the listing is complete when the matching `done` arrives, and
/// only then are devices published. A lost connection forgets every device at
/// once ("unsupported") and retries with `Backoff`, so the state always follows
/// the registry of the PipeWire that is reachable now, never one from an earlier
/// connection or start order (xdg-desktop-portal #2143).
final class PipeWireWatcher {
    enum Phase: String {
        case unreachable  // no connection
        case connecting  // connected; the first registry listing is not complete
        case connected  // the registry is followed
    }

    let host: HostHandle
    let threadLoop: OpaquePointer
    let loop: UnsafeMutablePointer<pw_loop>
    var context: OpaquePointer?
    var core: OpaquePointer?
    var registry: OpaquePointer?
    let coreListener: Listener<pw_core_events>
    let registryListener: Listener<pw_registry_events>
    /// Fires the next connection attempt (and tears down a lost connection first).
    var retryTimer: UnsafeMutablePointer<spa_source>?
    /// Fires when throttled publications may go out.
    var throttleTimer: UnsafeMutablePointer<spa_source>?
    /// Signalled by `configure` when `pendingConfig` holds a new configuration.
    var configEvent: UnsafeMutablePointer<spa_source>?
    /// The seq of the `pw_core_sync` that marks the end of the first listing.
    var syncSeq: Int32 = -1
    var phase = Phase.unreachable
    var devices = DeviceTable()
    var backoff = Backoff()
    /// One log line per outage, not one per attempt.
    var outageLogged = false

    /// The configuration in force; nil until the first `configure` has reached
    /// the loop, and nothing but the first "unsupported" is published before it.
    var configs: [DevicePermission: SwitchConfig]?
    let pendingConfig = Mutex<[DevicePermission: SwitchConfig]?>(nil)
    /// Whether `configure` has handed a configuration over (the host's queue only).
    private var handedOverOnce = false
    var lastPublished: [DevicePermission: PluginSnapshot] = [:]
    var throttle = PublishThrottle()
    /// Permissions whose publication waits for the throttle's timer.
    var throttled: Set<DevicePermission> = []

    /// The pointer PipeWire passes back to the callbacks: unretained, because the
    /// plugin state holds the watcher until `stop` has joined the thread.
    var me: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    private init(host: HostHandle, threadLoop: OpaquePointer) {
        self.host = host
        self.threadLoop = threadLoop
        loop = pw_thread_loop_get_loop(threadLoop)
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
    }

    // MARK: The host's queue

    /// Publishes "unsupported" for both permissions and starts the thread, whose
    /// first act is a connection attempt. Never waits for PipeWire.
    static func start(host: HostHandle) -> Result<PipeWireWatcher, PipeWireStartError> {
        pw_init(nil, nil)
        guard let threadLoop = pw_thread_loop_new("permissions-pw", nil) else {
            let code = errno
            pw_deinit()
            return .failure(PipeWireStartError(code: code, what: "pw_thread_loop_new"))
        }
        let watcher = PipeWireWatcher(host: host, threadLoop: threadLoop)
        for permission in DevicePermission.allCases { watcher.send(permission) }
        // The loop does not run yet, so its sources may be added from this thread.
        let loop = watcher.loop
        watcher.retryTimer = cpw_loop_add_timer(loop, pipewireRetryTimer, watcher.me)
        watcher.throttleTimer = cpw_loop_add_timer(loop, pipewireThrottleTimer, watcher.me)
        watcher.configEvent = cpw_loop_add_event(loop, pipewireConfigEvent, watcher.me)
        guard let retryTimer = watcher.retryTimer, watcher.throttleTimer != nil, watcher.configEvent != nil else {
            let code = errno
            watcher.stop()
            return .failure(PipeWireStartError(code: code, what: "pw_loop_add_timer/event"))
        }
        _ = cpw_loop_arm_timer(loop, retryTimer, 0)
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
        let parsed: [DevicePermission: SwitchConfig]
        var rc: Int32 = 0
        do {
            parsed = try DeviceConfig.parse(entries, host: host)
        } catch {
            host.log(.error, "\(error.description); keeping the last good configuration")
            guard !handedOverOnce else { return -EINVAL }
            parsed = Dictionary(uniqueKeysWithValues: DevicePermission.allCases.map { ($0, SwitchConfig()) })
            rc = -EINVAL
        }
        handedOverOnce = true
        pendingConfig.withLock { $0 = parsed }
        if let configEvent { _ = cpw_loop_signal_event(loop, configEvent) }
        return rc
    }

    /// Joins the thread, then frees every PipeWire object. No host call after it.
    func stop() {
        pw_thread_loop_stop(threadLoop)  // joins: from here on, this is the only thread
        tearDownConnection()
        for source in [retryTimer, throttleTimer, configEvent] {
            if let source { cpw_loop_destroy_source(loop, source) }
        }
        retryTimer = nil
        throttleTimer = nil
        configEvent = nil
        if let context { pw_context_destroy(context) }
        context = nil
        pw_thread_loop_destroy(threadLoop)
        pw_deinit()  // balances pw_init (counted since 0.3.x: other users are unaffected)
    }

    // MARK: The loop's thread

    /// `configure` woke the loop: apply what it handed over and publish.
    func configEventFired() {
        let new = pendingConfig.withLock { pending -> [DevicePermission: SwitchConfig]? in
            defer { pending = nil }
            return pending
        }
        guard let new else { return }
        configs = new
        DevicePermission.allCases.forEach(publish)
    }
}

/// Why the watcher could not start: a PipeWire call and its errno.
struct PipeWireStartError: Error {
    let code: Int32
    let what: String
}
