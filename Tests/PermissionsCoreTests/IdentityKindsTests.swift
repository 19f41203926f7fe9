import Foundation
import PermissionsTestSupport
import Testing
@testable import PermissionsIdentity

/// `IdentityReader` for sandboxed callers (flatpak, snap) and its PID-reuse check,
/// over a stand-in /proc tree.
@Suite("App identity: flatpak, snap, start time")
struct IdentityKindsTests {
    let root: TempDirectory
    let reader: IdentityReader

    init() throws {
        root = try TempDirectory()
        var reader = IdentityReader(procRoot: root.path)
        reader.runtimeRoot = root.url("run/user")
        self.reader = reader
    }

    /// A stand-in process: a stat line (start time 4711), and optionally an app scope
    /// in its cgroup and an executable, so that a test can see whether a stronger
    /// kind wins or a bad claim falls back.
    private func process(_ pid: Int, scope: String? = nil, exe: String? = nil) throws {
        try root.write("\(pid)/stat", IdentityReaderTests.statLine(pid: pid, startTime: 4711))
        try root.inHostMountNamespace(pid)
        if let scope {
            try root.write("\(pid)/cgroup", "0::/user.slice/user-1000.slice/user@1000.service/app.slice/\(scope)\n")
        }
        if let exe { try root.symlink("\(pid)/exe", to: exe) }
    }

    /// A .flatpak-info, and the instance flatpak would have made for it (unless the
    /// text names one itself).
    private func flatpakInfo(_ pid: Int, _ text: String) throws {
        let instanced = text.contains("[Instance]") ? text : text + "\n[Instance]\ninstance-id=\(pid)\n"
        try root.write("\(pid)/root/.flatpak-info", instanced)
        try root.flatpakInstance("\(pid)", childPID: pid, uid: 1000)
    }

    private func expectUnreadable(_ result: Result<AppIdentity, IdentityReader.Failure>,
                                  sourceLocation: SourceLocation = #_sourceLocation) {
        guard case .failure(.unreadable) = result else {
            Issue.record("expected .failure(.unreadable), got \(result)", sourceLocation: sourceLocation)
            return
        }
    }

    // MARK: flatpak

    @Test func flatpakInfoNamesTheApp() throws {
        try process(100)
        try flatpakInfo(100, "[Application]\nname=org.example.Flat\n")
        #expect(reader.identify(pid: 100, uid: 1000)
                == .success(AppIdentity(appID: "org.example.Flat", kind: .flatpak, uid: 1000, pid: 100)))
    }

    @Test func flatpakInfoWithTheUsualOtherGroups() throws {
        try process(101)
        try flatpakInfo(101, """
            [Application]
            name=org.gnome.Maps
            runtime=runtime/org.gnome.Platform/x86_64/45

            [Instance]
            instance-id=101
            app-path=/var/lib/flatpak/app/org.gnome.Maps/x86_64/stable/abc/files

            [Context]
            shared=network;ipc;
            """)
        let identity = try reader.identify(pid: 101, uid: 1000).get()
        #expect(identity.appID == "org.gnome.Maps")
        #expect(identity.kind == .flatpak)
    }

    @Test func flatpakWinsOverAnAppScopeAndTheExecutable() throws {
        try process(102, scope: "app-gnome-org.example.Scoped-77.scope", exe: "/usr/bin/bwrap")
        try root.write("102/attr/current", "snap.firefox.firefox (enforce)\n")
        try flatpakInfo(102, "[Application]\nname=org.example.Flat\n")
        #expect(reader.identify(pid: 102, uid: 1000)
                == .success(AppIdentity(appID: "org.example.Flat", kind: .flatpak, uid: 1000, pid: 102)))
    }

    @Test func rootDirectoryWithoutFlatpakInfoFallsThrough() throws {
        try process(103, scope: "app-gnome-org.example.Scoped-77.scope", exe: "/usr/bin/true")
        try root.write("103/root/etc/hostname", "box\n")
        #expect(reader.identify(pid: 103, uid: 1000)
                == .success(AppIdentity(appID: "org.example.Scoped", kind: .systemdUnit, uid: 1000, pid: 103)))
    }

    /// /proc/PID/root is itself a link (to the process's root directory): it is followed.
    @Test func rootAsALinkToTheSandboxIsFollowed() throws {
        let sandbox = try TempDirectory()
        try sandbox.write(".flatpak-info", "[Application]\nname=org.example.Linked\n[Instance]\ninstance-id=104\n")
        try root.flatpakInstance("104", childPID: 104, uid: 1000)
        try process(104, exe: "/usr/bin/true")
        try root.symlink("104/root", to: sandbox.path)
        #expect(reader.identify(pid: 104, uid: 1000)
                == .success(AppIdentity(appID: "org.example.Linked", kind: .flatpak, uid: 1000, pid: 104)))
    }

    @Test func flatpakInfoThatIsALinkIsRefusedWithoutFallback() throws {
        // The link points at a file with a perfectly good name: still refused.
        try root.write("elsewhere/info", "[Application]\nname=org.example.Chosen\n")
        try process(105, scope: "app-gnome-org.example.Scoped-77.scope", exe: "/usr/bin/true")
        try root.symlink("105/root/.flatpak-info", to: root.url("elsewhere/info"))
        let result = reader.identify(pid: 105, uid: 1000)
        expectUnreadable(result)
        #expect((try? result.get()) == nil)
    }

    @Test func flatpakInfoThatIsARelativeLinkIsRefused() throws {
        try root.write("106/root/real-info", "[Application]\nname=org.example.Chosen\n")
        try process(106, exe: "/usr/bin/true")
        try root.symlink("106/root/.flatpak-info", to: "real-info")
        expectUnreadable(reader.identify(pid: 106, uid: 1000))
    }

    @Test func danglingFlatpakInfoLinkIsRefusedNotAbsent() throws {
        try process(107, exe: "/usr/bin/true")
        try root.symlink("107/root/.flatpak-info", to: "/nonexistent/flatpak-info")
        expectUnreadable(reader.identify(pid: 107, uid: 1000))
    }

    @Test func flatpakInfoThatIsADirectoryIsRefused() throws {
        try process(108, scope: "app-gnome-org.example.Scoped-77.scope", exe: "/usr/bin/true")
        try root.write("108/root/.flatpak-info/name", "org.example.Dir\n")
        let result = reader.identify(pid: 108, uid: 1000)
        expectUnreadable(result)
        #expect((try? result.get()) == nil)
    }

    @Test("a bad flatpak name is refused, never replaced by another kind", arguments: [
        ("[Application]\nname=..\n", ".."),
        ("[Application]\nname=org.example..Evil\n", "org.example..Evil"),
        ("[Application]\nname=org.example/Evil\n", "org.example/Evil"),
        ("[Application]\nname=/usr/bin/true\n", "/usr/bin/true"),
        ("[Application]\nname=org.example\\nEvil\n", "org.example\nEvil"),  // keyfile escape for a newline
        ("[Application]\nname=org example\n", "org example"),
        ("[Application]\nname=" + String(repeating: "a", count: 300) + "\n", String(repeating: "a", count: 300)),
    ])
    func badFlatpakName(text: String, claimed: String) throws {
        try process(109, scope: "app-gnome-org.example.Scoped-77.scope", exe: "/usr/bin/true")
        try root.write("109/attr/current", "snap.firefox.firefox (enforce)\n")
        try flatpakInfo(109, text)
        #expect(reader.identify(pid: 109, uid: 1000) == .failure(.invalid(claimed)))
    }

    @Test("a .flatpak-info without an [Application] name is refused", arguments: [
        "",
        "[Application]\nruntime=runtime/org.gnome.Platform/x86_64/45\n",
        "[Instance]\nname=org.example.Elsewhere\n",
        "name=org.example.NoGroup\n",
        "this is not a key file\n",
        "[Application]\nname=org.example.Broken\nnot a key-value line\n",
    ])
    func flatpakInfoWithoutName(text: String) throws {
        try process(110, scope: "app-gnome-org.example.Scoped-77.scope", exe: "/usr/bin/true")
        try flatpakInfo(110, text)
        let result = reader.identify(pid: 110, uid: 1000)
        guard case .failure(.invalid) = result else {
            Issue.record("expected .failure(.invalid), got \(result)")
            return
        }
    }

    /// A process can make its own root (an unprivileged user namespace plus chroot, or
    /// a bind mount) and put a FIFO at /.flatpak-info. Opening it must not wait for a
    /// writer: identification runs on the daemon's only queue.
    @Test func flatpakInfoThatIsAFifoDoesNotBlock() throws {
        try process(111, exe: "/usr/bin/true")
        try FileManager.default.createDirectory(atPath: root.url("111/root"), withIntermediateDirectories: true)
        let fifo = root.url("111/root/.flatpak-info")
        #expect(mkfifo(fifo, 0o644) == 0)
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var result: Result<AppIdentity, IdentityReader.Failure>?
        let reader = self.reader
        runBlocking {
            result = reader.identify(pid: 111, uid: 1000)
            done.signal()
        }
        let returned = done.wait(timeout: .now() + 5) == .success
        if !returned {
            // Release the reader (a writer appears and goes), so that the test can end.
            let writer = open(fifo, O_WRONLY | O_NONBLOCK)
            if writer >= 0 { close(writer) }
            _ = done.wait(timeout: .now() + 10)
        }
        #expect(returned, "identify blocked for 5 s opening a FIFO .flatpak-info")
        // Either way, once it returns it is refused, not identified.
        if let result { expectUnreadable(result) }
    }

    // MARK: snap

    @Test func snapLabelNamesTheSnap() throws {
        try process(200, exe: "/snap/firefox/123/usr/lib/firefox/firefox")
        try root.write("200/attr/current", "snap.firefox.firefox (enforce)\n")
        #expect(reader.identify(pid: 200, uid: 1000)
                == .success(AppIdentity(appID: "snap.firefox", kind: .snap, uid: 1000, pid: 200)))
    }

    @Test func snapLabelWinsOverAnAppScope() throws {
        try process(201, scope: "app-gnome-org.example.Scoped-77.scope", exe: "/usr/bin/true")
        try root.write("201/attr/current", "snap.spotify.spotify (complain)")
        #expect(reader.identify(pid: 201, uid: 1000)
                == .success(AppIdentity(appID: "snap.spotify", kind: .snap, uid: 1000, pid: 201)))
    }

    @Test func snapHookLabelNamesTheSnap() throws {
        try process(202, exe: "/usr/bin/true")
        try root.write("202/attr/current", "snap.lxd.hook.configure (enforce)\n")
        let identity = try reader.identify(pid: 202, uid: 0).get()
        #expect(identity.appID == "snap.lxd")
        #expect(identity.kind == .snap)
    }

    @Test("a label that is not a snap's falls through", arguments: [
        "unconfined\n", "unconfined", "/usr/bin/man (enforce)\n", "snap-update-ns.firefox (enforce)\n",
        "snap (enforce)\n", "snap.firefox (enforce)\n", "",
    ])
    func nonSnapLabelFallsThrough(label: String) throws {
        try process(203, scope: "app-gnome-org.example.Scoped-77.scope", exe: "/usr/bin/true")
        try root.write("203/attr/current", label)
        #expect(reader.identify(pid: 203, uid: 1000)
                == .success(AppIdentity(appID: "org.example.Scoped", kind: .systemdUnit, uid: 1000, pid: 203)))
        try process(204, exe: "/usr/bin/true")
        try root.write("204/attr/current", label)
        #expect(reader.identify(pid: 204, uid: 1000)
                == .success(AppIdentity(appID: "/usr/bin/true", kind: .executable, uid: 1000, pid: 204)))
    }

    @Test func snapScopeNamesTheSnapWithoutALabel() throws {
        try process(205, scope: "snap.spotify.spotify-1234abcd.scope", exe: "/usr/bin/true")
        #expect(reader.identify(pid: 205, uid: 1000)
                == .success(AppIdentity(appID: "snap.spotify", kind: .snap, uid: 1000, pid: 205)))
    }

    @Test func snapScopeNamesTheSnapUnderAnUnconfinedLabel() throws {
        try process(206, scope: "snap.spotify.spotify-1234abcd.scope", exe: "/usr/bin/true")
        try root.write("206/attr/current", "unconfined\n")
        #expect(reader.identify(pid: 206, uid: 1000)
                == .success(AppIdentity(appID: "snap.spotify", kind: .snap, uid: 1000, pid: 206)))
    }

    @Test("other snap-like units are not snaps", arguments: [
        "snap.spotify.service", "snap.spotify.spotify.service", "snap-spotify-1.scope", "snap..x-1.scope",
    ])
    func otherSnapLikeUnits(unit: String) throws {
        try process(207, scope: unit, exe: "/usr/bin/true")
        #expect(reader.identify(pid: 207, uid: 1000)
                == .success(AppIdentity(appID: "/usr/bin/true", kind: .executable, uid: 1000, pid: 207)))
    }

    @Test("a bad snap name is refused, never replaced by another kind", arguments: [
        ("snap.fire/fox.firefox (enforce)\n", "snap.fire/fox"),
        ("snap.fire\u{1}fox.firefox (enforce)\n", "snap.fire\u{1}fox"),
    ])
    func badSnapLabel(label: String, claimed: String) throws {
        try process(208, scope: "app-gnome-org.example.Scoped-77.scope", exe: "/usr/bin/true")
        try root.write("208/attr/current", label)
        #expect(reader.identify(pid: 208, uid: 1000) == .failure(.invalid(claimed)))
    }

    // MARK: start time

    @Test("field 22 of a stat line", arguments: [
        ("1 (bash) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 12345 1000 100 18446744073709551615\n", "12345"),
        // The command name may hold spaces and ')' (the kernel does not escape it).
        ("2 (a b) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 777 1000 100\n", "777"),
        ("3 (x) ) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 999) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 31337 1 2\n",
         "31337"),
        ("4 ()) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 42 1000 100", "42"),
    ])
    func startTimeIsField22(line: String, expected: String) throws {
        try root.write("300/stat", line)
        #expect(reader.startTime(root.url("300")) == expected)
    }

    @Test func startTimeOfTheSharedStatLine() throws {
        try root.write("301/stat", IdentityReaderTests.statLine(pid: 301, startTime: 98765))
        #expect(reader.startTime(root.url("301")) == "98765")
    }

    @Test("no start time in a broken stat line", arguments: [
        "", "5 (short) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0\n",
        "6 no parenthesis S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 777 1000 100\n",
    ])
    func brokenStatLine(line: String) throws {
        try root.write("302/stat", line)
        #expect(reader.startTime(root.url("302")) == nil)
    }

    @Test func missingStatIsUnreadable() throws {
        // Everything else is there and valid: without a stat, nothing is believed.
        try root.write("303/root/.flatpak-info", "[Application]\nname=org.example.Flat\n")
        try root.write("303/cgroup", "0::/user.slice/app-gnome-org.example.Scoped-77.scope\n")
        try root.symlink("303/exe", to: "/usr/bin/true")
        #expect(reader.startTime(root.url("303")) == nil)
        expectUnreadable(reader.identify(pid: 303, uid: 1000))
    }

    @Test func statWithoutStartTimeIsUnreadable() throws {
        try root.write("304/stat", "304 (x) S 0 1\n")
        try root.symlink("304/exe", to: "/usr/bin/true")
        expectUnreadable(reader.identify(pid: 304, uid: 1000))
    }

    /// The PID is reused while it is being identified: the test's hook runs after
    /// /proc was read and before the start time is read again, and puts a new stat
    /// line in place.
    @Test(arguments: [(4711, false), (9999, true)])
    func startTimeChangingDuringIdentification(newStartTime: Int, replaced: Bool) throws {
        try process(305, exe: "/usr/bin/true")
        let statPath = root.url("305/stat")
        let newStat = IdentityReaderTests.statLine(pid: 305, startTime: newStartTime)
        var reader = self.reader
        reader.betweenReads = { try? newStat.write(toFile: statPath, atomically: true, encoding: .utf8) }
        let result = reader.identify(pid: 305, uid: 1000)
        if replaced {
            #expect(result == .failure(.unreadable("process 305 was replaced while it was being identified")))
        } else {
            #expect(result == .success(AppIdentity(appID: "/usr/bin/true", kind: .executable, uid: 1000, pid: 305)))
        }
    }

    /// A cgroup file that is a FIFO is refused at once (it would block the daemon),
    /// and the caller falls back to its executable.
    @Test func cgroupThatIsAFifoDoesNotBlock() throws {
        try process(306, exe: "/usr/bin/true")
        #expect(mkfifo(root.url("306/cgroup"), 0o644) == 0)
        #expect(reader.identify(pid: 306, uid: 1000)
                == .success(AppIdentity(appID: "/usr/bin/true", kind: .executable, uid: 1000, pid: 306)))
    }
}
