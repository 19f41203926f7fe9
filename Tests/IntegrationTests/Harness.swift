import Foundation
import Testing

// Real components for integration tests, one set per test (the dbus-broker
// util-broker habit): a private dbus-daemon, permissionsd as a real process with
// its own config, state and plugin directories, and real clients (busctl, gdbus,
// permissionsctl). Waiting is always for an event with a deadline, never a sleep.

/// Where `swift build` put the binaries: $PERMISSIONS_BIN_DIR (scripts/test sets it),
/// else .build/debug of this checkout.
let binDir: String = {
    // Resolved, because tests compare it with the executable paths the daemon reads
    // from /proc (which never contain symbolic links).
    if let dir = ProcessInfo.processInfo.environment["PERMISSIONS_BIN_DIR"] {
        return URL(fileURLWithPath: dir).resolvingSymlinksInPath().path
    }
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    return root.appendingPathComponent(".build/debug").path
}()

/// A plugin directory with only the config-driven plugins (location, notifications),
/// so that tests of the core see a fixed set of permissions and no backend that
/// reaches for PipeWire or the system bus. Made once per test process.
let corePluginDirectory: String = {
    let dir = try! makeTemporaryDirectory("core-plugins")
    for name in ["location", "notifications"] {
        let file = "libpermissions-\(name).so"
        try! FileManager.default.createSymbolicLink(atPath: dir + "/" + file, withDestinationPath: binDir + "/" + file)
    }
    return dir
}()

let packageRoot: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent().path

struct HarnessError: Error, CustomStringConvertible {
    let description: String
}

/// A fresh directory, removed by `remove()`.
func makeTemporaryDirectory(_ prefix: String = "permissions-test") throws -> String {
    var template = Array((NSTemporaryDirectory() + "/\(prefix).XXXXXX").utf8CString)
    guard let made = mkdtemp(&template) else { throw HarnessError(description: "mkdtemp failed") }
    return String(cString: made)
}

/// What a finished command printed.
struct CommandResult {
    let status: Int32
    let stdout: String
    let stderr: String
}

/// Runs a command to completion. With `asNobody`, it runs as uid/gid 65534 through
/// setpriv, to play a caller who is not an administrator.
@discardableResult
func run(_ executable: String, _ arguments: [String], asNobody: Bool = false,
         environment: [String: String]? = nil) throws -> CommandResult {
    let process = Process()
    if asNobody {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", executable] + arguments
    } else {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
    }
    if let environment { process.environment = environment }
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = FileHandle.nullDevice
    try process.run()
    // Read both pipes to the end before waiting, so a chatty command cannot block.
    let group = DispatchGroup()
    nonisolated(unsafe) var errData = Data()
    group.enter()
    DispatchQueue.global().async {
        errData = err.fileHandleForReading.readDataToEndOfFile()
        group.leave()
    }
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    group.wait()
    process.waitUntilExit()
    return CommandResult(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                         stderr: String(decoding: errData, as: UTF8.self))
}

/// A private dbus-daemon that any local user may connect to (so tests can call as
/// an unprivileged user).
final class TestBus {
    let directory: String
    let address: String
    private let process: Process

    init() throws {
        directory = try makeTemporaryDirectory("permissions-bus")
        chmod(directory, 0o755)
        let config = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:dir=\(directory)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
                <allow user="*"/>
              </policy>
            </busconfig>
            """
        try config.write(toFile: directory + "/bus.conf", atomically: true, encoding: .utf8)
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        process.arguments = ["--nofork", "--config-file=\(directory)/bus.conf", "--print-address=1"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice  // "Failed to set fd limit" noise
        try process.run()
        // The first line is the address, printed once the bus listens.
        var line = Data()
        while true {
            let byte = out.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty { throw HarnessError(description: "dbus-daemon exited before printing its address") }
            if byte.first == UInt8(ascii: "\n") { break }
            line.append(byte)
        }
        address = String(decoding: line, as: UTF8.self)
    }

    deinit {
        // SIGKILL: children of the test runner inherit its blocked SIGTERM.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// permissionsd running on a test bus, with its own directories.
final class DaemonUnderTest {
    let bus: TestBus
    let root: String
    var configDirectory: String { root + "/config" }
    var stateDirectory: String { root + "/state" }
    var pluginDirectories: [String]
    /// Extra environment for the daemon (e.g. XDG_RUNTIME_DIR for PipeWire,
    /// DBUS_SYSTEM_BUS_ADDRESS for BlueZ), on top of the test runner's.
    var environment: [String: String]
    var logFile: String { root + "/permissionsd.log" }
    private var process: Process?

    /// Starts permissionsd with `config` as permissions.conf and the location and
    /// notifications plugins of this build, unless `pluginDirectories` says otherwise.
    init(bus: TestBus, config: String = "", pluginDirectories: [String]? = nil,
         environment: [String: String] = [:], start: Bool = true) throws {
        self.bus = bus
        self.environment = environment
        root = try makeTemporaryDirectory("permissionsd")
        try FileManager.default.createDirectory(atPath: root + "/config", withIntermediateDirectories: true)
        self.pluginDirectories = pluginDirectories ?? [corePluginDirectory]
        try writeConfig(config)
        if start { try self.start() }
    }

    func start() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binDir + "/permissionsd")
        process.arguments = ["--address", bus.address, "--config-dir", configDirectory, "--state-dir", stateDirectory,
                             "--verbose"] + pluginDirectories.flatMap { ["--plugin-dir", $0] }
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        _ = FileManager.default.createFile(atPath: logFile, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logFile))
        log.seekToEndOfFile()
        process.standardError = log
        process.standardOutput = log
        try process.run()
        self.process = process
        let waited = try run("/usr/bin/gdbus", ["wait", "--address", bus.address, "--timeout", "20",
                                                "org.example.Permissions"])
        guard waited.status == 0, process.isRunning else {
            throw HarnessError(description: "permissionsd did not take its name; log:\n\(self.log)")
        }
    }

    /// SIGTERM, and wait for the exit. (permissionsd unblocks SIGTERM itself: children
    /// of the test runner inherit a signal mask that blocks it.)
    func stop() {
        guard let process, process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
        self.process = nil
    }

    /// SIGKILL: no chance to clean up, as in a crash.
    func kill() {
        guard let process, process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        self.process = nil
    }

    var isRunning: Bool { process?.isRunning ?? false }

    var log: String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }

    /// Replaces permissions.conf the way an editor that renames does, so the daemon
    /// never sees a half-written file.
    func writeConfig(_ text: String, name: String = "permissions.conf") throws {
        try text.write(toFile: configDirectory + "/" + name, atomically: true, encoding: .utf8)
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: root)
    }

    // Clients.

    func busctl(_ arguments: [String], asNobody: Bool = false) throws -> CommandResult {
        try run("/usr/bin/busctl", ["--address=\(bus.address)"] + arguments, asNobody: asNobody)
    }

    /// `busctl call` on the service object and interface.
    func call(_ member: String, _ signatureAndArguments: String..., asNobody: Bool = false) throws -> CommandResult {
        try busctl(["call", "org.example.Permissions", "/org/example/Permissions", "org.example.Permissions", member]
                   + signatureAndArguments, asNobody: asNobody)
    }

    func gdbusCall(_ method: String, _ arguments: String...) throws -> CommandResult {
        try run("/usr/bin/gdbus", ["call", "--address", bus.address, "--dest", "org.example.Permissions",
                                   "--object-path", "/org/example/Permissions",
                                   "--method", "org.example.Permissions." + method] + arguments)
    }

    func ctl(_ arguments: String..., asNobody: Bool = false) throws -> CommandResult {
        try run(binDir + "/permissionsctl", ["--address", bus.address] + arguments, asNobody: asNobody)
    }
}

/// `permissionsctl monitor` as a subscriber: collects the lines it prints.
final class Monitor: @unchecked Sendable {
    // @unchecked Sendable: `lines` is only touched under `condition`'s lock.
    private let process = Process()
    private let condition = NSCondition()
    private var lines: [String] = []
    private var serialsSeen: [UInt64] = []

    /// The serials of the StatusChanged signals received so far, in order.
    var serials: [UInt64] {
        condition.lock()
        defer { condition.unlock() }
        return serialsSeen
    }

    init(_ daemon: DaemonUnderTest) throws {
        process.executableURL = URL(fileURLWithPath: binDir + "/permissionsctl")
        process.arguments = ["--address", daemon.bus.address, "monitor"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let handle = out.fileHandleForReading
        Thread.detachNewThread { [self] in
            var pending = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    var line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...newline)
                    // Lines are kept without the serial, which tests compare separately.
                    var serial: UInt64?
                    if let range = line.range(of: " serial=") {
                        serial = UInt64(line[range.upperBound...])
                        line.removeSubrange(range.lowerBound...)
                    }
                    condition.lock()
                    lines.append(line)
                    if let serial { serialsSeen.append(serial) }
                    condition.broadcast()
                    condition.unlock()
                }
            }
        }
        // The monitor says "Monitoring …" once its match rules are in force.
        _ = try waitFor { $0.hasPrefix("Monitoring") }
    }

    deinit {
        kill(process.processIdentifier, SIGKILL)  // see TestBus.deinit
        process.waitUntilExit()
    }

    /// Waits (up to `timeout` seconds) for a line matching `predicate` that comes
    /// after the lines already consumed by earlier waits; returns it.
    private var consumed = 0

    @discardableResult
    func waitFor(timeout: TimeInterval = 15, _ predicate: (String) -> Bool) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let index = lines[consumed...].firstIndex(where: predicate) {
                consumed = index + 1
                return lines[index]
            }
            if !condition.wait(until: deadline) {
                throw HarnessError(description: "no matching line within \(timeout) s; saw: \(lines)")
            }
        }
    }

    /// The StatusChanged lines received so far (all, including consumed ones).
    var statusChanges: [String] {
        condition.lock()
        defer { condition.unlock() }
        return lines.filter { $0.hasPrefix("StatusChanged") }
    }
}

/// The line `permissionsctl monitor` prints for StatusChanged(app, permission, status).
func statusLine(app: String, _ permission: String, _ status: String) -> String {
    "StatusChanged app=\(app.isEmpty ? "*" : app) permission=\(permission) status=\(status)"
}
