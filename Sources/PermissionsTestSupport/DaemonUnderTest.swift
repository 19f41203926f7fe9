public import Foundation

/// permissionsd running on a test bus, with its own directories.
public final class DaemonUnderTest {
    public let bus: TestBus
    public let root: String
    /// root/config unless a test moves it before start.
    public var configDirectory: String
    public var stateDirectory: String { root + "/state" }
    public var pluginDirectories: [String]
    /// Extra environment for the daemon (e.g. XDG_RUNTIME_DIR for PipeWire,
    /// DBUS_SYSTEM_BUS_ADDRESS for BlueZ), on top of the test runner's.
    public var environment: [String: String]
    public var logFile: String { root + "/permissionsd.log" }
    /// Run as uid/gid 65534 (nobody) instead of root, owning its directories.
    public var asNobody = false
    /// The process whose mount namespace counts as the host's (`--host-pid`): the test
    /// runner, since PID 1 of the test machines may not be readable (a VM's init, a
    /// container's); or "self"; empty for no --host-pid (the daemon's default, or its
    /// configuration's [identity] host-pid=).
    public var hostPID = String(getpid())
    /// A command that runs the daemon (it must exec it, keeping the process id), such
    /// as `["/usr/bin/unshare", "-n", "--"]` for a network namespace of its own.
    public var launcher: [String] = []
    /// The directory whose `permissionsd` runs: this build's (`binDir`), or another
    /// build's, such as the release build that ships (`releaseBinDir`).
    public var programDirectory = binDir
    /// Where the daemon's standard error (and output) go instead of `logFile`.
    public var standardError: FileHandle?
    /// Tells the daemon (JOURNAL_STREAM) that `logFile` is the journal's stream, as
    /// systemd does for a service whose output goes to the journal.
    public var logFileIsJournalStream = false
    /// More options for the daemon, after the harness's own (`--user-runtime-root`).
    public var extraArguments: [String] = []
    private var process: Process?
    /// Signalled once when the running process exits (its termination handler).
    private var exited = DispatchSemaphore(value: 0)

    /// Starts permissionsd with `config` as permissions.conf and the location and
    /// notifications plugins of this build, unless `pluginDirectories` says otherwise.
    public init(bus: TestBus, config: String = "", pluginDirectories: [String]? = nil,
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
    public func start(waitForName: Bool = true) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: programDirectory + "/permissionsd")
        process.arguments = ["--address", bus.address, "--config-dir", configDirectory, "--state-dir", stateDirectory,
                             "--verbose"] + (hostPID.isEmpty ? [] : ["--host-pid", hostPID])
            + pluginDirectories.flatMap { ["--plugin-dir", $0] } + extraArguments
        if asNobody {
            for path in [root, configDirectory] + ((try? FileManager.default.subpathsOfDirectory(atPath: configDirectory))
                                                   ?? []).map({ configDirectory + "/" + $0 }) {
                guard chown(path, 65534, 65534) == 0 else { throw HarnessError(description: "chown \(path) failed") }
            }
            process.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", programDirectory + "/permissionsd"]
                + process.arguments!
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        }
        if !launcher.isEmpty {
            process.arguments = launcher.dropFirst() + [process.executableURL!.path] + process.arguments!
            process.executableURL = URL(fileURLWithPath: launcher[0])
        }
        _ = FileManager.default.createFile(atPath: logFile, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logFile))
        var journal = environment
        var st = stat()
        if logFileIsJournalStream, fstat(log.fileDescriptor, &st) == 0 { journal["JOURNAL_STREAM"] = "\(st.st_dev):\(st.st_ino)" }
        process.environment = ProcessInfo.processInfo.environment.merging(journal) { $1 }
        log.seekToEndOfFile()
        process.standardError = standardError ?? log
        process.standardOutput = standardError ?? log
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
    public func stop() {
        guard let process, process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
        self.process = nil
    }

    /// How the process ended: `.exit` with its status, or `.uncaughtSignal` with the signal.
    public struct Ending: Equatable, CustomStringConvertible {
        public let reason: Process.TerminationReason
        public let status: Int32
        public init(reason: Process.TerminationReason, status: Int32) {
            self.reason = reason
            self.status = status
        }
        public var description: String { reason == .exit ? "exit \(status)" : "signal \(status)" }
    }

    /// SIGTERM, then waits at most `timeout` for the exit. Returns how it ended, or
    /// nil if it was still running at the deadline (it is then killed).
    public func terminate(timeout: TimeInterval) -> Ending? {
        guard let process else { return nil }
        Glibc.kill(process.processIdentifier, SIGTERM)
        return waitForExit(timeout: timeout)
    }

    /// Waits at most `timeout` for the process to end (whoever made it end).
    /// Returns how it ended, or nil if it was still running (it is then killed).
    public func waitForExit(timeout: TimeInterval) -> Ending? {
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

    public var processIdentifier: Int32? { process?.processIdentifier }

    /// SIGTERM, and wait at most `seconds` for the exit; false (and SIGKILL) if it
    /// takes longer.
    public func stop(within seconds: Double) -> Bool {
        guard process != nil else { return true }
        return terminate(timeout: seconds) != nil
    }

    /// SIGKILL: no chance to clean up, as in a crash.
    public func kill() {
        guard let process, process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        self.process = nil
    }

    public var isRunning: Bool { process?.isRunning ?? false }

    /// The daemon's process id while it runs (for /proc figures and signals).
    public var pid: Int32? { process?.isRunning == true ? process?.processIdentifier : nil }

    public var log: String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }

    /// The log's lines that contain `text`.
    public func logLines(containing text: String) -> [String] {
        log.split(separator: "\n").filter { $0.contains(text) }.map(String.init)
    }

    /// Waits until the log has `count` lines containing `text` (woken by inotify on
    /// the log file, not by polling); returns the first such line.
    @discardableResult
    public func waitForLog(_ text: String, count: Int = 1, timeout: TimeInterval = 15) throws -> String {
        try wait(watching: logFile, for: UInt32(IN_MODIFY), timeout: timeout,
                 failure: { "not \(count) log lines with \"\(text)\" within \(timeout) s:\n\(self.log)" }) {
            let lines = logLines(containing: text)
            return lines.count >= count ? lines[0] : nil
        }
    }

    /// Waits until the decision store's WAL is empty or gone (woken by inotify on the
    /// state directory): the start checkpoints it after storing its serial epoch, and
    /// may own its name before that checkpoint is over.
    public func waitForEmptiedWAL(timeout: TimeInterval = 15) throws {
        let wal = stateDirectory + "/decisions.sqlite-wal"
        try wait(watching: stateDirectory, for: UInt32(IN_MODIFY | IN_DELETE), timeout: timeout,
                 failure: { "\(wal) not emptied within \(timeout) s" }) {
            var info = stat()
            return stat(wal, &info) != 0 || info.st_size == 0 ? () : nil
        }
    }

    /// Checks `done` now and after each inotify event `mask` on `path`, until it
    /// gives a value or `timeout` has passed (then throws `failure()`). The watch is
    /// made before the first check, so a change between the two is not missed.
    private func wait<T>(watching path: String, for mask: UInt32, timeout: TimeInterval,
                         failure: () -> String, until done: () -> T?) throws -> T {
        let fd = inotify_init1(Int32(IN_CLOEXEC))
        guard fd >= 0 else { throw HarnessError(description: "cannot watch \(path)") }
        defer { close(fd) }
        guard inotify_add_watch(fd, path, mask) >= 0 else { throw HarnessError(description: "cannot watch \(path)") }
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let value = done() { return value }
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { throw HarnessError(description: failure()) }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&pfd, 1, Int32(left * 1000) + 1) > 0 {
                var buffer = [UInt8](repeating: 0, count: 4096)
                _ = read(fd, &buffer, buffer.count)
            }
        }
    }

    /// Replaces permissions.conf the way an editor that renames does, so the daemon
    /// never sees a half-written file.
    public func writeConfig(_ text: String, name: String = "permissions.conf") throws {
        try text.write(toFile: configDirectory + "/" + name, atomically: true, encoding: .utf8)
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: root)
    }

    // Clients.

    public func busctl(_ arguments: [String], asNobody: Bool = false) throws -> CommandResult {
        try run("/usr/bin/busctl", ["--address=\(bus.address)"] + arguments, asNobody: asNobody)
    }

    /// `busctl call` on the service object and interface.
    public func call(_ member: String, _ signatureAndArguments: String..., asNobody: Bool = false) throws -> CommandResult {
        try busctl(["call", "org.example.Permissions", "/org/example/Permissions", "org.example.Permissions", member]
                   + signatureAndArguments, asNobody: asNobody)
    }

    public func gdbusCall(_ method: String, _ arguments: String...) throws -> CommandResult {
        try run("/usr/bin/gdbus", ["call", "--address", bus.address, "--dest", "org.example.Permissions",
                                   "--object-path", "/org/example/Permissions",
                                   "--method", "org.example.Permissions." + method] + arguments)
    }

    public func ctl(_ arguments: String..., asNobody: Bool = false) throws -> CommandResult {
        try run(binDir + "/permissionsctl", ["--address", bus.address] + arguments, asNobody: asNobody)
    }
}
