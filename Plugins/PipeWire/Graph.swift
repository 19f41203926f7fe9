// What a manager connection knows of its PipeWire's graph beyond the devices:
// enough to tell what an app's restricted client may reach (AppAccess.swift).
// Filled from the registry's `global` events, whose properties carry all of it,
// so nothing is bound. On the loop's thread.

struct Graph {
    struct Node: Equatable {
        /// `media.class`; nil for a node without one.
        var mediaClass: String?
        /// `client.id`: the client that made it (an app's own stream), if any.
        var client: UInt32?
    }

    struct Link: Equatable {
        /// `link.output.node` and `link.input.node`.
        var output: UInt32
        var input: UInt32
    }

    var nodes: [UInt32: Node] = [:]
    /// Port id to the node it belongs to (`node.id`).
    var ports: [UInt32: UInt32] = [:]
    var links: [UInt32: Link] = [:]
    /// Factory id to its `factory.name`.
    var factories: [UInt32: String] = [:]
    /// Clients whose `pipewire.access` is ours (AppRemote.accessValue), with their
    /// `application.name`, which carries the remote's token while it is opened.
    var ourClients: [UInt32: String] = [:]

    /// Whether `id` is an object this graph follows (and may give a client bits on).
    func isKnown(_ id: UInt32) -> Bool {
        nodes[id] != nil || ports[id] != nil || links[id] != nil || factories[id] != nil
    }

    /// Forgets a global that went; true if it was one this graph follows.
    @discardableResult
    mutating func remove(_ id: UInt32) -> Bool {
        nodes.removeValue(forKey: id) != nil || ports.removeValue(forKey: id) != nil
            || links.removeValue(forKey: id) != nil || factories.removeValue(forKey: id) != nil
            || ourClients.removeValue(forKey: id) != nil
    }
}
