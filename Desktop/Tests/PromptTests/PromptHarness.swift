import Foundation
import PermissionsTestSupport
import Testing

/// Where this package's build put permissions-prompt: $PERMISSIONS_DESKTOP_BIN_DIR
/// (scripts/test sets it), else .build/debug of this package.
let desktopBinDir: String = ProcessInfo.processInfo.environment["PERMISSIONS_DESKTOP_BIN_DIR"]
    ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent(".build/debug").path

/// The test run's output directory, where every test leaves a screenshot of what it
/// checked: $PERMISSIONS_TEST_OUTPUT_DIR (scripts/test sets it), else
/// .build/test-output of this package.
let testOutputDir: String = {
    let dir = ProcessInfo.processInfo.environment["PERMISSIONS_TEST_OUTPUT_DIR"]
        ?? URL(fileURLWithPath: desktopBinDir).deletingLastPathComponent().appendingPathComponent("test-output").path
    try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    return dir
}()

let atspiTool = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("tools/atspi.py").path

/// Tests/tools/atspi.py with `arguments`: what it printed, or its complaint thrown.
/// `user`: as another user, on that user's accessibility bus (`OtherUserDesktop`).
@discardableResult
func runAtspi(_ arguments: [String], as user: OtherUserDesktop? = nil) throws -> String {
    let result = try run("/usr/bin/python3", [atspiTool] + arguments, asUser: user?.uid,
                         environment: user.map { ProcessInfo.processInfo.environment.merging($0.environment) { $1 } })
    guard result.status == 0 else { throw HarnessError(description: "atspi.py \(arguments): \(result.stderr)") }
    return result.stdout
}

/// Runs `process` with its standard error collected line by line (what the
/// desktop programs log) and its standard output dropped.
func runLogged(_ process: Process) throws -> LineCollector {
    let err = Pipe()
    process.standardError = err
    process.standardOutput = FileHandle.nullDevice
    let log = LineCollector(err.fileHandleForReading)
    try process.run()
    return log
}

/// A key pressed in the window of process `pid`, focused first (no window
/// manager runs under Xvfb, so nothing else gives it the focus).
func pressKey(_ key: String, inWindowOf pid: Int32) throws {
    let search = try run("/usr/bin/xdotool", ["search", "--sync", "--onlyvisible", "--pid", String(pid)])
    guard search.status == 0, let window = search.stdout.split(separator: "\n").last else {
        throw HarnessError(description: "no window of process \(pid): \(search.stderr)")
    }
    for arguments in [["windowfocus", "--sync", String(window)], ["key", key]] {
        let result = try run("/usr/bin/xdotool", arguments)
        guard result.status == 0 else { throw HarnessError(description: "xdotool \(arguments): \(result.stderr)") }
    }
}

/// A desktop file, org.example.TicketScanner.desktop ("Ticket Scanner", the
/// camera-photo icon, Exec busctl: GIO ignores a desktop file whose program is not
/// installed, and the prompt's app is busctl), in a data directory of its own:
/// the environment that puts it before the system's.
func ticketScannerDesktopFile() throws -> [String: String] {
    let data = try makeTemporaryDirectory("xdg-data")
    try FileManager.default.createDirectory(atPath: data + "/applications", withIntermediateDirectories: true)
    try """
        [Desktop Entry]
        Type=Application
        Name=Ticket Scanner
        Exec=busctl --user
        Icon=camera-photo
        """.write(toFile: data + "/applications/org.example.TicketScanner.desktop", atomically: true, encoding: .utf8)
    return ["XDG_DATA_DIRS": data + ":/usr/share", "XDG_DATA_HOME": data + "/home"]
}

/// The whole screen as `name`.png in the test run's output directory.
@discardableResult
func screenshotOfDisplay(_ name: String) throws -> String {
    let path = testOutputDir + "/" + name + ".png"
    let result = try run("/usr/bin/import", ["-window", "root", path])
    guard result.status == 0 else { throw HarnessError(description: "import: \(result.stderr)") }
    return path
}

/// A real permissionsd on a private bus (camera declared, no plugin: the prompt's
/// permission is not-determined, whatever the machine has), and permissions-prompt
/// registered with it as root's agent, on the display Tests/with-display.sh made.
final class PromptSession {
    let bus: TestBus
    let daemon: DaemonUnderTest
    let prompt = Process()
    let log: LineCollector

    /// `declare`: the permissions declared (no plugin); `corePlugins`: the location
    /// and notifications plugins of the build as well. `environment`: more for the
    /// agent (XDG_DATA_DIRS, where it finds desktop files).
    init(declare permissions: String = "camera", corePlugins: Bool = false,
         environment: [String: String] = [:]) throws {
        guard ProcessInfo.processInfo.environment["DISPLAY"] != nil else {
            throw HarnessError(description: "no DISPLAY: run the desktop tests in Desktop/Tests/with-display.sh")
        }
        bus = try TestBus()
        daemon = try DaemonUnderTest(bus: bus, config: "[permissions]\ndeclare=\(permissions)\n",
                                     pluginDirectories: [corePlugins ? corePluginDirectory
                                                                     : try makeTemporaryDirectory("no-plugins")])
        prompt.executableURL = URL(fileURLWithPath: desktopBinDir + "/permissions-prompt")
        prompt.arguments = ["--address", bus.address]
        prompt.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        log = try runLogged(prompt)
        _ = try log.next(timeout: 15) { $0.contains("registered as the agent") }
    }

    deinit {
        // SIGKILL: children of the test runner inherit its blocked SIGTERM.
        if prompt.isRunning {
            kill(prompt.processIdentifier, SIGKILL)
            prompt.waitUntilExit()
        }
    }

    /// `Request(permission, {reason, accuracy, parent_window})` from busctl, whose
    /// app id is /usr/bin/busctl; the reply is read by `wait`.
    func request(_ permission: String, reason: String? = nil, accuracy: String? = nil,
                 parentWindow: String? = nil) throws -> PendingRequest {
        var options: [(String, String)] = []
        if let reason { options.append(("reason", reason)) }
        if let accuracy { options.append(("accuracy", accuracy)) }
        if let parentWindow { options.append(("parent_window", parentWindow)) }
        return try PendingRequest(bus: bus, permission: permission, options: options)
    }

    /// A camera request, waited for until its dialog shows: the request, the
    /// dialog's tree (`dialog`), and a screenshot `name` of it.
    func askCamera(reason: String? = nil, screenshot name: String) throws -> (PendingRequest, [String]) {
        let request = try self.request("camera", reason: reason)
        let tree = try dialog()
        try screenshot(name)
        return (request, tree)
    }

    /// The accessibility tree of the dialog shown, one "role<TAB>name" line an
    /// object, once one is shown (within `timeout`).
    func dialog(timeout: TimeInterval = 5) throws -> [String] {
        try atspi("dialog", "permissions-prompt", String(timeout)).split(separator: "\n")
            .map { String($0.drop { $0 == " " }) }
    }

    /// Clicks the dialog's button whose accessible name starts with `label`.
    func click(_ label: String) throws { try atspi("click", "permissions-prompt", label, "5") }

    /// Waits until no dialog is shown.
    func waitUntilNoDialog() throws { try atspi("gone", "permissions-prompt", "5") }

    /// How many dialogs are shown now.
    func dialogCount() throws -> Int { Int(try atspi("count", "permissions-prompt").trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1 }

    @discardableResult
    private func atspi(_ arguments: String...) throws -> String { try runAtspi(arguments) }

    /// A key pressed in the prompt's window (focused first: no window manager runs).
    func press(_ key: String) throws { try pressKey(key, inWindowOf: prompt.processIdentifier) }

    /// The X11 window shown whose title is `title` (a regular expression, as
    /// xdotool takes it), waited for.
    func windowID(title: String) throws -> UInt32 {
        let search = try run("/usr/bin/xdotool", ["search", "--sync", "--onlyvisible", "--name", title])
        guard search.status == 0, let line = search.stdout.split(separator: "\n").first, let id = UInt32(line) else {
            throw HarnessError(description: "no window named \(title): \(search.stdout) \(search.stderr)")
        }
        return id
    }

    /// The whole screen as `name`.png in the test run's output directory.
    @discardableResult
    func screenshot(_ name: String) throws -> String { try screenshotOfDisplay(name) }

    /// `permissionsctl list` on the test bus.
    func storedRows() throws -> [String] {
        let list = try daemon.ctl("list")
        guard list.status == 0 else { throw HarnessError(description: "permissionsctl list: \(list.stderr)") }
        return list.stdout.split(separator: "\n").dropFirst().map(String.init)
    }
}

/// A busctl Request in flight.
final class PendingRequest {
    let process = Process()
    private let out = Pipe()
    private let err = Pipe()
    private var finished = false
    /// What busctl printed on standard error, once `wait` threw for it.
    private(set) var errorText = ""

    /// `options`: string options (`reason`, `accuracy`).
    init(bus: TestBus, permission: String, options: [(String, String)]) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/busctl")
        process.arguments = ["--address=\(bus.address)", "--timeout=120", "call", "org.example.Permissions",
                             "/org/example/Permissions", "org.example.Permissions", "Request", "sa{sv}", permission]
            + [String(options.count)] + options.flatMap { [$0.0, "s", $0.1] }
        process.standardOutput = out
        process.standardError = err
        try process.run()
    }

    /// Kills busctl, as an app that quits while its prompt is shown.
    func kill() {
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        finished = true
    }

    deinit {
        if !finished, process.isRunning { kill() }
    }

    /// The reply's status word, or the error busctl printed.
    func wait(timeout: TimeInterval = 10) throws -> String {
        defer { finished = true }
        let exited = DispatchSemaphore(value: 0)
        let handle = out.fileHandleForReading
        // Written by the reader before it signals `exited`, read here only after.
        nonisolated(unsafe) var data = Data()
        runBlocking {
            data = handle.readDataToEndOfFile()
            exited.signal()
        }
        guard exited.wait(timeout: .now() + timeout) == .success else {
            process.terminate()
            throw HarnessError(description: "no reply to Request within \(timeout) s")
        }
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard process.terminationStatus == 0 else {
            errorText = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            throw HarnessError(description: errorText)
        }
        return text
    }
}
