import Foundation
import Testing
import PermissionsModel
@testable import PermissionsIdentity

extension TempDirectory {
    /// The host's mount namespace as a stand-in /proc shows it (PID 1's link).
    static let hostMountNamespace = "mnt:[4026531840]"

    /// Puts stand-in process `pid` (and PID 1) in the host's mount namespace.
    func inHostMountNamespace(_ pid: Int) throws {
        if (try? FileManager.default.destinationOfSymbolicLink(atPath: url("1/ns/mnt"))) == nil {
            try symlink("1/ns/mnt", to: Self.hostMountNamespace)
        }
        try symlink("\(pid)/ns/mnt", to: Self.hostMountNamespace)
    }

    /// What flatpak leaves for a running instance: run/user/UID (0700),
    /// .flatpak/ID/bwrapinfo.json naming the sandbox's first process, all owned by `uid`.
    func flatpakInstance(_ id: String, childPID: Int, uid: UInt32, under owner: UInt32? = nil) throws {
        let runtime = "run/user/\(owner ?? uid)"
        try write("\(runtime)/.flatpak/\(id)/bwrapinfo.json",
                  "{\n    \"child-pid\": \(childPID),\n    \"mnt-namespace\": 4026532300,\n    \"pid-namespace\": 4026532302\n}\n")
        for path in [runtime, "\(runtime)/.flatpak", "\(runtime)/.flatpak/\(id)", "\(runtime)/.flatpak/\(id)/bwrapinfo.json"] {
            #expect(chown(url(path), uid, uid) == 0)
        }
        #expect(chmod(url(runtime), 0o700) == 0)
    }
}

/// Identity that cannot be borrowed across users (issue 13, item 5): an executable
/// path only in the host's mount namespace, an app scope only under the caller's own
/// user manager, a .flatpak-info only with the instance flatpak made for it.
@Suite("App identity across users")
struct IdentityTrustTests {
    let root: TempDirectory
    let reader: IdentityReader

    init() throws {
        root = try TempDirectory()
        var reader = IdentityReader(procRoot: root.path)
        reader.runtimeRoot = root.url("run/user")
        self.reader = reader
    }

    /// A stand-in process with a parent (field 4 of its stat line).
    private func process(_ pid: Int, parent: Int = 1, exe: String = "/usr/bin/cheese", mountNamespace: String? = nil,
                         cgroup: String? = nil) throws {
        let fields = ["S", "\(parent)", "1", "1", "0", "-1", "4194560", "0", "0", "0", "0", "0", "0", "0", "0", "20", "0",
                      "1", "0", "4711", "1000", "100"]
        try root.write("\(pid)/stat", "\(pid) (p) " + fields.joined(separator: " ") + "\n")
        try root.symlink("\(pid)/exe", to: exe)
        if let mountNamespace { try root.symlink("\(pid)/ns/mnt", to: mountNamespace) } else { try root.inHostMountNamespace(pid) }
        if let cgroup { try root.write("\(pid)/cgroup", "0::\(cgroup)\n") }
    }

    private func expectUnreadable(_ result: Result<AppIdentity, IdentityReader.Failure>, _ reason: String,
                                  sourceLocation: SourceLocation = #_sourceLocation) {
        guard case .failure(.unreadable(let why)) = result, why.contains(reason) else {
            Issue.record("expected .failure(.unreadable(…\(reason)…)), got \(result)", sourceLocation: sourceLocation)
            return
        }
    }

    // MARK: mount namespace

    @Test func hostNamespaceGivesTheExecutablePath() throws {
        try process(10)
        #expect(reader.identify(pid: 10, uid: 1000)
                == .success(AppIdentity(appID: "/usr/bin/cheese", kind: .executable, uid: 1000, pid: 10)))
    }

    /// A user namespace that bind-mounts its own file over /usr/bin/cheese: the path
    /// is the victim's, the file is not.
    @Test func otherMountNamespaceIsUnverified() throws {
        try root.symlink("1/ns/mnt", to: TempDirectory.hostMountNamespace)
        try process(11, mountNamespace: "mnt:[4026532999]")
        let identity = try reader.identify(pid: 11, uid: 1000).get()
        #expect(identity == AppIdentity(appID: "unverified:/usr/bin/cheese", kind: .unverified, uid: 1000, pid: 11,
                                        unverifiedReason: "its mount namespace (mnt:[4026532999]) is not the host's "
                                            + "(PID 1's, \(TempDirectory.hostMountNamespace))"))
        // Never an id that allow=/deny= or SetDecision can name, nor the real path.
        #expect(!Validate.isAppID(identity.appID))
    }

    /// A host named by a PID other than 1 is pinned by its start time: once it exits,
    /// whoever gets its PID (any user, in a namespace of their own) is not the host.
    @Test func aHostProcessReplacedUnderItsPIDIsNoHost() throws {
        try process(50, mountNamespace: "mnt:[4026532100]")
        try process(51, mountNamespace: "mnt:[4026532100]")
        var pinned = reader
        pinned.hostPID = 50
        pinned.pinHost()
        #expect(pinned.hostStartTime == "4711")
        #expect(try pinned.identify(pid: 51, uid: 1000).get().kind == .executable)
        // Process 50 exits; another, started later, has its PID now.
        try root.write("50/stat", "50 (p) S 1 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 9999 1000 100\n")
        let after = try pinned.identify(pid: 51, uid: 1000).get()
        #expect(after.kind == .unverified)
        #expect(after.unverifiedReason.hasPrefix("the host's process (PID 50) has exited since it was named"), "\(after)")
        #expect(pinned.hostNamespaceProblem() == after.unverifiedReason)
    }

    /// A process of another user is never the host, whatever its PID.
    @Test func anotherUsersProcessIsNoHost() throws {
        try process(60, mountNamespace: "mnt:[4026532200]")
        try process(61, mountNamespace: "mnt:[4026532200]")
        #expect(chown(root.url("60"), 1, 1) == 0)
        var other = reader
        other.hostPID = 60
        let found = try other.identify(pid: 61, uid: 1000).get()
        #expect(found.kind == .unverified)
        #expect(found.unverifiedReason.hasPrefix("the host's process (PID 60) belongs to another user (uid 1)"), "\(found)")
    }

    @Test func unreadableNamespacesAreUnverified() throws {
        // The caller's own link is missing.
        try root.symlink("1/ns/mnt", to: TempDirectory.hostMountNamespace)
        try root.write("12/stat", IdentityReaderTests.statLine(pid: 12, startTime: 4711))
        try root.symlink("12/exe", to: "/usr/bin/cheese")
        let unreadable = try reader.identify(pid: 12, uid: 1000).get()
        #expect(unreadable.kind == .unverified)
        #expect(unreadable.unverifiedReason.hasPrefix("its mount namespace cannot be read ("), "\(unreadable)")
        // The host's link is missing (PID 1 unreadable): fail closed.
        var elsewhere = reader
        elsewhere.hostPID = 99
        try process(13)
        let hostless = try elsewhere.identify(pid: 13, uid: 1000).get()
        #expect(hostless.kind == .unverified)
        #expect(hostless.unverifiedReason.hasPrefix("the host's mount namespace cannot be read (/proc/99/ns/mnt: "),
                "\(hostless)")
        #expect(elsewhere.hostNamespaceProblem() == hostless.unverifiedReason)
        #expect(reader.hostNamespaceProblem() == nil)
    }

    /// Only the executable path needs the host's namespace: an app scope of the
    /// caller's own user manager still names the app.
    @Test func appScopeInAnotherNamespaceStillCounts() throws {
        try root.symlink("1/ns/mnt", to: TempDirectory.hostMountNamespace)
        try process(14, mountNamespace: "mnt:[4026532999]",
                    cgroup: "/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.gnome.Maps-1.scope")
        #expect(reader.identify(pid: 14, uid: 1000)
                == .success(AppIdentity(appID: "org.gnome.Maps", kind: .systemdUnit, uid: 1000, pid: 14)))
    }

    // MARK: cgroup

    @Test("an app scope outside the caller's own user manager gives no app id", arguments: [
        "/user.slice/user-1001.slice/user@1001.service/app.slice/app-gnome-org.victim.App-1.scope",
        "/app-gnome-org.victim.App-1.scope",
        "/system.slice/app-gnome-org.victim.App-1.scope",
        "/user.slice/user-1000.slice/app-gnome-org.victim.App-1.scope",
        "/evil/user.slice/user-1000.slice/user@1000.service/app-gnome-org.victim.App-1.scope",
        "/user.slice/user-10000.slice/user@10000.service/app-gnome-org.victim.App-1.scope",
        "/user.slice/user-1001.slice/user@1001.service/app.slice/snap.victim.victim-1234abcd.scope",
    ])
    func foreignScope(cgroup: String) throws {
        try process(20, cgroup: cgroup)
        #expect(reader.identify(pid: 20, uid: 1000)
                == .success(AppIdentity(appID: "/usr/bin/cheese", kind: .executable, uid: 1000, pid: 20)))
    }

    @Test func ownUserManagersScopeCounts() throws {
        try process(21, cgroup: "/user.slice/user-1001.slice/user@1001.service/app.slice/app-gnome-org.victim.App-1.scope")
        #expect(reader.identify(pid: 21, uid: 1001)
                == .success(AppIdentity(appID: "org.victim.App", kind: .systemdUnit, uid: 1001, pid: 21)))
    }

    // MARK: flatpak instance

    private func sandboxed(_ pid: Int, parent: Int = 1, instance: String = "7777") throws {
        try process(pid, parent: parent, mountNamespace: "mnt:[4026532300]",
                    cgroup: "/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.example.Scoped-1.scope")
        try root.write("\(pid)/root/.flatpak-info", "[Application]\nname=org.victim.App\n\n[Instance]\ninstance-id=\(instance)\n")
    }

    @Test func instanceOfTheCallerVouches() throws {
        try sandboxed(30)
        try root.flatpakInstance("7777", childPID: 30, uid: 1000)
        #expect(reader.identify(pid: 30, uid: 1000)
                == .success(AppIdentity(appID: "org.victim.App", kind: .flatpak, uid: 1000, pid: 30)))
    }

    /// The caller descends from the sandbox's first process (child-pid).
    @Test func descendantOfTheChildPIDIsInTheInstance() throws {
        try process(31)
        try process(32, parent: 31)
        try sandboxed(33, parent: 32)
        try root.flatpakInstance("7777", childPID: 31, uid: 1000)
        #expect(try reader.identify(pid: 33, uid: 1000).get().kind == .flatpak)
    }

    /// A chroot with a forged .flatpak-info: no instance, or user A's instance seen
    /// by a process of user B, or one the caller is not part of. Refused, never
    /// the app scope or executable beneath.
    @Test func forgedFlatpakInfoIsRefused() throws {
        try sandboxed(40)
        expectUnreadable(reader.identify(pid: 40, uid: 1000), "has no bwrapinfo.json of uid 1000")
        // The victim's instance, under the victim's runtime directory.
        try root.flatpakInstance("7777", childPID: 40, uid: 1001)
        expectUnreadable(reader.identify(pid: 40, uid: 1000), "has no bwrapinfo.json of uid 1000")
        // The caller's own directory, but another sandbox's child-pid.
        try process(41)
        try root.flatpakInstance("7777", childPID: 41, uid: 1000)
        expectUnreadable(reader.identify(pid: 40, uid: 1000), "is not in flatpak instance \"7777\" (child-pid 41)")
    }

    @Test func flatpakInfoWithoutInstanceIsRefused() throws {
        try process(42, cgroup: "/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.example.S-1.scope")
        try root.write("42/root/.flatpak-info", "[Application]\nname=org.victim.App\n")
        expectUnreadable(reader.identify(pid: 42, uid: 1000), "names no [Instance] instance-id")
    }

    @Test("an instance-id that is no single path element is refused", arguments: ["..", ".", "../1001/.flatpak/7777", "a b"])
    func badInstanceID(id: String) throws {
        try sandboxed(43, instance: id)
        try root.flatpakInstance("7777", childPID: 43, uid: 1000)
        expectUnreadable(reader.identify(pid: 43, uid: 1000), "bad instance-id")
    }

    /// Anything in the chain not owned by the caller's uid, writable by others, or a
    /// symbolic link does not vouch.
    @Test(arguments: ["owner", "mode", "link", "file owner", "no child-pid"])
    func untrustedInstanceFiles(fault: String) throws {
        try sandboxed(44)
        let dir = root.url("run/user/1000/.flatpak/7777")
        switch fault {
        case "owner":
            try root.flatpakInstance("7777", childPID: 44, uid: 1000)
            #expect(chown(root.url("run/user/1000"), 1001, 1001) == 0)
        case "mode":
            try root.flatpakInstance("7777", childPID: 44, uid: 1000)
            #expect(chmod(root.url("run/user/1000/.flatpak"), 0o777) == 0)
        case "link":
            try root.flatpakInstance("real", childPID: 44, uid: 1000)
            #expect(symlink(root.url("run/user/1000/.flatpak/real"), dir) == 0)
            #expect(lchown(dir, 1000, 1000) == 0)
        case "file owner":
            try root.flatpakInstance("7777", childPID: 44, uid: 1000)
            #expect(chown(dir + "/bwrapinfo.json", 0, 0) == 0)
        default:
            try root.flatpakInstance("7777", childPID: 44, uid: 1000)
            try root.write("run/user/1000/.flatpak/7777/bwrapinfo.json", "{\"pid-namespace\": 4026532302}\n")
            #expect(chown(dir + "/bwrapinfo.json", 1000, 1000) == 0)
        }
        let result = reader.identify(pid: 44, uid: 1000)
        guard case .failure(.unreadable) = result else {
            Issue.record("\(fault): expected a refusal, got \(result)")
            return
        }
    }

    @Test("child-pid in bwrap's info", arguments: [
        ("{\"child-pid\": 12}", UInt32?.some(12)), ("{\n  \"child-pid\" :\n 345,\n \"x\": 1}", 345),
        ("{\"child-pid\": \"12\"}", nil), ("{\"pid\": 12}", nil), ("", nil),
    ])
    func childPID(json: String, expected: UInt32?) {
        #expect(IdentityReader.childPID(json) == expected)
    }
}
