import DBusKit

/// One Bluetooth adapter as the plugin sees it: from bluetoothd's `org.bluez.Adapter1`
/// object, or from the kernel's HCI device list while bluetoothd is not running.
///
/// Only the properties that the status or the device list use are kept, so that the
/// many other `Adapter1` properties (Discovering, Class, UUIDs, …) cannot cause a
/// publication, let alone a signal.
struct Adapter: Sendable, Equatable {
    /// The D-Bus object path (`/org/bluez/hci0`), or the kernel's device name
    /// (`hci0`) for an adapter from the HCI list.
    var path: String
    var address = ""
    /// `Alias` (what the user calls it) when bluetoothd has one, else `Name`.
    var alias: String?
    var systemName = ""
    var powered = false
    /// `PowerState`, where bluetoothd has it (5.60 and later): "on", "off",
    /// "off-enabling", "on-disabling" or "off-blocked" (rfkill).
    var powerState: String?

    init(path: String, address: String = "", name: String = "", powered: Bool = false, powerState: String? = nil) {
        self.path = path
        self.address = address
        self.systemName = name
        self.powered = powered
        self.powerState = powerState
    }

    var name: String { alias ?? systemName }

    /// Whether an app could use this adapter now. An rfkill block wins over
    /// `Powered`: bluetoothd reports "off-blocked" while the radio is blocked, and
    /// the order in which the two properties change is not promised.
    var isOn: Bool { powered && powerState != "off-blocked" }

    /// Applies `Adapter1` properties from GetManagedObjects, InterfacesAdded or
    /// PropertiesChanged. Properties of another type than the interface documents
    /// are ignored rather than guessed at.
    mutating func apply(_ properties: [(String, DBusValue)]) {
        for (key, value) in properties {
            switch key {
            case "Address": if let s = value.stringValue { address = s }
            case "Alias": if let s = value.stringValue { alias = s }
            case "Name": if let s = value.stringValue { systemName = s }
            case "Powered": if let b = value.boolValue { powered = b }
            case "PowerState": if let s = value.stringValue { powerState = s }
            default: break
            }
        }
    }

    /// Forgets properties bluetoothd says are no longer valid (PropertiesChanged's
    /// third argument); returns true if one of them matters here, so that the
    /// caller fetches them again.
    mutating func invalidate(_ names: [String]) -> Bool {
        var relevant = false
        for name in names {
            switch name {
            case "Address": address = ""; relevant = true
            case "Alias": alias = nil; relevant = true
            case "Name": systemName = ""; relevant = true
            case "Powered": powered = false; relevant = true
            case "PowerState": powerState = nil; relevant = true
            default: break
            }
        }
        return relevant
    }

    /// The key/value list GetDetails shows for this adapter.
    var deviceProperties: [(key: String, value: String)] {
        var list: [(key: String, value: String)] = [
            ("path", path), ("address", address), ("name", name), ("powered", powered ? "true" : "false"),
        ]
        if let powerState { list.append(("power-state", powerState)) }
        return list
    }
}
