import DBusKit
internal import SystemPrimitives
import PluginKit

/// Follows bluetoothd's adapters on the system bus, and the kernel's HCI list while
/// bluetoothd (or the system bus) is not there; reports every change of the
/// resulting `AdapterView`.
///
/// Everything runs on one serial queue, the plugin's own, never the daemon's, and
/// nothing on it waits for bluetoothd: calls are asynchronous with a timeout, and a
/// bluetoothd that does not answer only delays the view, never a caller of the
/// daemon. The one blocking step is connecting to the system bus (connect and
/// Hello, answered by the bus daemon itself), and it too runs on this queue.
///
/// The order of events for one connection:
///  1. subscribe (NameOwnerChanged for org.bluez, InterfacesAdded/Removed, and
///     PropertiesChanged on Adapter1, all from org.bluez);
///  2. GetNameOwner(org.bluez): sent after the match rules, so an owner change
///     after its answer arrives as a signal; owner changes before it are dropped;
///  3. with an owner: GetManagedObjects to that unique name (see BlueZTable for
///     why signals before its answer can be dropped); without one: the kernel list.
/// A lost connection falls back to the kernel list and reconnects with a bounded
/// backoff.
///
/// `@unchecked Sendable`: every stored `var` is touched only on `queue` (the
/// closures handed to DBusKit and to timers run there), and `start`/`stop` hop onto
/// it.
final class BlueZFollower: @unchecked Sendable {
    struct Settings: Sendable {
        var bus: Bus = .system
        /// How long bluetoothd may take to answer before we ask again.
        var callTimeoutMilliseconds: Int32 = 5_000
        /// Backoff for reconnecting and for asking again: doubles from the first
        /// to the last value and stays there.
        var firstRetryMilliseconds = 100
        var maxRetryMilliseconds = 10_000
        /// How often to read the kernel's list again while bluetoothd is away, so
        /// that a dongle plugged in then still counts; nil never.
        var kernelPollMilliseconds: Int? = 10_000
        /// What arms the timers above and those of the connection's calls: the
        /// machine's clock, or a test's `ManualClock`.
        var timers: any Timers = DispatchTimers()
    }

    let queue: Queue
    private let settings: Settings
    private let kernel: any KernelAdapterProbe
    private let onChange: (AdapterView) -> Void
    private let log: (HostHandle.Priority, String) -> Void

    private var stopped = false
    private var connection: Connection?
    /// Bumped for every connection and at stop, so that replies, signals and timers
    /// that belong to an earlier one do nothing.
    private var epoch = 0
    /// True once GetNameOwner has answered on this connection.
    private var ownerKnown = false
    private var table = BlueZTable()
    /// The kernel's adapters while we fall back to them; nil while following bluetoothd.
    private var kernelAdapters: [Adapter]?
    private var lastKernelFailure: Int32?
    /// Whether the current outage of the system bus has been logged.
    private var busMissingSaid = false
    private var lastReported: AdapterView?
    private var reconnectDelay: Int
    private var retryDelay: Int
    private var reconnectTimer: (any ArmedTimer)?
    private var retryTimer: (any ArmedTimer)?
    private var kernelTimer: (any ArmedTimer)?

    /// `onChange` and `log` are called on `queue`.
    init(queue: Queue, settings: Settings = Settings(), kernel: any KernelAdapterProbe,
         onChange: @escaping (AdapterView) -> Void, log: @escaping (HostHandle.Priority, String) -> Void) {
        self.queue = queue
        self.settings = settings
        self.kernel = kernel
        self.onChange = onChange
        self.log = log
        reconnectDelay = settings.firstRetryMilliseconds
        retryDelay = settings.firstRetryMilliseconds
    }

    /// Returns at once; the connection is made on the queue.
    func start() {
        queue.async { self.connect() }
    }

    /// Stops all work and closes the connection. Call on `queue`; after it returns
    /// nothing of this object runs again and `onChange`/`log` are not called.
    func stop() {
        queue.assertCurrent()
        stopped = true
        epoch += 1
        for timer in [reconnectTimer, retryTimer, kernelTimer] { timer?.cancel() }
        reconnectTimer = nil
        retryTimer = nil
        kernelTimer = nil
        if let connection {
            connection.onDisconnect = nil
            connection.close()
        }
        connection = nil
    }

    // MARK: The connection

    private func connect() {
        guard !stopped else { return }
        reconnectTimer = nil
        let connection: Connection
        do {
            connection = try Connection.open(settings.bus, queue: queue, timers: settings.timers)
        } catch {
            // Said once per outage; the retries that follow are routine.
            log(busMissingSaid ? .debug : .info,
                "no system bus (\(error.message)); using the kernel's adapter list, trying again in \(reconnectDelay) ms")
            busMissingSaid = true
            useKernel()
            scheduleReconnect()
            return
        }
        busMissingSaid = false
        epoch += 1
        let epoch = self.epoch
        self.connection = connection
        ownerKnown = false
        connection.onDisconnect = { [weak self] in self?.disconnected(epoch) }
        connection.onError = { [weak self] error in self?.log(.warning, "D-Bus: \(error.message)") }
        let matches = [
            SignalMatch(sender: BlueZ.busDriver, path: "/org/freedesktop/DBus", interface: BlueZ.busDriver,
                        member: "NameOwnerChanged", arg0: BlueZ.service),
            SignalMatch(sender: BlueZ.service, interface: BlueZ.objectManager, member: "InterfacesAdded"),
            SignalMatch(sender: BlueZ.service, interface: BlueZ.objectManager, member: "InterfacesRemoved"),
            SignalMatch(sender: BlueZ.service, interface: BlueZ.properties, member: "PropertiesChanged",
                        arg0: BlueZ.adapterInterface),
        ]
        for match in matches {
            connection.subscribe(match) { [weak self] message in self?.received(message, epoch) }
        }
        askForOwner(epoch)
    }

    private func isCurrent(_ epoch: Int) -> Bool { !stopped && epoch == self.epoch }

    private func disconnected(_ epoch: Int) {
        guard isCurrent(epoch), let lost = connection else { return }
        log(.warning, "lost the system bus; using the kernel's adapter list, reconnecting in \(reconnectDelay) ms")
        connection = nil
        self.epoch += 1
        // We are inside libdbus's dispatch of the Disconnected message: close later.
        queue.async { lost.close() }
        table.reset(owner: nil)
        retryTimer?.cancel()
        retryTimer = nil
        useKernel()
        scheduleReconnect()
    }

    private func scheduleReconnect() {
        reconnectTimer?.cancel()
        reconnectTimer = timer(after: reconnectDelay) { [weak self] in self?.connect() }
        reconnectDelay = min(reconnectDelay * 2, settings.maxRetryMilliseconds)
    }

    // MARK: bluetoothd

    private func askForOwner(_ epoch: Int) {
        guard isCurrent(epoch), let connection else { return }
        let message = try! Message.methodCall(destination: BlueZ.busDriver, path: "/org/freedesktop/DBus",
                                              interface: BlueZ.busDriver, member: "GetNameOwner")
        try! message.append(.string(BlueZ.service))
        connection.call(message, timeoutMilliseconds: settings.callTimeoutMilliseconds) { [weak self] result in
            guard let self, self.isCurrent(epoch) else { return }
            switch result {
            case .success(let reply):
                self.reconnectDelay = self.settings.firstRetryMilliseconds  // the bus works
                self.ownerKnown = true
                if let owner = reply.arguments().first?.stringValue, !owner.isEmpty {
                    self.ownerAppeared(owner, epoch)
                } else {
                    self.ownerGone()
                }
            case .failure(let error) where error.name == BusError.nameHasNoOwner:
                self.reconnectDelay = self.settings.firstRetryMilliseconds
                self.ownerKnown = true
                self.log(.info, "bluetoothd is not running; using the kernel's adapter list")
                self.ownerGone()
            case .failure(let error):
                self.log(.warning, "GetNameOwner(org.bluez) failed (\(error)); asking again in \(self.retryDelay) ms")
                self.retry { $0.askForOwner(epoch) }
            }
        }
    }

    private func received(_ message: Message, _ epoch: Int) {
        guard isCurrent(epoch),
              let event = BlueZEvent(interface: message.interface, member: message.member, path: message.path,
                                     arguments: message.arguments())
        else { return }
        if case .ownerChanged(_, let new) = event {
            // Before GetNameOwner's answer, that answer is newer than this signal.
            guard ownerKnown, message.sender == BlueZ.busDriver, new != table.owner else { return }
            if let new {
                log(.info, "bluetoothd appeared on the bus (\(new))")
                ownerAppeared(new, epoch)
            } else {
                log(.info, "bluetoothd left the bus; using the kernel's adapter list")
                ownerGone()
            }
            return
        }
        switch table.apply(event, from: message.sender) {
        case .ignored: break
        case .applied: report()
        case .refetch(let path):
            report()
            refetch(path, epoch)
        }
    }

    private func ownerAppeared(_ owner: String, _ epoch: Int) {
        table.reset(owner: owner)
        retryTimer?.cancel()
        retryTimer = nil
        retryDelay = settings.firstRetryMilliseconds
        // The view stays what it was (the kernel's list, or nothing yet) until
        // GetManagedObjects answers: reporting "no adapter" in between would be a
        // status change that is not real.
        loadObjects(owner, epoch)
    }

    private func ownerGone() {
        table.reset(owner: nil)
        retryTimer?.cancel()
        retryTimer = nil
        useKernel()
    }

    private func loadObjects(_ owner: String, _ epoch: Int) {
        guard isCurrent(epoch), let connection, table.owner == owner else { return }
        let message = try! Message.methodCall(destination: owner, path: "/", interface: BlueZ.objectManager,
                                              member: "GetManagedObjects")
        connection.call(message, timeoutMilliseconds: settings.callTimeoutMilliseconds) { [weak self] result in
            guard let self, self.isCurrent(epoch), self.table.owner == owner, !self.table.synced else { return }
            switch result {
            case .success(let reply):
                guard let objects = adapterObjects(inManagedObjects: reply.arguments()) else {
                    self.log(.warning, "bluetoothd's GetManagedObjects reply has the wrong type (\(reply.signature)); asking again in \(self.retryDelay) ms")
                    return self.retry { $0.loadObjects(owner, epoch) }
                }
                self.stopKernelPolling()
                self.kernelAdapters = nil
                _ = self.table.load(objects, from: owner)
                self.report()
            case .failure(let error) where error.name == "org.freedesktop.DBus.Error.ServiceUnknown"
                                           || error.name == BusError.nameHasNoOwner:
                break  // bluetoothd left; NameOwnerChanged follows
            case .failure(let error):
                self.log(.warning, "bluetoothd did not answer GetManagedObjects (\(error)); asking again in \(self.retryDelay) ms")
                self.retry { $0.loadObjects(owner, epoch) }
            }
        }
    }

    /// Properties.GetAll for one adapter whose properties bluetoothd invalidated.
    private func refetch(_ path: String, _ epoch: Int) {
        guard let connection, let owner = table.owner else { return }
        let message = try! Message.methodCall(destination: owner, path: path, interface: BlueZ.properties,
                                              member: "GetAll")
        try! message.append(.string(BlueZ.adapterInterface))
        connection.call(message, timeoutMilliseconds: settings.callTimeoutMilliseconds) { [weak self] result in
            guard let self, self.isCurrent(epoch) else { return }
            if case .success(let reply) = result, let properties = reply.arguments().first?.stringKeyedEntries,
               self.table.refreshed(path, Dictionary(properties, uniquingKeysWith: { $1 }), from: owner) {
                self.report()
            }
            // On failure the adapter keeps what we know; the next signal corrects it.
        }
    }

    /// Runs `body` after the retry backoff, unless bluetoothd changes in between.
    private func retry(_ body: @escaping @Sendable (BlueZFollower) -> Void) {
        retryTimer?.cancel()
        retryTimer = timer(after: retryDelay) { [weak self] in
            guard let self else { return }
            self.retryTimer = nil
            body(self)
        }
        retryDelay = min(retryDelay * 2, settings.maxRetryMilliseconds)
    }

    // MARK: The kernel's list

    private func useKernel() {
        let result = readKernel()
        // A kernel without Bluetooth stays so until a module is loaded, and then
        // bluetoothd is what starts: nothing to poll for.
        guard result != .noKernelSupport, kernelTimer == nil, let interval = settings.kernelPollMilliseconds
        else { return }
        kernelTimer = settings.timers.schedule(after: interval, repeating: interval, on: queue) { [weak self] in
            guard let self, !self.stopped, self.kernelAdapters != nil else { return }
            if self.readKernel() == .noKernelSupport { self.stopKernelPolling() }
        }
    }

    @discardableResult
    private func readKernel() -> KernelProbeResult {
        let result = kernel.probe()
        if case .failed(let code) = result {
            if lastKernelFailure != code {
                log(.warning, "cannot read the kernel's Bluetooth adapters (errno \(code)); counting none")
            }
            lastKernelFailure = code
        } else {
            lastKernelFailure = nil
        }
        kernelAdapters = result.adapters
        report()
        return result
    }

    private func stopKernelPolling() {
        kernelTimer?.cancel()
        kernelTimer = nil
    }

    // MARK: Reporting

    private func report() {
        let view: AdapterView
        if let kernelAdapters {
            view = AdapterView(source: .kernel, adapters: kernelAdapters)
        } else if table.synced {
            view = AdapterView(source: .bluez, adapters: Array(table.adapters.values))
        } else {
            return
        }
        guard view != lastReported else { return }
        lastReported = view
        onChange(view)
    }

    private func timer(after milliseconds: Int, _ body: @escaping @Sendable () -> Void) -> any ArmedTimer {
        settings.timers.schedule(after: milliseconds, repeating: nil, on: queue, body)
    }
}
