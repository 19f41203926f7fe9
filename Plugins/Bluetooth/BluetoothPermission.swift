internal import SystemPrimitives
import PluginKit
import PermissionsModel

/// The `bluetooth` permission: combines the follower's adapter view with the
/// `[bluetooth]` configuration and publishes the result whenever it changes.
///
/// `@unchecked Sendable`: `follower`, `view`, `config` and `published` are touched
/// only on `queue`, except in `init`, which runs before anything is put on the
/// queue; `stopping` is atomic.
final class BluetoothPermission: @unchecked Sendable {
    private let queue = Queue(label: "permissions.bluetooth")
    private let publish: (PluginSnapshot) -> Void
    private let logLine: (HostHandle.Priority, String) -> Void
    private var follower: BlueZFollower?
    private var view = AdapterView.unknown
    private var config = SwitchConfig()
    private var published: PluginSnapshot
    /// Set by `stop` on the host's thread and checked on the queue before every
    /// call to the host, so that none happens once fini has returned, even if the
    /// queue was still busy then.
    /// A Locked, not a Synchronization.Atomic: that library would be loaded at
    /// every start for this flag alone (LinkedLibrariesTests).
    private let stopping = Locked(false)

    /// Publishes `unsupported` before returning, then starts following bluetoothd on
    /// the plugin's own queue. `publish` and `log` may be called from that queue
    /// until `stop` returns, never after.
    init(settings: BlueZFollower.Settings = BlueZFollower.Settings(),
         kernel: any KernelAdapterProbe = HCIDeviceList(),
         publish: @escaping (PluginSnapshot) -> Void,
         log: @escaping (HostHandle.Priority, String) -> Void) {
        self.publish = publish
        self.logLine = log
        published = bluetoothSnapshot(.unknown)
        publish(published)
        let follower = BlueZFollower(
            queue: queue, settings: settings, kernel: kernel,
            onChange: { [weak self] view in self?.viewChanged(view) },
            log: { [weak self] priority, message in self?.log(priority, message) })
        self.follower = follower
        follower.start()
    }

    /// A new accepted configuration (already checked by the caller).
    func apply(_ config: SwitchConfig) {
        queue.async {
            guard !self.isStopping else { return }
            self.config = config
            self.publishIfChanged()
        }
    }

    /// Stops the follower (timers, the connection) on the queue and waits for that,
    /// but not for long: the host gives fini 2 s, and the queue can be held up by
    /// one thing, connecting to a system bus daemon that accepts the connection but
    /// does not answer Hello (libdbus waits 25 s). Then this returns first; the
    /// follower stops as soon as the queue gets to it, and `stopping` keeps it away
    /// from the host meanwhile. Normally the queue is idle and this takes
    /// microseconds.
    func stop() {
        stopping.withLock { $0 = true }
        let done = Semaphore(value: 0)
        queue.async {
            self.follower?.stop()
            self.follower = nil
            done.signal()
        }
        _ = done.wait(timeout: .now() + .milliseconds(1_500))
    }

    private var isStopping: Bool { stopping.withLock { $0 } }

    private func viewChanged(_ view: AdapterView) {
        guard !isStopping else { return }
        self.view = view
        publishIfChanged()
    }

    /// The daemon diffs snapshots too; this spares it publications that change
    /// nothing at all.
    private func publishIfChanged() {
        let snapshot = bluetoothSnapshot(view, config: config)
        guard snapshot != published else { return }
        if snapshot.service != published.service {
            log(.debug, "bluetooth: \(published.service) -> \(snapshot.service) (\(view.adapters.count) adapter(s), from \(view.source.rawValue))")
        }
        published = snapshot
        guard !isStopping else { return }
        publish(snapshot)
    }

    private func log(_ priority: HostHandle.Priority, _ message: String) {
        guard !isStopping else { return }
        logLine(priority, message)
    }
}
