import PluginKit
import PermissionsModel

// From adapters to what the daemon is told: the whole mapping, as pure functions.
//
//   no adapter                              -> unsupported
//   adapters, none on (off or rfkill-blocked) -> disabled
//   at least one on                         -> available (the app's decision applies)
//
// plus the [bluetooth] section of the configuration, as for location and
// notifications: enabled=false gives "disabled" wherever there is an adapter, and
// allow/deny are per-app admin entries.

/// Where the adapter list came from.
enum AdapterSource: String, Sendable {
    /// Nothing is known yet: the plugin has just started.
    case none
    /// bluetoothd's `org.bluez.Adapter1` objects on the system bus.
    case bluez
    /// The kernel's HCI device list, while bluetoothd is not on the system bus (or
    /// there is no system bus).
    case kernel
}

/// Everything the plugin knows about adapters at one moment.
struct AdapterView: Sendable, Equatable {
    var source: AdapterSource
    /// Sorted by path, so that the same adapters always give the same device list.
    var adapters: [Adapter]

    init(source: AdapterSource, adapters: [Adapter]) {
        self.source = source
        self.adapters = adapters.sorted { $0.path < $1.path }
    }

    static let unknown = AdapterView(source: .none, adapters: [])
}

/// The service state that a set of adapters gives, before configuration.
func serviceState(of adapters: [Adapter]) -> PluginServiceState {
    if adapters.isEmpty { return .unsupported }
    return adapters.contains(where: \.isOn) ? .available : .disabled
}

/// The snapshot of `bluetooth` for a view and a configuration.
func bluetoothSnapshot(_ view: AdapterView, config: SwitchConfig = SwitchConfig()) -> PluginSnapshot {
    var service = serviceState(of: view.adapters)
    var details = [("source", view.source.rawValue)]
    // Why it is off, for a settings page: the admin's switch outranks the adapters'.
    if service != .unsupported, !config.enabled {
        details += config.disabledBy
    } else if service == .disabled {
        details.append((SwitchConfig.disabledByKey, "device"))
    }
    if service == .available, !config.enabled { service = .disabled }
    return PluginSnapshot(
        permission: "bluetooth", service: service,
        policies: config.allow.map { ($0, .allow) } + config.deny.map { ($0, .restricted) },
        details: details,
        devices: view.adapters.map(\.deviceProperties))
}
