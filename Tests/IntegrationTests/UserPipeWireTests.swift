import Foundation
import Testing
import PermissionsTestSupport

/// Each user's own PipeWire, followed by one daemon: `--user-runtime-root ROOT`,
/// users 1 and 2 (real uids) each with a private PipeWire running as themselves at
/// ROOT/UID/pipewire-0. Sockets are found by inotify; every wait is for a log
/// line or a signal, with a deadline.
@Suite("Each user's own PipeWire", .serialized)
struct UserPipeWireTests {
    static let user1: UInt32 = 1
    static let user2: UInt32 = 2

    /// The daemon on a bus of its own with the PipeWire plugin, following ROOT.
    static func daemon(root: TestRuntimeRoot) throws -> DaemonUnderTest {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [pipewirePluginDirectory],
                                         environment: [:], start: false)
        daemon.extraArguments = ["--user-runtime-root", root.path]
        try daemon.start()
        return daemon
    }

    /// The names of the daemon's threads, sorted.
    static func threads(_ daemon: DaemonUnderTest) -> [String] {
        guard let pid = daemon.pid,
              let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return [] }
        return tasks.compactMap { task in
            (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }.sorted()
    }

    /// Whether the daemon has libpipewire mapped (read with cat: Foundation reads
    /// /proc files short).
    static func mapsLibpipewire(_ daemon: DaemonUnderTest) throws -> Bool {
        let pid = try #require(daemon.pid)
        let maps = try run("/bin/cat", ["/proc/\(pid)/maps"]).stdout
        try #require(maps.contains("/libc.so"), "not the whole of /proc/\(pid)/maps")
        return maps.contains("/libpipewire-0.3.so")
    }

    static func pipewireThreads(_ daemon: DaemonUnderTest) -> Int {
        threads(daemon).filter { $0 == "permissions-pw" }.count
    }

    @Test func everyUsersPipeWireIsFollowedThroughLoginsRestartsAndLogouts() throws {
        let root = try TestRuntimeRoot()
        let one = try root.startPipeWire(Self.user1)
        try one.addCamera("cam-one")
        try root.makeUserDirectory(Self.user2)  // logged in, no PipeWire yet
        let daemon = try Self.daemon(root: root)
        _ = try daemon.waitForLog("following the registry of user 1's PipeWire: 1 camera(s), 0 microphone(s)")
        let oneUser = Self.pipewireThreads(daemon)

        // User 2's PipeWire starts later: its socket is seen, not polled for.
        let two = try root.startPipeWire(Self.user2)
        _ = try daemon.waitForLog("following the registry of user 2's PipeWire")
        try two.addMicrophone("mic-two")

        // A crash and a restart of user 1's.
        one.kill()
        _ = try daemon.waitForLog("lost the connection to user 1's PipeWire")
        try one.start()
        _ = try daemon.waitForLog("following the registry of user 1's PipeWire", count: 2)

        // Every user's connection on the same threads: the loop's, and the data loop
        // of the one context (a thread inherits its creator's name).
        let twoUsers = Self.pipewireThreads(daemon)
        #expect(twoUsers == oneUser && twoUsers <= 2, "\(Self.threads(daemon))")

        // A user logging in later (their directory made) and out (removed).
        try root.removeUserDirectory(Self.user2)
        _ = try daemon.waitForLog("user 2's runtime directory is gone")
        try root.startPipeWire(Self.user2)
        _ = try daemon.waitForLog("following the registry of user 2's PipeWire", count: 2)

        // No one PipeWire is the machine's: the machine-wide state stays unsupported.
        #expect(try daemon.call("GetStatus", "s", "camera").stdout == "s \"unsupported\"\n")
        #expect(daemon.isRunning)
    }

    /// No user's PipeWire when the daemon starts: libpipewire is not loaded and no
    /// loop runs until one user's socket is made; then that user is followed.
    @Test func noPipeWireLoadedUntilAUsersSocketIsMade() throws {
        let root = try TestRuntimeRoot()
        try root.makeUserDirectory(Self.user1)  // logged in, no PipeWire yet
        let daemon = try Self.daemon(root: root)
        _ = try daemon.waitForLog("following each user's PipeWire at \(root.path)/UID/pipewire-0 (none yet")
        #expect(try !Self.mapsLibpipewire(daemon))
        #expect(Self.pipewireThreads(daemon) == 0, "\(Self.threads(daemon))")
        #expect(try daemon.call("GetStatusForUser", "uss", "\(Self.user1)", "org.example.App", "camera").stdout
                == "s \"unsupported\"\n")

        try root.startPipeWire(Self.user1)
        _ = try daemon.waitForLog("following the registry of user 1's PipeWire")
        #expect(try Self.mapsLibpipewire(daemon))
        #expect(Self.pipewireThreads(daemon) >= 1, "\(Self.threads(daemon))")
        #expect(daemon.logLines(containing: "following each user's PipeWire").count == 1, "\(daemon.log)")
    }

    @Test func aMissingRuntimeRootIsLoggedAndEveryoneIsUnsupported() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [pipewirePluginDirectory], start: false)
        daemon.extraArguments = ["--user-runtime-root", daemon.root + "/no-such-dir"]
        try daemon.start()
        _ = try daemon.waitForLog("cannot watch \(daemon.root)/no-such-dir for users' PipeWire")
        #expect(try daemon.call("GetStatus", "s", "microphone").stdout == "s \"unsupported\"\n")
    }

    /// Under the shipped unit's capabilities (CapabilityBoundingSet=CAP_SYS_PTRACE
    /// CAP_DAC_READ_SEARCH): the user's socket is found, but connect(2) needs write
    /// permission on it, which neither gives. The user reads unsupported, fail closed,
    /// and the log says why (doc/threat-model.md, "Reaching each user's PipeWire").
    @Test func underTheUnitsCapabilitiesAUsersSocketIsRefusedAndReadsUnsupported() throws {
        let root = try TestRuntimeRoot()
        try root.startPipeWire(Self.user1).addCamera("cam-one")
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [pipewirePluginDirectory],
                                         environment: [:], start: false)
        daemon.extraArguments = ["--user-runtime-root", root.path]
        daemon.launcher = ["/usr/bin/setpriv", "--bounding-set", "-all,+sys_ptrace,+dac_read_search", "--"]
        try daemon.start()
        let line = try daemon.waitForLog("user 1's PipeWire")
        #expect(line.contains("Permission denied (errno 13)"), "\(line)")
        #expect(daemon.logLines(containing: "following the registry of user 1's PipeWire").isEmpty)
        #expect(try daemon.call("GetStatus", "s", "camera").stdout == "s \"unsupported\"\n")
        // The host says why and what to do, once for the user.
        let remedy = try daemon.waitForLog("cannot reach user 1's pipewire-0 under this daemon's privileges")
        #expect(remedy.contains("Permission denied (errno 13), and no connector is configured (--connector-socket)")
                && remedy.contains("start permissionsd-connector.socket"), "\(remedy)")
    }

    /// The same daemon with permissionsd-connector under its own unit's bounding set
    /// (CAP_DAC_OVERRIDE alone), on a stand-in system bus: user 1's connection comes
    /// through the connector, and user 1 reads their camera; user 2, logged in without
    /// a PipeWire, reads unsupported. The connector refuses no one.
    @Test func underTheUnitsCapabilitiesTheConnectorReachesEachUsersPipeWire() throws {
        let root = try TestRuntimeRoot()
        try root.startPipeWire(Self.user1).addCamera("cam-one")
        try root.makeUserDirectory(Self.user2)
        let connector = try TestConnector(root: root.path)
        let bus = try TestBus(type: "system")
        let daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [pipewirePluginDirectory],
                                         environment: [:], start: false)
        daemon.extraArguments = ["--user-runtime-root", root.path, "--connector-socket", connector.socket]
        daemon.launcher = ["/usr/bin/setpriv", "--bounding-set", "-all,+sys_ptrace,+dac_read_search", "--"]
        try daemon.start()
        _ = try daemon.waitForLog("following the registry of user 1's PipeWire: 1 camera(s), 0 microphone(s)")
        _ = try connector.waitForLine("handed pid \(daemon.pid ?? 0) (uid 0) user 1's pipewire-0")
        try bus.waitForStatus("camera", as: Self.user1, "not-determined")
        #expect(try bus.status("camera", as: Self.user2) == "s \"unsupported\"")
        #expect(try bus.status("microphone", as: Self.user1) == "s \"unsupported\"")
        #expect(connector.refusals.isEmpty, "\(connector.refusals)")
        #expect(daemon.logLines(containing: "cannot reach user").isEmpty, "\(daemon.log)")
    }

    /// A connector without its capability (its bounding set emptied) is no way in
    /// either: the user reads unsupported, and the daemon says so once, with the
    /// remedy, as when there is no connector.
    @Test func aConnectorWithoutItsCapabilityIsLoggedWithTheRemedy() throws {
        let root = try TestRuntimeRoot()
        try root.startPipeWire(Self.user1).addCamera("cam-one")
        let connector = try TestConnector(root: root.path, boundingSet: "-all")
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [pipewirePluginDirectory],
                                         environment: [:], start: false)
        daemon.extraArguments = ["--user-runtime-root", root.path, "--connector-socket", connector.socket]
        daemon.launcher = ["/usr/bin/setpriv", "--bounding-set", "-all,+sys_ptrace,+dac_read_search", "--"]
        try daemon.start()
        let remedy = try daemon.waitForLog("cannot reach user 1's pipewire-0 under this daemon's privileges")
        #expect(remedy.contains("and the connector refused it: Permission denied (errno 13)")
                && remedy.contains("start permissionsd-connector.socket"), "\(remedy)")
        _ = try connector.waitForLine("refused pid \(daemon.pid ?? 0) (uid 0)")
        #expect(daemon.logLines(containing: "following the registry of user 1's PipeWire").isEmpty)
    }
}
