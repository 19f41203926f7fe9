import Foundation
import Testing
import PermissionsTestSupport

/// What InstallTests use: scripts/install and scripts/uninstall run on the release
/// build scripts/test makes (PERMISSIONS_RELEASE_BIN_DIR; `swift build` cannot run
/// inside `swift test`, which holds the build directory's lock), the toolchain
/// hidden, systemd-analyze's figure, and a bus configured by the installed files.
enum Installing {
    static let releaseDir = ProcessInfo.processInfo.environment["PERMISSIONS_RELEASE_BIN_DIR"]

    /// The toolchain's `usr` directory (holding bin/swiftc and lib/swift), which the
    /// installed programs must not need.
    static let toolchainDir: String = {
        let swiftc = (try? run("/bin/sh", ["-c", "readlink -f \"$(command -v swiftc)\""]))?.stdout
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        return URL(fileURLWithPath: swiftc).deletingLastPathComponent().deletingLastPathComponent().path
    }()

    /// Runs scripts/install (or `script`) with `environment` added to the runner's:
    /// DBUS_SYSTEM_BUS_ADDRESS names the bus whose running daemon they restart or stop.
    @discardableResult
    static func install(_ arguments: [String], script: String = "install",
                        environment: [String: String] = [:]) throws -> CommandResult {
        let releaseDir = try #require(Self.releaseDir, "run through scripts/test, which makes the release build")
        let extra = script == "install" ? ["--build-dir", releaseDir] : []
        let result = try run(packageRoot + "/scripts/" + script, arguments + extra,
                             environment: ProcessInfo.processInfo.environment.merging(environment) { $1 })
        #expect(result.status == 0, "scripts/\(script) \(arguments): \(result.stderr)")
        return result
    }

    static func pkgconfig(_ package: String, _ variable: String) throws -> String {
        try run("/usr/bin/pkg-config", ["--variable=\(variable)", package]).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Every regular file and symbolic link under `root`, as paths below it ("/usr/bin/x").
    static func files(under root: String) -> Set<String> {
        var result = Set<String>()
        guard let walker = FileManager.default.enumerator(atPath: root) else { return result }
        while let relative = walker.nextObject() as? String {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: root + "/" + relative, isDirectory: &isDirectory),
               !isDirectory.boolValue { result.insert("/" + relative) }
        }
        return result
    }

    /// `command` in a mount namespace of its own where the toolchain directory is an
    /// empty tmpfs: what a machine without the toolchain looks like to it.
    static func withoutToolchain(_ command: [String]) -> [String] {
        ["/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
         "mount -t tmpfs tmpfs \"$0\" && exec \"$@\"", toolchainDir] + command
    }

    static func runWithoutToolchain(_ command: [String]) throws -> CommandResult {
        let full = withoutToolchain(command)
        return try run(full[0], Array(full.dropFirst()))
    }

    /// systemd-analyze's exposure figure for a unit file ("2.0" in "… permissionsd.service: 2.0 OK").
    static func exposure(of unit: String) throws -> Double {
        let result = try run("/usr/bin/systemd-analyze", ["security", "--offline=true", unit])
        let line = try #require(result.stdout.split(separator: "\n").last { $0.contains("Overall exposure level") },
                                "systemd-analyze security: \(result.stdout) \(result.stderr)")
        let figure = line.split(separator: ":").last?.split(separator: " ").first.map(String.init) ?? ""
        return try #require(Double(figure), "no figure in \(line)")
    }

    /// Stops an activated daemon (SIGTERM, as systemd would) and waits, up to 15 s,
    /// until it has exited: its parent, the bus daemon, reaps it (a zombie counts as
    /// exited, should the bus be gone first).
    static func stop(_ pid: Int32) {
        kill(pid, SIGTERM)
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline, (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8))
                .map({ !$0.contains(") Z ") }) ?? false {
            usleep(10_000)  // polling for the exit, with a deadline
        }
    }

    /// Installs with every directory in a new temporary directory (returned, with
    /// the flags that said so), so that the paths written into the files are real.
    static func installWithRealPaths() throws -> (root: String, flags: [String]) {
        // Resolved: compared with what /proc shows.
        let root = URL(fileURLWithPath: try makeTemporaryDirectory("install-root")).resolvingSymlinksInPath().path
        chmod(root, 0o755)  // nobody runs the installed permissionsctl
        let flags = ["--prefix", root + "/usr", "--sysconfdir", root + "/etc", "--localstatedir", root + "/var",
                     "--dbus-system-policy-dir", root + "/dbus/system.d",
                     "--dbus-system-services-dir", root + "/dbus/system-services",
                     "--polkit-actions-dir", root + "/polkit/actions", "--systemd-unit-dir", root + "/systemd"]
        try install(flags)
        return (root, flags)
    }
}

/// A dbus-daemon whose configuration is the installed files': the installed
/// activation directory as its service directory and, for a system-type bus,
/// the bus policy included after the default-deny policy of dbus's system.conf
/// (other types allow everything). It runs with the toolchain hidden, and so
/// does the daemon it activates, with `environment` added to its own.
final class InstalledBus {
    let directory: String
    let address: String
    private let process = Process()

    init(type: String?, policy: String? = nil, services: String, environment: [String: String] = [:]) throws {
        directory = try makeTemporaryDirectory("install-bus")
        chmod(directory, 0o755)  // nobody connects too
        address = "unix:path=\(directory)/bus_socket"
        let rules = type == "system" ? """
                <allow user="*"/>
                <deny own="*"/>
                <deny send_type="method_call"/>
                <allow send_type="signal"/>
                <allow send_requested_reply="true" send_type="method_return"/>
                <allow send_requested_reply="true" send_type="error"/>
                <allow receive_type="method_call"/>
                <allow receive_type="method_return"/>
                <allow receive_type="error"/>
                <allow receive_type="signal"/>
                <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
                <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
                <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
                <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Peer"/>
            """ : """
                <allow user="*"/>
                <allow own="*"/>
                <allow send_destination="*"/>
                <allow receive_sender="*"/>
            """
        let config = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              \(type.map { "<type>\($0)</type>" } ?? "")
              <listen>\(address)</listen>
              <auth>EXTERNAL</auth>
              <servicedir>\(services)</servicedir>
              <policy context="default">
            \(rules)
              </policy>
              \(policy.map { "<include>\($0)</include>" } ?? "")
            </busconfig>
            """
        try config.write(toFile: directory + "/bus.conf", atomically: true, encoding: .utf8)
        let command = Installing.withoutToolchain(["/usr/bin/dbus-daemon", "--nofork",
                                                     "--config-file=\(directory)/bus.conf", "--print-address=1"])
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let out = Pipe()
        process.standardOutput = out
        let log = directory + "/bus.log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: log)  // the activated daemon logs here too
        try process.run()
        // It prints its address once it listens.
        let line = try LineCollector(out.fileHandleForReading).next { !$0.isEmpty }
        #expect(line.hasPrefix(address), "\(line)")
    }

    var log: String { (try? String(contentsOfFile: directory + "/bus.log", encoding: .utf8)) ?? "" }

    deinit {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
