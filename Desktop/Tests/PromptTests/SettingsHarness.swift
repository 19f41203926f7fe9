import Foundation
import PermissionsTestSupport
import Testing

/// A real permissionsd on a private bus that is also the settings page's session
/// bus (so each test has its own org.example.Permissions.Settings), with camera,
/// microphone and bluetooth declared and the location and notifications plugins:
/// five permissions, the same on any machine. The bus's service directory holds
/// the page's D-Bus activation file, made from Desktop/data as scripts/install
/// makes it, with this build's program. The page reaches the accessibility bus
/// of the display's session (Tests/with-display.sh) through AT_SPI_BUS_ADDRESS.
final class SettingsSession {
    static let config = "[permissions]\ndeclare=camera;microphone;bluetooth\n"
    static let dataDir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("data").path

    let services: String
    let bus: TestBus
    let daemon: DaemonUnderTest
    private(set) var page: Process?
    private(set) var log = LineCollector()
    /// The user the page runs as, when not the test runner's (`launch(as:)`).
    private(set) var pageUser: OtherUserDesktop?
    let accessibilityBus: String

    /// `installed`: the page's activation file is in the bus's service directory
    /// (false: as on a machine without the settings application).
    init(installed: Bool = true) throws {
        guard ProcessInfo.processInfo.environment["DISPLAY"] != nil else {
            throw HarnessError(description: "no DISPLAY: run the desktop tests in Desktop/Tests/with-display.sh")
        }
        services = try makeTemporaryDirectory("settings-services")
        if installed {
            let template = try String(contentsOfFile: Self.dataDir + "/org.example.Permissions.Settings.service",
                                      encoding: .utf8)
            try template.replacingOccurrences(of: "@bindir@", with: desktopBinDir)
                .write(toFile: services + "/org.example.Permissions.Settings.service", atomically: true,
                       encoding: .utf8)
        }
        bus = try TestBus(services: services)
        daemon = try DaemonUnderTest(bus: bus, config: Self.config)
        let address = try run("/usr/bin/gdbus", ["call", "--session", "--dest", "org.a11y.Bus", "--object-path",
                                                 "/org/a11y/bus", "--method", "org.a11y.Bus.GetAddress"])
        guard address.status == 0, let quoted = address.stdout.split(separator: "'").dropFirst().first else {
            throw HarnessError(description: "no accessibility bus: \(address.stderr)")
        }
        accessibilityBus = String(quoted)
    }

    /// What the page needs of the environment: the test bus as its session bus,
    /// the display's accessibility bus.
    var pageEnvironment: [String: String] {
        ["DBUS_SESSION_BUS_ADDRESS": bus.address, "AT_SPI_BUS_ADDRESS": accessibilityBus, "GTK_A11Y": "atspi"]
    }

    /// The test runner's environment with the test bus as the session bus: an
    /// app's, whose service and settings page are both on it.
    var appEnvironment: [String: String] {
        ProcessInfo.processInfo.environment.merging(["DBUS_SESSION_BUS_ADDRESS": bus.address]) { $1 }
    }

    /// What a session's activation environment holds (dbus-update-activation-environment),
    /// so that a page D-Bus starts finds the display, its accessibility bus and
    /// the service (`PERMISSIONS_BUS=session`).
    func updateActivationEnvironment() throws {
        let environment = pageEnvironment.merging(["PERMISSIONS_BUS": "session",
                                                   "DISPLAY": ProcessInfo.processInfo.environment["DISPLAY"] ?? ""])
                                                 { $1 }
            .filter { $0.key != "DBUS_SESSION_BUS_ADDRESS" }
            .map { "'\($0.key)': '\($0.value)'" }.joined(separator: ", ")
        let updated = try run("/usr/bin/gdbus", ["call", "--address", bus.address, "--dest", "org.freedesktop.DBus",
                                                 "--object-path", "/org/freedesktop/DBus", "--method",
                                                 "org.freedesktop.DBus.UpdateActivationEnvironment", "{\(environment)}"])
        guard updated.status == 0 else { throw HarnessError(description: "UpdateActivationEnvironment: \(updated.stderr)") }
    }

    /// Starts `permissions-settings --session` (the service is on its session
    /// bus) and waits until it has read the service once. `user`: as that user,
    /// on its accessibility bus, and read and worked through it from then on.
    /// `environment`: more of it for the page (XDG_DATA_DIRS, for desktop files).
    func launch(as user: OtherUserDesktop? = nil, environment: [String: String] = [:]) throws {
        pageUser = user
        let page = Process()
        let program = desktopBinDir + "/permissions-settings"
        if let user {
            page.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            page.arguments = ["--reuid=\(user.uid)", "--regid=\(user.uid)", "--clear-groups", program, "--session"]
        } else {
            page.executableURL = URL(fileURLWithPath: program)
            page.arguments = ["--session"]
        }
        page.environment = ProcessInfo.processInfo.environment.merging(pageEnvironment) { $1 }
            .merging(user?.environment ?? [:]) { $1 }.merging(environment) { $1 }
        log = try runLogged(page)
        self.page = page
        try log.next(timeout: 15) { $0.contains("showing") }
        try find("frame", "Privacy")
    }

    deinit {
        // SIGKILL: children of the test runner inherit its blocked SIGTERM, so a
        // page does not end as it would when its session bus (the TestBus) goes:
        // GDBus's exit-on-close raises SIGTERM. That holds for a page that D-Bus
        // started too, found by its name on the bus.
        if let page, page.isRunning {
            kill(page.processIdentifier, SIGKILL)
            page.waitUntilExit()
        }
        if let started = try? run("/usr/bin/gdbus", ["call", "--address", bus.address, "--dest", "org.freedesktop.DBus",
                                                     "--object-path", "/org/freedesktop/DBus", "--method",
                                                     "org.freedesktop.DBus.GetConnectionUnixProcessID",
                                                     "org.example.Permissions.Settings"]),
           started.status == 0,
           let pid = started.stdout.split(separator: " ").last.flatMap({ Int32($0.filter(\.isNumber)) }) {
            kill(pid, SIGKILL)
        }
        bus.kill()
        // Gone from the accessibility bus before the next test looks for a page
        // by its name: a page that D-Bus started is no child of ours to wait for.
        _ = try? runAtspi(["quit", "permissions-settings", "10"], as: pageUser)
    }

    /// The line of the shown object of `role` named `name` ("prefix*" for a
    /// prefix) with every state in `states`, waited for.
    @discardableResult
    func find(_ role: String, _ name: String, _ states: String..., timeout: TimeInterval = 5) throws -> String {
        try runAtspi(["find", "permissions-settings", role, name, String(timeout)] + states, as: pageUser)
    }

    /// Waits until no such object is shown, by a page that still runs (an
    /// object is absent from a page that crashed too).
    func absent(_ role: String, _ name: String, timeout: TimeInterval = 5) throws {
        try runAtspi(["absent", "permissions-settings", role, name, String(timeout)], as: pageUser)
        if let page, !page.isRunning {
            throw HarnessError(description: "permissions-settings exited (status \(page.terminationStatus)) "
                               + "while \(role) \(name) was to go; its output:\n\(log.all.joined(separator: "\n"))")
        }
    }

    /// Clicks the shown button named `name`.
    func press(_ name: String, timeout: TimeInterval = 5) throws {
        try runAtspi(["press", "permissions-settings", "push button", name, String(timeout)], as: pageUser)
    }

    /// Types `text` into the search field.
    func search(_ text: String) throws {
        try runAtspi(["type", "permissions-settings", "entry", "Search apps", text, "5"])
    }

    /// What the page shows, one "role<TAB>name<TAB>states" line an object.
    func tree() throws -> [String] {
        try runAtspi(["tree", "permissions-settings", "5"]).split(separator: "\n").map(String.init)
    }

    /// The rows `permissionsctl list` shows.
    func storedRows() throws -> [String] {
        let list = try daemon.ctl("list")
        guard list.status == 0 else { throw HarnessError(description: "permissionsctl list: \(list.stderr)") }
        return list.stdout.split(separator: "\n").dropFirst().map(String.init)
    }

    func ctl(_ arguments: String...) throws {
        let result = try run(binDir + "/permissionsctl", ["--address", bus.address] + arguments)
        guard result.status == 0 else { throw HarnessError(description: "permissionsctl \(arguments): \(result.stderr)") }
    }
}

/// Tests/tools/bus-app.py running on a test bus: a stand-in agent or app, its
/// output lines collected; killed at the end (or by `kill`, as an app that quits).
final class BusApp {
    static let tool = URL(fileURLWithPath: atspiTool).deletingLastPathComponent().appendingPathComponent("bus-app.py").path
    let process = Process()
    let output: LineCollector

    init(_ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [Self.tool] + arguments
        let out = Pipe()
        process.standardOutput = out
        output = LineCollector(out.fileHandleForReading)
        try process.run()
    }

    /// The next line that starts with `prefix`, without it.
    func next(_ prefix: String, timeout: TimeInterval = 10) throws -> String {
        String(try output.next(timeout: timeout) { $0.hasPrefix(prefix) }.dropFirst(prefix.count))
    }

    func kill() {
        if process.isRunning {
            Glibc.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    deinit { kill() }
}

/// A desktop session of another user on the test's display: a session bus of
/// that uid (dbus-run-session) whose activation starts that user's
/// accessibility bus, as a second user logged in on the same screen would have.
/// The display's socket takes any local user. The accessibility bus is started
/// without DISPLAY, so that its launcher does not put its address on the
/// display's root window (AT_SPI_BUS), where every AT-SPI client of the display
/// would find it instead of the test runner's: the address goes to this
/// user's programs in AT_SPI_BUS_ADDRESS.
final class OtherUserDesktop {
    let uid: UInt32
    let home: String
    private let session = Process()
    private let input = Pipe()
    /// What this user's programs need: home, runtime directory, display and
    /// accessibility bus.
    private(set) var environment: [String: String] = [:]

    init(uid: UInt32 = 65534) throws {
        self.uid = uid
        home = try makeTemporaryDirectory("other-user")
        guard chown(home, uid, uid) == 0, chmod(home, 0o700) == 0 else {
            throw HarnessError(description: "chown \(home): \(String(cString: strerror(errno)))")
        }
        environment = ["HOME": home, "XDG_RUNTIME_DIR": home, "GSETTINGS_BACKEND": "memory",
                       "DISPLAY": ProcessInfo.processInfo.environment["DISPLAY"] ?? ""]
        session.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        session.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/env", "-u", "DISPLAY",
                             "-u", "AT_SPI_BUS_ADDRESS", "HOME=\(home)", "XDG_RUNTIME_DIR=\(home)",
                             // With SIGTERM unblocked (the test runner's children
                             // inherit it blocked): dbus-run-session ends the bus
                             // with it, and the bus's programs go with the bus.
                             "/usr/bin/python3", "-c",
                             "import os, signal, sys; signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM]); "
                                + "os.execv(sys.argv[1], sys.argv[1:])",
                             "/usr/bin/dbus-run-session", "--", "/bin/sh", "-c",
                             "gdbus call --session --dest org.a11y.Bus --object-path /org/a11y/bus "
                                + "--method org.a11y.Bus.GetAddress && exec cat"]
        session.environment = ProcessInfo.processInfo.environment.filter { $0.key != "DBUS_SESSION_BUS_ADDRESS" }
        session.standardInput = input
        let out = Pipe()
        session.standardOutput = out
        let lines = LineCollector(out.fileHandleForReading)
        try session.run()
        let line = try lines.next(timeout: 15) { $0.hasPrefix("('") }
        guard let address = line.split(separator: "'").dropFirst().first else {
            throw HarnessError(description: "no accessibility bus for uid \(uid): \(line)")
        }
        environment["AT_SPI_BUS_ADDRESS"] = String(address)
    }

    deinit {
        // The session ends with its input (cat), its bus and accessibility bus with it.
        try? input.fileHandleForWriting.close()
        session.waitUntilExit()
        try? FileManager.default.removeItem(atPath: home)
    }
}
