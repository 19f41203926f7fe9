// permissions-bench bluez: the time from PropertiesChanged(Powered) on the system
// bus to the StatusChanged("", bluetooth, …) a D-Bus subscriber receives.
//
// It starts its own two dbus-daemons (a stand-in system bus and a bus for the
// daemon) and permissionsd with only the bluetooth plugin of this build, and plays
// bluetoothd itself: it owns org.bluez on the system bus, answers GetManagedObjects
// with one adapter, and per cycle powers it off (-> "disabled") and on again
// (-> "not-determined") by emitting PropertiesChanged. "On the bus" is the moment
// just before that signal is written to the bus socket; "received" is when the
// bench's connection to the daemon's bus dispatches StatusChanged. Both are
// CLOCK_MONOTONIC in this process.
//
// Why not python3-dbusmock, as the tests use: its signal is emitted in another
// process, and stamping it when a third connection of the bench dispatches it was
// tried and measured later than the StatusChanged at times (the dispatch of one
// queue against another on two busy cores), which made the figures meaningless.
import DBusKit
import Foundation
import PermissionsTestSupport
import SystemPrimitives

func runBlueZBench(_ arguments: [String]) {
    let cycles = cyclesOption(arguments, default: 100, usage: "usage: permissions-bench bluez [--cycles N] [--smoke]")
    let world = BZWorld()
    defer { world.tearDown() }
    world.start()

    // Unmeasured cycles: connections warm, match rules in force, code paths paged in.
    for _ in 0..<3 { _ = world.cycle() }
    var off: [Double] = []
    var on: [Double] = []
    for _ in 0..<cycles {
        let (a, b) = world.cycle()
        off.append(a)
        on.append(b)
    }
    printTransitions(bench: "bluez", title: "BlueZ: PropertiesChanged(Powered) on the system bus -> StatusChanged "
                     + "received, \(cycles) cycles (ms)", fields: [("cycles", .int(cycles))], [
        Transition(label: "power off -> disabled", key: "power-off", samples: Samples(off)),
        Transition(label: "power on -> available", key: "power-on", samples: Samples(on)),
        Transition(label: "both", key: "all", samples: Samples(off + on)),
    ])
}

// MARK: What happened, when

/// What the bench's listener saw: StatusChanged signals with their times.
private enum BZEvent {
    case status(String, at: UInt64)
}

private typealias BZTimeline = Timeline<BZEvent>

private extension Timeline where Event == BZEvent {
    /// The first matching event from `from` on, within 10 s, or the bench fails.
    func first<T>(from: Int, _ what: String, _ match: (Event) -> T?) -> T {
        guard let found = first(from: from, timeout: 10, match) else { fail("no \(what) within 10 s") }
        return found
    }
}

// MARK: The processes and the cycle

/// The two buses and permissionsd in a temporary directory, the bench's bluetoothd
/// and its listening connection.
///
/// `@unchecked Sendable`: used from the main thread only; the signal handler
/// touches only `timeline`, which is Sendable.
private final class BZWorld: @unchecked Sendable {
    let root: String
    let timeline = BZTimeline()
    private var daemon: Child?
    /// Killed last, after every process on them.
    private var buses: [TestBus] = []
    private var listeners: [(Connection, Queue)] = []
    private var bluetoothd: BZBluetoothd?

    init() {
        root = makeRunDirectory()
    }

    func start() {
        makeDaemonDirectories(root, plugin: "bluetooth")

        let system = addBus("system")
        let daemonBus = addBus("daemon-bus")
        bluetoothd = BZBluetoothd(address: system)
        listen(daemonBus, SignalMatch(sender: "org.example.Permissions", path: "/org/example/Permissions",
                                      interface: "org.example.Permissions", member: "StatusChanged")) { message, at in
            let a = message.arguments().map { $0.stringValue ?? "" }
            guard a.count >= 3, a[0].isEmpty, a[1] == "bluetooth" else { return nil }
            return .status(a[2], at: at)
        }
        daemon = startDaemon(root: root, address: daemonBus, environment: ["DBUS_SYSTEM_BUS_ADDRESS": system])
        waitForStatus(daemonBus, "not-determined")
    }

    func tearDown() {
        for (connection, queue) in listeners { queue.sync { connection.close() } }
        listeners = []
        // permissionsd first (SIGTERM, so that fini runs), then the bench's
        // bluetoothd, then the buses.
        daemon?.kill(SIGTERM)
        bluetoothd?.close()
        bluetoothd = nil
        for bus in buses.reversed() { bus.kill() }
        buses = []
        Children.shared.killAll()
    }

    /// One power cycle of the adapter; returns both latencies in milliseconds.
    func cycle() -> (Double, Double) {
        (transition(powered: false, expect: "disabled"), transition(powered: true, expect: "not-determined"))
    }

    private func transition(powered: Bool, expect status: String) -> Double {
        let from = timeline.count
        let onBus = bluetoothd!.setPowered(powered)
        let received = timeline.first(from: from, "StatusChanged bluetooth \(status)") { event -> UInt64? in
            if case .status(let s, let at) = event {
                if s != status { fail("StatusChanged bluetooth \(s) where \(status) was expected") }
                return at
            }
            return nil
        }
        // Signed: a clock that misbehaved must show as a silly number, not a trap.
        return Double(Int64(bitPattern: received &- onBus)) / 1_000_000
    }

    /// A private dbus-daemon (`system` type for the stand-in system bus); returns its
    /// address once it listens.
    private func addBus(_ name: String) -> String {
        let bus = startBus(type: name == "system" ? "system" : "session")
        buses.append(bus)
        return bus.address
    }

    // MARK: D-Bus

    /// A connection on a queue of its own that records the signals `match` accepts,
    /// stamped when dispatched. Returns after a round trip to the bus, after which
    /// the match rule is in force.
    private func listen(_ address: String, _ match: SignalMatch,
                        _ event: @escaping @Sendable (Message, UInt64) -> BZEvent?) {
        let queue = Queue(label: "bench.listen.\(listeners.count)")
        let timeline = timeline
        let connection: Connection = queue.sync {
            let c = openConnection(address, queue: queue)
            c.subscribe(match) { message in
                let at = monotonicNanoseconds()
                if let e = event(message, at) { timeline.record(e) }
            }
            return c
        }
        listeners.append((connection, queue))
        pingBus([connection])
    }

    /// Asks GetStatus until the plugin has caught up with bluetoothd (it publishes
    /// "unsupported" first and the adapter once GetManagedObjects answers).
    private func waitForStatus(_ address: String, _ status: String) {
        let client = openBlocking(address)
        defer { client.close() }
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            let reply = busCall(client, CallTarget.getStatus("bluetooth").message(), timeoutMilliseconds: 10_000)
            if reply.arguments().first?.stringValue == status { return }
            sleepSeconds(0.01)  // polling GetStatus, the plugin announces nothing else
        }
        fail("bluetooth never became \(status); see \(root)/permissionsd.log")
    }
}

// MARK: The bench's bluetoothd

/// org.bluez with one adapter, /org/bluez/hci0, on a queue of its own: enough
/// BlueZ for the plugin (GetManagedObjects, PropertiesChanged on Adapter1).
///
/// Also the core bench's plugin-publication trigger (its broadcast fan-out).
///
/// `@unchecked Sendable`: `powered` and the connection are only touched on `queue`.
final class BZBluetoothd: @unchecked Sendable {
    private let queue = Queue(label: "bench.bluetoothd")
    private let connection: Connection
    private var powered = true

    init(address: String) {
        let queue = queue
        connection = queue.sync { openConnection(address, queue: queue) }
        queue.sync {
            do throws(BusError) {
                guard try connection.requestName("org.bluez") == .primaryOwner else { fail("org.bluez is taken") }
            } catch {
                fail("RequestName org.bluez: \(error)")
            }
            connection.export(ExportedObject(path: "/", interfaces: [
                Interface("org.freedesktop.DBus.ObjectManager", methods: [
                    Method("GetManagedObjects") { [unowned self] call in call.reply([self.managedObjects()]) },
                ]),
            ], introspection: ""))
            connection.export(ExportedObject(path: "/org/bluez/hci0", interfaces: [
                Interface("org.bluez.Adapter1", methods: [], properties: adapterProperties().map { name, value in
                    Property(name) { [unowned self] in name == "Powered" ? .boolean(self.powered) : value }
                }),
            ], introspection: ""))
        }
    }

    private func adapterProperties() -> [(String, DBusValue)] {
        [("Address", .string("00:11:22:33:44:55")), ("Name", .string("bench")), ("Alias", .string("bench")),
         ("Powered", .boolean(powered)), ("Discovering", .boolean(false))]
    }

    private func managedObjects() -> DBusValue {
        .dictionary(keySignature: "o", valueSignature: "a{sa{sv}}", [
            .init(.objectPath("/org/bluez/hci0"), .dictionary(keySignature: "s", valueSignature: "a{sv}", [
                .init(.string("org.bluez.Adapter1"), .vardict(adapterProperties())),
            ])),
        ])
    }

    /// Changes Powered and emits PropertiesChanged; returns the time just before
    /// the signal was handed to libdbus, which writes it to the socket at once.
    func setPowered(_ on: Bool) -> UInt64 {
        queue.sync {
            powered = on
            let signal = try! Message.signal(path: "/org/bluez/hci0", interface: "org.freedesktop.DBus.Properties",
                                             member: "PropertiesChanged")
            try! signal.append([.string("org.bluez.Adapter1"), .vardict([("Powered", .boolean(on))]), .strings([])])
            let at = monotonicNanoseconds()
            try! connection.send(signal)  // a benchmark that cannot send has nothing to measure
            return at
        }
    }

    func close() {
        queue.sync { connection.close() }
    }
}
