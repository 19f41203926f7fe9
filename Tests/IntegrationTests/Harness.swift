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

/// A fresh directory with symbolic links to the named plugins of this build.
func pluginDirectory(_ prefix: String, with names: [String]) -> String {
    let dir = try! makeTemporaryDirectory(prefix)
    for name in names {
        let file = "libpermissions-\(name).so"
        try! FileManager.default.createSymbolicLink(atPath: dir + "/" + file, withDestinationPath: binDir + "/" + file)
    }
    return dir
}

/// A plugin directory with only the config-driven plugins (location, notifications),
/// so that tests of the core see a fixed set of permissions and no backend that
/// reaches for PipeWire or the system bus. Made once per test process.
let corePluginDirectory: String = pluginDirectory("core-plugins", with: ["location", "notifications"])

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
/// an unprivileged user). `type` "system" makes a stand-in system bus;
/// `restartable` puts its socket at a fixed path, so that it can be killed and
/// started again at the same address.
final class TestBus {
    let directory: String
    private(set) var address = ""
    private let restartable: Bool
    private var process: Process?

    init(type: String = "session", restartable: Bool = false) throws {
        directory = try makeTemporaryDirectory("permissions-\(type)-bus")
        self.restartable = restartable
        chmod(directory, 0o755)
        let listen = restartable ? "unix:path=\(directory)/bus_socket" : "unix:dir=\(directory)"
        let config = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>\(type)</type>
              <listen>\(listen)</listen>
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
        try start()
    }

    /// Starts the bus daemon; returns once it listens (it prints its address then).
    func start() throws {
        precondition(process == nil, "the bus is running")
        if restartable { try? FileManager.default.removeItem(atPath: directory + "/bus_socket") }  // left by a SIGKILL
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        process.arguments = ["--nofork", "--config-file=\(directory)/bus.conf", "--print-address=1"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice  // "Failed to set fd limit" noise
        try process.run()
        self.process = process
        var line = Data()
        while true {
            let byte = out.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty { throw HarnessError(description: "dbus-daemon exited before printing its address") }
            if byte.first == UInt8(ascii: "\n") { break }
            line.append(byte)
        }
        // With a fixed socket, the same address every time (without the guid, which changes).
        address = restartable ? "unix:path=\(directory)/bus_socket" : String(decoding: line, as: UTF8.self)
    }

    /// SIGKILL (children of the test runner inherit its blocked SIGTERM): every
    /// client sees its connection drop.
    func kill() {
        guard let process else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        self.process = nil
    }

    /// The test runner's environment with this bus as the system bus.
    var asSystemBusEnvironment: [String: String] {
        ProcessInfo.processInfo.environment.merging(["DBUS_SYSTEM_BUS_ADDRESS": address]) { $1 }
    }

    deinit {
        kill()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// permissionsd running on a test bus, with its own directories.
final class DaemonUnderTest {
    let bus: TestBus
    let root: String
    /// root/config unless a test moves it before start.
    var configDirectory: String
    var stateDirectory: String { root + "/state" }
    var pluginDirectories: [String]
    /// Extra environment for the daemon (e.g. XDG_RUNTIME_DIR for PipeWire,
    /// DBUS_SYSTEM_BUS_ADDRESS for BlueZ), on top of the test runner's.
    var environment: [String: String]
    var logFile: String { root + "/permissionsd.log" }
    /// Run as uid/gid 65534 (nobody) instead of root, owning its directories.
    var asNobody = false
    private var process: Process?
    /// Signalled once when the running process exits (its termination handler).
    private var exited = DispatchSemaphore(value: 0)

    /// Starts permissionsd with `config` as permissions.conf and the location and
    /// notifications plugins of this build, unless `pluginDirectories` says otherwise.
    init(bus: TestBus, config: String = "", pluginDirectories: [String]? = nil,
         environment: [String: String] = [:], start: Bool = true) throws {
        self.bus = bus
        self.environment = environment
        root = try makeTemporaryDirectory("permissionsd")
        configDirectory = root + "/config"
        try FileManager.default.createDirectory(atPath: root + "/config", withIntermediateDirectories: true)
        self.pluginDirectories = pluginDirectories ?? [corePluginDirectory]
        try writeConfig(config)
        if start { try self.start() }
    }

    /// Starts permissionsd and, with `waitForName`, waits until it owns its name.
    func start(waitForName: Bool = true) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binDir + "/permissionsd")
        process.arguments = ["--address", bus.address, "--config-dir", configDirectory, "--state-dir", stateDirectory,
                             "--verbose"] + pluginDirectories.flatMap { ["--plugin-dir", $0] }
        if asNobody {
            for path in [root, configDirectory] + ((try? FileManager.default.subpathsOfDirectory(atPath: configDirectory))
                                                   ?? []).map({ configDirectory + "/" + $0 }) {
                #expect(chown(path, 65534, 65534) == 0, "chown \(path)")
            }
            process.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", binDir + "/permissionsd"]
                + process.arguments!
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        }
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        _ = FileManager.default.createFile(atPath: logFile, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logFile))
        log.seekToEndOfFile()
        process.standardError = log
        process.standardOutput = log
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        self.exited = exited
        try process.run()
        self.process = process
        guard waitForName else { return }
        let waited = try run("/usr/bin/gdbus", ["wait", "--address", bus.address, "--timeout", "20",
                                                "org.example.Permissions"])
        guard waited.status == 0, process.isRunning else {
            throw HarnessError(description: "permissionsd did not take its name; log:\n\(self.log)")
        }
    }

    /// SIGTERM, and wait for the exit. (Children of the test runner inherit a signal
    /// mask that blocks SIGTERM; permissionsd blocks it anyway and takes it from a
    /// signalfd.)
    func stop() {
        guard let process, process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
        self.process = nil
    }

    /// How the process ended: `.exit` with its status, or `.uncaughtSignal` with the signal.
    struct Ending: Equatable, CustomStringConvertible {
        let reason: Process.TerminationReason
        let status: Int32
        var description: String { reason == .exit ? "exit \(status)" : "signal \(status)" }
    }

    /// SIGTERM, then waits at most `timeout` for the exit. Returns how it ended, or
    /// nil if it was still running at the deadline (it is then killed).
    func terminate(timeout: TimeInterval) -> Ending? {
        guard let process else { return nil }
        Glibc.kill(process.processIdentifier, SIGTERM)
        return waitForExit(timeout: timeout)
    }

    /// Waits at most `timeout` for the process to end (whoever made it end).
    /// Returns how it ended, or nil if it was still running (it is then killed).
    func waitForExit(timeout: TimeInterval) -> Ending? {
        guard let process else { return nil }
        defer { self.process = nil }
        guard exited.wait(timeout: .now() + timeout) == .success else {
            Glibc.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return nil
        }
        process.waitUntilExit()
        return Ending(reason: process.terminationReason, status: process.terminationStatus)
    }

    var processIdentifier: Int32? { process?.processIdentifier }

    /// SIGTERM, and wait at most `seconds` for the exit; false (and SIGKILL) if it
    /// takes longer.
    func stop(within seconds: Double) -> Bool {
        guard process != nil else { return true }
        return terminate(timeout: seconds) != nil
    }

    /// SIGKILL: no chance to clean up, as in a crash.
    func kill() {
        guard let process, process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        self.process = nil
    }

    var isRunning: Bool { process?.isRunning ?? false }

    /// The daemon's process id while it runs (for /proc figures and signals).
    var pid: Int32? { process?.isRunning == true ? process?.processIdentifier : nil }

    var log: String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }

    /// The log's lines that contain `text`.
    func logLines(containing text: String) -> [String] {
        log.split(separator: "\n").filter { $0.contains(text) }.map(String.init)
    }

    /// Waits until the log has `count` lines containing `text` (woken by inotify on
    /// the log file, not by polling); returns the first such line.
    @discardableResult
    func waitForLog(_ text: String, count: Int = 1, timeout: TimeInterval = 15) throws -> String {
        let fd = inotify_init1(Int32(IN_CLOEXEC))
        guard fd >= 0, inotify_add_watch(fd, logFile, UInt32(IN_MODIFY)) >= 0 else {
            throw HarnessError(description: "cannot watch \(logFile)")
        }
        defer { close(fd) }
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let lines = logLines(containing: text)
            if lines.count >= count { return lines[0] }
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else {
                throw HarnessError(description: "not \(count) log lines with \"\(text)\" within \(timeout) s:\n\(log)")
            }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&pfd, 1, Int32(left * 1000) + 1) > 0 {
                var buffer = [UInt8](repeating: 0, count: 4096)
                _ = read(fd, &buffer, buffer.count)
            }
        }
    }

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

/// Lines a child process prints, collected by a thread of their own.
///
/// `@unchecked Sendable`: `lines`, `closed` and `consumed` are only touched under
/// `condition`'s lock.
final class LineCollector: @unchecked Sendable {
    private let condition = NSCondition()
    private var lines: [String] = []
    private var closed = false
    private var consumed = 0

    /// Reads `handle` to its end on a new thread.
    init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            var pending = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...newline)
                    condition.lock()
                    lines.append(line)
                    condition.broadcast()
                    condition.unlock()
                }
            }
            condition.lock()
            closed = true
            condition.broadcast()
            condition.unlock()
        }
    }

    var all: [String] {
        condition.lock()
        defer { condition.unlock() }
        return lines
    }

    /// Waits until `predicate` holds for every line so far; returns them.
    @discardableResult
    func wait(timeout: TimeInterval = 15, what: String, until predicate: ([String]) -> Bool) throws -> [String] {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while !predicate(lines) {
            if closed || !condition.wait(until: deadline) {
                guard predicate(lines) else {
                    let why = closed ? " (output closed)" : ""
                    throw HarnessError(description: "\(what): not within \(timeout) s\(why); lines: \(lines.suffix(40))")
                }
                break
            }
        }
        return lines
    }

    /// Waits for a line matching `predicate` after those earlier calls returned;
    /// returns it.
    @discardableResult
    func next(timeout: TimeInterval = 15, matching predicate: (String) -> Bool) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let index = lines[consumed...].firstIndex(where: predicate) {
                consumed = index + 1
                return lines[index]
            }
            if closed || !condition.wait(until: deadline) {
                throw HarnessError(description: "no matching line within \(timeout) s; saw: \(lines.suffix(40))")
            }
        }
    }
}

/// `permissionsctl monitor` as a subscriber. Lines are compared without their
/// " serial=N" part, which `serials` gives separately.
final class Monitor {
    private let process = Process()
    private let output: LineCollector

    init(_ daemon: DaemonUnderTest) throws {
        process.executableURL = URL(fileURLWithPath: binDir + "/permissionsctl")
        process.arguments = ["--address", daemon.bus.address, "monitor"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        output = LineCollector(out.fileHandleForReading)
        // The monitor says "Monitoring …" once its match rules are in force.
        _ = try waitFor { $0.hasPrefix("Monitoring") }
    }

    deinit {
        kill(process.processIdentifier, SIGKILL)  // see TestBus.kill
        process.waitUntilExit()
    }

    private static func withoutSerial(_ line: String) -> String {
        line.range(of: " serial=").map { String(line[..<$0.lowerBound]) } ?? line
    }

    /// Waits for a line (without its serial) matching `predicate`, after the lines
    /// earlier waits returned; returns it.
    @discardableResult
    func waitFor(timeout: TimeInterval = 15, _ predicate: (String) -> Bool) throws -> String {
        Self.withoutSerial(try output.next(timeout: timeout) { predicate(Self.withoutSerial($0)) })
    }

    /// Every line received so far (without serials), consumed or not.
    var all: [String] { output.all.map(Self.withoutSerial) }

    /// The StatusChanged lines received so far (all, including consumed ones).
    var statusChanges: [String] {
        output.all.filter { $0.hasPrefix("StatusChanged") }.map(Self.withoutSerial)
    }

    /// The serials of the StatusChanged signals received so far, in order.
    var serials: [UInt64] {
        output.all.compactMap { line in line.range(of: " serial=").flatMap { UInt64(line[$0.upperBound...]) } }
    }
}

/// The line `permissionsctl monitor` prints for StatusChanged(app, permission, status).
func statusLine(app: String, _ permission: String, _ status: String) -> String {
    "StatusChanged app=\(app.isEmpty ? "*" : app) permission=\(permission) status=\(status)"
}
