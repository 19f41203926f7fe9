// The notifications plugin: the `notifications` permission from the [notifications]
// section of the configuration (see SwitchConfig):
//
//     [notifications]
//     enabled=true
//     allow=org.gnome.Calendar
//     deny=/usr/bin/spammy
public import CPermissionsPlugin
import PluginKit

func notificationsInit(_ host: UnsafePointer<permissions_host>?,
                       _ state: UnsafeMutablePointer<UnsafeMutableRawPointer?>?) -> Int32 {
    SwitchPlugin.start(host, state) { SwitchPlugin(permission: "notifications", host: $0) }
}

func notificationsConfigure(_ state: UnsafeMutableRawPointer?, _ config: UnsafePointer<permissions_config>?) -> Int32 {
    SwitchPlugin.configure(state, config)
}

func notificationsValidate(_ state: UnsafeMutableRawPointer?, _ config: UnsafePointer<permissions_config>?) -> Int32 {
    SwitchPlugin.validate(state, config)
}

func notificationsFini(_ state: UnsafeMutableRawPointer?) { SwitchPlugin.stop(state) }

nonisolated(unsafe) let descriptor = makeDescriptor(
    name: "notifications", version: "1.0", description: "Desktop notifications, from the [notifications] config section",
    permissions: ["notifications"], initialize: notificationsInit, configure: notificationsConfigure,
    finish: notificationsFini, validate: notificationsValidate)

/// The entry point. `public`: an internal function is dropped by whole-module
/// optimisation in release builds, `@c` or not, and the library would have no entry.
@c(permissions_plugin_entry_v1)
public func permissionsPluginEntry() -> UnsafePointer<permissions_plugin> { descriptor }
