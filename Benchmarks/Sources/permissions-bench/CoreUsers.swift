// permissions-bench core, section "users": what following each logged-in user's
// PipeWire costs the daemon, at 1, 10 and 50 users. A daemon of its own (the
// PipeWire plugin alone, --user-runtime-root over a runtime root of the bench's)
// on a bus of its own; each user is a uid of its own (no account needed) with a
// directory ROOT/UID (0700, theirs) and a PipeWire running as them with one
// camera, as logind and a session make it. A user counts as followed once
// GetStatusForUser(uid, app, camera) reads "not-determined": the daemon sees
// their camera. Its memory and threads are read then, against the same daemon
// following nobody; xdg-permission-store has no such work, so there is no peer.
import DBusKit
import Foundation
import PermissionsTestSupport
import SystemPrimitives

extension CoreBench {
    /// The first uid the section makes users of (none needs an account).
    static let firstFollowedUID: UInt32 = 42_001

    func followedUsers() {
        guard getuid() == 0 else {
            print("users: not root: left out (each user's PipeWire runs as that user)")
            return
        }
        let counts = options.smoke ? [1, 2] : [1, 10, 50]
        let base = root + "/users"
        let runtime = base + "/run"
        makeDaemonDirectories(base, plugin: "pipewire", extra: ["run"])
        // Each user reaches their own directory through these, as through /run/user.
        for dir in [root, base, runtime] { chmod(dir, 0o755) }
        let usersBus = startBus()
        defer { usersBus.kill() }
        let daemon = startDaemon(root: base, address: usersBus.address, arguments: ["--user-runtime-root", runtime])
        defer { daemon.kill(SIGTERM) }
        let client = openBlocking(usersBus.address)
        defer { client.close() }
        let config = packageRoot + "/Tests/testenv/pipewire-test.conf"
        let idle = (memory: daemon.memory, threads: daemon.threads, descriptors: daemon.descriptors)
        var table = Table("Following each user's PipeWire: permissionsd (PipeWire plugin alone) with N users, each "
                          + "with a PipeWire of their own and a camera",
                          columns: ["users", "VmRSS (MiB)", "RssAnon (MiB)", "KiB per user", "threads",
                                    "threads per user", "descriptors", "followed in (s)"])
        table.add(["0", format(mebibytes(idle.memory?.rss ?? 0)), format(mebibytes(idle.memory?.anon ?? 0)), "-",
                   "\(idle.threads)", "-", "\(idle.descriptors)", "-"])
        var pipewires: [Child] = []
        defer { for p in pipewires { p.kill() } }
        var users = 0
        for count in counts {
            let t0 = monotonicNanoseconds()
            while users < count {
                let uid = Self.firstFollowedUID + UInt32(users)
                let dir = runtime + "/\(uid)"
                guard mkdir(dir, 0o700) == 0, chown(dir, uid, uid) == 0 else { fail("cannot make \(dir)") }
                pipewires.append(startPipeWireDaemon(config: config, runtimeDirectory: dir, uid: uid))
                addCamera(uid: uid, runtimeDirectory: dir)
                users += 1
            }
            for i in 0..<count { waitUntilFollowed(client, uid: Self.firstFollowedUID + UInt32(i)) }
            let seconds = Double(monotonicNanoseconds() - t0) / 1e9
            let memory = daemon.memory
            let threads = daemon.threads
            let descriptors = daemon.descriptors
            let perUser = Double((memory?.rss ?? 0) - (idle.memory?.rss ?? 0)) / Double(count)
            let threadsPerUser = Double(threads - idle.threads) / Double(count)
            table.add(["\(count)", format(mebibytes(memory?.rss ?? 0)), format(mebibytes(memory?.anon ?? 0)),
                       String(format: "%.0f", perUser), "\(threads)", String(format: "%.2f", threadsPerUser),
                       "\(descriptors)", String(format: "%.1f", seconds)])
            printJSONLine("followed_users", [
                ("users", .int(count)), ("rss_kib", .int(memory?.rss ?? 0)), ("anon_kib", .int(memory?.anon ?? 0)),
                ("idle_rss_kib", .int(idle.memory?.rss ?? 0)), ("kib_per_user", .num(perUser)),
                ("threads", .int(threads)), ("idle_threads", .int(idle.threads)), ("threads_per_user", .num(threadsPerUser)),
                ("descriptors", .int(descriptors)), ("followed_s", .num(seconds)),
            ])
        }
        table.print()
    }

    /// A fake camera (videotestsrc, which lingers after pw-cli leaves) in user
    /// `uid`'s PipeWire, made as that user.
    private func addCamera(uid: UInt32, runtimeDirectory: String) {
        let status = SpawnSpec("/usr/bin/setpriv",
                               ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/pw-cli", "create-node",
                                "adapter", "{ factory.name=videotestsrc node.name=bench-camera-\(uid) "
                                    + "media.class=Video/Source object.linger=true }"],
                               environment: ["XDG_RUNTIME_DIR": runtimeDirectory, "HOME": runtimeDirectory],
                               removing: ["PIPEWIRE_"], log: root + "/logs/pw-cli.log").run()
        guard status == 0 else { fail("pw-cli create-node as uid \(uid) failed; see \(root)/logs/pw-cli.log") }
    }

    /// Waits (20 s at most) until the daemon sees user `uid`'s camera.
    private func waitUntilFollowed(_ client: Connection, uid: UInt32) {
        let deadline = monotonicNanoseconds() + 20_000_000_000
        let target = CallTarget("GetStatusForUser", destination: "org.example.Permissions",
                                path: "/org/example/Permissions", interface: "org.example.Permissions",
                                member: "GetStatusForUser", [.uint32(uid), .string("org.example.App"), .string("camera")])
        while busCall(client, target.message()).arguments().first?.stringValue != "not-determined" {
            if monotonicNanoseconds() > deadline { fail("the daemon did not see user \(uid)'s camera within 20 s") }
            sleepSeconds(0.01)
        }
    }
}
