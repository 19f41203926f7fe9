// What an app's restricted client may reach in its user's PipeWire: the rule of
// enforcement, as a pure function of the graph, so that it is tested without a
// PipeWire (Tests/PipeWireAccessTests). A module of its own, linked into the
// plugin: the test bundle cannot link a second plugin's entry point.
//
// PipeWire checks these bits on every object (pw_impl_client_update_permissions):
// R lets the client see the object in its registry and bind it, W change it, X
// call its methods (a factory's create_object, a node's), M set metadata. An
// object the client has no entry for gets the default, which for our clients is
// 0: they connect with an access value of their own, so module-access grants
// nothing and nobody else does (WirePlumber's drop-ins).

public enum AppAccess {
    public static let read: UInt32 = 0o400
    public static let write: UInt32 = 0o200
    public static let execute: UInt32 = 0o100

    /// The factories a client needs to make its own stream (client-node) and to
    /// link it to a node it may see (link-factory).
    public static let factories: Set<String> = ["client-node", "link-factory"]

    /// Every object `client` may reach, with its bits; every other object is 0.
    /// - the core (id 0): rx, without which the client's socket is not even read;
    /// - its own client object: rwx;
    /// - the client-node and link factories: rx;
    /// - its own nodes and their ports: rwx;
    /// - while `granted`, the source nodes of `permission` (their `media.class`)
    ///   and their ports: rx;
    /// - links between its own nodes and nodes it may reach: rx.
    public static func reach(client: UInt32, permission: DevicePermission, granted: Bool,
                      graph: Graph) -> [UInt32: UInt32] {
        var bits: [UInt32: UInt32] = [0: read | execute, client: read | write | execute]
        for (id, name) in graph.factories where factories.contains(name) { bits[id] = read | execute }
        var nodeBits: [UInt32: UInt32] = [:]
        for (id, node) in graph.nodes {
            if node.client == client {
                nodeBits[id] = read | write | execute
            } else if granted, isGranted(node, permission) {
                nodeBits[id] = read | execute
            }
        }
        bits.merge(nodeBits) { a, _ in a }
        for (id, node) in graph.ports { if let b = nodeBits[node] { bits[id] = b } }
        for (id, link) in graph.links where isOwn(link, client, graph) {
            if nodeBits[link.output] != nil, nodeBits[link.input] != nil { bits[id] = read | execute }
        }
        return bits
    }

    /// The links to destroy: between one of `client`'s nodes and a node it may
    /// not reach (another app's, a device of another permission, or any source
    /// once not `granted`), whoever made them. PipeWire 0.3.65 does not destroy a
    /// link when a node's permission is taken away, and a session manager links
    /// with its own rights.
    public static func forbiddenLinks(client: UInt32, permission: DevicePermission, granted: Bool,
                               graph: Graph) -> [UInt32] {
        func reachable(_ id: UInt32) -> Bool {
            guard let node = graph.nodes[id] else { return false }
            return node.client == client || (granted && isGranted(node, permission))
        }
        return graph.links.filter { isOwn($0.value, client, graph) }
            .filter { !reachable($0.value.output) || !reachable($0.value.input) }
            .map(\.key).sorted()
    }

    /// A link with one end at one of the client's own nodes.
    private static func isOwn(_ link: Graph.Link, _ client: UInt32, _ graph: Graph) -> Bool {
        graph.nodes[link.output]?.client == client || graph.nodes[link.input]?.client == client
    }

    /// A device of the permission: a source of its media class (Devices.swift),
    /// not an app's stream.
    private static func isGranted(_ node: Graph.Node, _ permission: DevicePermission) -> Bool {
        node.mediaClass.flatMap(DevicePermission.init(mediaClass:)) == permission
    }
}
