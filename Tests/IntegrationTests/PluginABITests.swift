import Foundation
import Testing
import PermissionsTestSupport

/// The ABI's growth path and the host's side of the plugin lifecycle: plugins built
/// against an older, the current and a newer ABI 1 header load side by side and
/// are read alike; structs and strides below v1 are refused; a publication racing
/// fini is refused; plugins stuck in fini cost the exit one deadline in all.
/// The C sources and header copies are in Tests/fixtures/abi.
@Suite struct PluginABITests {
    static let fixtures = packageRoot + "/Tests/fixtures/abi"
    static let realHeader = packageRoot + "/Sources/CPermissionsPlugin/include"

    /// Compiles a C plugin into `directory` as libpermissions-`name`.so.
    static func build(_ source: String, include: String, defines: [String] = [], into directory: String,
                      name: String) throws {
        let r = try run("/usr/bin/cc", ["-shared", "-fPIC", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", include]
                        + defines.map { "-D" + $0 }
                        + ["-o", directory + "/libpermissions-\(name).so", source, "-lpthread"])
        #expect(r.status == 0, "cc \(name): \(r.stderr)")
    }

    /// One C source, three headers: ABI 1 as first released (frozen in v1/, the
    /// layout of every plugin already built), today's, and a future one with a field
    /// appended to every struct and larger array elements (future/). Every struct
    /// the host reads ends at an unreadable page, so reading past a declared size
    /// crashes the daemon; a wrong stride shows as "wrong-stride" in the answers.
    @Test func pluginsBuiltAgainstOlderAndNewerHeadersLoadSideBySide() throws {
        let dir = try makeTemporaryDirectory("abi-plugins")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let headers = [("v1", Self.fixtures + "/v1"), ("now", Self.realHeader), ("future", Self.fixtures + "/future")]
        for (header, include) in headers {
            try Self.build(Self.fixtures + "/abi-plugin.c", include: include,
                           defines: ["NAME=\"abi-\(header)\"", "HEADER=\"\(header)\""], into: dir, name: "abi-\(header)")
        }
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [corePluginDirectory, dir])
        for (header, _) in headers {
            let permission = "abi-\(header)"
            #expect(daemon.log.contains("plugin \(permission) \(header) loaded"), "\(daemon.log)")
            for (app, status) in [("org.example.Restricted", "restricted"), ("org.example.Allowed", "authorized"),
                                  ("org.example.Neutral", "not-determined")] {
                #expect(try daemon.call("GetStatusForApp", "ss", app, permission).stdout == "s \"\(status)\"\n",
                        "\(permission) for \(app)")
            }
            let details = try daemon.gdbusCall("GetDetails", permission).stdout
            let hostField = header == "future" ? "absent" : "unknown to this header"
            #expect(details.contains("'plugin-details': <{'header': '\(header)', 'second': '2', "
                                     + "'host-future-call': '\(hostField)'}>"), "\(details)")
            #expect(details.contains("'devices': <[{'name': 'cam0', 'description': 'First camera'}, {'name': 'cam1'}]>"),
                    "\(details)")
            #expect(!details.contains("wrong-stride"))
        }
        #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"not-determined\"\n")
        #expect(!daemon.log.contains("wrong-stride"))
        #expect(daemon.isRunning)
    }

    /// The future header is the real one plus the lines marked FUTURE, so that the
    /// test above keeps testing today's header grown, not a stale copy.
    @Test func theFutureHeaderIsTheRealOneWithAppendedFields() throws {
        let real = try String(contentsOfFile: Self.realHeader + "/permissions-plugin.h", encoding: .utf8)
        let future = try String(contentsOfFile: Self.fixtures + "/future/permissions-plugin.h", encoding: .utf8)
        let stripped = future.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.contains("/* FUTURE") }.joined(separator: "\n")
        #expect(stripped == real, """
            Tests/fixtures/abi/future/permissions-plugin.h must be the real header plus lines marked \
            /* FUTURE */: copy the header there again and re-add them
            """)
        #expect(future.components(separatedBy: "/* FUTURE").count - 1 == 9)
    }

    /// A descriptor or snapshot smaller than v1, or a stride below v1's element
    /// size (or not a multiple of a pointer's alignment): refused, one log line each,
    /// the plugin unavailable and its permission "unsupported"; the same source
    /// without the fault loads.
    @Test func structsAndStridesBelowV1AreRefused() throws {
        let dir = try makeTemporaryDirectory("abi-refused")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        func plugin(_ name: String, descriptorSize: String = "sizeof(struct permissions_plugin)",
                    change: String = "") throws {
            let source = dir + "/\(name).c"
            try """
                #include "permissions-plugin.h"
                static const char *const perms[] = { "\(name)", NULL };
                static const struct permissions_kv kv[1] = { { "key", "value" } };
                static const struct permissions_kv props[1] = { { "name", "dev0" } };
                static const struct permissions_device dev[1] = { { 1, props } };
                static const struct permissions_app_policy pol[1] = { { "org.example.App", PERMISSIONS_POLICY_RESTRICTED } };
                static int plugin_init(const struct permissions_host *host, void **state) {
                    (void)state;
                    struct permissions_snapshot s = { PERMISSIONS_SNAPSHOT_INIT, .permission = "\(name)",
                        .n_policies = 1, .policies = pol, .n_details = 1, .details = kv, .n_devices = 1, .devices = dev };
                    \(change);
                    host->publish(host->host_data, &s);
                    return 0;
                }
                static const struct permissions_plugin d = {
                    .abi_version = PERMISSIONS_PLUGIN_ABI_VERSION, .struct_size = \(descriptorSize), .name = "\(name)",
                    .version = "0.1", .description = "t", .permissions = perms, .init = plugin_init };
                const struct permissions_plugin *permissions_plugin_entry_v1(void) { return &d; }
                """.write(toFile: source, atomically: true, encoding: .utf8)
            try Self.build(source, include: Self.realHeader, into: dir, name: name)
            try FileManager.default.removeItem(atPath: source)
        }
        try plugin("fine")
        try plugin("shortdesc", descriptorSize: "PERMISSIONS_PLUGIN_V1_SIZE - 8")
        try plugin("shortsnap", change: "s.struct_size = PERMISSIONS_SNAPSHOT_V1_SIZE - 8")
        try plugin("shortpolicy", change: "s.policy_size = PERMISSIONS_APP_POLICY_V1_SIZE - 8")
        try plugin("shortkv", change: "s.kv_size = PERMISSIONS_KV_V1_SIZE - 8")
        try plugin("shortdevice", change: "s.device_size = PERMISSIONS_DEVICE_V1_SIZE - 8")
        try plugin("oddpolicy", change: "s.policy_size = PERMISSIONS_APP_POLICY_V1_SIZE + 4")

        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [dir])
        let log = daemon.log
        let expected = [
            "libpermissions-shortdesc.so: skipped: descriptor of 56 bytes is smaller than ABI 1's 64",
            "plugin shortsnap: publish with snapshot version 1, size 56 (ABI 1's is at least 64 bytes); ignored",
            "plugin shortpolicy: snapshot for shortpolicy with policy_size 8: ABI 1's element is 16 bytes",
            "plugin shortkv: snapshot for shortkv with kv_size 8: ABI 1's element is 16 bytes",
            "plugin shortdevice: snapshot for shortdevice with device_size 8: ABI 1's element is 16 bytes",
            "plugin oddpolicy: snapshot for oddpolicy with policy_size 20: ABI 1's element is 16 bytes",
        ] + ["shortsnap", "shortpolicy", "shortkv", "shortdevice", "oddpolicy"].map {
            "libpermissions-\($0).so: unavailable: it published a snapshot outside the ABI"
        }
        for line in expected {
            #expect(log.components(separatedBy: "\n").filter { $0.contains(line) }.count == 1, "missing: \(line)\n\(log)")
        }
        let plugins = try daemon.ctl("plugins").stdout
        for name in ["shortdesc", "shortsnap", "shortpolicy", "shortkv", "shortdevice", "oddpolicy"] {
            #expect(plugins.split(separator: "\n").contains { $0.hasPrefix(name + " ") && $0.contains(" unavailable") },
                    "\(name) should be unavailable:\n\(plugins)")
        }
        for name in ["shortsnap", "shortpolicy", "shortkv", "shortdevice", "oddpolicy"] {
            #expect(try daemon.call("GetStatusForApp", "ss", "org.example.App", name).stdout == "s \"unsupported\"\n")
        }
        #expect(try daemon.call("GetStatusForApp", "ss", "org.example.App", "fine").stdout == "s \"restricted\"\n")
        #expect(plugins.split(separator: "\n").contains { $0.hasPrefix("fine ") && $0.contains(" loaded ") }, "\(plugins)")
    }

    /// The plugin's publication is inside the host's publish (blocked reading the
    /// snapshot, see publish-race.c) when the daemon stops it: the host decided to
    /// stop it before fini, so publish must answer -ESHUTDOWN, not 0.
    @Test func aPublicationRacingFiniIsRefused() throws {
        let dir = try makeTemporaryDirectory("abi-race")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Self.build(Self.fixtures + "/publish-race.c", include: Self.realHeader, into: dir, name: "race")
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [dir])
        // Loaded: init returned, so the publication is blocked inside the host now.
        #expect(daemon.log.contains("plugin race 1 loaded"), "\(daemon.log)")
        #expect(try daemon.call("GetStatus", "s", "race").stdout == "s \"not-determined\"\n")
        #expect(daemon.stop(within: 10))
        let log = daemon.log
        #expect(log.contains("race: publish was blocked when fini started; it returned \(-ESHUTDOWN) "
                             + "(-ESHUTDOWN is \(-ESHUTDOWN))"), "\(log)")
    }

    /// Two plugins that never return from fini: the daemon stops both at once and
    /// gives up on them after one deadline (2 s), not one each.
    @Test func pluginsStuckInFiniCostTheExitOneDeadline() throws {
        let dir = try makeTemporaryDirectory("abi-stuck")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for name in ["stuck-a", "stuck-b"] {
            let source = dir + "/\(name).c"
            try """
                #include <unistd.h>
                #include "permissions-plugin.h"
                static const char *const perms[] = { "\(name)", NULL };
                static int plugin_init(const struct permissions_host *host, void **state) {
                    (void)state;
                    struct permissions_snapshot s = { PERMISSIONS_SNAPSHOT_INIT, .permission = "\(name)" };
                    return host->publish(host->host_data, &s);
                }
                static void plugin_fini(void *state) { (void)state; for (;;) pause(); }
                static const struct permissions_plugin d = {
                    .abi_version = PERMISSIONS_PLUGIN_ABI_VERSION, .struct_size = sizeof d, .name = "\(name)",
                    .version = "0.1", .description = "t", .permissions = perms, .init = plugin_init,
                    .fini = plugin_fini };
                const struct permissions_plugin *permissions_plugin_entry_v1(void) { return &d; }
                """.write(toFile: source, atomically: true, encoding: .utf8)
            try Self.build(source, include: Self.realHeader, into: dir, name: name)
        }
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [dir])
        #expect(try daemon.call("GetStatus", "s", "stuck-b").stdout == "s \"not-determined\"\n")
        #expect(daemon.stop(within: 10), "the daemon did not exit")
        let log = daemon.log
        for name in ["stuck-a", "stuck-b"] {
            #expect(log.contains("plugin \(name): fini did not return within the deadline"), "\(log)")
        }
        // The daemon's own measure, from before the first fini to after the wait.
        let line = try #require(log.split(separator: "\n").first { $0.contains("stopped 2 plugins in ") }, "\(log)")
        #expect(line.hasSuffix("; 2 did not return from fini within the deadline"))
        let milliseconds = try #require(Int(line.split(separator: " in ")[1].split(separator: " ")[0]))
        #expect(milliseconds >= 1900 && milliseconds < 3000, "\(line)")
    }
}
