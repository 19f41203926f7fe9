internal import SystemPrimitives
import Foundation
import Glibc
import Testing
@testable import PermissionsModel
@testable import PermissionsPluginHost

/// validate (ABI 1.1) through the host: real plugin libraries loaded by a real
/// PluginHost. The location plugin of this build, and C plugins compiled here: one
/// whose validate reports through config->problem, one without validate.
@Suite struct PluginValidateTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    static let binDir = ProcessInfo.processInfo.environment["PERMISSIONS_BIN_DIR"] ?? packageRoot + "/.build/debug"

    static let source = """
        #include <errno.h>
        #include <stdio.h>
        #include <string.h>
        #include "permissions-plugin.h"
        static const char *const perms[] = { NAME, NULL };
        static int plugin_init(const struct permissions_host *host, void **state) {
            (void)state;
            struct permissions_snapshot s = { PERMISSIONS_SNAPSHOT_INIT, .permission = NAME };
            return host->publish(host->host_data, &s);
        }
        #ifdef WITH_VALIDATE
        static int plugin_validate(void *state, const struct permissions_config *config) {
            (void)state;
            for (uint32_t i = 0; i < config->n_entries; i++) {
                const struct permissions_config_entry *e = &config->entries[i];
                if (strcmp(e->key, "silent") == 0)
                    return -EINVAL;  /* rejected without a report */
                if (strcmp(e->key, "level") == 0 && strcmp(e->value, "high") != 0) {
                    char line[256];
                    snprintf(line, sizeof line, "%s: [%s] level=%s: expected high", e->origin, e->section, e->value);
                    if (PERMISSIONS_HAS_FIELD(config, struct permissions_config, problem) && config->problem)
                        config->problem(config->problem_data, line);
                    return -EINVAL;
                }
            }
            return 0;
        }
        #endif
        static const struct permissions_plugin d = {
            .abi_version = PERMISSIONS_PLUGIN_ABI_VERSION, .struct_size = sizeof d, .name = NAME, .version = "1",
            .description = "validate test", .permissions = perms, .init = plugin_init,
        #ifdef WITH_VALIDATE
            .validate = plugin_validate,
        #endif
        };
        const struct permissions_plugin *permissions_plugin_entry_v1(void) { return &d; }
        """

    static func compile(_ name: String, in dir: TempDirectory, defines: [String]) throws {
        try dir.write("plugin.c", source)
        let cc = Process()
        cc.executableURL = URL(fileURLWithPath: "/usr/bin/cc")
        cc.arguments = ["-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-I",
                        packageRoot + "/Sources/CPermissionsPlugin/include", "-DNAME=\"\(name)\""]
            + defines.map { "-D" + $0 } + ["-o", dir.url("libpermissions-\(name).so"), dir.url("plugin.c")]
        try cc.run()
        cc.waitUntilExit()
        #expect(cc.terminationStatus == 0, "cc \(name)")
        #expect(unlink(dir.url("plugin.c")) == 0)
    }

    /// What the host reports, touched only on its queue.
    final class Seen: @unchecked Sendable {
        var problems: [String] = []
    }

    func validate(_ host: PluginHost, _ queue: Queue, _ config: [ConfigEntry]) throws -> [String] {
        let seen = Seen()
        let answered = Semaphore(value: 0)
        queue.async {
            host.validateAll(config) { problems in
                seen.problems = problems
                answered.signal()
            }
        }
        #expect(answered.wait(timeout: .now() + 10) == .success, "validateAll did not answer")
        return queue.sync { seen.problems }
    }

    func location(_ host: PluginHost, _ queue: Queue) -> Snapshot? {
        queue.sync { host.plugins.first { $0.name == "location" }?.latest["location"] }
    }

    @Test func validateReportsProblemsWithoutApplying() throws {
        let dir = try TempDirectory()
        #expect(symlink(Self.binDir + "/libpermissions-location.so", dir.url("libpermissions-location.so")) == 0)
        try Self.compile("checked", in: dir, defines: ["WITH_VALIDATE"])
        try Self.compile("unchecked", in: dir, defines: [])

        let queue = Queue(label: "validate-test")
        let host = PluginHost(queue: queue)
        let published = Semaphore(value: 0)
        let loaded = Semaphore(value: 0)
        let deny = ConfigEntry(section: "location", key: "deny", value: "org.example.Denied", origin: "test.conf:3")
        let path = dir.path
        queue.async {
            host.onPublish = { plugin, _ in if plugin.name == "location" { published.signal() } }
            host.loadAll(from: [path], config: [deny]) { loaded.signal() }
        }
        #expect(loaded.wait(timeout: .now() + 10) == .success)
        #expect(queue.sync { host.plugins.map { "\($0.name) \($0.info.state)" }.sorted() }
                == ["checked loaded", "location loaded", "unchecked loaded"])
        let configured = try #require(location(host, queue))
        #expect(configured.service == .available && configured.policies == ["org.example.Denied": .restricted])

        // Bad values: each plugin that checks says why, quoting the origin; the one
        // without validate says nothing (its configure checks). Nothing is applied.
        let bad = [
            ConfigEntry(section: "location", key: "enabled", value: "maybe", origin: "test.conf:2"),
            ConfigEntry(section: "checked", key: "level", value: "low", origin: "test.conf:5"),
            ConfigEntry(section: "unchecked", key: "level", value: "low", origin: "test.conf:7"),
        ]
        #expect(try validate(host, queue, bad) == ["test.conf:5: [checked] level=low: expected high",
                                                   "test.conf:2: [location] enabled=maybe: expected true or false"])
        #expect(location(host, queue) == configured)

        // Rejected without a report: the host says which plugin.
        #expect(try validate(host, queue, [ConfigEntry(section: "checked", key: "silent", value: "1", origin: "t:1")])
                == ["plugin checked rejected the configuration (Invalid argument (errno 22))"])

        // A good configuration: no problem, and still nothing applied...
        let off = [ConfigEntry(section: "location", key: "enabled", value: "false", origin: "test.conf:2")]
        #expect(try validate(host, queue, off) == [])
        #expect(location(host, queue) == configured)
        // ...until it is configured.
        queue.async { host.configureAll(off) }
        #expect(published.wait(timeout: .now() + 10) == .success)
        #expect(location(host, queue)?.service == .disabled)
        queue.sync { host.stopAll() }
    }
}
