// What a manager connection knows of its PipeWire's graph beyond the devices:
// enough to tell what an app's restricted client may reach (AppAccess.swift).
// Filled from the registry's `global` events, whose properties carry all of it,
// so nothing is bound. On the loop's thread.

public struct Graph {
    public init() {}

    public struct Node: Equatable, Sendable {
        /// `media.class`; nil for a node without one.
        public var mediaClass: String?
        /// `client.id`: the client that made it (an app's own stream), if any.
        public var client: UInt32?

        public init(mediaClass: String?, client: UInt32? = nil) {
            self.mediaClass = mediaClass
            self.client = client
        }
    }

    public struct Link: Equatable, Sendable {
        /// `link.output.node` and `link.input.node`.
        public var output: UInt32
        public var input: UInt32

        public init(output: UInt32, input: UInt32) {
            self.output = output
            self.input = input
        }
    }

    public var nodes: [UInt32: Node] = [:]
    /// Port id to the node it belongs to (`node.id`).
    public var ports: [UInt32: UInt32] = [:]
    public var links: [UInt32: Link] = [:]
    /// Factory id to its `factory.name`.
    public var factories: [UInt32: String] = [:]
    /// Clients whose `pipewire.access` is ours (AppRemote.accessValue), with their
    /// `application.name`, which carries the remote's token while it is opened.
    public var ourClients: [UInt32: String] = [:]
    /// Every other global (devices, modules, metadata, other clients, ...): an app's
    /// client gets an explicit 0 on each, so that no session manager's change of
    /// its default permissions can widen what it reaches.
    public var others = Set<UInt32>()

    /// Every global this graph knows of.
    public var allIDs: Set<UInt32> {
        Set(nodes.keys).union(ports.keys).union(links.keys).union(factories.keys).union(ourClients.keys).union(others)
    }

    /// Forgets a global that went; true if it was one this graph follows.
    @discardableResult
    public mutating func remove(_ id: UInt32) -> Bool {
        nodes.removeValue(forKey: id) != nil || ports.removeValue(forKey: id) != nil
            || links.removeValue(forKey: id) != nil || factories.removeValue(forKey: id) != nil
            || ourClients.removeValue(forKey: id) != nil || others.remove(id) != nil
    }
}
