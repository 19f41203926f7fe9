import Glibc
import Testing
@testable import PermissionsIdentity

/// `IdentityReader` over a stand-in /proc tree.
@Suite("App identity from /proc")
struct IdentityReaderTests {
    let root: TempDirectory
    let reader: IdentityReader

    init() throws {
        root = try TempDirectory()
        reader = IdentityReader(procRoot: root.path)
        // Every stand-in process has a stat line; its start time (field 22) is 4711.
        for pid in [4242, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
            try root.write("\(pid)/stat", Self.statLine(pid: pid, startTime: 4711))
            try root.inHostMountNamespace(pid)
        }
    }

    /// A /proc/PID/stat line (the command name has spaces and parentheses, as a
    /// hostile one could).
    static func statLine(pid: Int, startTime: Int) -> String {
        let fields = ["S", "1", "1", "1", "0", "-1", "4194560", "0", "0", "0", "0", "0", "0", "0", "0", "20", "0", "1",
                      "0", "\(startTime)", "1000", "100"]
        return "\(pid) (evil) (name) " + fields.joined(separator: " ") + "\n"
    }

    private func cgroup(pid: UInt32, unit: String) throws {
        try root.write("\(pid)/cgroup", "0::/user.slice/user-1000.slice/user@1000.service/app.slice/\(unit)\n")
    }

    @Test func gnomeScope() throws {
        try cgroup(pid: 4242, unit: "app-gnome-org.gnome.Maps-1234.scope")
        let identity = try reader.identify(pid: 4242, uid: 1000).get()
        #expect(identity == AppIdentity(appID: "org.gnome.Maps", kind: .systemdUnit, uid: 1000, pid: 4242))
    }

    @Test("app id from an XDG unit name", arguments: [
        ("app-gnome-org.gnome.Maps-1234.scope", "org.gnome.Maps"),
        ("app-flatpak-org.foo.Bar@12.service", "org.foo.Bar"),
        ("app-flatpak-org.foo.Bar.service", "org.foo.Bar"),
        ("app-org.foo.Bar.service", "org.foo.Bar"),
        ("app-org.foo.Bar@abc.service", "org.foo.Bar"),
        ("app-org.foo.Bar-99.scope", "org.foo.Bar"),
        ("app-gnome-org.foo\\x2dbar-99.scope", "org.foo-bar"),
        ("app-kde-org.kde.kate\\x2dbeta\\x2dx-5.scope", "org.kde.kate-beta-x"),
        ("app-gnome-org.foo\\x2dbar@1.service", "org.foo-bar"),
    ])
    func unitNames(unit: String, appID: String) throws {
        try cgroup(pid: 7, unit: unit)
        let identity = try reader.identify(pid: 7, uid: 1000).get()
        #expect(identity.appID == appID)
        #expect(identity.kind == .systemdUnit)
    }

    @Test func onlyTheUnifiedHierarchyLineCounts() throws {
        try root.write("8/cgroup", """
            12:pids:/user.slice/app-gnome-org.wrong.One-1.scope
            1:name=systemd:/user.slice/app-gnome-org.wrong.Two-1.scope
            0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.right.App-3.scope
            """)
        #expect(try reader.identify(pid: 8, uid: 1000).get().appID == "org.right.App")
    }

    @Test func nonAppUnitFallsBackToTheExecutable() throws {
        try root.write("9/cgroup", "0::/user.slice/user-1000.slice/session-2.scope\n")
        try root.symlink("9/exe", to: "/usr/bin/true")
        let identity = try reader.identify(pid: 9, uid: 1000).get()
        #expect(identity == AppIdentity(appID: "/usr/bin/true", kind: .executable, uid: 1000, pid: 9))
    }

    @Test(arguments: ["0::/\n", "0::/system.slice/foo.service\n", "0::/user.slice/app-gnome--1.scope\n",
                      "0::/user.slice/app-gnome-org.x.Y.slice\n", "0::/user.slice/app.slice\n",
                      "3:cpu:/user.slice/app-gnome-org.x.Y-1.scope\n", ""])
    func otherCgroupsFallBackToTheExecutable(cgroupText: String) throws {
        try root.write("10/cgroup", cgroupText)
        try root.symlink("10/exe", to: "/usr/bin/gnome-weather")
        let identity = try reader.identify(pid: 10, uid: 5).get()
        #expect(identity.appID == "/usr/bin/gnome-weather")
        #expect(identity.kind == .executable)
    }

    @Test func noCgroupFileFallsBackToTheExecutable() throws {
        try root.symlink("11/exe", to: "/opt/My App/bin/app")
        #expect(try reader.identify(pid: 11, uid: 1).get().appID == "/opt/My App/bin/app")
    }

    /// A file merely *named* "… (deleted)" keeps its name: stripping it would let it
    /// pass for the app at the shorter path.
    @Test func deletedSuffixOfALiveFileIsKept() throws {
        try root.write("12/cgroup", "0::/user.slice/session-2.scope\n")
        try root.write("bin/victim (deleted)", "#!/bin/true\n")
        try root.symlink("12/exe", to: root.url("bin/victim (deleted)"))
        let identity = try reader.identify(pid: 12, uid: 1000).get()
        #expect(identity.appID == root.url("bin/victim (deleted)"))
        #expect(identity.kind == .executable)
    }

    /// What the " (deleted)" check relies on: an unlinked file has no links.
    @Test func unlinkedFileHasNoLinks() throws {
        let path = root.url("gone")
        try root.write("gone", "x")
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        #expect(reader.linkCount("/proc/self/fd/\(fd)") == 1)
        unlink(path)
        #expect(reader.linkCount("/proc/self/fd/\(fd)") == 0)
    }

    @Test func missingProcessIsUnreadable() {
        let result = reader.identify(pid: 999_999, uid: 1000)
        guard case .failure(.unreadable) = result else {
            Issue.record("expected .failure(.unreadable), got \(result)")
            return
        }
    }

    @Test func cgroupWithoutExeIsUnreadable() throws {
        try root.write("13/cgroup", "0::/user.slice/session-2.scope\n")
        let result = reader.identify(pid: 13, uid: 1000)
        guard case .failure(.unreadable) = result else {
            Issue.record("expected .failure(.unreadable), got \(result)")
            return
        }
    }

    @Test("hostile app id in the unit name is refused", arguments: [
        ("app-gnome-org..evil-1.scope", "org..evil"),
        ("app-gnome-org.foo\\x2f..\\x2fbar-1.scope", "org.foo/../bar"),
        ("app-gnome-org.foo\\x0abar-1.scope", "org.foo\nbar"),
        ("app-gnome-org.foo\\x20bar-1.scope", "org.foo bar"),
        ("app-gnome-org.foo\\x00-1.scope", "org.foo\0"),
        ("app-gnome-\\x2e\\x2e-1.scope", ".."),
    ])
    func hostileUnit(unit: String, claimed: String) throws {
        try cgroup(pid: 14, unit: unit)
        // A valid exe is there too: a bad claim must not fall back to another identity.
        try root.symlink("14/exe", to: "/usr/bin/true")
        #expect(reader.identify(pid: 14, uid: 1000) == .failure(.invalid(claimed)))
    }

    @Test(arguments: ["true", "../usr/bin/true", "/usr/../bin/true", "/usr/bin/tr\nue"])
    func hostileExecutableIsRefused(target: String) throws {
        try root.symlink("15/exe", to: target)
        #expect(reader.identify(pid: 15, uid: 1000) == .failure(.invalid(target)))
    }

    @Test func unescapeDecodesBytesAndLeavesBrokenEscapes() {
        #expect(IdentityReader.unescape("a\\x2db") == "a-b")
        #expect(IdentityReader.unescape("\\x41\\x42") == "AB")
        #expect(IdentityReader.unescape("end\\x2") == "end\\x2")
        #expect(IdentityReader.unescape("bad\\xzz") == "bad\\xzz")
        #expect(IdentityReader.unescape("plain") == "plain")
    }
}
