import Foundation
import Testing
import PermissionsTestSupport

/// What InstallTests use: scripts/install and scripts/uninstall run on the release
/// builds scripts/test makes (PERMISSIONS_RELEASE_BIN_DIR, and the desktop
/// package's PERMISSIONS_DESKTOP_RELEASE_BIN_DIR; `swift build` cannot run inside
/// `swift test`, which holds the build directory's lock), the toolchain hidden,
/// systemd-analyze's figure, and a bus configured by the installed files.
enum Installing {
    static let releaseDir = ProcessInfo.processInfo.environment["PERMISSIONS_RELEASE_BIN_DIR"]
    static let desktopReleaseDir = ProcessInfo.processInfo.environment["PERMISSIONS_DESKTOP_RELEASE_BIN_DIR"]

    /// The toolchain's `usr` directory (holding bin/swiftc and lib/swift), which the
    /// installed programs must not need.
    static let toolchainDir: String = {
        let swiftc = (try? run("/bin/sh", ["-c", "readlink -f \"$(command -v swiftc)\""]))?.stdout
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        return URL(fileURLWithPath: swiftc).deletingLastPathComponent().deletingLastPathComponent().path
    }()

    /// Runs scripts/install (or `script`) with `environment` added to the runner's:
    /// DBUS_SYSTEM_BUS_ADDRESS names the bus whose running daemon they restart or stop.
    /// The install is of the release builds, the desktop one's too unless
    /// `arguments` say --no-desktop.
    @discardableResult
    static func install(_ arguments: [String], script: String = "install",
                        environment: [String: String] = [:]) throws -> CommandResult {
        let releaseDir = try #require(Self.releaseDir, "run through scripts/test, which makes the release build")
        var extra = script == "install" ? ["--build-dir", releaseDir] : []
        if script == "install", !arguments.contains("--no-desktop") {
            let desktopDir = try #require(Self.desktopReleaseDir,
                                          "run through scripts/test, which makes the desktop package's release build")
            extra += ["--desktop-build-dir", desktopDir]
        }
        let result = try run(packageRoot + "/scripts/" + script, arguments + extra,
                             environment: ProcessInfo.processInfo.environment.merging(environment) { $1 })
        #expect(result.status == 0, "scripts/\(script) \(arguments): \(result.stderr)")
        return result
    }

    /// The libraries of GTK and libadwaita that `file` loads, as ldd names them:
    /// none for the daemon and the client, which a server without GTK runs.
    static func gtkLibraries(of file: String) throws -> [String] {
        let ldd = try run("/usr/bin/ldd", [file])
        #expect(ldd.status == 0, "ldd \(file): \(ldd.stdout) \(ldd.stderr)")
        return ldd.stdout.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { $0.hasPrefix("libgtk") || $0.hasPrefix("libadwaita") }
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
    /// empty tmpfs: what a machine without the toolchain looks like to it. With
    /// `ownPIDNamespace`, also in a PID namespace of its own, as its PID 1 (with a
    /// /proc of that namespace), killed with `unshare` (--kill-child), and with it
    /// everything in the namespace. With `privateRun`, /run is an empty tmpfs of
    /// its own too (mode 0755), for what a test puts in a machine's /run.
    static func withoutToolchain(_ command: [String], ownPIDNamespace: Bool = false,
                                 privateRun: Bool = false) -> [String] {
        let run = privateRun ? " && mount -t tmpfs -o mode=0755 tmpfs /run" : ""
        return ["/usr/bin/unshare"] + (ownPIDNamespace ? ["--pid", "--kill-child", "--mount-proc"] : ["--mount"])
            + ["--propagation", "private", "/bin/sh", "-c", "mount -t tmpfs tmpfs \"$0\"\(run) && exec \"$@\"",
               toolchainDir]
            + command
    }

    /// The processes whose parent is `pid` (from /proc/PID/stat).
    static func children(of pid: Int32) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).filter { child in
            // "PID (comm) STATE PPID ...": comm may hold spaces, so after its last ")".
            guard let stat = try? String(contentsOfFile: "/proc/\(child)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return false }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && Int32(fields[1]) == pid
        }
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
                     "--polkit-actions-dir", root + "/polkit/actions", "--systemd-unit-dir", root + "/systemd",
                     "--wireplumber-data-dir", root + "/wireplumber"]
        try install(flags)
        return (root, flags)
    }
}

/// A dbus-daemon whose configuration is the installed files': the installed
/// activation directory as its service directory and, for a system-type bus,
/// dbus's own system.conf (StockSystemBusConfig: default deny, root bound too)
/// with a policy directory holding only `policy` and `alsoIncluding` (other types
/// allow everything, and include `policy`). It runs with the toolchain hidden, and
/// so does the daemon it activates, with `environment` added to its own (a system
/// bus is the system bus of both).
///
/// With `ownPIDNamespace`, the bus is PID 1 of a PID namespace of its own, as an
/// init is on a machine (with `privateRun`, with a /run of its own; with
/// `boundingSet`, the bus and what it activates bounded to those capabilities,
/// `setpriv --bounding-set`'s argument): the daemon it activates reads PID 1's mount namespace
/// as the host's, which it cannot where the test runner's PID 1 is out of reach
/// (a sandbox's). Clients that are to be the host's run `inside` it.
final class InstalledBus {
    let directory: String
    let address: String
    /// With `ownPIDNamespace`: the bus daemon's process id (here; 1 inside).
    private(set) var initPID: Int32?
    private let process = Process()

    init(type: String?, policy: String? = nil, alsoIncluding: [String] = [], services: String,
         environment: [String: String] = [:], ownPIDNamespace: Bool = false, privateRun: Bool = false,
         boundingSet: String? = nil) throws {
        directory = try makeTemporaryDirectory("install-bus")
        chmod(directory, 0o755)  // nobody connects too
        var environment = environment
        let config: String
        if type == "system" {
            let socket = directory + "/system_bus_socket"
            address = "unix:path=\(socket)"
            let policies = directory + "/system.d"
            try FileManager.default.createDirectory(atPath: policies, withIntermediateDirectories: false)
            for file in (policy.map { [$0] } ?? []) + alsoIncluding {
                try FileManager.default.copyItem(atPath: file,
                                                 toPath: policies + "/" + URL(fileURLWithPath: file).lastPathComponent)
            }
            config = try StockSystemBusConfig.text(socket: socket, policyDirectory: policies, serviceDirectory: services)
            environment["DBUS_SYSTEM_BUS_ADDRESS"] = environment["DBUS_SYSTEM_BUS_ADDRESS"] ?? address
        } else {
            address = "unix:path=\(directory)/bus_socket"
            config = """
                <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
                 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
                <busconfig>
                  \(type.map { "<type>\($0)</type>" } ?? "")
                  <listen>\(address)</listen>
                  <auth>EXTERNAL</auth>
                  <servicedir>\(services)</servicedir>
                  <policy context="default">
                    <allow user="*"/>
                    <allow own="*"/>
                    <allow send_destination="*"/>
                    <allow receive_sender="*"/>
                  </policy>
                  \(policy.map { "<include>\($0)</include>" } ?? "")
                </busconfig>
                """
        }
        try config.write(toFile: directory + "/bus.conf", atomically: true, encoding: .utf8)
        let bounded = boundingSet.map { ["/usr/bin/setpriv", "--bounding-set", $0, "--"] } ?? []
        let command = Installing.withoutToolchain(bounded + ["/usr/bin/dbus-daemon", "--nofork",
                                                     "--config-file=\(directory)/bus.conf", "--print-address=1"],
                                                    ownPIDNamespace: ownPIDNamespace, privateRun: privateRun)
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
        if ownPIDNamespace {
            // unshare's one child, by now the bus daemon (sh exec'd it).
            guard let pid = Installing.children(of: process.processIdentifier).first else {
                throw HarnessError(description: "the bus's namespace has no PID 1: \(log)")
            }
            initPID = pid
        }
    }

    /// `command` run in the bus's PID and mount namespaces (nsenter forks it there),
    /// as a process of the machine; with `asUser`, as that uid and gid, no other
    /// groups. It is killed when nsenter is (setpriv's --pdeathsig), so that
    /// killing the process a test started ends the client itself.
    func inside(_ command: [String], asUser uid: UInt32? = nil) -> [String] {
        guard let initPID else { return command }
        return ["/usr/bin/nsenter", "--target", String(initPID), "--pid", "--mount", "--",
                "/usr/bin/setpriv", "--pdeathsig", "KILL"]
            + (uid.map { ["--reuid=\($0)", "--regid=\($0)", "--clear-groups"] } ?? []) + command
    }

    var log: String { (try? String(contentsOfFile: directory + "/bus.log", encoding: .utf8)) ?? "" }

    deinit {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
