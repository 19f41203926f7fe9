import PipeWireAccess
internal import CPipeWire
internal import CPipeWireShims
internal import Glibc

// The C callbacks PipeWire calls on its thread loop's thread. They are plain global
// functions in a file without top-level code: closures in main.swift would be
// inferred @MainActor and trap when called from another thread (pitfall S1). Each
// recovers the watcher or one of its remotes from `data`, an unretained pointer:
// the plugin state holds the watcher until fini has joined the thread, so it
// outlives every callback.

private func watcher(_ data: UnsafeMutableRawPointer?) -> PipeWireWatcher {
    Unmanaged<PipeWireWatcher>.fromOpaque(data!).takeUnretainedValue()
}

/// The remote a connection's callbacks belong to: unretained, because the watcher
/// holds it until its timer and listeners are removed (`PipeWireRemote.close`).
private func remote(_ data: UnsafeMutableRawPointer?) -> PipeWireRemote {
    Unmanaged<PipeWireRemote>.fromOpaque(data!).takeUnretainedValue()
}

func pipewireRetryTimer(_ data: UnsafeMutableRawPointer?, _ expirations: UInt64) {
    remote(data).retryTimerFired()
}

func pipewireThrottleTimer(_ data: UnsafeMutableRawPointer?, _ expirations: UInt64) {
    watcher(data).throttleTimerFired()
}

func pipewireConfigEvent(_ data: UnsafeMutableRawPointer?, _ count: UInt64) {
    watcher(data).configEventFired()
}

func pipewireDirectoriesReadable(_ data: UnsafeMutableRawPointer?, _ fd: Int32, _ mask: UInt32) {
    watcher(data).directoriesReadable()
}

func pipewireCoreDone(_ data: UnsafeMutableRawPointer?, _ id: UInt32, _ seq: Int32) {
    remote(data).coreDone(id: id, seq: seq)
}

func pipewireCoreError(_ data: UnsafeMutableRawPointer?, _ id: UInt32, _ seq: Int32, _ res: Int32,
                       _ message: UnsafePointer<CChar>?) {
    remote(data).coreError(id: id, res: res, message: message.map { String(cString: $0) } ?? "")
}

/// The node type name, fetched once: `global` compares it for every object. It
/// points at a string literal in the shim library, never written, so sharing the
/// pointer between threads is safe.
nonisolated(unsafe) private let nodeType: UnsafePointer<CChar> = cpw_type_interface_node()
// The same for the other types enforcement follows (Graph.swift).
nonisolated(unsafe) private let portType: UnsafePointer<CChar> = cpw_type_interface_port()
nonisolated(unsafe) private let linkType: UnsafePointer<CChar> = cpw_type_interface_link()
nonisolated(unsafe) private let factoryType: UnsafePointer<CChar> = cpw_type_interface_factory()
nonisolated(unsafe) private let clientType: UnsafePointer<CChar> = cpw_type_interface_client()

func pipewireRegistryGlobal(_ data: UnsafeMutableRawPointer?, _ id: UInt32, _ permissions: UInt32,
                            _ type: UnsafePointer<CChar>?, _ version: UInt32, _ props: UnsafePointer<spa_dict>?) {
    guard let type else { return }
    func value(_ key: String) -> String? {
        guard let props, let v = spa_dict_lookup(props, key) else { return nil }
        return String(cString: v)
    }
    func number(_ key: String) -> UInt32? { value(key).flatMap { UInt32($0) } }
    let remote = remote(data)
    if strcmp(type, nodeType) == 0 {
        remote.nodeAppeared(id: id, device: device(from: props),
                            node: Graph.Node(mediaClass: value(PW_KEY_MEDIA_CLASS), client: number(PW_KEY_CLIENT_ID)))
    } else if strcmp(type, portType) == 0, let node = number(PW_KEY_NODE_ID) {
        remote.otherGlobalAppeared(id: id) { $0.ports[id] = node }
    } else if strcmp(type, linkType) == 0, let output = number(PW_KEY_LINK_OUTPUT_NODE),
              let input = number(PW_KEY_LINK_INPUT_NODE) {
        remote.otherGlobalAppeared(id: id) { $0.links[id] = Graph.Link(output: output, input: input) }
    } else if strcmp(type, factoryType) == 0, let name = value(PW_KEY_FACTORY_NAME) {
        remote.otherGlobalAppeared(id: id) { $0.factories[id] = name }
    } else if strcmp(type, clientType) == 0, value(PW_KEY_ACCESS) == AppRemote.accessValue {
        remote.ourClientAppeared(id: id, name: value(PW_KEY_APP_NAME) ?? "")
    } else {
        remote.otherGlobalAppeared(id: id) { $0.others.insert(id) }
    }
}

func pipewireRegistryGlobalRemove(_ data: UnsafeMutableRawPointer?, _ id: UInt32) {
    remote(data).globalRemoved(id: id)
}

/// The camera or microphone a node's global properties describe, or nil. The
/// registry's `global` event carries `media.class`, `node.name`,
/// `node.description` and `object.serial`, so no node needs to be bound.
func device(from props: UnsafePointer<spa_dict>?) -> Device? {
    func value(_ key: String) -> String? {
        guard let props, let v = spa_dict_lookup(props, key) else { return nil }
        return String(cString: v)
    }
    guard let mediaClass = value(PW_KEY_MEDIA_CLASS),
          let permission = DevicePermission(mediaClass: mediaClass)
    else { return nil }
    let name = value(PW_KEY_NODE_NAME) ?? ""
    // A panel needs something to show: the description, else the nick, else the name.
    let description = value(PW_KEY_NODE_DESCRIPTION) ?? value(PW_KEY_NODE_NICK) ?? name
    return Device(permission: permission, serial: value(PW_KEY_OBJECT_SERIAL).flatMap { UInt64($0) },
                  name: name, description: description, mediaClass: mediaClass)
}
