import Foundation
import Testing
import PermissionsTestSupport

/// Faults found by a hostile pass over OpenPipeWireRemote (branch `break`): each
/// test fails on the code it was written against. Setups as EnforcementTests'.
@Suite("Enforced PipeWire connections: faults", .serialized)
struct EnforcementBreakTests {
    static let user1: UInt32 = 1
    static let user2: UInt32 = 2

    let root: TestRuntimeRoot
    let bus: TestBus
    let daemon: DaemonUnderTest
    let appID: String

    init() throws {
        appID = try PWRemoteTool.path()
        root = try TestRuntimeRoot()
        bus = try TestBus(type: "system")
        daemon = try DaemonUnderTest(bus: bus, config: "[notifications]\nenabled=true\n",
                                     pluginDirectories: [pipewirePluginDirectory], environment: [:], start: false)
        daemon.extraArguments = ["--user-runtime-root", root.path]
    }

    func startUsers() throws -> (UserPipeWire, UserPipeWire) {
        let one = try root.startPipeWire(Self.user1)
        try one.addCamera("cam-one")
        try one.addMicrophone("mic-one")
        let two = try root.startPipeWire(Self.user2)
        try two.addCamera("cam-two")
        try daemon.start()
        _ = try daemon.waitForLog("following the registry of user 1's PipeWire: 1 camera(s), 1 microphone(s)")
        _ = try daemon.waitForLog("following the registry of user 2's PipeWire")
        return (one, two)
    }

    func decide(_ decision: String, user: UInt32, _ permission: String = "camera") throws {
        let r = try daemon.ctl(decision, "--user", String(user), appID, permission)
        #expect(r.status == 0, "permissionsctl \(decision): \(r.stderr)")
    }

    /// One user whose own PipeWire does not answer (SIGSTOP: any user may stop their
    /// own PipeWire, or it may just hang) and who asks for two connections at once
    /// makes the host's watchdog abandon the PipeWire plugin: the second open_remote
    /// waits behind the first on the plugin's serial call queue, and the 2 s
    /// deadline runs from when it was queued, not from when it started. Then:
    /// - camera and microphone are "unsupported" for every user, until a restart;
    /// - a connection already handed to ANOTHER user's app keeps its camera: the
    ///   service forgets it ("closed") and remote_status is no longer sent to an
    ///   unavailable plugin, so a deny never narrows it (frames keep flowing).
    @Test func oneUsersHungPipeWireAbandonsThePluginAndLeavesOtherUsersConnectionsWide() throws {
        let (one, _) = try startUsers()
        try decide("grant", user: Self.user1)
        try decide("grant", user: Self.user2)
        let other = try PipeWireApp(address: bus.address, asUser: Self.user2)
        #expect(try other.firstAnswer() == "synced")
        #expect(other.registry.nodeID("cam-two") != nil)

        let pid = try #require(one.pid)
        #expect(Glibc.kill(pid, SIGSTOP) == 0)
        let first = try PipeWireApp(address: bus.address, asUser: Self.user1)
        let second = try PipeWireApp(address: bus.address, asUser: Self.user1)
        _ = try? first.firstAnswer()
        _ = try? second.firstAnswer()
        #expect(Glibc.kill(pid, SIGCONT) == 0)

        let plugins = try daemon.ctl("plugins")
        #expect(!plugins.stdout.contains("unavailable"), "one user's hung PipeWire took the plugin from all:\n\(plugins.stdout)")

        try decide("deny", user: Self.user2)
        try other.waitUntil("user 2's camera gone after a deny", timeout: 2) { $0.nodeID("cam-two") == nil }
    }

    /// A deny that cannot be stored narrows the app's open connections (held), but
    /// not the app: it asks for a new connection at once and gets the camera, the
    /// status being still "authorized". The hold is per connection, not per
    /// (user, app, permission).
    @Test(.enabled(if: StoreFaultTests.canMountTmpfs, "needs mount(2) for a small tmpfs (root)"))
    func aHeldDenyIsUndoneByOpeningANewConnection() throws {
        let state = daemon.stateDirectory
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try #require(mount("tmpfs", state, "tmpfs", 0, "size=1m,mode=0700") == 0)
        defer {
            daemon.stop()
            umount2(state, Int32(MNT_DETACH))
        }
        _ = try startUsers()
        try decide("grant", user: Self.user1)
        daemon.stop()
        try daemon.start()
        _ = try daemon.waitForLog("following the registry of user 1's PipeWire", count: 1)
        let filler = try StoreFaultTests.fill(state)
        defer { unlink(filler) }
        let app = try PipeWireApp(address: bus.address, asUser: Self.user1)
        #expect(try app.firstAnswer() == "synced")
        let refused = try daemon.ctl("deny", "--user", String(Self.user1), appID, "camera")
        #expect(refused.status != 0 && refused.stderr.contains("StorageFailed"), "\(refused.stderr)")
        try app.waitUntil("the camera gone though the deny was not stored", timeout: 1) { $0.nodeID("cam-one") == nil }

        let again = try PipeWireApp(address: bus.address, asUser: Self.user1)
        let answer = try again.firstAnswer()
        if answer == "synced" {
            Thread.sleep(forTimeInterval: 0.5)
            #expect(again.registry.nodeID("cam-one") == nil,
                    "a new connection of the same app sees the camera the held deny took away: \(again.registry.objects)")
        }
    }

    /// A timed grant that ends while the disk is full: its removal fails ("retrying
    /// in a minute"), nothing is signalled, so the connection is never told; the
    /// status reads "not-determined" while the app keeps the camera.
    @Test(.enabled(if: StoreFaultTests.canMountTmpfs && FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlite3"),
                   "needs mount(2) (root) and sqlite3"))
    func aTimedGrantEndingOnAFullDiskLeavesTheConnectionWide() throws {
        let state = daemon.stateDirectory
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try #require(mount("tmpfs", state, "tmpfs", 0, "size=1m,mode=0700") == 0)
        defer {
            daemon.stop()
            umount2(state, Int32(MNT_DETACH))
        }
        _ = try startUsers()
        try decide("grant", user: Self.user1)
        daemon.stop()
        // A grant that ends in 6 s (as an agent's timed answer would store it).
        let ends = (Int64(Date().timeIntervalSince1970) + 6) * 1_000_000
        let edit = try run("/usr/bin/sqlite3", [state + "/decisions.sqlite", "UPDATE user_decisions SET expires_at=\(ends)"])
        #expect(edit.status == 0, "\(edit.stderr)")
        try daemon.start()
        _ = try daemon.waitForLog("following the registry of user 1's PipeWire", count: 1)
        let app = try PipeWireApp(address: bus.address, asUser: Self.user1)
        #expect(try app.firstAnswer() == "synced")
        #expect(app.registry.nodeID("cam-one") != nil)
        let filler = try StoreFaultTests.fill(state)
        defer { unlink(filler) }
        _ = try daemon.waitForLog("cannot remove an expired decision", timeout: 15)
        #expect(try daemon.ctl("get", "--user", String(Self.user1), appID, "camera").stdout == "not-determined\n")
        try app.waitUntil("the camera gone once the timed grant ended", timeout: 2) { $0.nodeID("cam-one") == nil }
    }
}
