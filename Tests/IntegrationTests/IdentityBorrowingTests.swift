import Foundation
import Testing
import PermissionsTestSupport

/// The three ways of borrowing another app's identity (issue 13, item 5), tried with
/// real processes against the real daemon: a bind mount over an executable in a
/// mount namespace of one's own, a chroot holding a forged /.flatpak-info, and an app
/// scope outside the caller's own user manager; plus a real flatpak-like sandbox
/// (bwrap with `--info-fd`), which is identified only with the instance it wrote.
///
/// Serialized: the tests share /run/user/1 and the cgroup parents they make.
@Suite(.serialized) struct IdentityBorrowingTests {
    let bus: TestBus
    let daemon: DaemonUnderTest

    init() throws {
        bus = try TestBus()
        daemon = try DaemonUnderTest(bus: bus, config: "[location]\nenabled=true\n")
    }

    /// busctl, run as /usr/bin/gdbus inside a user and mount namespace of its own.
    private func busctlPosingAsGdbus(_ arguments: [String]) throws -> CommandResult {
        let quoted = (["--address=\(bus.address)"] + arguments).map { "'" + $0 + "'" }.joined(separator: " ")
        return try run("/usr/bin/unshare", ["--user", "--map-root-user", "--mount", "/bin/sh", "-c",
                                            "mount --bind /usr/bin/busctl /usr/bin/gdbus && exec /usr/bin/gdbus \(quoted)"])
    }

    @Test func boundOverExecutableBorrowsNothing() throws {
        #expect(try daemon.ctl("grant", "/usr/bin/gdbus", "location").status == 0)
        // The real /usr/bin/gdbus has the grant.
        let real = try daemon.gdbusCall("GetStatus", "location")
        #expect(real.stdout == "('authorized',)\n", "\(real.stderr)")

        let status = try busctlPosingAsGdbus(["call", "org.example.Permissions", "/org/example/Permissions",
                                              "org.example.Permissions", "GetStatus", "s", "location"])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout == "s \"not-determined\"\n")
        let details = try busctlPosingAsGdbus(["--json=short", "call", "org.example.Permissions",
                                               "/org/example/Permissions", "org.example.Permissions",
                                               "GetDetails", "s", "location"])
        #expect(details.status == 0, "\(details.stderr)")
        #expect(details.stdout.contains("\"app-id\":{\"type\":\"s\",\"data\":\"unverified:/usr/bin/gdbus\"}"), "\(details.stdout)")
        #expect(details.stdout.contains("\"identity-kind\":{\"type\":\"s\",\"data\":\"unverified\"}"), "\(details.stdout)")
    }

    /// An unverified caller's "always" is a session grant: nothing is stored for
    /// its app id, which names a file of its own namespace only.
    @Test func anUnverifiedCallersAnswerIsNeverStored() throws {
        let agent = try TestAgent(bus: bus)
        let quoted = ["--address=\(bus.address)", "--timeout=60", "call", "org.example.Permissions",
                      "/org/example/Permissions", "org.example.Permissions", "Request", "sa{sv}", "location", "0"]
            .map { "'" + $0 + "'" }.joined(separator: " ")
        let request = try BackgroundCommand("/usr/bin/unshare", [
            "--user", "--map-root-user", "--mount", "/bin/sh", "-c",
            "mount --bind /usr/bin/busctl /usr/bin/gdbus && exec /usr/bin/gdbus \(quoted)"])
        let prompt = try agent.waitForPrompt()
        #expect(prompt.app == "unverified:/usr/bin/gdbus")
        agent.answer(prompt, "allow-always")
        #expect(try request.wait().1 == "s \"authorized\"\n", "\(request.errorOutput)")
        let stored = try daemon.call("ListAllDecisions", "s", "")
        #expect(stored.stdout == "a(xsssxs) 0\n", "\(stored.stderr)")
    }

    /// A confined subscriber (here an unverified one: permissionsctl monitor in a
    /// mount namespace of its own, as root) hears only its own app's changes and
    /// the service-level ones, not its user's other apps', whatever scope it asks.
    @Test func aConfinedSubscriberHearsOnlyItsOwnApp() throws {
        let confined = try RunningProgram("/usr/bin/unshare", ["--user", "--map-root-user", "--mount",
                                                                binDir + "/permissionsctl", "--address", bus.address, "monitor"])
        _ = try confined.lines.next { $0.hasPrefix("Monitoring") }
        let user = try Monitor(daemon)
        #expect(try daemon.ctl("grant", "org.example.Other", "location").status == 0)
        try user.waitFor { $0 == statusLine(app: "org.example.Other", "location", "authorized") }
        try daemon.writeConfig("[location]\nenabled=false\n")
        try user.waitFor { $0 == statusLine(app: "", "location", "disabled") }
        _ = try confined.lines.next { $0.hasPrefix("StatusChanged app=* permission=location status=disabled") }
        #expect(confined.lines.all.filter { $0.hasPrefix("StatusChanged") }.count == 1, "\(confined.lines.all)")
        // Asking for the user's whole stream is refused.
        let r = try run("/usr/bin/unshare", ["--user", "--map-root-user", "--mount", "/usr/bin/busctl",
                                            "--address=\(bus.address)", "call", "org.example.Permissions",
                                            "/org/example/Permissions", "org.example.Permissions", "Subscribe",
                                            "a{sv}", "1", "scope", "s", "user"])
        #expect(r.status != 0)
        #expect(r.stderr.contains("scope \"user\" is not allowed: unverified:/usr/bin/busctl"), "\(r.stderr)")
    }

    // MARK: a chroot with a forged .flatpak-info

    /// User 2 makes a root of its own (user and mount namespace, tmpfs, chroot) holding
    /// a .flatpak-info that names org.victim.App and an instance of user 1.
    @Test func chrootWithForgedFlatpakInfoBorrowsNothing() throws {
        #expect(try daemon.ctl("grant", "--user", "1", "org.victim.App", "location").status == 0)
        let runtime = try RuntimeDirectory(uid: 1)
        // User 1's instance "victim". Its child-pid is the test runner, an ancestor of
        // every process this test starts: only the uid the instance is looked up
        // under stands between user 2 and it.
        try runtime.writeInstance("victim", bwrapInfo: "{\n    \"child-pid\": \(getpid())\n}\n")
        let forged = "[Application]\nname=org.victim.App\n\n[Instance]\ninstance-id=victim\n"

        let borrower = try inChroot(as: 2, flatpakInfo: forged)
        #expect(Identity(borrower) == nil, "\(borrower.stdout)")
        #expect(borrower.stderr.contains("flatpak instance \"victim\" has no bwrapinfo.json of uid 2"), "\(borrower.stderr)")
        let noInstance = try inChroot(as: 2, flatpakInfo: "[Application]\nname=org.victim.App\n")
        #expect(Identity(noInstance) == nil, "\(noInstance.stdout)")
        #expect(noInstance.stderr.contains(".flatpak-info names no [Instance] instance-id"), "\(noInstance.stderr)")

        // Control: the same chroot of user 1, whose instance it names, is taken for the
        // app (within one user nothing is isolated), so what refuses user 2 is the uid.
        let owner = try inChroot(as: 1, flatpakInfo: forged)
        #expect(Identity(owner) == Identity(appID: "org.victim.App", kind: "flatpak", status: "authorized"),
                "\(owner.stderr)")
    }

    /// GetDetails from busctl in a chroot of `uid`'s own: an unprivileged user
    /// namespace, a tmpfs root with the host's /usr and the bus's directory, and
    /// `flatpakInfo` as /.flatpak-info.
    private func inChroot(as uid: UInt32, flatpakInfo: String) throws -> CommandResult {
        let root = try makeTemporaryDirectory("permissions-chroot")
        defer { rmdir(root) }  // the tmpfs was mounted in the namespace only
        chmod(root, 0o755)
        let script = """
            set -e
            mount -t tmpfs none \(quote(root))
            mkdir \(quote(root + "/usr"))
            mount --rbind /usr \(quote(root + "/usr"))
            for link in bin lib lib64; do ln -s usr/$link \(quote(root))/$link; done
            mkdir -p \(quote(root + bus.directory))
            mount --bind \(quote(bus.directory)) \(quote(root + bus.directory))
            printf '%s' \(quote(flatpakInfo)) > \(quote(root + "/.flatpak-info"))
            exec chroot \(quote(root)) \(busctlGetDetails)
            """
        return try run("/usr/bin/setpriv", ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups",
                                            "/usr/bin/unshare", "--user", "--map-root-user", "--mount", "/bin/sh", "-c", script])
    }

    // MARK: app scopes

    /// A cgroup named like an app scope counts only under the caller's own user
    /// manager. The scopes are made with mkdir under cgroup v2, and the caller is
    /// moved into one before it execs busctl as uid 1 or 2.
    @Test func appScopeOutsideOwnUserManagerBorrowsNothing() throws {
        #expect(try daemon.ctl("grant", "--user", "1", "org.victim.App", "location").status == 0)
        let tag = String(UInt32.random(in: 1...UInt32.max))
        let scope = "app-gnome-org.victim.App-\(tag).scope"
        let cgroups = try CgroupTree()
        let user1 = try cgroups.make("user.slice/user-1.slice/user@1.service/app.slice/\(scope)")
        let elsewhere = try cgroups.make("permissions-test-\(tag)/app.slice/\(scope)")
        let nested = try cgroups.make("permissions-test-\(tag)/user.slice/user-1.slice/user@1.service/app.slice/\(scope)")
        let unscoped = Identity(appID: "/usr/bin/busctl", kind: "executable", status: "not-determined")

        // Control: user 1 in its own user manager's scope is the app.
        let owner = try inCgroup(user1, as: 1)
        #expect(Identity(owner) == Identity(appID: "org.victim.App", kind: "systemd-unit", status: "authorized"),
                "\(owner.stderr)")
        // User 2 in user 1's scope.
        let otherUser = try inCgroup(user1, as: 2)
        #expect(Identity(otherUser) == unscoped, "\(otherUser.stderr)")
        // User 1 in scopes outside its user manager.
        let outside = try inCgroup(elsewhere, as: 1)
        #expect(Identity(outside) == unscoped, "\(outside.stderr)")
        let underAnotherParent = try inCgroup(nested, as: 1)
        #expect(Identity(underAnotherParent) == unscoped, "\(underAnotherParent.stderr)")
    }

    /// GetDetails from busctl run as `uid`, moved into `cgroup` (by root) first.
    private func inCgroup(_ cgroup: String, as uid: UInt32) throws -> CommandResult {
        try run("/bin/sh", ["-c", "echo $$ > \(quote(cgroup + "/cgroup.procs")) && exec /usr/bin/setpriv --reuid=\(uid) "
                            + "--regid=\(uid) --clear-groups \(busctlGetDetails)"])
    }

    // MARK: a flatpak-like sandbox

    /// A sandbox made the way flatpak makes one: bwrap writes bwrapinfo.json to
    /// `--info-fd` under `$XDG_RUNTIME_DIR/.flatpak/<instance>/`, and the sandbox's
    /// /.flatpak-info names that instance. It is the app; a sandbox whose
    /// .flatpak-info names an instance it is not part of, or one with no or someone
    /// else's bwrapinfo.json, is refused.
    @Test func flatpakSandboxCountsOnlyWithItsInstance() throws {
        #expect(try daemon.ctl("grant", "--user", "1", "org.victim.App", "location").status == 0)
        let runtime = try RuntimeDirectory(uid: 1)
        let app = Identity(appID: "org.victim.App", kind: "flatpak", status: "authorized")

        let real = try inSandbox(runtime, instance: "1001", record: .bwrap)
        #expect(Identity(real) == app, "\(real.stderr)")

        // The instance of the sandbox above, whose first process is gone and was no
        // ancestor of this one.
        let stale = try inSandbox(runtime, instance: "1001", record: .none)
        #expect(Identity(stale) == nil, "\(stale.stdout)")
        #expect(stale.stderr.contains("is not in flatpak instance \"1001\""), "\(stale.stderr)")

        // A bwrapinfo.json naming a live process that is not the sandbox's (the daemon).
        let daemonPID = try #require(daemon.pid)
        try runtime.writeInstance("1002", bwrapInfo: "{\n    \"child-pid\": \(daemonPID)\n}\n")
        let wrongPID = try inSandbox(runtime, instance: "1002", record: .none)
        #expect(Identity(wrongPID) == nil, "\(wrongPID.stdout)")
        #expect(wrongPID.stderr.contains("is not in flatpak instance \"1002\" (child-pid \(daemonPID))"), "\(wrongPID.stderr)")

        // No bwrapinfo.json at all.
        let missing = try inSandbox(runtime, instance: "1003", record: .none)
        #expect(Identity(missing) == nil, "\(missing.stdout)")
        #expect(missing.stderr.contains("flatpak instance \"1003\" has no bwrapinfo.json of uid 1"), "\(missing.stderr)")

        // One that names no child-pid.
        try runtime.writeInstance("1004", bwrapInfo: "{\n    \"mnt-namespace\": 4026532300\n}\n")
        let noChild = try inSandbox(runtime, instance: "1004", record: .none)
        #expect(Identity(noChild) == nil, "\(noChild.stdout)")
        #expect(noChild.stderr.contains("bwrapinfo.json names no child-pid"), "\(noChild.stderr)")

        // The right record, but the file is someone else's (root's) in user 1's
        // directory: only what the caller's uid wrote counts.
        let foreign = try inSandbox(runtime, instance: "1005", record: .bwrapIntoRootsFile)
        #expect(Identity(foreign) == nil, "\(foreign.stdout)")
        #expect(foreign.stderr.contains("flatpak instance \"1005\" has no bwrapinfo.json of uid 1"), "\(foreign.stderr)")
    }

    /// Who writes an instance's bwrapinfo.json for `inSandbox`.
    private enum InstanceRecord {
        /// Nobody: the instance directory is empty.
        case none
        /// bwrap, through `--info-fd` on a file the user's shell opened, as flatpak has it.
        case bwrap
        /// bwrap, into a file that root opened in the user's instance directory.
        case bwrapIntoRootsFile
    }

    /// GetDetails from busctl in a bwrap sandbox of `uid` (a tmpfs root with the
    /// host's /usr, a PID namespace) whose /.flatpak-info names org.victim.App and
    /// `instance`, a directory the user makes in its runtime directory.
    private func inSandbox(_ runtime: RuntimeDirectory, instance: String, record: InstanceRecord) throws -> CommandResult {
        let scratch = try makeTemporaryDirectory("permissions-sandbox")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        chmod(scratch, 0o755)
        let info = scratch + "/flatpak-info"
        try "[Application]\nname=org.victim.App\n\n[Instance]\ninstance-id=\(instance)\n"
            .write(toFile: info, atomically: false, encoding: .utf8)
        chmod(info, 0o644)
        let directory = runtime.instanceDirectory(instance)
        let file = quote(directory + "/bwrapinfo.json")
        let sandbox = (["/usr/bin/bwrap"] + (record == .none ? [] : ["--info-fd", "3"])
            + ["--unshare-pid", "--die-with-parent", "--tmpfs", "/", "--ro-bind", "/usr", "/usr",
               "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
               "--proc", "/proc", "--dev", "/dev", "--ro-bind", bus.directory, bus.directory,
               "--ro-bind", info, "/.flatpak-info"]).map(quote).joined(separator: " ") + " " + busctlGetDetails
        let user = "/usr/bin/setpriv --reuid=\(runtime.uid) --regid=\(runtime.uid) --clear-groups /bin/sh -c "
        let makeDirectory = "umask 077 && mkdir -p \(quote(directory))"
        let script = switch record {
        case .none: user + quote("\(makeDirectory) && exec \(sandbox)")
        case .bwrap: user + quote("\(makeDirectory) && exec 3>\(file) && exec \(sandbox)")
        case .bwrapIntoRootsFile: user + quote(makeDirectory) + " && exec 3>\(file) && exec " + user + quote("exec \(sandbox)")
        }
        return try run("/bin/sh", ["-c", script])
    }

    // MARK: helpers

    /// busctl's GetDetails call on this test's bus, as shell words.
    private var busctlGetDetails: String {
        ["/usr/bin/busctl", "--address=\(bus.address)", "--json=short", "call", "org.example.Permissions",
         "/org/example/Permissions", "org.example.Permissions", "GetDetails", "s", "location"].map(quote).joined(separator: " ")
    }
}

/// What GetDetails says about the caller.
private struct Identity: Equatable, CustomStringConvertible {
    var appID: String
    var kind: String
    var status: String

    init(appID: String, kind: String, status: String) {
        self.appID = appID
        self.kind = kind
        self.status = status
    }

    /// From busctl's `--json=short` answer to GetDetails; nil when the call failed.
    init?(_ result: CommandResult) {
        guard result.status == 0,
              let json = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
              let details = (json["data"] as? [[String: Any]])?.first
        else { return nil }
        func value(_ key: String) -> String { ((details[key] as? [String: Any])?["data"] as? String) ?? "(none)" }
        self.init(appID: value("app-id"), kind: value("identity-kind"), status: value("status"))
    }

    var description: String { "\(kind) \(appID) \(status)" }
}

/// A word for /bin/sh.
private func quote(_ word: String) -> String { "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'" }

/// /run/user/UID as logind makes it (0700, owned by the user), for a test on a
/// machine without one. Afterwards it is removed if the test made it, else only the
/// instance directories the test named are.
private final class RuntimeDirectory {
    static let root = "/run/user"
    let uid: UInt32
    let path: String
    private let made: Bool
    private var instances: Set<String> = []

    init(uid: UInt32) throws {
        self.uid = uid
        path = "\(Self.root)/\(uid)"
        made = mkdir(path, 0o700) == 0
        guard made || errno == EEXIST else { throw HarnessError(description: "cannot make \(path): errno \(errno)") }
        guard chown(path, uid, uid) == 0, chmod(path, 0o700) == 0 else {
            throw HarnessError(description: "cannot give \(path) to uid \(uid)")
        }
    }

    /// Where flatpak keeps instance `id` (not made here).
    func instanceDirectory(_ id: String) -> String {
        instances.insert(id)
        return path + "/.flatpak/\(id)"
    }

    /// Instance `id` with `bwrapInfo` as its bwrapinfo.json, all owned by the user.
    func writeInstance(_ id: String, bwrapInfo: String) throws {
        let directory = instanceDirectory(id)
        for directory in [path + "/.flatpak", directory] {
            guard mkdir(directory, 0o700) == 0 || errno == EEXIST, chown(directory, uid, uid) == 0 else {
                throw HarnessError(description: "cannot make \(directory)")
            }
        }
        let file = directory + "/bwrapinfo.json"
        try bwrapInfo.write(toFile: file, atomically: false, encoding: .utf8)
        guard chown(file, uid, uid) == 0, chmod(file, 0o600) == 0 else { throw HarnessError(description: "cannot chown \(file)") }
    }

    deinit {
        if made {
            try? FileManager.default.removeItem(atPath: path)
        } else {
            for id in instances { try? FileManager.default.removeItem(atPath: path + "/.flatpak/\(id)") }
        }
    }
}

/// Cgroups made under the cgroup v2 hierarchy for a test, removed (innermost first)
/// afterwards; the ones that were there before are left alone.
private final class CgroupTree {
    /// cgroup v2: beside the v1 hierarchies (hybrid, as on the test machines), or alone.
    let root: String
    private var made: [String] = []

    init() throws {
        guard let root = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
            .first(where: { FileManager.default.fileExists(atPath: $0 + "/cgroup.controllers") })  // v2 only
        else { throw HarnessError(description: "no cgroup v2 hierarchy at /sys/fs/cgroup/unified or /sys/fs/cgroup") }
        self.root = root
    }

    /// Makes `relative` (and its parents) under the hierarchy; returns its path.
    func make(_ relative: String) throws -> String {
        var path = root
        for element in relative.split(separator: "/") {
            path += "/" + element
            if mkdir(path, 0o755) == 0 {
                made.append(path)
            } else if errno != EEXIST {
                throw HarnessError(description: "cannot make cgroup \(path): errno \(errno)")
            }
        }
        return path
    }

    deinit {
        // Their processes have exited: the tests wait for each. A parent that another
        // test still uses is not empty and stays.
        for path in made.reversed() { rmdir(path) }
    }
}
