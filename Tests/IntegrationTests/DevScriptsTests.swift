import Foundation
import Testing
import PermissionsTestSupport

/// The README's first command as a newcomer runs it, in a copy of the checkout's
/// scripts without a session bus: `eval "$(scripts/dev-up)"` prints only shell
/// lines on stdout, a hint without errors on stderr, leaves `.dev/env` for other
/// terminals, and serves busctl; `scripts/dev-down` stops the daemon and the bus.
@Suite struct DevScriptsTests {
    /// Runs the rest with no signal blocked, as from a login shell: a test's
    /// children inherit the blocked signals of the thread that spawned them, and a
    /// daemon with SIGTERM blocked is not what dev-up and dev-down meet in use.
    static let unblocked = ["-c", "import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, []); "
                            + "os.execv(sys.argv[1], sys.argv[1:])"]

    @Test func devUpServesTheBusAndDevDownStopsIt() throws {
        let checkout = URL(fileURLWithPath: try makeTemporaryDirectory("dev-checkout")).standardizedFileURL.path
        defer { try? FileManager.default.removeItem(atPath: checkout) }
        for path in ["scripts/dev-up", "scripts/dev-down", "scripts/dev-common.sh", "scripts/install-deps",
                     "dbus/permissions.conf"] {
            try FileManager.default.createDirectory(atPath: checkout + "/" + (path as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: packageRoot + "/" + path, toPath: checkout + "/" + path)
        }
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = nil
        environment["PERMISSIONS_BUS"] = nil
        environment["PERMISSIONS_BIN_DIR"] = binDir
        // (Output to files, read after: stdout is what eval runs.)
        let script = """
            eval "$(scripts/dev-up 2>.up.err)" >.up.out && echo "bus=$DBUS_SESSION_BUS_ADDRESS" >>.up.out &&
            busctl --user call org.example.Permissions /org/example/Permissions org.example.Permissions \\
                GetStatus s location >>.up.out && permissionsctl get /usr/bin/true location >>.up.out
            """
        let status = try run("/usr/bin/python3", Self.unblocked + ["/bin/bash", "-c", script], environment: environment,
                             directory: checkout).status
        let up = CommandResult(status: status,
                               stdout: (try? String(contentsOfFile: checkout + "/.up.out", encoding: .utf8)) ?? "",
                               stderr: (try? String(contentsOfFile: checkout + "/.up.err", encoding: .utf8)) ?? "")
        defer { _ = try? run("/usr/bin/python3", Self.unblocked + [checkout + "/scripts/dev-down"], environment: environment) }
        #expect(up.status == 0, "\(up.stderr)")
        #expect(!up.stderr.contains("No such file"), "\(up.stderr)")
        #expect(up.stderr.contains("Other terminals: '. .dev/env' in \(checkout)."), "\(up.stderr)")
        #expect(up.stdout.contains("s \"not-determined\"\n"), "\(up.stdout)")
        // permissionsctl without --session: PERMISSIONS_BUS=session, from dev-up.
        #expect(up.stdout.hasSuffix("\nnot-determined\n"), "\(up.stdout)")
        // Another terminal: . .dev/env reaches the same bus.
        let other = try run("/bin/bash", ["-c", ". .dev/env && busctl --user call org.example.Permissions "
                                          + "/org/example/Permissions org.example.Permissions GetStatus s location"
                                          + " && permissionsctl get /usr/bin/true location"],
                            environment: environment, directory: checkout)
        #expect(other.stdout == "s \"not-determined\"\nnot-determined\n", "\(other.stderr)")

        // Run again (and again): each run stops the daemon before, waits until it has
        // ended, and starts the next on the same bus.
        for _ in 0..<3 {
            let before = try String(contentsOfFile: checkout + "/.dev/permissionsd.pid", encoding: .utf8)
            let rerun = try run("/usr/bin/python3", Self.unblocked + ["/bin/bash", "-c", ". .dev/env && scripts/dev-up"],
                                environment: environment, directory: checkout)
            #expect(rerun.status == 0, "\(rerun.stderr)")
            let after = try String(contentsOfFile: checkout + "/.dev/permissionsd.pid", encoding: .utf8)
            #expect(after != before)
            let pid = Int32(before.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
            #expect((try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)).map { $0.contains(") Z ") } ?? true,
                    "the previous daemon \(pid) still runs")
            let served = try run("/bin/bash", ["-c", ". .dev/env && busctl --user call org.example.Permissions "
                                               + "/org/example/Permissions org.example.Permissions GetStatus s location"],
                                 environment: environment, directory: checkout)
            #expect(served.stdout == "s \"not-determined\"\n", "\(served.stderr)")
        }

        let down = try run("/usr/bin/python3", Self.unblocked + [checkout + "/scripts/dev-down"], environment: environment)
        #expect(down.status == 0)
        #expect(!FileManager.default.fileExists(atPath: checkout + "/.dev/env"))
        #expect(!FileManager.default.fileExists(atPath: checkout + "/.dev/permissionsd.pid"))
        // The private bus is gone with it.
        let address = up.stdout.split(separator: "\n").first { $0.hasPrefix("bus=") }.map { String($0.dropFirst(4)) } ?? ""
        let gone = try run("/usr/bin/busctl", ["--address=\(address)", "status"])
        #expect(gone.status != 0)
    }
}
