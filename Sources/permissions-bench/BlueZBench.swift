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
    let cycles = cyclesOption(arguments, default: 100, usage: "usage: permissions-bench bluez [--cycles N]") { bzFail($0, code: $1) }
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
    bzReport(cycles: cycles, rows: [("power off -> disabled", BZStats(off)),
                                    ("power on -> available", BZStats(on)),
                                    ("both", BZStats(off + on))])
}

// MARK: Report

private struct BZStats {
    let count: Int
    let p50, p99, min, max, mean: Double

    /// Nearest-rank percentiles of `values` (milliseconds).
    init(_ values: [Double]) {
        let sorted = values.sorted()
        func rank(_ p: Double) -> Double { sorted[Swift.max(0, Int((p * Double(sorted.count)).rounded(.up)) - 1)] }
        count = sorted.count
        p50 = rank(0.50)
        p99 = rank(0.99)
        min = sorted.first!
        max = sorted.last!
        mean = sorted.reduce(0, +) / Double(sorted.count)
    }
}

private func bzReport(cycles: Int, rows: [(String, BZStats)]) {
    func ms(_ v: Double) -> String { String(format: "%.3f", v) }
    func pad(_ s: String, _ width: Int) -> String { String(repeating: " ", count: Swift.max(0, width - s.count)) + s }
    print("BlueZ: PropertiesChanged(Powered) on the system bus -> StatusChanged received, \(cycles) cycles (ms)")
    print("transition".padding(toLength: 24, withPad: " ", startingAt: 0)
          + pad("n", 6) + ["p50", "p99", "min", "max", "mean"].map { pad($0, 9) }.joined())
    for (name, s) in rows {
        print(name.padding(toLength: 24, withPad: " ", startingAt: 0)
              + pad(String(s.count), 6) + [s.p50, s.p99, s.min, s.max, s.mean].map { pad(ms($0), 9) }.joined())
    }
    let keys = ["power-off", "power-on", "all"]
    let fields = zip(keys, rows).map { key, row in
        let s = row.1
        return "\"\(key)\":{\"n\":\(s.count),\"p50\":\(ms(s.p50)),\"p99\":\(ms(s.p99)),\"min\":\(ms(s.min)),"
            + "\"max\":\(ms(s.max)),\"mean\":\(ms(s.mean))}"
    }
    print("{\"bench\":\"bluez\",\"cycles\":\(cycles),\"unit\":\"ms\"," + fields.joined(separator: ",") + "}")
    fflush(nil)
}

/// Prints the reason, stops every process the bench started (exit skips `defer`,
/// and the children would outlive it), and exits.
private func bzFail(_ message: String, code: Int32 = 1) -> Never {
    FileHandle.standardError.write(("permissions-bench bluez: " + message + "\n").data(using: .utf8)!)
    bzChildren.killAll()
    exit(code)
}

/// Every process the bench started, for `bzFail`.
///
/// `@unchecked Sendable`: `processes` is only touched under `lock`.
private final class BZChildren: @unchecked Sendable {
    private let lock = NSLock()
    private var processes: [Process] = []

    func add(_ p: Process) { lock.withLock { processes.append(p) } }

    func killAll() {
        for p in lock.withLock({ processes }).reversed() where p.isRunning {
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
        }
    }
}

private let bzChildren = BZChildren()

// MARK: What happened, when

/// What the bench's listener saw: StatusChanged signals with their times.
private enum BZEvent {
    case status(String, at: UInt64)
}

private typealias BZTimeline = Timeline<BZEvent>

private extension Timeline where Event == BZEvent {
    /// The first matching event from `from` on, within 10 s, or the bench fails.
    func first<T>(from: Int, _ what: String, _ match: (Event) -> T?) -> T {
        guard let found = first(from: from, timeout: 10, match) else { bzFail("no \(what) within 10 s") }
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
    private var processes: [Process] = []
    /// Killed last, after every process on them.
    private var buses: [TestBus] = []
    private var listeners: [(Connection, DispatchQueue)] = []
    private var bluetoothd: BZBluetoothd?

    init() {
        var template = Array((NSTemporaryDirectory() + "/permissions-bench-bluez.XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { bzFail("mkdtemp failed") }
        root = String(cString: made)
    }

    func start() {
        makeDaemonDirectories(root, plugin: "bluetooth") { bzFail($0) }

        let system = startBus("system")
        let daemonBus = startBus("daemon-bus")
        bluetoothd = BZBluetoothd(address: system)
        listen(daemonBus, SignalMatch(sender: "org.example.Permissions", path: "/org/example/Permissions",
                                      interface: "org.example.Permissions", member: "StatusChanged")) { message, at in
            let a = message.arguments().map { $0.stringValue ?? "" }
            guard a.count >= 3, a[0].isEmpty, a[1] == "bluetooth" else { return nil }
            return .status(a[2], at: at)
        }
        startDaemon(daemonBus, system: system)
        waitForStatus(daemonBus, "not-determined")
    }

    func tearDown() {
        for (connection, queue) in listeners { queue.sync { connection.close() } }
        listeners = []
        // permissionsd first (SIGTERM, so that fini runs), then the bench's
        // bluetoothd, then the buses.
        for p in processes.reversed() where p.isRunning && p.executableURL?.lastPathComponent == "permissionsd" {
            kill(p.processIdentifier, SIGTERM)
            p.waitUntilExit()
        }
        bluetoothd?.close()
        bluetoothd = nil
        for p in processes.reversed() where p.isRunning {
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
        }
        for bus in buses.reversed() { bus.kill() }
        buses = []
        try? FileManager.default.removeItem(atPath: root)
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
                if s != status { bzFail("StatusChanged bluetooth \(s) where \(status) was expected") }
                return at
            }
            return nil
        }
        // Signed: a clock that misbehaved must show as a silly number, not a trap.
        return Double(Int64(bitPattern: received &- onBus)) / 1_000_000
    }

    // MARK: Processes

    private func launch(_ path: String, _ arguments: [String], environment: [String: String] = [:],
                        stdout: Any? = nil, stderr: Any? = nil) -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = arguments
        p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = stdout ?? FileHandle.nullDevice
        p.standardError = stderr ?? FileHandle.nullDevice
        do { try p.run() } catch { bzFail("cannot run \(path): \(error)") }
        processes.append(p)
        bzChildren.add(p)
        return p
    }

    /// A private dbus-daemon (`system` type for the stand-in system bus); returns its
    /// address once it listens.
    private func startBus(_ name: String) -> String {
        do {
            let bus = try TestBus(type: name == "system" ? "system" : "session", diesWithParent: true)
            buses.append(bus)
            return bus.address
        } catch {
            bzFail("dbus-daemon (\(name)): \(error)")
        }
    }

    private func startDaemon(_ address: String, system: String) {
        _ = FileManager.default.createFile(atPath: root + "/permissionsd.log", contents: nil)
        let log = FileHandle(forWritingAtPath: root + "/permissionsd.log")!
        _ = launch(benchBinDirectory + "/permissionsd",
                   ["--address", address, "--config-dir", root + "/config", "--state-dir", root + "/state",
                    "--plugin-dir", root + "/plugins"],
                   environment: ["DBUS_SYSTEM_BUS_ADDRESS": system], stderr: log)
        waitForName(address, "org.example.Permissions", what: "permissionsd (see \(root)/permissionsd.log)")
    }

    private func waitForName(_ address: String, _ name: String, what: String) {
        let wait = launch("/usr/bin/gdbus", ["wait", "--address", address, "--timeout", "20", name])
        wait.waitUntilExit()
        guard wait.terminationStatus == 0 else { bzFail("\(what) did not start") }
    }

    // MARK: D-Bus

    static func open(_ address: String, queue: DispatchQueue? = nil) -> Connection {
        do {
            return try Connection.open(.address(address), queue: queue)
        } catch {
            bzFail("cannot connect to \(address): \(error)")
        }
    }

    @discardableResult
    private func call(_ connection: Connection, _ path: String, _ interface: String, _ member: String,
                      _ arguments: [DBusValue], destination: String) -> Message {
        do {
            let message = try Message.methodCall(destination: destination, path: path, interface: interface,
                                                 member: member)
            try message.append(arguments)
            return try connection.callBlocking(message, timeoutMilliseconds: 10_000)
        } catch {
            bzFail("\(interface).\(member): \(error)")
        }
    }

    /// A connection on a queue of its own that records the signals `match` accepts,
    /// stamped when dispatched. Returns after a round trip to the bus, after which
    /// the match rule is in force.
    private func listen(_ address: String, _ match: SignalMatch,
                        _ event: @escaping @Sendable (Message, UInt64) -> BZEvent?) {
        let queue = DispatchQueue(label: "bench.listen.\(listeners.count)")
        let timeline = timeline
        let connection: Connection = queue.sync {
            let c = Self.open(address, queue: queue)
            c.subscribe(match) { message in
                let at = monotonicNanoseconds()
                if let e = event(message, at) { timeline.record(e) }
            }
            return c
        }
        listeners.append((connection, queue))
        guard busAnswers(connection, on: queue) else { bzFail("the bus at \(address) did not answer") }
    }

    /// Asks GetStatus until the plugin has caught up with bluetoothd (it publishes
    /// "unsupported" first and the adapter once GetManagedObjects answers).
    private func waitForStatus(_ address: String, _ status: String) {
        let client = Self.open(address)
        defer { client.close() }
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            let reply = call(client, "/org/example/Permissions", "org.example.Permissions", "GetStatus",
                             [.string("bluetooth")], destination: "org.example.Permissions")
            if reply.arguments().first?.stringValue == status { return }
            usleep(10_000)
        }
        bzFail("bluetooth never became \(status); see \(root)/permissionsd.log")
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
    private let queue = DispatchQueue(label: "bench.bluetoothd")
    private let connection: Connection
    private var powered = true

    init(address: String) {
        let queue = queue
        connection = queue.sync { BZWorld.open(address, queue: queue) }
        queue.sync {
            do throws(BusError) {
                guard try connection.requestName("org.bluez") == .primaryOwner else { bzFail("org.bluez is taken") }
            } catch {
                bzFail("RequestName org.bluez: \(error)")
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
