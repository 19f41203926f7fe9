import Foundation
import Testing
import PermissionsClient
import PermissionsTestSupport

/// OpenPipeWireRemote end to end: real PipeWire daemons as users 1 and 2, the
/// daemon following both, and "an app" (pwremote) as user 1 that connects through
/// the descriptor it was given and reports its registry. What it can see is what
/// PipeWire shows a client with those permissions: no mock in between.
@Suite("Enforced PipeWire connections", .serialized)
struct EnforcementTests {
    static let user1: UInt32 = 1
    static let user2: UInt32 = 2

    let root: TestRuntimeRoot
    let bus: TestBus
    let daemon: DaemonUnderTest
    /// The app id the daemon gives pwremote: its executable's path.
    let appID: String

    init() throws {
        appID = try PWRemoteTool.path()
        root = try TestRuntimeRoot()
        bus = try TestBus(type: "system")
        daemon = try DaemonUnderTest(bus: bus, config: "[notifications]\nenabled=true\n",
                                     pluginDirectories: [pipewirePluginDirectory], environment: [:], start: false)
        daemon.extraArguments = ["--user-runtime-root", root.path]
    }


    /// User 1's PipeWire with a camera and a microphone, user 2's with a camera,
    /// and the daemon following both.
    func startUsers() throws -> UserPipeWire {
        let one = try root.startPipeWire(Self.user1)
        try one.addCamera("cam-one")
        try one.addMicrophone("mic-one")
        let two = try root.startPipeWire(Self.user2)
        try two.addCamera("cam-two")
        try daemon.start()
        _ = try daemon.waitForLog("following the registry of user 1's PipeWire: 1 camera(s), 1 microphone(s)")
        _ = try daemon.waitForLog("following the registry of user 2's PipeWire")
        return one
    }

    /// Runs a test's body; when it throws (a wait that ran out, an app that was
    /// disconnected), the daemon's log goes with the failure, since the test's
    /// directory, and the log in it, go with the test. (A run in CI once saw an
    /// app disconnected where its permissions were to be narrowed, and the why was
    /// in the log.)
    func withDaemonLog(_ body: () throws -> Void) throws {
        do {
            try body()
        } catch {
            Issue.record("the daemon's log:\n\(daemon.log)")
            throw error
        }
    }

    /// permissionsctl as root: store `decision` for `user`'s pwremote.
    func decide(_ decision: String, _ permission: String = "camera", user: UInt32 = Self.user1) throws {
        let r = try daemon.ctl(decision, "--user", String(user), appID, permission)
        #expect(r.status == 0, "permissionsctl \(decision): \(r.stderr)")
    }

    /// Runs `body` with the daemon's state directory on a 1 MiB tmpfs of its own (to
    /// fill) and user 1's pwremote granted the camera; `prepare` gets the state
    /// directory while the daemon is stopped after the grant. Its start again
    /// checkpoints the WAL (waited for: the name may be owned before that is over),
    /// so that a full disk refuses the next write. The daemon is stopped and the
    /// tmpfs unmounted after.
    func withGrantOnASmallDisk(prepare: (_ state: String) throws -> Void = { _ in },
                               _ body: (_ state: String) throws -> Void) throws {
        let state = daemon.stateDirectory
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try #require(mount("tmpfs", state, "tmpfs", 0, "size=1m,mode=0700") == 0)
        defer {
            daemon.stop()
            umount2(state, Int32(MNT_DETACH))
        }
        _ = try startUsers()
        try decide("grant")
        daemon.stop()
        try prepare(state)
        try daemon.start()
        try daemon.waitForEmptiedWAL()
        _ = try daemon.waitForLog("following the registry of user 1's PipeWire", count: 1)
        try body(state)
    }

    /// permissionsctl as user `uid`.
    func ctl(as uid: UInt32, _ arguments: String...) throws -> CommandResult {
        try run(binDir + "/permissionsctl", ["--address", bus.address] + arguments, asUser: uid)
    }

    func openApp(_ permission: String = "camera") throws -> PipeWireApp {
        try PipeWireApp(address: bus.address, asUser: Self.user1, permission: permission)
    }

    @Test func refusedUntilAuthorizedThenItSeesTheCameraAndNothingElse() throws {
        try withDaemonLog {
            _ = try startUsers()
            let refused = try openApp().firstAnswer()
            #expect(refused.hasPrefix("error org.example.Permissions.Error.NotAuthorized "), "\(refused)")
            #expect(refused.contains("\"not-determined\""), "\(refused)")

            try decide("grant")
            let app = try openApp()
            #expect(try app.firstAnswer() == "synced")
            // The camera, and no other device: not the microphone, not user 2's camera.
            #expect(app.registry.nodeNames == ["cam-one"], "\(app.registry.objects)")
            // What a client needs to make and link its own stream, and no more.
            let factories = Set(app.registry.objects.values.filter { $0.type == "Factory" }.compactMap { $0.properties["factory.name"] })
            #expect(factories == ["client-node", "link-factory"])
            #expect(Set(app.registry.objects.values.map(\.type)).isSubset(of: ["Core", "Factory", "Node", "Port", "Client"]),
                    "\(app.registry.objects)")
            // The microphone needs its own grant.
            let microphone = try openApp("microphone").firstAnswer()
            #expect(microphone.hasPrefix("error org.example.Permissions.Error.NotAuthorized "), "\(microphone)")
            // A permission no plugin enforces.
            let notifications = try openApp("notifications").firstAnswer()
            #expect(notifications.hasPrefix("error org.example.Permissions.Error.NotSupported "), "\(notifications)")
        }
    }

    @Test func aDenyTakesTheCameraAwayWithinASecondAndDestroysTheLinkToIt() throws {
        try withDaemonLog {
            let one = try startUsers()
            try decide("grant")
            let app = try openApp()
            #expect(try app.firstAnswer() == "synced")
            let camera = try #require(app.registry.nodeID("cam-one"))
            let stream = try app.makeStream()
            // Its own node's port, which it must see to be linked (AppAccess gives it rwx).
            try app.waitUntil("the stream's input port") { registry in
                registry.objects.values.contains { $0.type == "Port" && $0.properties["node.id"] == String(stream) }
            }
            let link = try app.link(camera, stream)
            #expect(try one.list("Link").contains("id \(link),"))

            try decide("deny")
            try app.waitUntil("the camera gone from the app's registry", timeout: 1) { $0.nodeID("cam-one") == nil }
            // PipeWire 0.3.65 keeps links when a permission goes: the service destroys it.
            let deadline = Date().addingTimeInterval(1)
            while try one.list("Link").contains("id \(link),") {
                #expect(Date() < deadline, "link \(link) still there a second after the deny")
                if Date() >= deadline { break }
            }

            // A grant brings it back, on the same connection.
            try decide("grant")
            try app.waitUntil("the camera back") { $0.nodeID("cam-one") != nil }
            // And a reset (not-determined) takes it away again.
            let reset = try daemon.ctl("reset", "--user", String(Self.user1), appID, "camera")
            #expect(reset.status == 0, "\(reset.stderr)")
            try app.waitUntil("the camera gone after a reset", timeout: 1) { $0.nodeID("cam-one") == nil }
        }
    }

    @Test func anAdminLockAndTheDeviceSwitchedOffRevokeToo() throws {
        try withDaemonLog {
            _ = try startUsers()
            try decide("grant")
            let app = try openApp()
            #expect(try app.firstAnswer() == "synced")
            #expect(app.registry.nodeID("cam-one") != nil)

            try daemon.writeConfig("[notifications]\nenabled=true\n[camera]\ndeny=\(appID)\n")
            try app.waitUntil("the camera gone under an admin lock") { $0.nodeID("cam-one") == nil }
            try daemon.writeConfig("[notifications]\nenabled=true\n")
            try app.waitUntil("the camera back without the lock") { $0.nodeID("cam-one") != nil }
            try daemon.writeConfig("[notifications]\nenabled=true\n[camera]\nenabled=false\n")
            try app.waitUntil("the camera gone while switched off") { $0.nodeID("cam-one") == nil }
        }
    }

    @Test func pipeWireRestartingWidensNothingAndTheRemoteEnds() throws {
        try withDaemonLog {
            let one = try startUsers()
            try decide("grant")
            let app = try openApp()
            #expect(try app.firstAnswer() == "synced")
            let listed = try ctl(as: Self.user1, "remotes")
            #expect(listed.stdout.contains("camera") && listed.stdout.contains(appID), "\(listed.stdout)")

            one.kill()
            _ = try app.program.lines.next { $0 == "disconnected" }
            _ = try daemon.waitForLog("remote 1: camera for \(appID) of uid 1 closed")
            let restarted = try root.startPipeWire(Self.user1)
            try restarted.addCamera("cam-one")
            try restarted.addMicrophone("mic-one")
            _ = try daemon.waitForLog("following the registry of user 1's PipeWire", count: 2)
            // A new connection after the restart sees what the first did: the camera only.
            let again = try openApp()
            #expect(try again.firstAnswer() == "synced")
            try again.waitUntil("the camera listed") { $0.nodeID("cam-one") != nil }
            #expect(again.registry.nodeNames == ["cam-one"])
        }
    }

    /// An app that closes its connection (here: exits) ends its remote: the
    /// service holds no copy that would keep it open, so the user's limit is
    /// never used up by connections apps have let go.
    @Test func anAppClosingItsConnectionEndsTheRemote() throws {
        try withDaemonLog {
            _ = try startUsers()
            try decide("grant")
            for round in 1...3 {
                let app = try openApp()
                #expect(try app.firstAnswer() == "synced")
                app.program.answer("quit")
                app.program.process.waitUntilExit()
                _ = try daemon.waitForLog("of uid 1 closed", count: round)
            }
            #expect(try ctl(as: Self.user1, "remotes", "--json").stdout == "[]\n")
        }
    }

    @Test func aLogoutEndsTheRemote() throws {
        try withDaemonLog {
            _ = try startUsers()
            try decide("grant")
            let app = try openApp()
            #expect(try app.firstAnswer() == "synced")
            try root.removeUserDirectory(Self.user1)
            _ = try app.program.lines.next { $0 == "disconnected" }
            _ = try daemon.waitForLog("remote 1: camera for \(appID) of uid 1 closed")
            #expect(try ctl(as: Self.user1, "remotes", "--json").stdout == "[]\n")
            // Without a PipeWire the camera is unsupported: no new connection.
            let refused = try openApp().firstAnswer()
            #expect(refused.hasPrefix("error org.example.Permissions.Error.NotAuthorized ") && refused.contains("unsupported"),
                    "\(refused)")
        }
    }

    @Test func aNewDaemonDestroysTheConnectionsTheOldOneMade() throws {
        try withDaemonLog {
            _ = try startUsers()
            try decide("grant")
            let app = try openApp()
            #expect(try app.firstAnswer() == "synced")
            daemon.kill()
            // Nobody narrows that connection any more: the next daemon disconnects it.
            try daemon.start()
            _ = try app.program.lines.next { $0 == "disconnected" }
            _ = try daemon.waitForLog("claims this service's access value but is none of its open connections")
        }
    }

    @Test func remotesAreListedToTheirOwnUserAndToRootOnly() throws {
        try withDaemonLog {
            _ = try startUsers()
            try decide("grant")
            let app = try openApp()
            #expect(try app.firstAnswer() == "synced")
            let own = try ctl(as: Self.user1, "remotes")
            #expect(own.stdout.contains(appID), "\(own.stdout)")
            let other = try ctl(as: Self.user2, "remotes")
            #expect(!other.stdout.contains(appID), "\(other.stdout)")
            let all = try daemon.ctl("remotes", "--json")
            #expect(all.stdout.contains("\"uid\":1,\"app\":\"\(appID)\",\"permission\":\"camera\""), "\(all.stdout)")
        }
    }

    /// The library's openPipeWireRemote(for:), as this test process (root, with a
    /// PipeWire of its own under the runtime root): why not, then a descriptor
    /// connected to that PipeWire.
    @Test func theClientLibraryOpensARemoteAndSaysWhyNot() async throws {
        let own = try root.startPipeWire(0)
        try own.addCamera("cam-root")
        try daemon.start()
        _ = try daemon.waitForLog("following the registry of user 0's PipeWire: 1 camera(s)")
        let client = try PermissionsClient(bus: .address(bus.address))
        let me = try await client.identity().appID
        do {
            _ = try await client.openPipeWireRemote(for: .camera)
            Issue.record("opened before a grant")
        } catch {
            #expect(error.code == .notAuthorized && error.message.contains("\"not-determined\""), "\(error)")
        }
        do {
            _ = try await client.openPipeWireRemote(for: .notifications)
            Issue.record("opened a permission no plugin enforces")
        } catch {
            #expect(error.code == .notSupported, "\(error)")
        }
        #expect(try daemon.ctl("grant", "--user", "0", me, "camera").status == 0)
        let fd = try await client.openPipeWireRemote(for: .camera)
        defer { close(fd) }
        // A socket whose peer is user 0's PipeWire.
        // struct ucred (pid, uid, gid), which Swift's Glibc does not declare.
        var credentials: (pid: Int32, uid: UInt32, gid: UInt32) = (0, 0, 0)
        var length = socklen_t(12)
        #expect(getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0)
        let peer = credentials.pid
        #expect(peer == own.pid, "peer \(peer), PipeWire \(String(describing: own.pid))")
        #expect(fcntl(fd, F_GETFD) & FD_CLOEXEC != 0)
    }

    /// A deny that a full disk cannot store: StorageFailed, the status unchanged,
    /// and the connection narrowed anyway (failing closed) until a decision is
    /// stored: the deny once there is room keeps it narrow, a grant widens it.
    @Test(.enabled(if: StoreFaultTests.canMountTmpfs, "needs mount(2) for a small tmpfs (root)"))
    func aDenyThatCannotBeStoredNarrowsTheConnectionAnyway() throws {
        try withGrantOnASmallDisk { state in
            let filler = try StoreFaultTests.fill(state)
            let app = try openApp()
            #expect(try app.firstAnswer() == "synced")
            #expect(app.registry.nodeID("cam-one") != nil)

            let refused = try daemon.ctl("deny", "--user", String(Self.user1), appID, "camera")
            #expect(refused.status != 0 && refused.stderr.contains("StorageFailed"), "\(refused.stderr)")
            try app.waitUntil("the camera gone though the deny was not stored", timeout: 1) { $0.nodeID("cam-one") == nil }
            #expect(try daemon.ctl("get", "--user", String(Self.user1), appID, "camera").stdout == "authorized\n")
            #expect(try ctl(as: Self.user1, "remotes").stdout.contains("denied"))

            #expect(unlink(filler) == 0)
            try decide("grant")
            try app.waitUntil("the camera back once a grant is stored") { $0.nodeID("cam-one") != nil }
        }
    }
}
