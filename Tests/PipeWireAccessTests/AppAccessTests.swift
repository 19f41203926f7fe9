// Unit tests of enforcement's rule (AppAccess): what an app's restricted client
// may reach in a graph, and which links go. Pure functions over a Graph; the
// end-to-end behaviour with a real PipeWire is in IntegrationTests/EnforcementTests.
import PipeWireAccess
import Testing

@Suite struct AppAccessTests {
    static let rx = AppAccess.read | AppAccess.execute
    static let rwx = AppAccess.read | AppAccess.write | AppAccess.execute
    static let app: UInt32 = 50

    /// Two cameras (one virtual), a microphone, a sink, another app's stream, the
    /// app's own stream; their ports; factories; links.
    static var graph: Graph {
        var g = Graph()
        g.nodes = [10: .init(mediaClass: "Video/Source"), 11: .init(mediaClass: "Video/Source/Virtual"),
                   12: .init(mediaClass: "Audio/Source"), 13: .init(mediaClass: "Audio/Sink"),
                   14: .init(mediaClass: "Stream/Input/Video", client: 60),
                   15: .init(mediaClass: "Stream/Input/Video", client: app), 16: .init(mediaClass: nil)]
        g.ports = [20: 10, 21: 12, 22: 15, 23: 14]
        g.factories = [30: "client-node", 31: "link-factory", 32: "adapter", 33: "spa-node-factory"]
        // 40: camera to the app's stream; 41: microphone to the app's stream; 42:
        // camera to another app's stream; 43: the app's stream to another app's.
        g.links = [40: .init(output: 10, input: 15), 41: .init(output: 12, input: 15),
                   42: .init(output: 10, input: 14), 43: .init(output: 15, input: 14)]
        return g
    }

    @Test func aGrantedCameraClientReachesTheCamerasItsOwnAndWhatAStreamNeeds() {
        let reach = AppAccess.reach(client: Self.app, permission: .camera, granted: true, graph: Self.graph)
        #expect(reach == [0: Self.rx, Self.app: Self.rwx, 30: Self.rx, 31: Self.rx,
                          10: Self.rx, 11: Self.rx, 20: Self.rx, 15: Self.rwx, 22: Self.rwx, 40: Self.rx])
    }

    @Test func withoutTheGrantOnlyItsOwnRemains() {
        let reach = AppAccess.reach(client: Self.app, permission: .camera, granted: false, graph: Self.graph)
        #expect(reach == [0: Self.rx, Self.app: Self.rwx, 30: Self.rx, 31: Self.rx, 15: Self.rwx, 22: Self.rwx])
    }

    @Test func aMicrophoneClientReachesTheMicrophoneNotTheCameras() {
        let reach = AppAccess.reach(client: Self.app, permission: .microphone, granted: true, graph: Self.graph)
        #expect(reach[12] == Self.rx && reach[21] == Self.rx && reach[41] == Self.rx)
        #expect(reach[10] == nil && reach[11] == nil && reach[40] == nil)
    }

    @Test func linksToWhatItMayNotReachGoWhoeverMadeThem() {
        // Granted the camera: the microphone's link and the one to another app go;
        // links between other clients are not its business.
        #expect(AppAccess.forbiddenLinks(client: Self.app, permission: .camera, granted: true, graph: Self.graph)
                == [41, 43])
        #expect(AppAccess.forbiddenLinks(client: Self.app, permission: .camera, granted: false, graph: Self.graph)
                == [40, 41, 43])
        #expect(AppAccess.forbiddenLinks(client: Self.app, permission: .microphone, granted: true, graph: Self.graph)
                == [40, 43])
    }

    @Test func aGraphForgetsWhatWent() {
        var g = Self.graph
        let removed = g.remove(10), absent = g.remove(999)
        #expect(removed && !absent && !g.allIDs.contains(10))
        g.ourClients[70] = "permissionsd remote x"
        g.others.insert(80)
        let client = g.remove(70), other = g.remove(80)
        #expect(client && other && g.ourClients.isEmpty && g.others.isEmpty)
    }
}
