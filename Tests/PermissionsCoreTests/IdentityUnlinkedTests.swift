import Foundation
import Glibc
import Testing
@testable import PermissionsIdentity

/// An executable with no links (unlinked since it started, or a memfd) names no
/// file: its caller is `unverified`, never identified by a path (`/memfd:x`, or a
/// path that now names another file). A memfd, from a real program, is in
/// UnlinkedExecutableTests (IntegrationTests).
@Suite struct IdentityUnlinkedTests {
    static let unlinkedReason = "its executable has no name in any file system (a memfd, or deleted since it started)"

    let root: TempDirectory
    let reader: IdentityReader

    init() throws {
        root = try TempDirectory()
        reader = IdentityReader(procRoot: root.path)
        for pid in [20, 22] {
            try root.write("\(pid)/stat", IdentityReaderTests.statLine(pid: pid, startTime: 4711))
            try root.inHostMountNamespace(pid)
        }
    }

    /// A stand-in process whose exe is a file unlinked while it is open: no links.
    @Test func anUnlinkedExecutableIsUnverified() throws {
        try root.write("gone", "#!/bin/true\n")
        let fd = open(root.url("gone"), O_RDONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        #expect(unlink(root.url("gone")) == 0)
        try root.symlink("20/exe", to: "/proc/self/fd/\(fd)")
        #expect(try reader.identify(pid: 20, uid: 1000).get()
                == AppIdentity(appID: "unverified:/proc/self/fd/\(fd)", kind: .unverified, uid: 1000, pid: 20,
                               unverifiedReason: Self.unlinkedReason))
    }

    /// A live file that still has its links is the app at its path, as before.
    @Test func aLinkedExecutableKeepsItsPath() throws {
        try root.write("bin/app", "#!/bin/true\n")
        try root.symlink("22/exe", to: root.url("bin/app"))
        #expect(try reader.identify(pid: 22, uid: 1000).get()
                == AppIdentity(appID: root.url("bin/app"), kind: .executable, uid: 1000, pid: 22))
    }

    /// The kernel's own words: a real process running a copy of /usr/bin/sleep that
    /// was then unlinked (its /proc/PID/exe reads "… (deleted)"), seen through a
    /// stand-in entry that is its /proc directory: unverified, under the path
    /// without the mark. (The process only waits to be looked at, and is killed.)
    @Test func aRealProcessWhoseExecutableWasDeletedIsUnverified() throws {
        let copy = root.url("sleep-copy")
        try FileManager.default.copyItem(atPath: "/usr/bin/sleep", toPath: copy)
        let child = Process()
        child.executableURL = URL(fileURLWithPath: copy)
        child.arguments = ["600"]
        try child.run()  // returns once the copy is exec'd (posix_spawn)
        defer {
            // SIGKILL: the test runner's children inherit a mask that blocks SIGTERM.
            kill(child.processIdentifier, SIGKILL)
            child.waitUntilExit()
        }
        #expect(unlink(copy) == 0)
        let pid = child.processIdentifier
        try root.symlink("\(pid)", to: "/proc/\(pid)")
        var real = IdentityReader(procRoot: root.path)
        real.hostPID = UInt32(pid)  // its own mount namespace counts as the host's here
        let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")
        #expect(exe == copy + " (deleted)")
        #expect(try real.identify(pid: UInt32(pid), uid: 1000).get()
                == AppIdentity(appID: "unverified:" + copy, kind: .unverified, uid: 1000, pid: UInt32(pid),
                               unverifiedReason: Self.unlinkedReason))
    }
}
