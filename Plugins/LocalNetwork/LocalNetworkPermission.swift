internal import SystemPrimitives
import PluginKit
import PermissionsModel

/// The `local-network` permission: combines the watcher's interfaces with the
/// `[local-network]` configuration and publishes the result whenever it changes.
///
/// `@unchecked Sendable`: `watcher`, `interfaces`, `config` and `published` are
/// touched only on `queue`, except in `init`, which runs before anything is put on
/// the queue; `stopping` is atomic.
final class LocalNetworkPermission: @unchecked Sendable {
    private let queue = Queue(label: "permissions.local-network")
    private let publish: (PluginSnapshot) -> Void
    private let logLine: (HostHandle.Priority, String) -> Void
    private var watcher: InterfaceWatcher?
    private var interfaces: [LocalInterface] = []
    private var config = SwitchConfig()
    private var published: PluginSnapshot
    /// Set by `stop` on the host's thread and checked on the queue before every
    /// call to the host, so that none happens once fini has returned.
    /// A Locked, not a Synchronization.Atomic: that library would be loaded at
    /// every start for this flag alone (LinkedLibrariesTests).
    private let stopping = Locked(false)

    /// Publishes `unsupported` before returning (nothing is known yet: fail
    /// closed), then follows the kernel on the plugin's own queue.
    init(publish: @escaping (PluginSnapshot) -> Void, log: @escaping (HostHandle.Priority, String) -> Void) {
        self.publish = publish
        self.logLine = log
        published = localNetworkSnapshot([])
        publish(published)
        let watcher = InterfaceWatcher(
            queue: queue,
            onChange: { [weak self] interfaces in self?.interfacesChanged(interfaces) },
            log: { [weak self] message in self?.log(.error, message) })
        self.watcher = watcher
        queue.async { watcher.start() }
    }

    /// A new accepted configuration.
    func apply(_ config: SwitchConfig) {
        queue.async {
            guard !self.isStopping else { return }
            self.config = config
            self.publishIfChanged()
        }
    }

    /// Stops the watcher on the queue and waits for that (the queue never blocks:
    /// every read is non-blocking), at most 1.5 s of fini's 2 s.
    func stop() {
        stopping.withLock { $0 = true }
        let done = Semaphore(value: 0)
        queue.async {
            self.watcher?.stop()
            self.watcher = nil
            done.signal()
        }
        _ = done.wait(timeout: .now() + .milliseconds(1_500))
    }

    private var isStopping: Bool { stopping.withLock { $0 } }

    private func interfacesChanged(_ interfaces: [LocalInterface]) {
        guard !isStopping else { return }
        self.interfaces = interfaces
        publishIfChanged()
    }

    private func publishIfChanged() {
        let snapshot = localNetworkSnapshot(interfaces, config: config)
        guard snapshot != published else { return }
        if snapshot.service != published.service {
            log(.debug, "local-network: \(published.service) -> \(snapshot.service) "
                + "(\(interfaces.map(\.name).joined(separator: ", ")))")
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
