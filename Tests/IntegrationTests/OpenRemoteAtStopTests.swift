import Foundation
import Testing
import PermissionsTestSupport

/// fini frees what open_remote uses, so the header promises fini only once every
/// open_remote has returned. The host waits 2 s for those under way; one that
/// still runs then means no fini at all, never fini beside it. The test plugin's
/// open_remote waits for a file the test makes, and its fini leaves a mark that
/// says whether an open_remote was running.
@Suite(.serialized) struct OpenRemoteAtStopTests {
    /// A plugin NAME (by default "slow-open") enforcing a permission of the same
    /// name: open_remote hands out a socket at once, or,
    /// while DIR/block or DIR/block-UID (the remote's user) exists, marks
    /// DIR/open-began and DIR/open-began-ID (the remote's id) and waits (10 s at
    /// most) for DIR/release, then fails with EIO.
    static func plugin(marks: String, version: String, name: String = "slow-open") -> String {
        """
        #include <errno.h>
        #include <fcntl.h>
        #include <stdatomic.h>
        #include <stdio.h>
        #include <sys/socket.h>
        #include <unistd.h>
        #include "permissions-plugin.h"
        static const char *const perms[] = { "\(name)", NULL };
        static atomic_int opening;
        static void mark(const char *name) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", "\(marks)", name);
            int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
            if (fd >= 0) close(fd);
        }
        static int exists(const char *name) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", "\(marks)", name);
            return access(path, F_OK) == 0;
        }
        static int plugin_init(const struct permissions_host *host, void **state) {
            (void)state;
            struct permissions_snapshot s = { PERMISSIONS_PLUGIN_ABI_VERSION, sizeof s };
            s.service_state = PERMISSIONS_SERVICE_AVAILABLE;
            s.permission = perms[0];
            host->publish(host->host_data, &s);
            return 0;
        }
        static void plugin_fini(void *state) {
            (void)state;
            mark(atomic_load(&opening) ? "fini-while-opening" : "fini");
        }
        static int plugin_open_remote(void *state, const struct permissions_remote *remote) {
            (void)state;
            char user_block[64], began[64];
            snprintf(user_block, sizeof user_block, "block-%u", remote->uid);
            snprintf(began, sizeof began, "open-began-%llu", (unsigned long long)remote->id);
            if (exists("block") || exists(user_block)) {
                atomic_store(&opening, 1);
                mark("open-began");
                mark(began);
                for (int i = 0; i < 1000 && !exists("release"); i++) usleep(10000);
                atomic_store(&opening, 0);
                return -EIO;
            }
            int pair[2];
            if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return -errno;
            close(pair[1]);  /* never says remote_closed: the host counts it open */
            return pair[0];
        }
        static void plugin_remote_status(void *state, uint64_t id, const char *status) {
            (void)state; (void)id; (void)status;
        }
        static const struct permissions_plugin descriptor = {
            .abi_version = PERMISSIONS_PLUGIN_ABI_VERSION,
            .struct_size = sizeof descriptor,
            .name = "\(name)",
            .version = "\(version)",
            .description = "test plugin",
            .permissions = perms,
            .init = plugin_init,
            .fini = plugin_fini,
            .enforced = perms,
            .open_remote = plugin_open_remote,
            .remote_status = plugin_remote_status,
        };
        const struct permissions_plugin *permissions_plugin_entry_v1(void) { return &descriptor; }
        """
    }

    let marks: String
    let plugins: String
    let bus: TestBus
    let daemon: DaemonUnderTest

    init() throws {
        marks = try makeTemporaryDirectory("open-remote-marks")
        plugins = try makeTemporaryDirectory("open-remote-plugins")
        try PluginLoadingTests.compile(Self.plugin(marks: marks, version: "0.1"), into: plugins,
                                       file: "libpermissions-slow-open.so")
        bus = try TestBus()
        daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [plugins])
        // gdbus is the app: its id is its executable's path.
        #expect(try daemon.ctl("grant", "/usr/bin/gdbus", "slow-open").status == 0)
    }

    private func removeDirectories(_ more: String...) {
        for directory in [marks, plugins] + more { try? FileManager.default.removeItem(atPath: directory) }
    }

    private func exists(_ mark: String) -> Bool { FileManager.default.fileExists(atPath: marks + "/" + mark) }

    private func make(_ mark: String) {
        _ = FileManager.default.createFile(atPath: marks + "/" + mark, contents: nil)
    }

    private func waitFor(_ mark: String) throws {
        let deadline = Date().addingTimeInterval(15)
        while !exists(mark) {
            guard Date() < deadline else { throw HarnessError(description: "no \(mark) within 15 s") }
            usleep(10_000)
        }
    }

    private func openRemote() throws -> RunningProgram {
        try RunningProgram("/usr/bin/gdbus", ["call", "--address", bus.address, "--dest", "org.example.Permissions",
                                               "--object-path", "/org/example/Permissions", "--method",
                                               "org.example.Permissions.OpenPipeWireRemote", "slow-open", "{}"])
    }

    @Test(.hangGuard) func aStopDuringAnOpenRemoteDoesNotCallFini() throws {
        defer { removeDirectories() }
        make("block")
        let app = try openRemote()
        try waitFor("open-began")
        let ending = daemon.terminate(timeout: 15)
        make("release")
        #expect(ending == DaemonUnderTest.Ending(reason: .exit, status: 0))
        #expect(!exists("fini-while-opening"), "fini ran while open_remote did")
        #expect(!exists("fini"))
        #expect(daemon.log.contains("plugin slow-open: an open_remote still runs 2 s after its stop began; "
                                    + "fini is not called"), "\(daemon.log)")
        _ = app
    }

    /// A copy replaced with a remote open and an open_remote running: its fini
    /// cannot be called, so nothing would narrow what it handed out; the daemon
    /// stops, as for a plugin given up with remotes open.
    @Test(.hangGuard) func aCopyReplacedDuringAnOpenRemoteStopsTheDaemon() throws {
        defer { removeDirectories() }
        let first = try openRemote()
        _ = try first.lines.next { $0.contains("handle") }
        make("block")
        let second = try openRemote()
        try waitFor("open-began")
        // The new copy, renamed into place as a package manager does.
        let staging = try makeTemporaryDirectory("open-remote-staging")
        defer { removeDirectories(staging) }
        try PluginLoadingTests.compile(Self.plugin(marks: marks, version: "0.2"), into: staging,
                                       file: "libpermissions-slow-open.so")
        #expect(rename(staging + "/libpermissions-slow-open.so", plugins + "/libpermissions-slow-open.so") == 0)
        let ending = daemon.waitForExit(timeout: 20)
        make("release")
        #expect(ending == DaemonUnderTest.Ending(reason: .exit, status: 1))
        #expect(!exists("fini-while-opening"), "fini ran while open_remote did")
        #expect(daemon.log.contains("fini is not called"), "\(daemon.log)")
        #expect(daemon.log.contains("its fini could not be called"), "\(daemon.log)")
        _ = second
    }
}
