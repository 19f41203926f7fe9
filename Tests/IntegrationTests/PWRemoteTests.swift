import Foundation
import Testing
import PermissionsTestSupport

/// Tests/testenv/pwremote, the app that tests of OpenPipeWireRemote and of
/// WirePlumber run, against a user's real PipeWire with its own socket: what it
/// prints unrestricted (its registry with its permissions on each global, its own
/// stream's node, a link it makes), and with no permissions (busy until a manager
/// grants some; a PipeWire that goes away).
@Suite("pwremote", .serialized)
struct PWRemoteTests {
    /// The id of the first "global ID TYPE ..." line that `matches`.
    static func globalID(_ app: RunningProgram, _ matches: (String) -> Bool) throws -> String {
        let line = try app.lines.wait(what: "a matching global") { $0.contains { $0.hasPrefix("global ") && matches($0) } }
            .first { $0.hasPrefix("global ") && matches($0) }!
        return String(line.split(separator: " ")[1])
    }

    @Test func anUnrestrictedAppListsMakesAStreamAndLinksItToTheCamera() throws {
        let root = try TestRuntimeRoot()
        let pipewire = try root.startPipeWire(1)
        defer { withExtendedLifetime(root) {} }
        try pipewire.addCamera("cam")
        try pipewire.addMicrophone("mic")
        let app = try pipewire.app()
        try app.lines.next { $0 == "synced" }
        let camera = try Self.globalID(app) { $0.contains(" Node perms=rwxm media.class=Video/Source node.name=cam") }
        _ = try Self.globalID(app) { $0.contains(" Node perms=rwxm media.class=Audio/Source node.name=mic") }
        _ = try Self.globalID(app) { $0.hasSuffix(" Factory perms=rwxm factory.name=link-factory") }
        _ = try Self.globalID(app) { $0.hasSuffix(" Client perms=rwxm pipewire.access=unrestricted application.name=pwremote") }

        app.answer("stream")
        let node = try app.lines.next { $0.hasPrefix("stream-node ") }.dropFirst("stream-node ".count)
        _ = try Self.globalID(app) { $0.hasPrefix("global \(node) Node ") && $0.contains(" media.class=Stream/Input/Video ") }
        app.answer("link \(camera) \(node)")
        let link = try app.lines.next { $0.hasPrefix("link ") || $0.hasPrefix("link-error ") }
        #expect(link.hasPrefix("link "), "\(app.lines.all)")
        let linkID = String(link.dropFirst("link ".count))
        _ = try Self.globalID(app) {
            $0.hasPrefix("global \(linkID) Link ") && $0.contains(" link.output.node=\(camera) link.input.node=\(node) ")
        }
        // The link as the user's own tools see it.
        #expect(try pipewire.objectID("Link", "link.input.node", String(node)) == UInt32(linkID))

        // A second stream: by node ids alone, the camera's one video port, linked
        // already and not a mixing one, is not found; with the ports named, the
        // link is made.
        app.answer("stream")
        let second = try app.lines.next { $0.hasPrefix("stream-node ") }.dropFirst("stream-node ".count)
        let cameraPort = try Self.globalID(app) { $0.contains(" Port ") && $0.contains(" node.id=\(camera) port.direction=out ") }
        let secondPort = try Self.globalID(app) { $0.contains(" Port ") && $0.contains(" node.id=\(second) port.direction=in ") }
        app.answer("link \(camera) \(second)")
        let refused = try app.lines.next { $0.hasPrefix("link ") || $0.hasPrefix("link-error ") }
        #expect(refused.hasPrefix("link-error -22 link-factory: unknown output port"), "\(refused)")
        try app.lines.next { $0.hasPrefix("core-error ") && $0.hasSuffix(" -22 link-factory: unknown output port (null)") }
        app.answer("link \(camera) \(second) \(cameraPort) \(secondPort)")
        let made = try app.lines.next { $0.hasPrefix("link ") || $0.hasPrefix("link-error ") }
        #expect(made.hasPrefix("link "), "\(app.lines.all)")
        app.answer("quit")
        app.process.waitUntilExit()
        #expect(app.process.terminationStatus == 0)
    }

    @Test func anAppWithNoPermissionsIsBusyUntilAManagerGrantsSome() throws {
        let root = try TestRuntimeRoot()
        let pipewire = try root.startPipeWire(1)
        defer { withExtendedLifetime(root) {} }
        try pipewire.addCamera("cam")
        // Its own pipewire.access: module-access leaves it alone, with nothing.
        let app = try pipewire.app(access: "org.example.permissions")
        try app.errors?.next { $0 == "busy" }
        #expect(app.lines.all.isEmpty, "\(app.lines.all)")

        // R and X on the core alone: it is read, and sees the core alone.
        let client = try pipewire.objectID("Client", "pipewire.access", "org.example.permissions")
        try pipewire.setPermissions(client: client, object: 0, "0500")
        try app.lines.next { $0 == "synced" }
        #expect(app.lines.all == ["global 0 Core perms=r-x-", "synced"])
        // And the camera: it appears.
        let camera = try pipewire.objectID("Node", "node.name", "cam")
        try pipewire.setPermissions(client: client, object: Int64(camera), "0500")
        try app.lines.next { $0 == "global \(camera) Node perms=r-x- media.class=Video/Source node.name=cam" }
        // Taken away: it goes.
        try pipewire.setPermissions(client: client, object: Int64(camera), "0")
        try app.lines.next { $0 == "remove \(camera)" }

        // PipeWire goes: the app says so and exits 3.
        pipewire.kill()
        try app.lines.next { $0 == "disconnected" }
        app.process.waitUntilExit()
        #expect(app.process.terminationStatus == 3)
    }
}
