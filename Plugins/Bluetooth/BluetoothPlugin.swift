// The BlueZ plugin: the `bluetooth` permission from bluetoothd's adapters on the
// system bus (and the kernel's HCI list while bluetoothd is away). See README.md
// in this directory for the mapping and the behaviour.
//
// This file is only the C side: the descriptor and init/configure/fini.
public import CPermissionsPlugin
import Glibc
import PluginKit
import PermissionsModel

func bluetoothInit(_ host: UnsafePointer<permissions_host>?,
                   _ state: UnsafeMutablePointer<UnsafeMutableRawPointer?>?) -> Int32 {
    guard let host, let state else { return -EINVAL }
    let handle = HostHandle(host)
    let permission = BluetoothPermission(publish: { handle.publish($0) }, log: { handle.log($0, $1) })
    state.pointee = Unmanaged.passRetained(PluginState(host: handle, permission: permission)).toOpaque()
    return 0
}

/// `[bluetooth]` takes the keys location and notifications take: enabled, allow, deny.
func bluetoothConfigure(_ state: UnsafeMutableRawPointer?, _ config: UnsafePointer<permissions_config>?) -> Int32 {
    guard let state else { return -EINVAL }
    let plugin = Unmanaged<PluginState>.fromOpaque(state).takeUnretainedValue()
    do {
        plugin.permission.apply(try SwitchConfig.parse(configEntries(config), section: "bluetooth", log: plugin.host))
        return 0
    } catch {
        plugin.host.log(.error, "\(error.description); keeping the last good configuration")
        return -EINVAL
    }
}

func bluetoothFini(_ state: UnsafeMutableRawPointer?) {
    guard let state else { return }
    let plugin = Unmanaged<PluginState>.fromOpaque(state).takeRetainedValue()
    plugin.permission.stop()
}

/// What init hands the host as `state`.
final class PluginState {
    let host: HostHandle
    let permission: BluetoothPermission

    init(host: HostHandle, permission: BluetoothPermission) {
        self.host = host
        self.permission = permission
    }
}

nonisolated(unsafe) let descriptor = makeDescriptor(
    name: "bluetooth", version: "1.0",
    description: "Bluetooth, from BlueZ's adapters on the system bus (Powered, PowerState)",
    permissions: ["bluetooth"], initialize: bluetoothInit, configure: bluetoothConfigure, finish: bluetoothFini)

/// The one exported symbol. `public`: an internal function is dead-stripped from an
/// optimised (whole-module) build, `@c` or not, and the library would load as "no
/// entry symbol".
@c(permissions_plugin_entry_v1)
public func permissionsPluginEntry() -> UnsafePointer<permissions_plugin> { descriptor }
