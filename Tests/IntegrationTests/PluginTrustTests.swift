import Foundation
import Testing
import PermissionsTestSupport

/// Plugin files are trusted as sshd's StrictModes and PAM trust theirs: owned by
/// root or the daemon's user, writable by nobody else, in a directory nobody else
/// can write to (unless sticky, like /tmp). What is checked is the opened file, so a
/// symbolic link owned by root that leads to someone else's file is refused too.
@Suite struct PluginTrustTests {
    static let nobody: uid_t = 65534

    /// A C test plugin named `name` that publishes one permission of the same name.
    static func plugin(_ name: String, into directory: String) throws -> String {
        try PluginLoadingTests.compile(PluginLoadingTests.cPlugin(name: name, permissions: "\"\(name)\","),
                                       into: directory, file: "libpermissions-\(name).so")
        return directory + "/libpermissions-\(name).so"
    }

    static func directory(_ prefix: String, mode: mode_t) throws -> String {
        let dir = try makeTemporaryDirectory(prefix)
        #expect(chmod(dir, mode) == 0)
        return dir
    }

    /// A root daemon: each untrusted file is refused with one log line naming it and
    /// the reason (and stays refused, unlogged, when touched); its permission does
    /// not exist. The trusted ones load. A refused file made trustworthy (chmod) loads.
    @Test func untrustedPluginFilesAreRefused() throws {
        let plain = try Self.directory("trust-plain", mode: 0o755)
        let open = try Self.directory("trust-open", mode: 0o777)
        let sticky = try Self.directory("trust-sticky", mode: 0o1777)
        let elsewhere = try Self.directory("trust-elsewhere", mode: 0o755)
        defer { [plain, open, sticky, elsewhere].forEach { try? FileManager.default.removeItem(atPath: $0) } }
        // World-writable and owned by nobody (the case): the owner is named first.
        let nobodys = try Self.plugin("nobodys", into: plain)
        #expect(chown(nobodys, Self.nobody, Self.nobody) == 0 && chmod(nobodys, 0o666) == 0)
        // Root's, but group-writable.
        let writable = try Self.plugin("writable", into: plain)
        #expect(chmod(writable, 0o664) == 0)
        // Fine itself, in a directory anyone may write to.
        _ = try Self.plugin("opendir", into: open)
        // A sticky directory owned by root (like /tmp): others cannot swap the file.
        _ = try Self.plugin("stickydir", into: sticky)
        // A link owned by root, to a file owned by nobody: the opened file counts.
        let target = try Self.plugin("linked", into: elsewhere)
        #expect(chown(target, Self.nobody, Self.nobody) == 0)
        #expect(symlink(target, plain + "/libpermissions-linked.so") == 0)

        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [corePluginDirectory, plain, open, sticky])
        let monitor = try Monitor(daemon)
        let refusals = [
            "plugin \(plain)/libpermissions-nobodys.so: skipped: it is owned by uid 65534, not by root or the daemon's uid 0",
            "plugin \(plain)/libpermissions-writable.so: skipped: it is writable by group or others (mode 0664)",
            "plugin \(open)/libpermissions-opendir.so: skipped: its directory \(open) is writable by group or others "
                + "and not sticky (mode 0777)",
            "plugin \(plain)/libpermissions-linked.so: skipped: it is owned by uid 65534, not by root or the daemon's uid 0",
        ]
        for line in refusals {
            #expect(daemon.logLines(containing: line).count == 1, "missing: \(line)\n\(daemon.log)")
        }
        for name in ["nobodys", "writable", "opendir", "linked"] {
            #expect(try daemon.call("GetStatus", "s", name).stderr.contains("unknown permission \"\(name)\""))
        }
        #expect(try daemon.call("GetStatus", "s", "stickydir").stdout == "s \"not-determined\"\n")
        let plugins = try daemon.ctl("plugins").stdout
        #expect(plugins.split(separator: "\n").contains { $0.hasPrefix("writable ") && $0.contains(" unavailable") },
                "\(plugins)")

        // Touched, still refused for the same reason: looked at again (the debug log
        // says so: once when the daemon started watching, then for IN_ATTRIB and
        // IN_CLOSE_WRITE), but no second warning.
        let again = "plugin \(writable): still skipped, as before"
        try daemon.waitForLog(again, count: 1)
        #expect(try run("/usr/bin/touch", [writable]).status == 0)
        try daemon.waitForLog(again, count: 3)
        #expect(daemon.logLines(containing: "libpermissions-writable.so: skipped").count == 1, "\(daemon.log)")

        // Made trustworthy: IN_ATTRIB, and it loads.
        #expect(chmod(writable, 0o644) == 0)
        try monitor.waitFor { $0 == statusLine(app: "", "writable", "not-determined") }
        #expect(try daemon.call("GetStatus", "s", "writable").stdout == "s \"not-determined\"\n")
    }

    /// A daemon that is not root cannot open a mode-000 plugin and skips it; a later
    /// `chmod 644` (IN_ATTRIB only) is noticed and the plugin loads.
    @Test func aNonRootDaemonNoticesAChmod() throws {
        let dir = try Self.directory("trust-chmod", mode: 0o755)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = try Self.plugin("latecomer", into: dir)
        #expect(chmod(file, 0) == 0)
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [dir], start: false)
        daemon.asNobody = true
        try daemon.start()
        // A daemon that is not root cannot identify root's processes; the plugin's
        // signals are everyone-level anyway.
        let monitor = try Monitor(daemon, broadcast: true)
        #expect(daemon.logLines(containing: "plugin \(file): skipped: cannot open: Permission denied").count == 1,
                "\(daemon.log)")
        #expect(try daemon.call("GetStatus", "s", "latecomer").stderr.contains("unknown permission \"latecomer\""))

        #expect(chmod(file, 0o644) == 0)
        try monitor.waitFor { $0 == statusLine(app: "", "latecomer", "not-determined") }
        try monitor.waitFor { $0.hasPrefix("PropertiesChanged") && $0.contains("latecomer 0.1 loaded") }
        // Asked as nobody: a daemon that is not root cannot open a root caller's process
        // root (/proc/PID/root), so it could not identify busctl run as root.
        let status = try daemon.call("GetStatus", "s", "latecomer", asNobody: true)
        #expect(status.stdout == "s \"not-determined\"\n", "\(status)")
        #expect(daemon.log.contains("plugin latecomer 0.1 loaded from \(file)"))
    }

    /// A chain of links, plugins/x.so -> ww/x.so -> safe/x.so, through a directory
    /// anyone may write to (not sticky): whoever can write there can swap the middle
    /// link, so the plugin is refused, naming that directory.
    @Test func aLinkChainThroughAnOpenDirectoryIsRefused() throws {
        let plain = try Self.directory("trust-chain-plain", mode: 0o755)
        let open = try Self.directory("trust-chain-open", mode: 0o777)
        let safe = try Self.directory("trust-chain-safe", mode: 0o755)
        defer { [plain, open, safe].forEach { try? FileManager.default.removeItem(atPath: $0) } }
        let target = try Self.plugin("chained", into: safe)
        #expect(symlink(target, open + "/libpermissions-chained.so") == 0)
        #expect(symlink(open + "/libpermissions-chained.so", plain + "/libpermissions-chained.so") == 0)
        // The same chain through a directory that is not open loads.
        let fine = try Self.plugin("direct", into: safe)
        #expect(symlink(fine, plain + "/libpermissions-direct.so") == 0)

        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [corePluginDirectory, plain])
        let line = "plugin \(plain)/libpermissions-chained.so: skipped: \(open), the directory of "
            + "\(open)/libpermissions-chained.so on its way to its target, is writable by group or others and not "
            + "sticky (mode 0777)"
        #expect(daemon.logLines(containing: line).count == 1, "\(daemon.log)")
        #expect(try daemon.call("GetStatus", "s", "chained").stderr.contains("unknown permission \"chained\""))
        #expect(try daemon.call("GetStatus", "s", "direct").stdout == "s \"not-determined\"\n")
    }

    /// A plugin directory made writable by others while the daemon runs (IN_ATTRIB
    /// on the directory itself): its plugins are refused, as a restart would; made
    /// safe again, they load again.
    @Test func aPluginDirectoryMadeWritableByOthersStopsItsPlugins() throws {
        let dir = try Self.directory("trust-chmod-dir", mode: 0o755)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = try Self.plugin("guarded", into: dir)
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [corePluginDirectory, dir])
        let monitor = try Monitor(daemon)
        #expect(try daemon.call("GetStatus", "s", "guarded").stdout == "s \"not-determined\"\n")

        #expect(chmod(dir, 0o777) == 0)
        try monitor.waitFor { $0 == statusLine(app: "", "guarded", "unsupported") }
        let line = "plugin \(dir)/libpermissions-guarded.so: skipped: its directory \(dir) is writable by group or "
            + "others and not sticky (mode 0777)"
        #expect(daemon.logLines(containing: line).count == 1, "\(daemon.log)")
        #expect(try daemon.call("GetStatus", "s", "guarded").stderr.contains("unknown permission \"guarded\""))

        #expect(chmod(dir, 0o755) == 0)
        try monitor.waitFor { $0 == statusLine(app: "", "guarded", "not-determined") }
        #expect(try daemon.call("GetStatus", "s", "guarded").stdout == "s \"not-determined\"\n")
    }
}
