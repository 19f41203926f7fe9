import DBusKit

// bluetoothd's objects as the plugin follows them: the names it uses on the bus,
// the signals decoded into events, and the adapter table those events change. No
// I/O here; BlueZFollower feeds it.

enum BlueZ {
    static let service = "org.bluez"
    static let adapterInterface = "org.bluez.Adapter1"
    static let objectManager = "org.freedesktop.DBus.ObjectManager"
    static let properties = "org.freedesktop.DBus.Properties"
    static let busDriver = "org.freedesktop.DBus"
}

/// A signal about bluetoothd's objects, decoded.
enum BlueZEvent: Equatable {
    /// InterfacesAdded; `adapter` holds the Adapter1 properties when the object has
    /// that interface (nil for devices, players and the like).
    case interfacesAdded(path: String, adapter: [String: DBusValue]?)
    /// InterfacesRemoved; `adapterRemoved` when the list names Adapter1.
    case interfacesRemoved(path: String, adapterRemoved: Bool)
    /// PropertiesChanged on Adapter1.
    case adapterPropertiesChanged(path: String, changed: [String: DBusValue], invalidated: [String])
    /// NameOwnerChanged for org.bluez; nil owners for "none".
    case ownerChanged(old: String?, new: String?)

    /// Decodes one signal, or nil if it is not one of ours or is malformed (a
    /// malformed signal is dropped, never trusted in part).
    init?(interface: String?, member: String?, path: String?, arguments args: [DBusValue]) {
        switch (interface, member) {
        case (BlueZ.objectManager, "InterfacesAdded"):
            guard args.count >= 2, let object = args[0].stringValue,
                  let interfaces = args[1].stringKeyedEntries else { return nil }
            let adapter = interfaces.first { $0.0 == BlueZ.adapterInterface }
            self = .interfacesAdded(path: object,
                                    adapter: adapter.map { Dictionary($0.1.stringKeyedEntries ?? [], uniquingKeysWith: { $1 }) })
        case (BlueZ.objectManager, "InterfacesRemoved"):
            guard args.count >= 2, let object = args[0].stringValue, let names = args[1].stringArray else { return nil }
            self = .interfacesRemoved(path: object, adapterRemoved: names.contains(BlueZ.adapterInterface))
        case (BlueZ.properties, "PropertiesChanged"):
            guard let path, args.count >= 3, args[0].stringValue == BlueZ.adapterInterface,
                  let changed = args[1].stringKeyedEntries, let invalidated = args[2].stringArray else { return nil }
            self = .adapterPropertiesChanged(path: path, changed: Dictionary(changed, uniquingKeysWith: { $1 }),
                                             invalidated: invalidated)
        case (BlueZ.busDriver, "NameOwnerChanged"):
            guard args.count >= 3, args[0].stringValue == BlueZ.service,
                  let old = args[1].stringValue, let new = args[2].stringValue else { return nil }
            self = .ownerChanged(old: old.isEmpty ? nil : old, new: new.isEmpty ? nil : new)
        default:
            return nil
        }
    }
}

/// The Adapter1 objects in a GetManagedObjects reply (`a{oa{sa{sv}}}`), by path;
/// nil if the reply does not have that shape.
func adapterObjects(inManagedObjects args: [DBusValue]) -> [String: [String: DBusValue]]? {
    guard let objects = args.first?.stringKeyedEntries else { return nil }
    var adapters: [String: [String: DBusValue]] = [:]
    for (path, interfaces) in objects {
        guard let entry = interfaces.stringKeyedEntries?.first(where: { $0.0 == BlueZ.adapterInterface }) else { continue }
        adapters[path] = Dictionary(entry.1.stringKeyedEntries ?? [], uniquingKeysWith: { $1 })
    }
    return adapters
}

/// The adapters of the bluetoothd instance that owns org.bluez.
///
/// Ordering makes this simple: a reply and the signals of one sender reach us in
/// the order it sent them. So a GetManagedObjects reply already contains every
/// change signalled before it, and signals that come before the reply can be
/// dropped; after it, each signal applies on top. Signals from anyone but the
/// current owner (a previous instance, a late message) are dropped too.
struct BlueZTable {
    /// bluetoothd's unique name while it owns org.bluez.
    private(set) var owner: String?
    /// True once GetManagedObjects has answered for `owner`.
    private(set) var synced = false
    private(set) var adapters: [String: Adapter] = [:]

    /// What applying a signal did.
    enum Outcome: Equatable {
        case ignored
        case applied
        /// Applied, and these properties of the adapter at `path` must be fetched again.
        case refetch(path: String)
    }

    /// A new owner, or none: whatever we knew is gone (bluetoothd re-creates its
    /// objects when it starts).
    mutating func reset(owner newOwner: String?) {
        owner = newOwner
        synced = false
        adapters = [:]
    }

    /// Installs the GetManagedObjects reply from `sender`; false if it came from an
    /// instance that is no longer the owner.
    mutating func load(_ objects: [String: [String: DBusValue]], from sender: String) -> Bool {
        guard sender == owner else { return false }
        adapters = [:]
        for (path, properties) in objects { adapters[path] = Self.adapter(path, properties) }
        synced = true
        return true
    }

    mutating func apply(_ event: BlueZEvent, from sender: String?) -> Outcome {
        guard synced, let owner, sender == owner else { return .ignored }
        switch event {
        case .interfacesAdded(let path, let properties?):
            adapters[path] = Self.adapter(path, properties)
        case .interfacesAdded:
            return .ignored
        case .interfacesRemoved(let path, true):
            guard adapters.removeValue(forKey: path) != nil else { return .ignored }
        case .interfacesRemoved:
            return .ignored
        case .adapterPropertiesChanged(let path, let changed, let invalidated):
            guard var adapter = adapters[path] else { return .ignored }
            adapter.apply(changed.map { ($0.key, $0.value) })
            let mustFetch = adapter.invalidate(invalidated)
            adapters[path] = adapter
            if mustFetch { return .refetch(path: path) }
        case .ownerChanged:
            return .ignored  // the follower handles owners, with reset(owner:)
        }
        return .applied
    }

    /// Applies the answer to Properties.GetAll for one adapter (after a refetch).
    mutating func refreshed(_ path: String, _ properties: [String: DBusValue], from sender: String) -> Bool {
        guard synced, sender == owner, var adapter = adapters[path] else { return false }
        adapter.apply(properties.map { ($0.key, $0.value) })
        adapters[path] = adapter
        return true
    }

    private static func adapter(_ path: String, _ properties: [String: DBusValue]) -> Adapter {
        var adapter = Adapter(path: path)
        // Sorted, so that a dictionary's order cannot change the outcome.
        adapter.apply(properties.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
        return adapter
    }
}
