import Foundation
import Testing
import PermissionsTestSupport

// Real components for the BlueZ plugin, one set per test: a stand-in system bus (its
// own dbus-daemon, which the daemon reaches through DBUS_SYSTEM_BUS_ADDRESS), the
// python3-dbusmock bluez5 template on it playing bluetoothd, permissionsd with the
// bluetooth plugin on a private bus, and `permissionsctl monitor`. No real
// bluetoothd or HCI here (TESTENV.md §3).

/// A plugin directory with the bluetooth plugin, and location for fences and for
/// tests that need another permission. Made once per test process.
let bluetoothPluginDirectory: String = pluginDirectory("bluetooth-plugins", with: ["bluetooth", "location"])

/// A stand-in system bus that can be killed and started again at the same address
/// (a restart of the system bus).
typealias StandInSystemBus = TestBus

extension TestBus {
    static func standInSystemBus() throws -> TestBus { try TestBus(type: "system", restartable: true) }
}

/// python3-dbusmock's bluez5 template on a stand-in system bus: bluetoothd as far
/// as the bus can tell. Driven with gdbus, as a user would.
final class BlueZMock {
    let bus: StandInSystemBus
    private var process: Process?

    init(bus: StandInSystemBus, start: Bool = true) throws {
        self.bus = bus
        if start { try self.start() }
    }

    /// Starts the mock; returns once it owns org.bluez. A new mock has no adapters.
    func start() throws {
        let process = Process()
        // Debian's python: the pyenv one on PATH has no dbusmock (TESTENV E1).
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-m", "dbusmock", "--system", "-t", "bluez5"]
        process.environment = ProcessInfo.processInfo.environment.merging(["DBUS_SYSTEM_BUS_ADDRESS": bus.address]) { $1 }
        let logFile = bus.directory + "/bluez-mock.log"
        if !FileManager.default.fileExists(atPath: logFile) { _ = FileManager.default.createFile(atPath: logFile, contents: nil) }
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logFile))
        log.seekToEndOfFile()
        process.standardOutput = log
        process.standardError = log
        try process.run()
        self.process = process
        let waited = try run("/usr/bin/gdbus", ["wait", "--address", bus.address, "--timeout", "20", "org.bluez"])
        guard waited.status == 0, process.isRunning else {
            throw HarnessError(description: "the bluez5 mock did not take org.bluez: \(waited.stderr)")
        }
    }

    /// SIGKILL, as in a crash: the bus says only NameOwnerChanged (TESTENV E11).
    func kill() {
        guard let process else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        self.process = nil
    }

    /// SIGSTOP: it keeps org.bluez but answers nothing, a hung bluetoothd.
    func freeze() {
        if let process { Glibc.kill(process.processIdentifier, SIGSTOP) }
    }

    func thaw() {
        if let process { Glibc.kill(process.processIdentifier, SIGCONT) }
    }

    deinit { kill() }

    // Driving it. `device` must end in a digit (hci0): the mock derives the address
    // from that digit (TESTENV E11).

    func addAdapter(_ device: String, name: String = "test-host") throws {
        try call("/", "org.bluez.Mock.AddAdapter", device, name)
    }

    func removeAdapter(_ device: String) throws {
        try call("/", "org.bluez.Mock.RemoveAdapter", device)
    }

    /// Properties.Set, which emits PropertiesChanged even when the value is the same.
    func set(_ device: String, _ property: String, _ gvariant: String) throws {
        try call("/org/bluez/\(device)", "org.freedesktop.DBus.Properties.Set", "org.bluez.Adapter1", property, gvariant)
    }

    func setPowered(_ device: String, _ on: Bool) throws {
        try set(device, "Powered", on ? "<true>" : "<false>")
    }

    /// Gives the adapter a property it lacks (the template has no PowerState),
    /// without a signal.
    func addProperty(_ device: String, _ property: String, _ gvariant: String) throws {
        try call("/org/bluez/\(device)", "org.freedesktop.DBus.Mock.AddProperty", "org.bluez.Adapter1", property, gvariant)
    }

    /// Changes several properties in one PropertiesChanged signal, e.g.
    /// `{'Powered': <false>, 'PowerState': <'off-blocked'>}`.
    func update(_ device: String, _ dictionary: String) throws {
        try call("/org/bluez/\(device)", "org.freedesktop.DBus.Mock.UpdateProperties", "org.bluez.Adapter1", dictionary)
    }

    func call(_ path: String, _ method: String, _ arguments: String...) throws {
        let r = try run("/usr/bin/gdbus", ["call", "--address", bus.address, "--dest", "org.bluez",
                                           "--object-path", path, "--method", method] + arguments)
        guard r.status == 0 else { throw HarnessError(description: "\(method) \(arguments): \(r.stderr)") }
    }
}

/// Everything one bluetooth test needs.
final class BlueZWorld {
    let bus: TestBus
    let system: StandInSystemBus
    let mock: BlueZMock
    let daemon: DaemonUnderTest
    let monitor: Monitor

    init(config: String = "", mockRunning: Bool = true, beforeDaemon: (BlueZMock) throws -> Void = { _ in }) throws {
        bus = try TestBus()
        system = try TestBus.standInSystemBus()
        mock = try BlueZMock(bus: system, start: mockRunning)
        try beforeDaemon(mock)
        daemon = try DaemonUnderTest(bus: bus, config: config, pluginDirectories: [bluetoothPluginDirectory],
                                     environment: ["DBUS_SYSTEM_BUS_ADDRESS": system.address])
        monitor = try Monitor(daemon)
    }

    /// Waits for the next StatusChanged of `bluetooth` and returns its status word.
    /// Lines are consumed in order, so an unexpected signal shows up as the wrong
    /// word here rather than going unnoticed.
    func nextStatus(timeout: TimeInterval = 15) throws -> String {
        let line = try monitor.waitFor(timeout: timeout) { $0.hasPrefix("StatusChanged ") && $0.contains(" permission=bluetooth ") }
        guard line.hasPrefix("StatusChanged app=* "), let word = line.split(separator: "=").last else {
            throw HarnessError(description: "unexpected line \(line)")
        }
        return String(word)
    }

    /// Every bluetooth StatusChanged so far, as status words.
    var statuses: [String] {
        monitor.statusChanges.filter { $0.contains(" permission=bluetooth ") }.map { String($0.split(separator: "=").last!) }
    }

    /// `busctl call GetStatus s bluetooth`, as the test process.
    func status() throws -> String {
        let r = try daemon.call("GetStatus", "s", "bluetooth")
        guard r.status == 0 else { throw HarnessError(description: "GetStatus: \(r.stderr)") }
        return r.stdout
    }

    /// Waits (up to `timeout` s) until the daemon's log contains `text`, woken by
    /// the log file's changes (`DaemonUnderTest.waitForLog`).
    func waitForLog(_ text: String, timeout: TimeInterval = 20) throws {
        try daemon.waitForLog(text, timeout: timeout)
    }
}
