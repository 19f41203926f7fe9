// The notifications plugin: the `notifications` permission from the [notifications]
// section of the configuration (see SwitchConfig):
//
//     [notifications]
//     enabled=true
//     allow=org.gnome.Calendar
//     deny=/usr/bin/spammy
public import CPermissionsPlugin
import PluginKit
import PermissionsModel

func notificationsInit(_ host: UnsafePointer<permissions_host>?,
                       _ state: UnsafeMutablePointer<UnsafeMutableRawPointer?>?) -> Int32 {
    SwitchPlugin.start(host, state) { SwitchPlugin(permission: "notifications", host: $0) }
}

nonisolated(unsafe) let descriptor = SwitchPlugin.descriptor(
    name: "notifications", version: "1.0", description: "Desktop notifications, from the [notifications] config section",
    permission: "notifications", initialize: notificationsInit)

/// The entry point. `public`: an internal function is dropped by whole-module
/// optimisation in release builds, `@c` or not, and the library would have no entry.
@c(permissions_plugin_entry_v1)
public func permissionsPluginEntry() -> UnsafePointer<permissions_plugin> { descriptor }
