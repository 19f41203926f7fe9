// The devices seen on one connection (what counts as one: PipeWireAccess's
// DevicePermission).
import PipeWireAccess

/// One camera or microphone node, as the registry announced it.
struct Device: Equatable, Sendable {
    var permission: DevicePermission
    /// `object.serial`: unique for the life of the PipeWire daemon, unlike the
    /// registry id, which PipeWire hands to the next object at once. Nil only on a
    /// PipeWire too old to have serials (before 0.3.41).
    var serial: UInt64?
    var name: String
    var description: String
    var mediaClass: String

    /// The key/value list a settings panel shows (GetDetails' `devices`).
    var properties: [(key: String, value: String)] {
        var list = [("name", name), ("description", description)]
        if let serial { list.append(("serial", String(serial))) }
        list.append(("media-class", mediaClass))
        return list
    }
}

/// The cameras and microphones of one PipeWire connection, by registry id.
///
/// The id is only the handle that `global_remove` names. PipeWire reuses it for
/// the next object immediately, but on one connection it always sends the
/// `global_remove` of the old object before the `global` of the new one, in
/// order; so "the device at id N" is always well defined, and a remove followed
/// by an add of the same id is two real transitions. What is published identifies
/// a device by its serial.
struct DeviceTable {
    private var byID: [UInt32: Device] = [:]

    /// Records the node now at `id`; returns the device it replaced, if any.
    @discardableResult
    mutating func insert(_ device: Device, id: UInt32) -> Device? {
        byID.updateValue(device, forKey: id)
    }

    /// Forgets the node at `id`; returns it if it was a camera or microphone.
    mutating func remove(id: UInt32) -> Device? {
        byID.removeValue(forKey: id)
    }

    mutating func removeAll() {
        byID.removeAll()
    }

    /// The devices behind one permission, oldest first (by serial), so that the
    /// list a panel shows does not reshuffle when a device comes or goes.
    func devices(for permission: DevicePermission) -> [Device] {
        byID.filter { $0.value.permission == permission }
            .sorted { ($0.value.serial ?? UInt64($0.key), $0.key) < ($1.value.serial ?? UInt64($1.key), $1.key) }
            .map(\.value)
    }
}
