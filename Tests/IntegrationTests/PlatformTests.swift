import CPermissionsPlugin
import Foundation
import Testing
import PermissionsTestSupport

/// Plugins as a platform: built with only a C compiler and the SDK, dropped into a
/// running daemon, removed, replaced; permissions declared in config; ABI checks.
@Suite struct PlatformTests {
    /// Builds the C example (Plugins/Example) with its Makefile and the in-tree SDK;
    /// returns the library's path.
    static func buildExample(version: String = "1.0") throws -> String {
        let dir = try makeTemporaryDirectory("example")
        for file in ["Makefile", "example-lan.c"] {
            try FileManager.default.copyItem(atPath: packageRoot + "/Plugins/Example/" + file, toPath: dir + "/" + file)
        }
        let source = try String(contentsOfFile: dir + "/example-lan.c", encoding: .utf8)
        try source.replacingOccurrences(of: ".version = \"1.0\"", with: ".version = \"\(version)\"")
            .write(toFile: dir + "/example-lan.c", atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["PKG_CONFIG_PATH"] = packageRoot + "/Plugins/sdk"
        let r = try run("/usr/bin/make", ["-s", "-C", dir], environment: environment)
        #expect(r.status == 0, "make: \(r.stderr)")
        return dir + "/libpermissions-example-lan.so"
    }

    /// Puts a file into a directory the way install(1) does: write aside, rename in.
    static func install(_ file: String, into directory: String, as name: String) throws {
        let temporary = directory + "/.\(name).tmp"
        try? FileManager.default.removeItem(atPath: temporary)
        try FileManager.default.copyItem(atPath: file, toPath: temporary)
        #expect(rename(temporary, directory + "/" + name) == 0)
    }

    @Test func cExampleIsHotLoadedConfiguredReplacedAndRemoved() throws {
        let library = try Self.buildExample()
        let hot = try makeTemporaryDirectory("hot-plugins")
        defer { try? FileManager.default.removeItem(atPath: hot) }
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: "[example-lan]\nenabled=true\n",
                                         pluginDirectories: [corePluginDirectory, hot])
        let monitor = try Monitor(daemon)
        #expect(try daemon.call("GetStatus", "s", "example-lan").stderr.contains("unknown permission"))

        try Self.install(library, into: hot, as: "libpermissions-example-lan.so")
        try monitor.waitFor { $0 == statusLine(app: "", "example-lan", "not-determined") }
        try monitor.waitFor { $0.hasPrefix("PropertiesChanged") && $0.contains("example-lan") }
        #expect(try daemon.call("GetStatus", "s", "example-lan").stdout == "s \"not-determined\"\n")
        #expect(try daemon.ctl("plugins").stdout.contains("example-lan    1.0      loaded"))

        // Its config section drives it, like a built-in plugin's.
        try daemon.writeConfig("[example-lan]\nenabled=false\n")
        try monitor.waitFor { $0 == statusLine(app: "", "example-lan", "disabled") }
        try daemon.writeConfig("[example-lan]\nenabled=true\ndeny=/usr/bin/busctl\n")
        try monitor.waitFor { $0 == statusLine(app: "", "example-lan", "not-determined") }
        #expect(try daemon.call("GetStatus", "s", "example-lan").stdout == "s \"restricted\"\n")

        // Replaced by a new version: the new code runs, configured before it takes over
        // from the old one, which is stopped. It behaves the same: no StatusChanged
        // (checked with a fence: a change of its own whose signal must come next).
        let before = monitor.statusChanges.count
        try Self.install(try Self.buildExample(version: "2.0"), into: hot, as: "libpermissions-example-lan.so")
        // (The configuration edit above announces ConfigGeneration too: skip to Plugins.)
        let replaced = try monitor.waitFor { $0.hasPrefix("PropertiesChanged") && $0.contains("Plugins") }
        #expect(replaced.contains("(example-lan 2.0 loaded example-lan)"), "\(replaced)")
        #expect(daemon.log.contains("libpermissions-example-lan.so was replaced"))
        #expect(try daemon.ctl("plugins").stdout.contains("example-lan    2.0      loaded"))
        #expect(try daemon.call("GetStatus", "s", "example-lan").stdout == "s \"restricted\"\n")
        #expect(try daemon.ctl("grant", "org.example.Fence", "location").status == 0)
        try monitor.waitFor { $0 == statusLine(app: "org.example.Fence", "location", "authorized") }
        #expect(Array(monitor.statusChanges[before...]) == [statusLine(app: "org.example.Fence", "location", "authorized")])

        // Removed: its permission goes, with a signal, and the daemon carries on.
        try FileManager.default.removeItem(atPath: hot + "/libpermissions-example-lan.so")
        try monitor.waitFor { $0 == statusLine(app: "", "example-lan", "unsupported") }
        #expect(try daemon.call("GetStatus", "s", "example-lan").stderr.contains("unknown permission"))
        #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"not-determined\"\n")
        #expect(daemon.isRunning)
    }

    @Test func declaredPermissionsBehaveLikeAnyOther() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: """
            [permissions]
            declare=contacts;photos

            [photos]
            deny=/usr/bin/busctl
            """)
        let monitor = try Monitor(daemon)
        let all = try daemon.gdbusCall("GetAll")
        #expect(all.stdout == "({'contacts': 'not-determined', 'location': 'not-determined', "
                + "'notifications': 'not-determined', 'photos': 'not-determined'},)\n")
        #expect(try daemon.call("GetStatus", "s", "photos").stdout == "s \"restricted\"\n")
        // (A bad app id in allow= or deny= refuses the whole configuration, for declared
        // permissions as for plugins' sections: SwitchConfigTests.)
        let contacts = try daemon.ctl("status", "contacts").stdout
        #expect(contacts.contains("plugin: config"))
        #expect(contacts.contains("\nplugin-details: none\n"), "\(contacts)")  // not an empty "plugin-details: "

        // Decisions and signals.
        #expect(try daemon.ctl("grant", "org.example.Addressbook", "contacts").status == 0)
        try monitor.waitFor { $0 == statusLine(app: "org.example.Addressbook", "contacts", "authorized") }

        // Requests, through an agent.
        let agent = try TestAgent(bus: bus)
        let request = try daemon.requestInBackground("contacts")
        let prompt = try agent.waitForPrompt()
        #expect(prompt.permission == "contacts")
        agent.answer(prompt, "deny")
        #expect(try request.wait().1 == "s \"denied\"\n")

        // A new declaration in a drop-in appears at once.
        try FileManager.default.createDirectory(atPath: daemon.configDirectory + "/permissions.conf.d",
                                                withIntermediateDirectories: true)
        try daemon.writeConfig("[permissions]\ndeclare=contacts;photos;screen-capture\n",
                               name: "permissions.conf.d/50-more.conf")
        try monitor.waitFor { $0 == statusLine(app: "", "screen-capture", "not-determined") }
        try monitor.waitFor { $0.hasPrefix("PropertiesChanged") && $0.contains("screen-capture") }
        agent.autoAnswer = "allow-once"
        #expect(try daemon.ctl("request", "screen-capture").stdout == "authorized\n")
    }

    /// One misbehaving plugin per fault, all in one daemon, which keeps answering.
    @Test func misbehavingPluginsAreContained() throws {
        let dir = try makeTemporaryDirectory("bad-plugins")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let common = """
            #include <errno.h>
            #include <pthread.h>
            #include <unistd.h>
            #include "permissions-plugin.h"
            __attribute__((unused)) static const struct permissions_host *the_host;
            __attribute__((unused)) static void publish_state(const char *permission, int32_t state) {
                struct permissions_snapshot s = { PERMISSIONS_PLUGIN_ABI_VERSION, sizeof s };
                s.permission = permission;
                s.service_state = state;
                the_host->publish(the_host->host_data, &s);
            }
            """
        func plugin(_ name: String, _ body: String) throws {
            try PluginLoadingTests.compile(common + body + """
                static const char *const perms[] = { "\(name)", NULL };
                static const struct permissions_plugin d = {
                    PERMISSIONS_PLUGIN_ABI_VERSION, sizeof d, "\(name)", "0.1", "fault", perms, plugin_init, NULL, NULL };
                const struct permissions_plugin *permissions_plugin_entry_v1(void) { return &d; }
                """, into: dir, file: "libpermissions-\(name).so")
        }
        // init never returns.
        try plugin("blocker", """
            static int plugin_init(const struct permissions_host *h, void **s) {
                (void)h; (void)s; for (;;) pause(); return 0; }
            """)
        // init returns a value outside the ABI.
        try plugin("positive", """
            static int plugin_init(const struct permissions_host *h, void **s) { (void)h; (void)s; return 7; }
            """)
        // publishes a service state outside the enum.
        try plugin("badvalue", """
            static int plugin_init(const struct permissions_host *h, void **s) {
                (void)s; the_host = h; publish_state("badvalue", 42); return 0; }
            """)
        // publishes from a thread of its own, after init returned: allowed, applied.
        try plugin("threaded", """
            static void *later(void *p) { (void)p; usleep(200000); publish_state("threaded", 0); return NULL; }
            static int plugin_init(const struct permissions_host *h, void **s) {
                (void)s; the_host = h; pthread_t t; pthread_create(&t, NULL, later, NULL); pthread_detach(t); return 0; }
            """)
        // publishes in a storm from its own thread.
        try plugin("storm", """
            static void *flood(void *p) {
                (void)p;
                for (int i = 0; ; i++) if (the_host->publish(the_host->host_data, &(struct permissions_snapshot){
                    PERMISSIONS_PLUGIN_ABI_VERSION, sizeof(struct permissions_snapshot), "storm", i % 2 }) == -EBUSY) break;
                return NULL;
            }
            static int plugin_init(const struct permissions_host *h, void **s) {
                (void)s; the_host = h; pthread_t t; pthread_create(&t, NULL, flood, NULL); pthread_detach(t); return 0; }
            """)

        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [corePluginDirectory, dir])
        // The daemon owns its name although one plugin never returned from init: it
        // waited for that init's deadline (2 s). The storm's end and the thread's
        // publication are waited for, not assumed to have come within those 2 s.
        #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"not-determined\"\n")
        try daemon.waitForLog("libpermissions-storm.so: unavailable: it published more than 1000 snapshots in a second")
        let monitor = try Monitor(daemon)  // subscribed before the read below: the change cannot slip between
        if try daemon.call("GetStatus", "s", "threaded").stdout != "s \"not-determined\"\n" {
            _ = try monitor.waitFor { $0.hasPrefix("StatusChanged ") && $0.contains(" permission=threaded ") }
        }
        for _ in 0..<10 {
            #expect(try daemon.call("GetStatus", "s", "notifications").stdout == "s \"not-determined\"\n")
        }
        let log = daemon.log
        #expect(log.contains("libpermissions-blocker.so: unavailable: init did not return within the deadline"))
        #expect(log.contains("libpermissions-positive.so: unavailable: init returned 7, outside the ABI"))
        #expect(log.contains("plugin badvalue: service state 42 for badvalue is not in the ABI"))
        #expect(log.contains("libpermissions-badvalue.so: unavailable: it published a snapshot outside the ABI"))
        #expect(log.contains("libpermissions-storm.so: unavailable: it published more than 1000 snapshots in a second"))
        let plugins = try daemon.ctl("plugins").stdout
        for (name, state) in [("blocker", "unavailable"), ("positive", "unavailable"), ("badvalue", "unavailable"),
                              ("storm", "unavailable"), ("threaded", "loaded"), ("location", "loaded")] {
            #expect(plugins.split(separator: "\n").contains { $0.hasPrefix(name + " ") && $0.contains(" \(state) ") },
                    "\(name) should be \(state):\n\(plugins)")
        }
        for name in ["blocker", "positive", "badvalue", "storm"] {
            #expect(try daemon.call("GetStatus", "s", name).stdout == "s \"unsupported\"\n")
        }
        #expect(try daemon.call("GetStatus", "s", "threaded").stdout == "s \"not-determined\"\n")
        #expect(daemon.isRunning)
    }

    /// Every plugin this build made, and the C example: the entry symbol is the only
    /// symbol exported, and the descriptor has this ABI's version and sizes.
    @Test func everyBuiltPluginPassesTheABIChecks() throws {
        let libraries = try FileManager.default.contentsOfDirectory(atPath: binDir)
            .filter { $0.hasPrefix("libpermissions-") && $0.hasSuffix(".so") }.sorted()
            .map { binDir + "/" + $0 } + [try Self.buildExample()]
        #expect(libraries.count >= 5)
        for path in libraries {
            let file = URL(fileURLWithPath: path).lastPathComponent
            let exported = try run("/usr/bin/nm", ["-D", "--defined-only", path]).stdout
                .split(separator: "\n").filter { line in
                    let fields = line.split(separator: " ")
                    return fields.count == 3 && fields[1].first!.isUppercase
                }.map { String($0.split(separator: " ")[2]) }
            #expect(exported == ["permissions_plugin_entry_v1"], "\(file) exports \(exported)")

            guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
                Issue.record("\(file): \(String(cString: dlerror()))")
                continue
            }
            let symbol = try #require(dlsym(handle, PERMISSIONS_PLUGIN_ENTRY), "\(file) has no entry symbol")
            let entry = unsafeBitCast(symbol, to: permissions_plugin_entry_fn.self)
            let descriptor = try #require(entry(), "\(file): the entry returned NULL").pointee
            #expect(descriptor.abi_version == PERMISSIONS_PLUGIN_ABI_VERSION, "\(file)")
            #expect(Int(descriptor.struct_size) == MemoryLayout<permissions_plugin>.size, "\(file)")
            let name = String(cString: try #require(descriptor.name))
            #expect("libpermissions-\(name).so" == file)
            #expect(descriptor.`init` != nil, "\(file) has no init")
            // Never dlclose: a Swift plugin's runtime metadata must stay mapped.
        }
    }
}
