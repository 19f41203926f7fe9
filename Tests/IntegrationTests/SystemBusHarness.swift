import Foundation
import Testing
import PermissionsTestSupport

// A stand-in system bus (a private dbus-daemon with the system bus's rules),
// python-dbusmock's polkitd template on it, and permissionsd with --system:
// what PolkitTests and MultiUserTests run against, with real clients as real
// different uids (setpriv).

/// The stand-in system bus of these tests.
typealias PolkitTestSystemBus = TestBus

extension TestBus {
    /// The test runner's environment with this bus as the system bus.
    var environment: [String: String] { asSystemBusEnvironment }

    /// Waits (gdbus, with a deadline) until `name` has an owner on this bus.
    func waitForName(_ name: String) throws {
        let waited = try run("/usr/bin/gdbus", ["wait", "--system", "--timeout", "20", name], environment: environment)
        guard waited.status == 0 else { throw HarnessError(description: "\(name) did not appear: \(waited.stderr)") }
    }

    /// Waits (up to `timeout` seconds) until `name` has no owner on this bus.
    func waitForNameToGo(_ name: String, timeout: TimeInterval = 15) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let r = try run("/usr/bin/busctl", ["--address=\(address)", "call", "org.freedesktop.DBus",
                                                "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner", "s", name])
            if r.stdout == "b false\n" { return }
            if Date() > deadline { throw HarnessError(description: "\(name) still owned after \(timeout) s: \(r)") }
        }
    }
}

/// python-dbusmock's polkitd on the stand-in system bus. It starts allowing nothing.
/// `template` is dbusmock's template: its own polkitd, or a file of ours
/// (Tests/testenv/polkitd-holding.py).
final class PolkitTestMock {
    let bus: PolkitTestSystemBus
    private var process: Process?

    init(bus: PolkitTestSystemBus, template: String = "polkitd") throws {
        self.bus = bus
        let process = Process()
        // Not the pyenv python3 on PATH: only the system one has dbusmock.
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-m", "dbusmock", "--system", "-t", template]
        process.environment = bus.environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        try bus.waitForName("org.freedesktop.PolicyKit1")
    }

    /// The actions polkit allows from now on (the mock's SetAllowed).
    func setAllowed(_ actions: [String]) throws {
        let r = try run("/usr/bin/busctl", ["--address=\(bus.address)", "call", "org.freedesktop.PolicyKit1",
                                            "/org/freedesktop/PolicyKit1/Authority", "org.freedesktop.DBus.Mock",
                                            "SetAllowed", "as", String(actions.count)] + actions)
        guard r.status == 0 else { throw HarnessError(description: "SetAllowed failed: \(r.stderr)") }
    }

    /// SIGSTOP: polkit's answers wait from now on, as a real polkit's do while it
    /// asks its user for a password, until `resume`.
    func pause() {
        if let process { Glibc.kill(process.processIdentifier, SIGSTOP) }
    }

    /// SIGCONT: polkit answers what waited, in order.
    func resume() {
        if let process { Glibc.kill(process.processIdentifier, SIGCONT) }
    }

    /// SIGKILL, and wait until the bus has dropped its name.
    func kill() throws {
        guard let process else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        self.process = nil
        try bus.waitForNameToGo("org.freedesktop.PolicyKit1")
    }

    deinit { try? kill() }
}

/// permissionsd with --system on the stand-in bus (DaemonUnderTest always passes
/// --address, which makes the daemon treat its own uid as admin and never ask polkit).
final class PolkitTestDaemon {
    let bus: PolkitTestSystemBus
    let root: String
    var logFile: String { root + "/permissionsd.log" }
    private var process: Process?

    /// `prepareState` runs with the state directory (made, empty) before the daemon starts.
    init(bus: PolkitTestSystemBus, config: String = "", prepareState: ((String) throws -> Void)? = nil) throws {
        self.bus = bus
        root = try makeTemporaryDirectory("permissionsd-system")
        try FileManager.default.createDirectory(atPath: root + "/config", withIntermediateDirectories: true)
        if let prepareState {
            try FileManager.default.createDirectory(atPath: root + "/state", withIntermediateDirectories: true)
            try prepareState(root + "/state")
        }
        try config.write(toFile: root + "/config/permissions.conf", atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binDir + "/permissionsd")
        process.arguments = ["--system", "--config-dir", root + "/config", "--state-dir", root + "/state",
                             "--plugin-dir", corePluginDirectory, "--verbose", "--host-pid", String(getpid())]
        process.environment = bus.environment
        _ = FileManager.default.createFile(atPath: logFile, contents: nil)
        let logHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: logFile))
        process.standardOutput = logHandle
        process.standardError = logHandle
        process.standardInput = FileHandle.nullDevice
        try process.run()
        self.process = process
        let waited = try run("/usr/bin/gdbus", ["wait", "--system", "--timeout", "20", "org.example.Permissions"],
                             environment: bus.environment)
        guard waited.status == 0, process.isRunning else {
            throw HarnessError(description: "permissionsd did not take its name on the system bus; log:\n\(self.log)")
        }
    }

    var isRunning: Bool { process?.isRunning ?? false }
    var log: String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }

    deinit {
        if let process, process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: root)
    }

    /// `busctl call` on the service object and interface, through the stand-in bus.
    func call(_ member: String, _ signatureAndArguments: String..., asNobody: Bool = false,
              asUser: UInt32? = nil) throws -> CommandResult {
        try run("/usr/bin/busctl", ["--address=\(bus.address)", "call", "org.example.Permissions",
                                    "/org/example/Permissions", "org.example.Permissions", member]
                + signatureAndArguments, asNobody: asNobody, asUser: asUser)
    }

    /// The same through gdbus, whose error output names the D-Bus error.
    func gdbusCall(_ method: String, _ arguments: String..., asNobody: Bool = false,
                   asUser: UInt32? = nil) throws -> CommandResult {
        try run("/usr/bin/gdbus", ["call", "--address", bus.address, "--dest", "org.example.Permissions",
                                   "--object-path", "/org/example/Permissions",
                                   "--method", "org.example.Permissions." + method] + arguments, asNobody: asNobody,
                asUser: asUser)
    }
}

extension PolkitTestDaemon {
    /// permissionsctl on this bus, as root or as `asUser`.
    func ctl(_ arguments: String..., asUser: UInt32? = nil) throws -> CommandResult {
        try run(binDir + "/permissionsctl", ["--address", bus.address] + arguments, asUser: asUser)
    }
}
