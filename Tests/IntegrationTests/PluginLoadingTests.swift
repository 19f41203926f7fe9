import Foundation
import Testing
import PermissionsTestSupport

/// Plugin files that are not valid plugins are skipped with one log line naming
/// the file and the reason, and every other plugin still loads. The test plugins
/// are C, compiled here against the shipped header with only a C compiler.
@Suite struct PluginLoadingTests {
    static let header = packageRoot + "/Sources/CPermissionsPlugin/include"

    /// A plugin in C: `descriptor` fills in `struct permissions_plugin d`.
    static func cPlugin(name: String, permissions: String, abi: String = "PERMISSIONS_PLUGIN_ABI_VERSION",
                        initBody: String = "return 0;", entry: String = "permissions_plugin_entry_v1") -> String {
        """
        #include <errno.h>
        #include "permissions-plugin.h"
        static const char *const perms[] = { \(permissions) NULL };
        static int plugin_init(const struct permissions_host *host, void **state) {
            (void)state;
            struct permissions_snapshot s = { PERMISSIONS_PLUGIN_ABI_VERSION, sizeof s };
            s.service_state = PERMISSIONS_SERVICE_AVAILABLE;
            for (int i = 0; perms[i]; i++) { s.permission = perms[i]; host->publish(host->host_data, &s); }
            \(initBody)
        }
        static const struct permissions_plugin descriptor = {
            \(abi), sizeof(struct permissions_plugin), "\(name)", "0.1", "test plugin", perms,
            plugin_init, NULL, NULL,
        };
        const struct permissions_plugin *\(entry)(void) { return &descriptor; }
        """
    }

    static func compile(_ source: String, into directory: String, file: String) throws {
        let c = directory + "/" + file + ".c"
        try source.write(toFile: c, atomically: true, encoding: .utf8)
        let r = try run("/usr/bin/cc", ["-shared", "-fPIC", "-Wall", "-Werror", "-I", header, "-o",
                                        directory + "/" + file, c])
        #expect(r.status == 0, "cc: \(r.stderr)")
        try FileManager.default.removeItem(atPath: c)
    }

    /// `source` with a constructor that sleeps `microseconds`, then runs `after`
    /// (C statements): a plugin whose dlopen takes that long.
    static func slowToMap(_ source: String, microseconds: Int, after: String = "") -> String {
        source.replacingOccurrences(of: "#include <errno.h>", with: """
            #include <errno.h>
            #include <stdio.h>
            #include <unistd.h>
            __attribute__((constructor)) static void slow(void) { usleep(\(microseconds)); \(after) }
            """)
    }

    /// The text of `path` (empty while it does not exist) once `done` holds for it,
    /// or when `seconds` have passed: polled, every 10 ms, for a file a plugin writes.
    static func fileText(_ path: String, within seconds: Double, until done: (String) -> Bool) -> String {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            if done(text) || Date() >= deadline { return text }
            usleep(10_000)  // polling a file for its line, with a deadline
        }
    }

    @Test func badFilesAreSkippedAndTheOthersLoad() throws {
        let dir = try makeTemporaryDirectory("plugins")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "this is not a library\n".write(toFile: dir + "/libpermissions-junk.so", atomically: true, encoding: .utf8)
        try Self.compile(Self.cPlugin(name: "oldabi", permissions: "\"old-abi\",", abi: "99"),
                         into: dir, file: "libpermissions-oldabi.so")
        try Self.compile(Self.cPlugin(name: "nosym", permissions: "\"no-sym\",", entry: "some_other_symbol"),
                         into: dir, file: "libpermissions-nosym.so")
        try Self.compile(Self.cPlugin(name: "other", permissions: "\"misnamed\","),
                         into: dir, file: "libpermissions-misnamed.so")
        try Self.compile(Self.cPlugin(name: "dup", permissions: "\"location\","),
                         into: dir, file: "libpermissions-dup.so")
        try Self.compile(Self.cPlugin(name: "badname", permissions: "\"Bad Name\","),
                         into: dir, file: "libpermissions-badname.so")
        try Self.compile(Self.cPlugin(name: "failing", permissions: "\"failing\",", initBody: "return -EIO;"),
                         into: dir, file: "libpermissions-failing.so")
        try Self.compile(Self.cPlugin(name: "cgood", permissions: "\"c-good\", \"c-other\","),
                         into: dir, file: "libpermissions-cgood.so")
        try "not even looked at\n".write(toFile: dir + "/README", atomically: true, encoding: .utf8)

        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [corePluginDirectory, dir])
        let log = daemon.log
        let expected = [
            "libpermissions-junk.so: skipped: not a loadable library",
            "libpermissions-oldabi.so: skipped: ABI version 99, this daemon supports 1",
            "libpermissions-nosym.so: skipped: no entry symbol permissions_plugin_entry_v1",
            "libpermissions-misnamed.so: skipped: it calls itself \"other\", the file name says \"misnamed\"",
            "libpermissions-dup.so: skipped: permission \"location\" is already provided by plugin \"location\"",
            "libpermissions-badname.so: skipped: invalid permission name \"Bad Name\"",
            "libpermissions-failing.so: unavailable: init failed: Input/output error (errno 5)",
        ]
        for line in expected {
            #expect(log.components(separatedBy: "\n").filter { $0.contains(line) }.count == 1, "missing: \(line)\n\(log)")
        }
        #expect(!log.contains("README"))

        let permissions = try daemon.busctl(["get-property", "org.example.Permissions", "/org/example/Permissions",
                                             "org.example.Permissions", "Permissions"])
        // A plugin whose init failed still declared its permission: it is known, with
        // nothing behind it.
        #expect(permissions.stdout == "as 5 \"c-good\" \"c-other\" \"failing\" \"location\" \"notifications\"\n")
        #expect(try daemon.call("GetStatus", "s", "c-good").stdout == "s \"not-determined\"\n")
        #expect(try daemon.call("GetStatus", "s", "failing").stdout == "s \"unsupported\"\n")

        let plugins = try daemon.ctl("plugins")
        #expect(plugins.stdout.contains("failing        0.1      unavailable  failing"), "\(plugins.stdout)")
        #expect(plugins.stdout.contains("junk                    unavailable"), "\(plugins.stdout)")
    }

    /// A plugin whose constructor never returns holds the dynamic loader's lock for
    /// good, inside dlopen: it is abandoned at its deadline, and costs no other
    /// plugin. Those opened before it had looked up what they need from the loader
    /// in their own turn (PluginKit's `makeDescriptor`), so their init, made after
    /// its dlopen began, does not wait on that lock.
    @Test func aPluginStuckInItsConstructorCostsOnlyItself() throws {
        let dir = try makeTemporaryDirectory("stuck-plugin")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Self.compile("""
            #include <unistd.h>
            #include "permissions-plugin.h"
            __attribute__((constructor)) static void stall(void) { for (;;) pause(); }
            const struct permissions_plugin *permissions_plugin_entry_v1(void) { return 0; }
            """, into: dir, file: "libpermissions-stuck.so")
        let plugins = ["bluetooth", "local-network", "location", "notifications", "pipewire"]
        let every = pluginDirectory("every-plugin", with: plugins)
        defer { try? FileManager.default.removeItem(atPath: every) }
        // No PipeWire socket yet: the PipeWire plugin's init waits for one (libpipewire
        // itself is loaded only when it comes, and that dlopen would wait too).
        let runtime = try makeTemporaryDirectory("runtime")
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        chmod(runtime, 0o700)
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [every, dir],
                                         environment: ["XDG_RUNTIME_DIR": runtime])
        #expect(daemon.log.contains("libpermissions-stuck.so: skipped: opening did not return within the deadline"),
                "\(daemon.log)")
        for plugin in plugins {
            #expect(daemon.log.contains("plugin \(plugin) 1."), "\(plugin): \(daemon.log)")
        }
        #expect(!daemon.log.contains("init did not return"), "\(daemon.log)")
        #expect(try daemon.gdbusCall("GetAll").stdout.contains("'camera'"))
    }

    /// A name whose first copy will not serve (refused at opening, or claiming a
    /// permission a name before it claimed) falls back to its copy in the next
    /// directory, which maps before the names after it: one of those stuck in its
    /// constructor, holding the loader's lock for good, does not cost it the
    /// fallback. (Breaker: the fallback was abandoned at its deadline.)
    @Test(arguments: ["refused at opening", "a clashing claim"])
    func aFallbackCopyMapsBeforeAStuckPluginAfterIt(_ why: String) throws {
        let first = try makeTemporaryDirectory("first")
        let second = try makeTemporaryDirectory("second")
        defer {
            try? FileManager.default.removeItem(atPath: first)
            try? FileManager.default.removeItem(atPath: second)
        }
        let stuck = """
            #include <unistd.h>
            #include "permissions-plugin.h"
            __attribute__((constructor)) static void stall(void) { for (;;) pause(); }
            const struct permissions_plugin *permissions_plugin_entry_v1(void) { return 0; }
            """
        // In the first directory, in name order: aa, bb whose copy there will not
        // serve, and cc, stuck. In the second, bb's copy that will.
        try Self.compile(Self.cPlugin(name: "aa", permissions: "\"shared\","), into: first,
                         file: "libpermissions-aa.so")
        let refused = why == "refused at opening"
            ? Self.cPlugin(name: "bb", permissions: "\"bb-first\",", entry: "not_the_entry")
            : Self.cPlugin(name: "bb", permissions: "\"shared\",")
        try Self.compile(refused, into: first, file: "libpermissions-bb.so")
        try Self.compile(stuck, into: first, file: "libpermissions-cc.so")
        try Self.compile(Self.cPlugin(name: "bb", permissions: "\"bb-second\","), into: second,
                         file: "libpermissions-bb.so")
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [first, second])
        #expect(daemon.log.contains("libpermissions-cc.so: skipped: opening did not return within the deadline"),
                "\(daemon.log)")
        #expect(daemon.log.contains("plugin bb 0.1 loaded from \(second)/libpermissions-bb.so"), "\(daemon.log)")
        #expect(try daemon.call("GetStatus", "s", "bb-second").stdout == "s \"not-determined\"\n", "\(daemon.log)")
        #expect(try daemon.call("GetStatus", "s", "shared").stdout == "s \"not-determined\"\n")
    }

    /// A plugin in C that writes each call it gets to `trace` (one word a line):
    /// init (returning `initResult`), validate, configure.
    static func tracingPlugin(name: String, trace: String, initResult: String) -> String {
        """
        #include <errno.h>
        #include <stdio.h>
        #include "permissions-plugin.h"
        static const char *const perms[] = { "\(name)-permission", NULL };
        static void note(const char *call) {
            FILE *f = fopen("\(trace)", "a");
            if (f) { fprintf(f, "%s\\n", call); fclose(f); }
        }
        static int plugin_init(const struct permissions_host *host, void **state) {
            (void)host; (void)state;
            note("init");
            return \(initResult);
        }
        static int plugin_configure(void *state, const struct permissions_config *config) {
            (void)state; (void)config;
            note("configure");
            return 0;
        }
        static int plugin_validate(void *state, const struct permissions_config *config) {
            (void)state; (void)config;
            note("validate");
            return 0;
        }
        static const struct permissions_plugin descriptor = {
            PERMISSIONS_PLUGIN_ABI_VERSION, sizeof(struct permissions_plugin), "\(name)", "0.1", "test plugin",
            perms, plugin_init, plugin_configure, NULL, plugin_validate, NULL, NULL, NULL,
        };
        const struct permissions_plugin *permissions_plugin_entry_v1(void) { return &descriptor; }
        """
    }

    /// At load, validate and configure run on the plugin's queue straight after
    /// the step before went well, ahead of the daemon queue's look at it
    /// (AheadCall): a plugin whose init succeeds is validated, then configured,
    /// then given the configuration files' part in the same order; one whose init
    /// fails gets neither call, ahead or not.
    @Test func validateAndConfigureFollowOnlyAnInitThatSucceeded() throws {
        let dir = try makeTemporaryDirectory("traced-plugins")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Self.compile(Self.tracingPlugin(name: "good", trace: dir + "/good.trace", initResult: "0"), into: dir,
                         file: "libpermissions-good.so")
        try Self.compile(Self.tracingPlugin(name: "failing", trace: dir + "/failing.trace", initResult: "-EIO"),
                         into: dir, file: "libpermissions-failing.so")
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [dir])
        #expect(daemon.log.contains("plugin good 0.1 loaded"), "\(daemon.log)")
        #expect(daemon.log.contains("libpermissions-failing.so: unavailable: init failed"), "\(daemon.log)")
        // The name is owned once the configuration is in force: every call of
        // start-up has returned by then. Stopped, so that nothing comes later.
        daemon.stop()
        let good = try String(contentsOfFile: dir + "/good.trace", encoding: .utf8)
        #expect(good == "init\nvalidate\nconfigure\nvalidate\nconfigure\n")
        let failing = try String(contentsOfFile: dir + "/failing.trace", encoding: .utf8)
        #expect(failing == "init\n")
    }

    /// A plugin that maps after the service is made starts its init ahead, on its
    /// own queue, as soon as its dlopen returned (PluginResolution.open). One whose
    /// init then breaks the ABI (a snapshot outside it, its first publication) is
    /// given up, never loaded. The daemon queue nearly always looks at its opening
    /// before its misbehaviour; the other order (`LoadedPlugin.givenUpEarly`) is
    /// not forced here.
    @Test func anInitRunAheadThatBreaksTheABIIsGivenUp() throws {
        let dir = try makeTemporaryDirectory("misbehaving-plugin")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // The constructor's pause keeps its dlopen going until the service is made
        // (a few milliseconds into start-up), so that its init runs ahead.
        let source = Self.slowToMap(Self.cPlugin(name: "misbehaving", permissions: "\"misbehaving\",", initBody: """
            struct permissions_snapshot bad = { PERMISSIONS_PLUGIN_ABI_VERSION, 1 };
            host->publish(host->host_data, &bad);
            return 0;
            """), microseconds: 300_000)
        try Self.compile(source, into: dir, file: "libpermissions-misbehaving.so")
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [dir])
        #expect(daemon.log.contains("libpermissions-misbehaving.so: unavailable: it published a snapshot outside the ABI"),
                "\(daemon.log)")
        #expect(!daemon.log.contains("plugin misbehaving 0.1 loaded"), "\(daemon.log)")
        #expect(try daemon.call("GetStatus", "s", "misbehaving").stdout == "s \"unsupported\"\n", "\(daemon.log)")
    }

    /// A plugin that breaks the ABI during its validate at load (a snapshot with a
    /// service state outside the enum) is given up: its host calls are closed, and
    /// it must get no further call, configure included (the ahead configure is
    /// skipped; the daemon queue must not make the call itself).
    @Test func aPluginGivenUpDuringItsValidateIsNotConfigured() throws {
        let dir = try makeTemporaryDirectory("traced-plugins")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let trace = dir + "/bad.trace"
        let source = """
            #include <errno.h>
            #include <stdio.h>
            #include "permissions-plugin.h"
            static const char *const perms[] = { "bad-permission", NULL };
            static const struct permissions_host *H;
            static void note(const char *call) {
                FILE *f = fopen("\(trace)", "a");
                if (f) { fprintf(f, "%s\\n", call); fclose(f); }
            }
            static int plugin_init(const struct permissions_host *host, void **state) {
                (void)state; H = host; note("init"); return 0;
            }
            static int plugin_configure(void *state, const struct permissions_config *config) {
                (void)state; (void)config; note("configure"); return 0;
            }
            static int plugin_validate(void *state, const struct permissions_config *config) {
                (void)state; (void)config; note("validate");
                struct permissions_snapshot s = { PERMISSIONS_PLUGIN_ABI_VERSION, sizeof s };
                s.permission = perms[0]; s.service_state = 99;
                H->publish(H->host_data, &s);
                return 0;
            }
            static const struct permissions_plugin descriptor = {
                PERMISSIONS_PLUGIN_ABI_VERSION, sizeof(struct permissions_plugin), "bad", "0.1", "test plugin",
                perms, plugin_init, plugin_configure, NULL, plugin_validate, NULL, NULL, NULL,
            };
            const struct permissions_plugin *permissions_plugin_entry_v1(void) { return &descriptor; }
            """
        try Self.compile(source, into: dir, file: "libpermissions-bad.so")
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [dir])
        #expect(daemon.log.contains("libpermissions-bad.so: unavailable: it published a snapshot outside the ABI"),
                "\(daemon.log)")
        daemon.stop()
        #expect(try String(contentsOfFile: trace, encoding: .utf8) == "init\nvalidate\n")
    }

    /// A configuration that changes while a replacing copy's init runs: the new
    /// copy's steps run ahead with the configuration it was opened under are not
    /// made (they would wait in front of the new configuration's, and eat their
    /// deadline); it is validated and configured with the new one only, and takes
    /// over. (Breaker: it got the old configuration after the new one was in
    /// force, and, with slow calls, was abandoned at configure's deadline.)
    @Test func aCopyWhoseInitOutlastsTheConfigurationGetsOnlyTheNewOne() throws {
        let dir = try makeTemporaryDirectory("reloaded-plugin")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let trace = dir + "/slow.trace"
        func plugin(version: String, initMilliseconds: Int) -> String {
            """
            #include <stdio.h>
            #include <string.h>
            #include <unistd.h>
            #include "permissions-plugin.h"
            static const char *const perms[] = { "slow-permission", NULL };
            static void note(const char *call, const struct permissions_config *config) {
                const char *k = "-";
                for (uint32_t i = 0; config && i < config->n_entries; i++)
                    if (strcmp(config->entries[i].key, "k") == 0) k = config->entries[i].value;
                FILE *f = fopen("\(trace)", "a");
                if (f) { fprintf(f, "\(version) %s %s\\n", call, k); fclose(f); }
            }
            static int plugin_init(const struct permissions_host *host, void **state) {
                (void)host; (void)state;
                note("init-begins", NULL);
                usleep(\(initMilliseconds) * 1000);
                return 0;
            }
            static int plugin_configure(void *state, const struct permissions_config *config) {
                (void)state; note("configure", config); return 0;
            }
            static int plugin_validate(void *state, const struct permissions_config *config) {
                (void)state; note("validate", config); return 0;
            }
            static const struct permissions_plugin descriptor = {
                PERMISSIONS_PLUGIN_ABI_VERSION, sizeof(struct permissions_plugin), "slow", "\(version)", "test plugin",
                perms, plugin_init, plugin_configure, NULL, plugin_validate, NULL, NULL, NULL,
            };
            const struct permissions_plugin *permissions_plugin_entry_v1(void) { return &descriptor; }
            """
        }
        try Self.compile(plugin(version: "1", initMilliseconds: 0), into: dir, file: "libpermissions-slow.so")
        let staging = try makeTemporaryDirectory("reloaded-plugin-next")
        defer { try? FileManager.default.removeItem(atPath: staging) }
        try Self.compile(plugin(version: "2", initMilliseconds: 1500), into: staging, file: "libpermissions-slow.so")
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: "[slow]\nk=old\n", pluginDirectories: [dir])
        #expect(daemon.log.contains("plugin slow 1 loaded"), "\(daemon.log)")
        try PlatformTests.install(staging + "/libpermissions-slow.so", into: dir, as: "libpermissions-slow.so")
        // While the new copy's init runs (its first line is written), the change.
        _ = Self.fileText(trace, within: 10) { $0.contains("2 init-begins") }
        try daemon.writeConfig("[slow]\nk=new\n")
        _ = try daemon.waitForLog("plugin slow 2 loaded")
        daemon.stop()
        let calls = try String(contentsOfFile: trace, encoding: .utf8).split(separator: "\n").filter { $0.hasPrefix("2 ") }
        #expect(calls == ["2 init-begins -", "2 validate new", "2 configure new"], "\(calls)\n\(daemon.log)")
    }

    /// A copy abandoned at its opening's deadline (its constructor outlasts it),
    /// whose name falls back to a copy in the next directory, is never started: its
    /// dlopen returns later, in the mapping turn the fallback keeps, and neither
    /// claims that turn nor runs its init ahead. (Breaker: it was initialized,
    /// validated and configured, a plugin the log said was abandoned, never fini'd.)
    @Test func aCopyAbandonedAtItsOpeningIsNeverStarted() throws {
        let first = try makeTemporaryDirectory("first")
        let second = try makeTemporaryDirectory("second")
        defer {
            try? FileManager.default.removeItem(atPath: first)
            try? FileManager.default.removeItem(atPath: second)
        }
        let trace = first + "/late.trace"
        let late = Self.slowToMap(Self.tracingPlugin(name: "late", trace: trace, initResult: "0"),
                                  microseconds: 2_600_000, after: """
            FILE *f = fopen("\(trace)", "a"); if (f) { fprintf(f, "constructed\\n"); fclose(f); }
            """)
        try Self.compile(late, into: first, file: "libpermissions-late.so")
        try Self.compile(Self.cPlugin(name: "late", permissions: "\"late-permission\","), into: second,
                         file: "libpermissions-late.so")
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [first, second])
        #expect(daemon.log.contains("\(first)/libpermissions-late.so: skipped: opening did not return within the deadline"),
                "\(daemon.log)")
        #expect(daemon.log.contains("plugin late 0.1 loaded from \(second)/libpermissions-late.so"), "\(daemon.log)")
        // The constructor's end, then a second for a call that must not come.
        _ = Self.fileText(trace, within: 10) { $0.contains("constructed") }
        _ = Self.fileText(trace, within: 1) { $0 != "constructed\n" }
        daemon.stop()
        let calls = Self.fileText(trace, within: 0) { _ in true }
        #expect(calls == "constructed\n", "calls the abandoned copy got: \(calls)")
    }

    @Test func noPluginsAtAllStillServes() throws {
        let dir = try makeTemporaryDirectory("plugins")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [dir])
        #expect(try daemon.gdbusCall("GetAll").stdout == "(@a{ss} {},)\n")
        #expect(try daemon.call("GetStatus", "s", "camera").stderr.contains("unknown permission \"camera\""))
    }
}
