// The location plugin: the `location` permission from the [location] section of the
// configuration (see SwitchConfig), plus a maximum accuracy level, geoclue's levels:
//
//     [location]
//     enabled=true
//     max-accuracy=city        none | country | city | neighborhood | street | exact
//     allow=org.gnome.Maps
//     deny=/usr/bin/untrusted
//
// max-accuracy is reported in GetDetails' plugin-details; apps that honour it (or a
// location portal in front of them) must not ask for more. Default: exact.
public import CPermissionsPlugin
import PluginKit
import PermissionsModel

func locationExtraKey(_ key: String, _ value: String) throws(SwitchConfig.Invalid) -> String? {
    guard key == "max-accuracy" else { return nil }
    guard LocationAccuracy.levels.contains(value) else {
        throw SwitchConfig.Invalid(description: "expected one of \(LocationAccuracy.levels.joined(separator: ", "))")
    }
    return value
}

func locationInit(_ host: UnsafePointer<permissions_host>?,
                  _ state: UnsafeMutablePointer<UnsafeMutableRawPointer?>?) -> Int32 {
    SwitchPlugin.start(host, state) { handle in
        SwitchPlugin(permission: "location", host: handle, extraKey: locationExtraKey) { config in
            [("max-accuracy", config.extra["max-accuracy"] ?? "exact")]
        }
    }
}

nonisolated(unsafe) let descriptor = SwitchPlugin.descriptor(
    name: "location", version: "1.0", description: "Location services, from the [location] config section",
    permission: "location", initialize: locationInit)

/// The entry point. `public`: an internal function is dropped by whole-module
/// optimisation in release builds, `@c` or not, and the library would have no entry.
@c(permissions_plugin_entry_v1)
public func permissionsPluginEntry() -> UnsafePointer<permissions_plugin> { descriptor }
