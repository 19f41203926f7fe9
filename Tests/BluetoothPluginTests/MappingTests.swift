// Unit tests of the pure parts: adapter properties, the status mapping, signal
// decoding and the adapter table. They need no bus and no kernel. The plugin's
// internals are reached with @testable import (debug builds enable testability).
@testable import BluetoothPlugin
import DBusKit
import PluginKit
import Testing
import SystemPrimitives
import PermissionsModel

/// Adapter1 properties as bluetoothd sends them (`a{sv}` entries).
func adapterProperties(address: String = "00:01:02:03:04:05", name: String = "host", alias: String? = nil,
                       powered: Bool = true, powerState: String? = nil) -> [String: DBusValue] {
    var p: [String: DBusValue] = [
        "Address": .variant(.string(address)), "Name": .variant(.string(name)),
        "Powered": .variant(.boolean(powered)), "Discovering": .variant(.boolean(false)),
        "Class": .variant(.uint32(268)),
    ]
    if let alias { p["Alias"] = .variant(.string(alias)) }
    if let powerState { p["PowerState"] = .variant(.string(powerState)) }
    return p
}

@Suite struct AdapterMappingTests {
    @Test func propertiesOfOtherTypesAreIgnored() {
        var a = Adapter(path: "/org/bluez/hci0")
        a.apply([("Powered", .variant(.boolean(true))), ("Address", .variant(.string("AA:BB:CC:DD:EE:FF"))),
                 ("Name", .variant(.uint32(7)))])
        #expect(a.powered)
        #expect(a.address == "AA:BB:CC:DD:EE:FF")
        #expect(a.systemName == "")
        a.apply([("Powered", .variant(.string("no")))])
        #expect(a.powered)
    }

    @Test func aliasIsTheNameWhenPresent() {
        var a = Adapter(path: "/org/bluez/hci0", name: "system")
        #expect(a.name == "system")
        a.apply([("Alias", .variant(.string("Kitchen")))])
        #expect(a.name == "Kitchen")
    }

    @Test func deviceKeys() {
        let plain = Adapter(path: "/org/bluez/hci0", address: "00:01:02:03:04:05", name: "host", powered: true)
        #expect(plain.deviceProperties.map(\.key) == ["path", "address", "name", "powered"])
        #expect(plain.deviceProperties.map(\.value) == ["/org/bluez/hci0", "00:01:02:03:04:05", "host", "true"])
        let blocked = Adapter(path: "/org/bluez/hci1", powered: false, powerState: "off-blocked")
        #expect(blocked.deviceProperties.last! == ("power-state", "off-blocked"))
        #expect(blocked.deviceProperties[3] == ("powered", "false"))
    }

    @Test func serviceStates() {
        let on = Adapter(path: "/a", powered: true)
        let off = Adapter(path: "/b", powered: false)
        #expect(serviceState(of: []) == .unsupported)
        #expect(serviceState(of: [off]) == .disabled)
        #expect(serviceState(of: [off, on]) == .available)
        #expect(serviceState(of: [on, on]) == .available)
    }

    @Test func rfkillBlockIsOffWhateverPoweredSays() {
        // bluetoothd does not promise which of the two properties changes first.
        let blocked = Adapter(path: "/a", powered: true, powerState: "off-blocked")
        #expect(!blocked.isOn)
        #expect(serviceState(of: [blocked]) == .disabled)
        #expect(serviceState(of: [Adapter(path: "/a", powered: true, powerState: "on-disabling")]) == .available)
        #expect(serviceState(of: [Adapter(path: "/a", powered: false, powerState: "off-enabling")]) == .disabled)
    }

    @Test func snapshotCombinesAdaptersAndConfiguration() {
        let view = AdapterView(source: .bluez, adapters: [Adapter(path: "/org/bluez/hci1", powered: true),
                                                          Adapter(path: "/org/bluez/hci0", powered: false)])
        var config = SwitchConfig()
        config.deny = ["org.example.Locked"]
        var s = bluetoothSnapshot(view, config: config)
        #expect(s.service == .available)
        #expect(s.devices.map { $0[0].value } == ["/org/bluez/hci0", "/org/bluez/hci1"])  // sorted
        #expect(s.policies.map(\.app) == ["org.example.Locked"])
        #expect(s.policies.map(\.policy) == [.restricted])
        #expect(s.details.map(\.value) == ["bluez"])

        config.enabled = false
        s = bluetoothSnapshot(view, config: config)
        #expect(s.service == .disabled)
        #expect(s.details.map { "\($0.key)=\($0.value)" } == ["source=bluez", "disabled-by=configuration"])
        // unsupported wins over a configuration switch, as everywhere.
        #expect(bluetoothSnapshot(AdapterView(source: .bluez, adapters: []), config: config).service == .unsupported)
        #expect(bluetoothSnapshot(.unknown).service == .unsupported)
    }

    /// Why it is disabled, for a settings page: adapters that are all off are the
    /// device's doing; the admin's switch outranks them.
    @Test func disabledSaysWhy() {
        let off = AdapterView(source: .bluez, adapters: [Adapter(path: "/org/bluez/hci0", powered: false)])
        let byDevice = bluetoothSnapshot(off)
        #expect(byDevice.service == .disabled)
        #expect(byDevice.details.map { "\($0.key)=\($0.value)" } == ["source=bluez", "disabled-by=device"])
        var config = SwitchConfig()
        config.enabled = false
        #expect(bluetoothSnapshot(off, config: config).details.last.map { "\($0.key)=\($0.value)" }
                == "disabled-by=configuration")
        let on = AdapterView(source: .bluez, adapters: [Adapter(path: "/org/bluez/hci0", powered: true)])
        #expect(!bluetoothSnapshot(on).details.contains { $0.key == "disabled-by" })
        #expect(!bluetoothSnapshot(AdapterView(source: .bluez, adapters: []), config: config).details
            .contains { $0.key == "disabled-by" })
    }
}

@Suite struct BlueZDecodingTests {
    @Test func interfacesAddedForAnAdapterAndForADevice() {
        let adapter = BlueZEvent(interface: BlueZ.objectManager, member: "InterfacesAdded", path: "/", arguments: [
            .objectPath("/org/bluez/hci0"),
            .dictionary(keySignature: "s", valueSignature: "a{sv}", [
                .init(.string("org.freedesktop.DBus.Introspectable"), .vardict([])),
                .init(.string(BlueZ.adapterInterface), .vardict([("Powered", .boolean(true))])),
            ]),
        ])
        #expect(adapter == .interfacesAdded(path: "/org/bluez/hci0", adapter: ["Powered": .variant(.boolean(true))]))
        let device = BlueZEvent(interface: BlueZ.objectManager, member: "InterfacesAdded", path: "/", arguments: [
            .objectPath("/org/bluez/hci0/dev_00_11"),
            .dictionary(keySignature: "s", valueSignature: "a{sv}", [
                .init(.string("org.bluez.Device1"), .vardict([("Connected", .boolean(true))])),
            ]),
        ])
        #expect(device == .interfacesAdded(path: "/org/bluez/hci0/dev_00_11", adapter: nil))
    }

    @Test func interfacesRemoved() {
        let e = BlueZEvent(interface: BlueZ.objectManager, member: "InterfacesRemoved", path: "/",
                           arguments: [.objectPath("/org/bluez/hci0"), .strings([BlueZ.adapterInterface, "org.bluez.Media1"])])
        #expect(e == .interfacesRemoved(path: "/org/bluez/hci0", adapterRemoved: true))
        let other = BlueZEvent(interface: BlueZ.objectManager, member: "InterfacesRemoved", path: "/",
                               arguments: [.objectPath("/org/bluez/hci0"), .strings(["org.bluez.Media1"])])
        #expect(other == .interfacesRemoved(path: "/org/bluez/hci0", adapterRemoved: false))
    }

    @Test func propertiesChangedOnlyForAdapter1() {
        let args: (String) -> [DBusValue] = { iface in
            [.string(iface), .vardict([("Powered", .boolean(false))]), .strings(["Alias"])]
        }
        #expect(BlueZEvent(interface: BlueZ.properties, member: "PropertiesChanged", path: "/org/bluez/hci0",
                           arguments: args(BlueZ.adapterInterface))
                == .adapterPropertiesChanged(path: "/org/bluez/hci0", changed: ["Powered": .variant(.boolean(false))],
                                             invalidated: ["Alias"]))
        #expect(BlueZEvent(interface: BlueZ.properties, member: "PropertiesChanged", path: "/org/bluez/hci0",
                           arguments: args("org.bluez.Device1")) == nil)
    }

    @Test func nameOwnerChanged() {
        #expect(BlueZEvent(interface: BlueZ.busDriver, member: "NameOwnerChanged", path: "/org/freedesktop/DBus",
                           arguments: [.string("org.bluez"), .string(":1.4"), .string("")])
                == .ownerChanged(old: ":1.4", new: nil))
        #expect(BlueZEvent(interface: BlueZ.busDriver, member: "NameOwnerChanged", path: "/org/freedesktop/DBus",
                           arguments: [.string("org.example.Other"), .string(""), .string(":1.5")]) == nil)
    }

    @Test func malformedSignalsAreDropped() {
        #expect(BlueZEvent(interface: BlueZ.objectManager, member: "InterfacesAdded", path: "/",
                           arguments: [.objectPath("/org/bluez/hci0")]) == nil)
        #expect(BlueZEvent(interface: BlueZ.properties, member: "PropertiesChanged", path: "/org/bluez/hci0",
                           arguments: [.string(BlueZ.adapterInterface), .uint32(1), .strings([])]) == nil)
    }

    @Test func managedObjects() {
        let reply: [DBusValue] = [.dictionary(keySignature: "o", valueSignature: "a{sa{sv}}", [
            .init(.objectPath("/org/bluez"), .dictionary(keySignature: "s", valueSignature: "a{sv}", [
                .init(.string("org.bluez.AgentManager1"), .vardict([])),
            ])),
            .init(.objectPath("/org/bluez/hci0"), .dictionary(keySignature: "s", valueSignature: "a{sv}", [
                .init(.string(BlueZ.adapterInterface), .vardict([("Powered", .boolean(false))])),
            ])),
        ])]
        #expect(adapterObjects(inManagedObjects: reply) == ["/org/bluez/hci0": ["Powered": .variant(.boolean(false))]])
        #expect(adapterObjects(inManagedObjects: [.string("nonsense")]) == nil)
    }
}

@Suite struct BlueZTableTests {
    let owner = ":1.7"

    func added(_ path: String, powered: Bool = true) -> BlueZEvent {
        .interfacesAdded(path: path, adapter: adapterProperties(powered: powered))
    }

    func powered(_ path: String, _ on: Bool) -> BlueZEvent {
        .adapterPropertiesChanged(path: path, changed: ["Powered": .variant(.boolean(on))], invalidated: [])
    }

    @Test func signalsBeforeTheInitialListAreDropped() {
        var t = BlueZTable()
        t.reset(owner: owner)
        #expect(t.apply(added("/org/bluez/hci0"), from: owner) == .ignored)
        let loaded = t.load(["/org/bluez/hci0": adapterProperties(powered: false)], from: owner)
        #expect(loaded)
        #expect(t.adapters["/org/bluez/hci0"]?.powered == false)
        #expect(t.apply(powered("/org/bluez/hci0", true), from: owner) == .applied)
        #expect(t.adapters["/org/bluez/hci0"]?.powered == true)
    }

    @Test func signalsAndRepliesFromAnotherInstanceAreDropped() {
        var t = BlueZTable()
        t.reset(owner: owner)
        let fromStranger = t.load(["/org/bluez/hci0": adapterProperties()], from: ":1.3")
        #expect(!fromStranger)
        #expect(!t.synced)
        let fromOwner = t.load([:], from: owner)
        #expect(fromOwner)
        #expect(t.apply(added("/org/bluez/hci0"), from: ":1.3") == .ignored)
        #expect(t.apply(added("/org/bluez/hci0"), from: nil) == .ignored)
        #expect(t.adapters.isEmpty)
    }

    @Test func addRemoveAndOtherObjects() {
        var t = BlueZTable()
        t.reset(owner: owner)
        _ = t.load([:], from: owner)
        #expect(t.apply(added("/org/bluez/hci0"), from: owner) == .applied)
        #expect(t.apply(added("/org/bluez/hci1", powered: false), from: owner) == .applied)
        #expect(t.apply(.interfacesAdded(path: "/org/bluez/hci0/dev_1", adapter: nil), from: owner) == .ignored)
        #expect(t.apply(.interfacesRemoved(path: "/org/bluez/hci0", adapterRemoved: false), from: owner) == .ignored)
        #expect(t.adapters.count == 2)
        #expect(t.apply(.interfacesRemoved(path: "/org/bluez/hci0", adapterRemoved: true), from: owner) == .applied)
        #expect(t.apply(.interfacesRemoved(path: "/org/bluez/hci0", adapterRemoved: true), from: owner) == .ignored)
        #expect(t.adapters.keys.sorted() == ["/org/bluez/hci1"])
        #expect(t.apply(powered("/org/bluez/hci9", true), from: owner) == .ignored)  // unknown adapter
    }

    @Test func invalidatedPropertiesAreFetchedAgain() {
        var t = BlueZTable()
        t.reset(owner: owner)
        _ = t.load(["/org/bluez/hci0": adapterProperties(powered: true)], from: owner)
        let e = BlueZEvent.adapterPropertiesChanged(path: "/org/bluez/hci0", changed: [:], invalidated: ["Powered"])
        #expect(t.apply(e, from: owner) == .refetch(path: "/org/bluez/hci0"))
        #expect(t.adapters["/org/bluez/hci0"]?.powered == false)
        let refreshed = t.refreshed("/org/bluez/hci0", ["Powered": .variant(.boolean(true))], from: owner)
        #expect(refreshed)
        #expect(t.adapters["/org/bluez/hci0"]?.powered == true)
        let irrelevant = BlueZEvent.adapterPropertiesChanged(path: "/org/bluez/hci0", changed: [:], invalidated: ["UUIDs"])
        #expect(t.apply(irrelevant, from: owner) == .applied)
    }

    @Test func aNewOwnerStartsEmpty() {
        var t = BlueZTable()
        t.reset(owner: owner)
        _ = t.load(["/org/bluez/hci0": adapterProperties()], from: owner)
        t.reset(owner: ":1.9")
        #expect(t.adapters.isEmpty)
        #expect(!t.synced)
        #expect(t.apply(added("/org/bluez/hci0"), from: owner) == .ignored)
    }
}
