import PipeWireAccess
internal import Glibc
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

    /// configure's rule, the watcher's and PipeWireStart's alike: a configuration
    /// that parses is taken (0); a bad one is logged and, for the first, the
    /// defaults are taken instead, for a later one nothing (-EINVAL either way).
    /// `first`: no configuration has been taken yet. nil: keep the one in force.
    static func taken(_ entries: [PluginConfigEntry], host: HostHandle, first: Bool)
        -> (configs: [DevicePermission: SwitchConfig]?, rc: Int32)
    {
        do {
            return (try parse(entries, host: host), 0)
        } catch {
            host.log(.error, "\(error.description); keeping the last good configuration")
            guard first else { return (nil, -EINVAL) }
            return (Dictionary(uniqueKeysWithValues: DevicePermission.allCases.map { ($0, SwitchConfig()) }), -EINVAL)
        }
    }
}
