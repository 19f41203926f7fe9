import PipeWireAccess
import PluginKit
import PermissionsModel

/// The plugin's configuration: a `[camera]` and a `[microphone]` section with the
/// keys every switchable permission has (SwitchConfig), nothing of its own:
///
///     [camera]
///     enabled=true              false: "disabled" for every app while a camera exists
///     allow=org.example.Call    forced allow: "authorized"
///     deny=org.example.Spy      locked deny: "restricted"
///
/// Without a device the status is "unsupported" whatever this says (unsupported
/// outranks disabled and the per-app entries).
enum DeviceConfig {
    /// Parses both sections; throws for a bad value (origin and reason in the message).
    static func parse(_ entries: [PluginConfigEntry], host: HostHandle)
        throws(SwitchConfig.Invalid) -> [DevicePermission: SwitchConfig]
    {
        var result: [DevicePermission: SwitchConfig] = [:]
        for permission in DevicePermission.allCases {
            result[permission] = try SwitchConfig.parse(entries, section: permission.rawValue, log: host)
        }
        return result
    }
}
