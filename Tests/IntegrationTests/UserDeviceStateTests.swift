import Foundation
import Testing
import PermissionsTestSupport

/// Camera and microphone per user: each user's status, details and signals come
/// from their own PipeWire only (the plugin's publish_for_user), on a stand-in
/// system bus with clients running as users 1 and 2.
@Suite("Device state per user", .serialized)
struct UserDeviceStateTests {
    static let user1: UInt32 = 1
    static let user2: UInt32 = 2

    let root: TestRuntimeRoot
    let bus: TestBus
    let daemon: DaemonUnderTest

    init() throws {
        root = try TestRuntimeRoot()
        bus = try TestBus(type: "system")
        daemon = try DaemonUnderTest(bus: bus, config: "[notifications]\nenabled=true\n",
                                     pluginDirectories: [pipewirePluginDirectory], environment: [:], start: false)
        daemon.extraArguments = ["--user-runtime-root", root.path]
    }

    func status(_ permission: String, as uid: UInt32) throws -> String {
        try bus.status(permission, as: uid)
    }

    func details(_ permission: String, as uid: UInt32) throws -> String {
        try run(binDir + "/permissionsctl", ["--address", bus.address, "status", permission], asUser: uid).stdout
    }

    func waitForStatus(_ permission: String, as uid: UInt32, _ expected: String) throws {
        try bus.waitForStatus(permission, as: uid, expected)
    }

    func monitor(as uid: UInt32, _ options: String...) throws -> RunningProgram {
        let monitor = try RunningProgram(binDir + "/permissionsctl", ["--address", bus.address, "monitor"] + options,
                                         asUser: uid)
        _ = try monitor.lines.next { $0.hasPrefix("Monitoring") }
        return monitor
    }

    @Test func eachUserSeesTheirOwnPipeWireAndHearsOnlyTheirOwnChanges() throws {
        let one = try root.startPipeWire(Self.user1)
        try one.addCamera("cam-one")
        try root.makeUserDirectory(Self.user2)
        try daemon.start()
        _ = try daemon.waitForLog("following the registry of user 1's PipeWire")

        try waitForStatus("camera", as: Self.user1, "not-determined")
        #expect(try status("camera", as: Self.user2) == "s \"unsupported\"")
        #expect(try status("microphone", as: Self.user1) == "s \"unsupported\"")
        // Root (uid 0, no PipeWire of its own) and the machine-wide view: unsupported.
        #expect(try daemon.call("GetStatus", "s", "camera").stdout == "s \"unsupported\"\n")
        // GetDetails lists the caller's own devices only.
        #expect(try details("camera", as: Self.user1).contains("name=cam-one"))
        let other = try details("camera", as: Self.user2)
        #expect(!other.contains("cam-one") && other.contains("service-state: unsupported"), "\(other)")

        let monitor1 = try monitor(as: Self.user1)
        let monitor2 = try monitor(as: Self.user2)
        let broadcast = try monitor(as: Self.user2, "--broadcast")
        try one.removeNode("cam-one")
        _ = try monitor1.lines.next { $0.hasPrefix("StatusChanged app=* permission=camera status=unsupported") }

        // User 2's PipeWire starts later, with a microphone: followed, and theirs alone.
        let two = try root.startPipeWire(Self.user2)
        try two.addMicrophone("mic-two")
        _ = try monitor2.lines.next { $0.hasPrefix("StatusChanged app=* permission=microphone status=not-determined") }
        #expect(try status("microphone", as: Self.user2) == "s \"not-determined\"")
        #expect(try status("microphone", as: Self.user1) == "s \"unsupported\"")

        // The fence: an everyone-level change every stream gets; signals arrive in
        // order, so anything leaked to another stream would have come before it.
        try daemon.writeConfig("[notifications]\nenabled=true\ndeny=org.example.Fence\n")
        for monitor in [monitor1, monitor2, broadcast] {
            _ = try monitor.lines.next { $0.hasPrefix("StatusChanged app=org.example.Fence ") }
        }
        let fence = "StatusChanged app=org.example.Fence permission=notifications status=restricted"
        #expect(monitor1.statusChanges.map(stripSerial) == [
            "StatusChanged app=* permission=camera status=unsupported", fence])
        #expect(monitor2.statusChanges.map(stripSerial) == [
            "StatusChanged app=* permission=microphone status=not-determined", fence])
        #expect(broadcast.statusChanges.map(stripSerial) == [fence])
    }

    /// The C example's disabled-for= (publish_for_user from C): that user alone reads
    /// "disabled"; once the key goes, they read everyone's state again.
    @Test func theCExamplePublishesForOneUser() throws {
        let library = try PlatformTests.buildExample()
        let plugins = try makeTemporaryDirectory("example-per-user")
        defer { try? FileManager.default.removeItem(atPath: plugins) }
        try FileManager.default.copyItem(atPath: library, toPath: plugins + "/libpermissions-example-lan.so")
        let daemon = try DaemonUnderTest(bus: bus, config: "[example-lan]\ndisabled-for=1\n",
                                         pluginDirectories: [plugins], environment: [:])
        try waitForStatus("example-lan", as: Self.user1, "disabled")
        #expect(try status("example-lan", as: Self.user2) == "s \"not-determined\"")
        let monitor2 = try monitor(as: Self.user2)
        try daemon.writeConfig("[example-lan]\n")
        try waitForStatus("example-lan", as: Self.user1, "not-determined")
        // User 2's state never changed: a change of their own is the fence.
        try daemon.writeConfig("[example-lan]\ndisabled-for=2\n")
        _ = try monitor2.lines.next { $0.hasPrefix("StatusChanged app=* permission=example-lan status=disabled") }
        #expect(monitor2.statusChanges.map(stripSerial) == ["StatusChanged app=* permission=example-lan status=disabled"])
    }
}
