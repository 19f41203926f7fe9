import Foundation
import Testing
import PermissionsTestSupport

// Real PipeWire for the PipeWire plugin's tests: one private daemon per test, with
// the minimal headless config of Tests/testenv (no session manager, no hardware),
// fake cameras and microphones made with pw-cli, and permissionsd loading the
// plugin this build made. Every wait is for an event, with a deadline.

/// A plugin directory with the PipeWire plugin, plus notifications (whose admin
/// locks serve as fences) and location. Made once per test process.
let pipewirePluginDirectory: String = pluginDirectory("pipewire-plugins", with: ["pipewire", "notifications", "location"])

/// The environment minus PipeWire's own variables, so that only what a test sets
/// decides which PipeWire a process reaches.
func environmentWithoutPipeWire() -> [String: String] {
    ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PIPEWIRE_") }
}

/// A private PipeWire daemon in a runtime directory of its own.
final class TestPipeWire {
    let runtimeDirectory: String
    private var process: Process?
    static let config = packageRoot + "/Tests/testenv/pipewire-test.conf"

    /// Makes the runtime directory and, unless `start` is false, starts PipeWire.
    init(start: Bool = true) throws {
        runtimeDirectory = try makeTemporaryDirectory("pipewire-runtime")
        if start { try self.start() }
    }

    /// Starts PipeWire and returns once it listens on `runtimeDirectory/pipewire-0`.
    /// Readiness is PipeWire's own "Listening on" log line (protocol-native at info
    /// level), printed after listen(2): from then on connections queue until it
    /// accepts them, so there is no window where a client is refused.
    func start() throws {
        precondition(process == nil, "PipeWire already running")
        var environment = environmentWithoutPipeWire()
        environment["XDG_RUNTIME_DIR"] = runtimeDirectory
        process = try Self.launch(["/usr/bin/pipewire", "-c", Self.config], environment: environment,
                                  what: "PipeWire listening")
    }

    /// Runs `command` (PipeWire, possibly behind setpriv) with the test config's
    /// logging and returns once it listens (its own log line, "Listening on
    /// 'pipewire-0'"): the one start of every test's PipeWire.
    static func launch(_ command: [String], environment: [String: String], what: String) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        var environment = environment
        environment["PIPEWIRE_DEBUG"] = "2,mod.protocol-native:3"
        process.environment = environment
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let output = LineCollector(err.fileHandleForReading)
        try output.wait(what: what) { $0.contains { $0.contains("Listening on 'pipewire-0'") } }
        return process
    }

    /// SIGKILL, as a crash (children of the test runner inherit a blocked SIGTERM).
    /// The stale socket stays behind, as after a real crash.
    func kill() {
        guard let process else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        self.process = nil
    }

    /// SIGSTOP: a hung PipeWire that keeps its socket and never answers.
    func suspend() {
        if let process { Glibc.kill(process.processIdentifier, SIGSTOP) }
    }

    func resume() {
        if let process { Glibc.kill(process.processIdentifier, SIGCONT) }
    }

    deinit {
        kill()
        try? FileManager.default.removeItem(atPath: runtimeDirectory)
    }

    /// What permissionsd needs to find this PipeWire by the usual rules: only
    /// XDG_RUNTIME_DIR. PipeWire variables the test runner may carry would take
    /// precedence, so any that are set are pointed here too.
    var daemonEnvironment: [String: String] {
        var environment = ["XDG_RUNTIME_DIR": runtimeDirectory]
        let inherited = ProcessInfo.processInfo.environment
        if inherited["PIPEWIRE_RUNTIME_DIR"] != nil { environment["PIPEWIRE_RUNTIME_DIR"] = runtimeDirectory }
        if inherited["PIPEWIRE_REMOTE"] != nil { environment["PIPEWIRE_REMOTE"] = "pipewire-0" }
        return environment
    }

    // Fake devices. The nodes live in the daemon (object.linger) after pw-cli exits,
    // and pw-cli returns once PipeWire has made or destroyed the node. pw-cli
    // always exits 0; it reports failures on stderr.

    func pwCli(_ arguments: [String]) throws {
        var environment = environmentWithoutPipeWire()
        environment["XDG_RUNTIME_DIR"] = runtimeDirectory
        let r = try run("/usr/bin/pw-cli", arguments, environment: environment)
        guard r.status == 0, r.stderr.isEmpty else {
            throw HarnessError(description: "pw-cli \(arguments.joined(separator: " ")): \(r.status) \(r.stderr)")
        }
    }

    func addCamera(_ name: String, mediaClass: String = "Video/Source") throws {
        try pwCli(["create-node", "adapter", "{ factory.name=videotestsrc node.name=\(name) "
                   + "node.description=\"Fake Camera \(name)\" media.class=\(mediaClass) object.linger=true }"])
    }

    func addMicrophone(_ name: String, mediaClass: String = "Audio/Source") throws {
        try pwCli(["create-node", "adapter", "{ factory.name=support.null-audio-sink node.name=\(name) "
                   + "node.description=\"Fake Mic \(name)\" media.class=\(mediaClass) audio.position=[MONO] "
                   + "object.linger=true }"])
    }

    /// A node of any class (a sink, say), from the null audio sink.
    func addAudioNode(_ name: String, mediaClass: String) throws {
        try pwCli(["create-node", "adapter", "{ factory.name=support.null-audio-sink node.name=\(name) "
                   + "media.class=\(mediaClass) audio.position=[MONO] object.linger=true }"])
    }

    func removeNode(_ name: String) throws {
        try pwCli(["destroy", name])
    }
}

/// One test's world: a bus, permissionsd with the PipeWire plugin, and a
/// subscriber that records every StatusChanged line.
final class PipeWireRig {
    let bus: TestBus
    let daemon: DaemonUnderTest
    let pipewire: TestPipeWire
    private var subscriber: Process?
    private var signals: LineCollector!
    /// Index in the recorded lines up to which `newSignals` has reported.
    private var cursor = 0
    private var fences = 0
    /// The drop-in the fences' locks go to, made (empty) before the daemon starts.
    static let fenceDropIn = "permissions.conf.d/99-fences.conf"
    private var markers = 0

    /// With `startDaemon` false, the subscriber is in place before the daemon
    /// starts (`startDaemon()`), so that no signal of its start-up is missed.
    init(pipewire: TestPipeWire, environment: [String: String]? = nil, startDaemon: Bool = true) throws {
        self.pipewire = pipewire
        bus = try TestBus()
        daemon = try DaemonUnderTest(bus: bus, config: "[notifications]\nenabled=true\n",
                                     pluginDirectories: [pipewirePluginDirectory],
                                     environment: environment ?? pipewire.daemonEnvironment, start: false)
        try FileManager.default.createDirectory(atPath: daemon.configDirectory + "/permissions.conf.d",
                                                withIntermediateDirectories: true)
        try daemon.writeConfig("", name: Self.fenceDropIn)
        try subscribe()
        if startDaemon { try daemon.start() }
    }

    func startDaemon() throws { try daemon.start() }

    /// `permissionsctl monitor --broadcast` (device changes are everyone-level), which
    /// says "Monitoring" once its match rules are in force (they name the service's
    /// well-known name, so they work before it runs).
    private func subscribe() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binDir + "/permissionsctl")
        process.arguments = ["--address", bus.address, "monitor", "--broadcast"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        subscriber = process
        signals = LineCollector(out.fileHandleForReading)
        try signals.wait(what: "monitor ready") { $0.contains { $0.hasPrefix("Monitoring") } }
    }

    deinit {
        if let subscriber {
            kill(subscriber.processIdentifier, SIGKILL)  // see TestBus.deinit
            subscriber.waitUntilExit()
        }
    }

    /// Every StatusChanged line so far, without the change serial.
    var statusLines: [String] {
        signals.all.filter { $0.hasPrefix("StatusChanged") }.map(stripSerial)
    }

    /// Waits until the lines not yet reported by `newSignals` contain `line` `count` times.
    func waitFor(_ line: String, count: Int = 1, timeout: TimeInterval = 15) throws {
        try waitFrom(cursor, for: line, count: count, timeout: timeout)
    }

    /// The StatusChanged lines since the previous call, excluding the fences',
    /// complete: it makes an everyone-level change of its own (an admin lock on
    /// notifications, added to the configuration) and waits for that broadcast;
    /// signals from one sender arrive in order, so every signal the daemon emitted
    /// before the lock has arrived by then.
    func newSignals() throws -> [String] {
        fences += 1
        let app = "org.example.Fence\(fences)"
        let fence = statusLine(app: app, "notifications", "restricted")
        let locked = (1...fences).map { "org.example.Fence\($0)" }.joined(separator: ";")
        try daemon.writeConfig("[notifications]\ndeny=\(locked)\n", name: Self.fenceDropIn)
        try signals.wait(what: "fence \(fences)") { lines in lines.contains { stripSerial($0) == fence } }
        let all = statusLines
        let index = all.lastIndex(of: fence)!
        defer { cursor = index + 1 }
        return all[cursor..<index].filter { !$0.contains("app=org.example.Fence") }
    }

    /// Returns once the plugin has handled every node change made so far. PipeWire
    /// sends registry events in order and the plugin handles them in order, so it
    /// adds and removes a marker device of `marker` (which must have no devices)
    /// and waits for both of its signals.
    func flushPipeWire(marker: String) throws {
        markers += 1
        let name = "marker\(markers)"
        let from = statusLines.count
        if marker == "camera" { try pipewire.addCamera(name) } else { try pipewire.addMicrophone(name) }
        try waitFrom(from, for: statusLine(app: "", marker, "not-determined"))
        try pipewire.removeNode(name)
        try waitFrom(from, for: statusLine(app: "", marker, "unsupported"))
    }

    /// Waits until the StatusChanged lines from index `from` on contain `line` `count` times.
    private func waitFrom(_ from: Int, for line: String, count: Int = 1, timeout: TimeInterval = 15) throws {
        try signals.wait(timeout: timeout, what: "\(count) × \(line)") { lines in
            lines.filter { $0.hasPrefix("StatusChanged") }.dropFirst(from).filter { stripSerial($0) == line }.count
                >= count
        }
    }

    /// Asks `condition` again (each time a D-Bus round trip) until it holds, up to
    /// `timeout` seconds: for a state that no single signal marks.
    func poll(timeout: TimeInterval = 15, _ what: String, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while try !condition() {
            guard Date() < deadline else { throw HarnessError(description: "\(what): not within \(timeout) s") }
        }
    }

    // The service's answers.

    func status(_ permission: String) throws -> String {
        let r = try daemon.call("GetStatus", "s", permission)
        guard r.status == 0 else { throw HarnessError(description: "GetStatus \(permission): \(r.stderr)") }
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `permissionsctl status PERMISSION`: the details, devices included.
    func details(_ permission: String) throws -> String {
        let r = try daemon.ctl("status", permission)
        guard r.status == 0 else { throw HarnessError(description: "status \(permission): \(r.stderr)") }
        return r.stdout
    }

    /// The `name=` of each device `permissionsctl status` lists, in its order.
    func deviceNames(_ permission: String) throws -> [String] {
        try details(permission).split(separator: "\n").filter { $0.hasPrefix("  - ") }.compactMap { line in
            line.split(separator: " ").first { $0.hasPrefix("name=") }.map { String($0.dropFirst("name=".count)) }
        }
    }

    /// The plugin's `pipewire` detail: connected, connecting or unreachable.
    func connectionState(_ permission: String = "camera") throws -> String {
        let line = try details(permission).split(separator: "\n").first { $0.hasPrefix("plugin-details:") } ?? ""
        return line.split(separator: " ").first { $0.hasPrefix("pipewire=") }.map { String($0.dropFirst(9)) } ?? ""
    }
}

/// A `permissionsctl monitor` line without its change serial, as `statusLine` makes them.
func stripSerial(_ line: String) -> String {
    line.range(of: " serial=").map { String(line[..<$0.lowerBound]) } ?? line
}
