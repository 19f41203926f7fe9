import Foundation
import Testing
import PermissionsTestSupport

/// Plugin directories as administrators and package managers really handle them:
/// made after the daemon started, removed and made again, plugins linked in, the
/// same plugin in two directories, a plugin touched, and a hot-loaded plugin's
/// permissions kept out of sight until its first configure has returned.
///
/// The plugin is mostly the C example (Plugins/Example, `example-lan`), configured
/// with a locked deny for busctl (the caller of `daemon.call`), so every status read
/// shows whether the configuration is in force. "0 signals" is checked with a fence:
/// a change of its own, made after the case, whose signal must be the next one.
@Suite struct PluginDirectoryTests {
    static let config = "[example-lan]\nenabled=true\ndeny=/usr/bin/busctl\n"
    static let plugin = "libpermissions-example-lan.so"

    /// The StatusChanged lines that came since `index` (an earlier count of
    /// `monitor.statusChanges`), up to a fence: a grant for a new app on location.
    /// Signals from one sender arrive in order, so the list is complete.
    static func signalsUntilFence(_ daemon: DaemonUnderTest, _ monitor: Monitor, since index: Int) throws -> [String] {
        let app = "org.example.Fence\(monitor.statusChanges.count)"
        let fence = statusLine(app: app, "location", "authorized")
        let r = try daemon.ctl("grant", app, "location")
        #expect(r.status == 0, "\(r.stderr)")
        try monitor.waitFor { $0 == fence }
        let all = monitor.statusChanges
        return Array(all[index..<all.lastIndex(of: fence)!])
    }

    static func status(_ daemon: DaemonUnderTest) throws -> String {
        let r = try daemon.call("GetStatus", "s", "example-lan")
        return r.status == 0 ? r.stdout : r.stderr
    }

    static func removeTree(_ path: String) { try? FileManager.default.removeItem(atPath: path) }

    /// The loaded signals of a plugin whose configuration denies busctl.
    static let appeared = [statusLine(app: "", "example-lan", "not-determined"),
                           statusLine(app: "/usr/bin/busctl", "example-lan", "restricted")]

    /// A plugin directory that does not exist at start-up, two levels down: its
    /// nearest existing ancestor is watched, then each level, then the directory.
    @Test func aDirectoryMadeAfterStartUpIsWatched() throws {
        let library = try PlatformTests.buildExample()
        let root = try makeTemporaryDirectory("late-plugins")
        defer { Self.removeTree(root) }
        let late = root + "/lib/plugins"
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config, pluginDirectories: [corePluginDirectory, late])
        let monitor = try Monitor(daemon)
        #expect(try Self.status(daemon).contains("unknown permission \"example-lan\""))

        #expect(mkdir(root + "/lib", 0o755) == 0)
        #expect(mkdir(late, 0o755) == 0)
        try daemon.waitForLog("plugin directory \(late) appeared")
        try PlatformTests.install(library, into: late, as: Self.plugin)
        try monitor.waitFor { $0 == Self.appeared[0] }
        try monitor.waitFor { $0.hasPrefix("PropertiesChanged") && $0.contains("example-lan 1.0 loaded") }
        #expect(try Self.status(daemon) == "s \"restricted\"\n")
        #expect(daemon.logLines(containing: "plugin example-lan 1.0 loaded from \(late)/\(Self.plugin)").count == 1)
        #expect(try Self.signalsUntilFence(daemon, monitor, since: 0) == Self.appeared)
    }

    /// Removed (its plugins go, with a signal) and made again (they come back).
    @Test func aDirectoryRemovedAndMadeAgainIsWatched() throws {
        let library = try PlatformTests.buildExample()
        let hot = try makeTemporaryDirectory("hot-plugins")
        defer { Self.removeTree(hot) }
        try PlatformTests.install(library, into: hot, as: Self.plugin)
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config, pluginDirectories: [corePluginDirectory, hot])
        let monitor = try Monitor(daemon)
        #expect(try Self.status(daemon) == "s \"restricted\"\n")

        Self.removeTree(hot)
        try monitor.waitFor { $0 == statusLine(app: "", "example-lan", "unsupported") }
        try daemon.waitForLog("plugin directory \(hot) is gone")
        #expect(try Self.status(daemon).contains("unknown permission \"example-lan\""))

        #expect(mkdir(hot, 0o700) == 0)
        try daemon.waitForLog("plugin directory \(hot) appeared")
        let before = monitor.statusChanges.count
        try PlatformTests.install(library, into: hot, as: Self.plugin)
        try monitor.waitFor { $0.hasPrefix("PropertiesChanged") && $0.contains("example-lan 1.0 loaded") }
        #expect(try Self.status(daemon) == "s \"restricted\"\n")
        #expect(try Self.signalsUntilFence(daemon, monitor, since: before) == Self.appeared)
    }

    /// `ln -s`: only IN_CREATE reports it.
    @Test func aSymbolicLinkIsLoaded() throws {
        let library = try PlatformTests.buildExample()
        let hot = try makeTemporaryDirectory("hot-plugins")
        defer { Self.removeTree(hot) }
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config, pluginDirectories: [corePluginDirectory, hot])
        let monitor = try Monitor(daemon)
        #expect(try run("/bin/ln", ["-s", library, hot + "/" + Self.plugin]).status == 0)
        try monitor.waitFor { $0.hasPrefix("PropertiesChanged") && $0.contains("example-lan 1.0 loaded") }
        #expect(try Self.status(daemon) == "s \"restricted\"\n")
        #expect(try Self.signalsUntilFence(daemon, monitor, since: 0) == Self.appeared)
    }

    /// `ln` (a hard link): only IN_CREATE reports it.
    @Test func aHardLinkIsLoaded() throws {
        let library = try PlatformTests.buildExample()
        let hot = try makeTemporaryDirectory("hot-plugins")
        defer { Self.removeTree(hot) }
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config, pluginDirectories: [corePluginDirectory, hot])
        let monitor = try Monitor(daemon)
        #expect(try run("/bin/ln", [library, hot + "/" + Self.plugin]).status == 0)
        try monitor.waitFor { $0.hasPrefix("PropertiesChanged") && $0.contains("example-lan 1.0 loaded") }
        #expect(try Self.status(daemon) == "s \"restricted\"\n")
        #expect(try Self.signalsUntilFence(daemon, monitor, since: 0) == Self.appeared)
    }

    /// At start-up, copies that do not load in the first directories (not a library,
    /// another ABI) do not hide the good one in a later directory; each is logged.
    @Test func brokenCopiesDoNotHideAGoodOneAtStartUp() throws {
        let first = try makeTemporaryDirectory("first")
        let second = try makeTemporaryDirectory("second")
        let third = try makeTemporaryDirectory("third")
        defer { [first, second, third].forEach(Self.removeTree) }
        try "not a library\n".write(toFile: first + "/" + Self.plugin, atomically: true, encoding: .utf8)
        try PluginLoadingTests.compile(PluginLoadingTests.cPlugin(name: "example-lan", permissions: "\"example-lan\",",
                                                                  abi: "99"), into: second, file: Self.plugin)
        try PlatformTests.install(try PlatformTests.buildExample(version: "3.0"), into: third, as: Self.plugin)
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config,
                                         pluginDirectories: [corePluginDirectory, first, second, third])
        #expect(daemon.logLines(containing: "plugin \(first)/\(Self.plugin): skipped: not a loadable library").count == 1,
                "\(daemon.log)")
        #expect(daemon.logLines(containing: "plugin \(second)/\(Self.plugin): skipped: ABI version 99").count == 1)
        #expect(daemon.logLines(containing: "plugin example-lan 3.0 loaded from \(third)/").count == 1)
        #expect(try Self.status(daemon) == "s \"restricted\"\n")
        let plugins = try daemon.ctl("plugins").stdout.split(separator: "\n").filter { $0.hasPrefix("example-lan ") }
        #expect(plugins.count == 1 && plugins[0].contains("3.0      loaded"), "\(plugins)")
    }

    /// The same plugin in two directories: the first directory's copy serves;
    /// removing it falls back to the second's (no `unsupported`, no UnknownPermission,
    /// and, as both behave the same, no signal at all); putting it back takes over again.
    @Test func removingTheFirstCopyFallsBackToTheSecond() throws {
        let first = try makeTemporaryDirectory("first")
        let second = try makeTemporaryDirectory("second")
        defer { [first, second].forEach(Self.removeTree) }
        let one = try PlatformTests.buildExample(version: "1.0")
        try PlatformTests.install(one, into: first, as: Self.plugin)
        try PlatformTests.install(try PlatformTests.buildExample(version: "2.0"), into: second, as: Self.plugin)
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config,
                                         pluginDirectories: [corePluginDirectory, first, second])
        let monitor = try Monitor(daemon)
        #expect(try daemon.ctl("plugins").stdout.contains("example-lan    1.0      loaded"))
        #expect(try Self.status(daemon) == "s \"restricted\"\n")

        #expect(unlink(first + "/" + Self.plugin) == 0)
        let fallback = try monitor.waitFor { $0.hasPrefix("PropertiesChanged") }
        #expect(fallback.contains("(example-lan 2.0 loaded example-lan)"), "\(fallback)")
        #expect(!fallback.contains("Permissions="), "the permission never went: \(fallback)")
        #expect(try Self.status(daemon) == "s \"restricted\"\n")
        #expect(daemon.logLines(containing: "plugin example-lan: \(second)/\(Self.plugin) takes over from \(first)/")
                    .count == 1, "\(daemon.log)")
        #expect(try Self.signalsUntilFence(daemon, monitor, since: 0) == [])

        let before = monitor.statusChanges.count
        try PlatformTests.install(one, into: first, as: Self.plugin)
        let back = try monitor.waitFor { $0.hasPrefix("PropertiesChanged") }
        #expect(back.contains("(example-lan 1.0 loaded example-lan)"), "\(back)")
        #expect(try Self.status(daemon) == "s \"restricted\"\n")
        #expect(try Self.signalsUntilFence(daemon, monitor, since: before) == [])
    }

    /// `touch` on a loaded plugin, and the same bytes written over it: its content did
    /// not change, so nothing is loaded again (no log line, no property change) and
    /// no signal is sent. A real change of content is loaded.
    @Test func touchingALoadedPluginCostsNothing() throws {
        let hot = try makeTemporaryDirectory("hot-plugins")
        defer { Self.removeTree(hot) }
        let library = try PlatformTests.buildExample()
        try PlatformTests.install(library, into: hot, as: Self.plugin)
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config, pluginDirectories: [corePluginDirectory, hot])
        let monitor = try Monitor(daemon)
        #expect(try Self.status(daemon) == "s \"restricted\"\n")

        // Once looked at again when the daemon started watching (the debug log says
        // so). touch opens the file, sets its times and closes it: IN_ATTRIB and
        // IN_CLOSE_WRITE, each handled before the fence.
        let unchanged = "plugin \(hot)/\(Self.plugin): content unchanged; not loaded again"
        try daemon.waitForLog(unchanged, count: 1)
        #expect(try run("/usr/bin/touch", [hot + "/" + Self.plugin]).status == 0)
        try daemon.waitForLog(unchanged, count: 3)
        #expect(try Self.signalsUntilFence(daemon, monitor, since: 0) == [])
        // Written over in place with the same bytes (IN_CLOSE_WRITE).
        #expect(try run("/bin/cp", [library, hot + "/" + Self.plugin]).status == 0)
        try daemon.waitForLog(unchanged, count: 4)
        var before = monitor.statusChanges.count
        #expect(try Self.signalsUntilFence(daemon, monitor, since: before) == [])
        #expect(try Self.status(daemon) == "s \"restricted\"\n")
        #expect(daemon.logLines(containing: "plugin example-lan 1.0 loaded").count == 1)
        #expect(!daemon.log.contains("was replaced"))
        #expect(!monitor.all.contains { $0.hasPrefix("PropertiesChanged") }, "\(monitor.all)")

        // Another build: loaded, configured, and in force; still no signal, as it
        // behaves the same.
        before = monitor.statusChanges.count
        try PlatformTests.install(try PlatformTests.buildExample(version: "2.0"), into: hot, as: Self.plugin)
        try monitor.waitFor { $0.hasPrefix("PropertiesChanged") && $0.contains("example-lan 2.0 loaded") }
        #expect(daemon.logLines(containing: "\(Self.plugin) was replaced").count == 1)
        #expect(try Self.status(daemon) == "s \"restricted\"\n")
        #expect(try Self.signalsUntilFence(daemon, monitor, since: before) == [])
    }

    /// A hot-loaded plugin's permission does not exist until its first configure has
    /// returned: while configure runs (held on a FIFO here), the permission is not in
    /// `Permissions`, calls get UnknownPermission, and no signal is sent; then the
    /// first signals already carry the configured state (busctl restricted).
    @Test func aHotLoadedPluginIsHiddenUntilConfigured() throws {
        let build = try makeTemporaryDirectory("slow-build")
        let hot = try makeTemporaryDirectory("hot-plugins")
        defer { [build, hot].forEach(Self.removeTree) }
        let fifo = build + "/release-configure"
        #expect(mkfifo(fifo, 0o600) == 0)
        try PluginLoadingTests.compile("""
            #include <fcntl.h>
            #include <string.h>
            #include <unistd.h>
            #include "permissions-plugin.h"
            static const char *const perms[] = { "slow-config", NULL };
            static const struct permissions_host *the_host;
            static void publish(const char *denied) {
                struct permissions_app_policy deny = { .app_id = denied, .policy = PERMISSIONS_POLICY_RESTRICTED };
                struct permissions_snapshot s = { PERMISSIONS_SNAPSHOT_INIT, .permission = "slow-config",
                    .service_state = PERMISSIONS_SERVICE_AVAILABLE, .n_policies = denied ? 1 : 0, .policies = &deny };
                the_host->publish(the_host->host_data, &s);
            }
            static int plugin_init(const struct permissions_host *host, void **state) {
                (void)state;
                the_host = host;
                publish(NULL);  /* before configure: no deny */
                return 0;
            }
            static int plugin_configure(void *state, const struct permissions_config *config) {
                (void)state;
                const char *denied = NULL;
                for (uint32_t i = 0; i < config->n_entries; i++)
                    if (strcmp(config->entries[i].key, "deny") == 0) denied = config->entries[i].value;
                the_host->log(the_host->host_data, PERMISSIONS_LOG_INFO, "configure waiting");
                int fd = open("\(fifo)", O_RDONLY);  /* until the test opens it for writing */
                if (fd >= 0) close(fd);
                publish(denied);
                return 0;
            }
            static const struct permissions_plugin d = {
                .abi_version = PERMISSIONS_PLUGIN_ABI_VERSION, .struct_size = sizeof d, .name = "slow-config",
                .version = "0.1", .description = "slow configure", .permissions = perms, .init = plugin_init,
                .configure = plugin_configure };
            const struct permissions_plugin *permissions_plugin_entry_v1(void) { return &d; }
            """, into: build, file: "libpermissions-slow-config.so")
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: "[slow-config]\ndeny=/usr/bin/busctl\n",
                                         pluginDirectories: [corePluginDirectory, hot])
        let monitor = try Monitor(daemon)

        try PlatformTests.install(build + "/libpermissions-slow-config.so", into: hot, as: "libpermissions-slow-config.so")
        try daemon.waitForLog("plugin slow-config: configure waiting")
        // Inside the window (configure has at most its 2 s deadline).
        let status = try daemon.call("GetStatus", "s", "slow-config")
        #expect(status.stderr.contains("unknown permission \"slow-config\""), "\(status)")
        let permissions = try daemon.busctl(["get-property", "org.example.Permissions", "/org/example/Permissions",
                                             "org.example.Permissions", "Permissions"]).stdout
        #expect(permissions == "as 2 \"location\" \"notifications\"\n")
        #expect(!monitor.all.contains { $0.contains("slow-config") }, "\(monitor.all)")

        let writer = open(fifo, O_WRONLY)  // lets configure return
        #expect(writer >= 0)
        close(writer)
        try monitor.waitFor { $0.hasPrefix("PropertiesChanged") && $0.contains("slow-config 0.1 loaded") }
        #expect(try daemon.call("GetStatus", "s", "slow-config").stdout == "s \"restricted\"\n")
        #expect(try Self.signalsUntilFence(daemon, monitor, since: 0)
                == [statusLine(app: "", "slow-config", "not-determined"),
                    statusLine(app: "/usr/bin/busctl", "slow-config", "restricted")])
    }

    /// A plugin directory that is a symbolic link switched to another generation
    /// (`ln -s g2 tmp; mv -T tmp DIR`, the NixOS or release-directory habit): its
    /// parent is watched for its name, so the switch is seen; the plugins only the old
    /// generation had stop, those only the new one has load, and the one both have
    /// is replaced by the new version (behaving the same: no signal).
    @Test func aSymbolicLinkedDirectorySwitchedIsFollowed() throws {
        let root = try makeTemporaryDirectory("generations")
        defer { Self.removeTree(root) }
        let g1 = root + "/g1", g2 = root + "/g2", dir = root + "/plugins"
        #expect(mkdir(g1, 0o755) == 0 && mkdir(g2, 0o755) == 0)
        try PlatformTests.install(try PlatformTests.buildExample(), into: g1, as: Self.plugin)
        try PlatformTests.install(try PlatformTests.buildExample(version: "2.0"), into: g2, as: Self.plugin)
        _ = try PluginTrustTests.plugin("old-only", into: g1)
        _ = try PluginTrustTests.plugin("new-only", into: g2)
        #expect(symlink("g1", dir) == 0)
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config, pluginDirectories: [corePluginDirectory, dir])
        let monitor = try Monitor(daemon)
        #expect(try Self.status(daemon) == "s \"restricted\"\n")
        #expect(try daemon.call("GetStatus", "s", "old-only").stdout == "s \"not-determined\"\n")

        #expect(symlink("g2", root + "/tmp") == 0)
        #expect(try run("/bin/mv", ["-T", root + "/tmp", dir]).status == 0)
        try daemon.waitForLog("plugin directory \(dir) was replaced")
        try daemon.waitForLog("plugin example-lan 2.0 loaded from \(dir)/\(Self.plugin)")
        try daemon.waitForLog("plugin new-only 0.1 loaded from \(dir)/libpermissions-new-only.so")
        try daemon.waitForLog("plugin \(dir)/libpermissions-old-only.so was removed; stopping old-only")
        #expect(try Self.status(daemon) == "s \"restricted\"\n")
        #expect(try daemon.call("GetStatus", "s", "new-only").stdout == "s \"not-determined\"\n")
        #expect(try daemon.call("GetStatus", "s", "old-only").stderr.contains("unknown permission \"old-only\""))
        #expect(try Self.signalsUntilFence(daemon, monitor, since: 0).sorted()
                == [statusLine(app: "", "new-only", "not-determined"),
                    statusLine(app: "", "old-only", "unsupported")].sorted())
    }
}
