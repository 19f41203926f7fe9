// The local-network plugin: may an app talk to devices on the local network? The
// answer depends on the machine: `unsupported` while no interface other than the
// loopback is up, running and has an address; then the [local-network] section
// (enabled=, allow=, deny=, as for location) and the user's decision apply. It
// follows links and addresses through rtnetlink (InterfaceWatcher.swift).
//
// This file is only the C side: the descriptor and init/configure/fini.
public import CPermissionsPlugin
import Glibc
import PluginKit
import PermissionsModel

func localNetworkInit(_ host: UnsafePointer<permissions_host>?,
                      _ state: UnsafeMutablePointer<UnsafeMutableRawPointer?>?) -> Int32 {
    guard let host, let state else { return -EINVAL }
    let handle = HostHandle(host)
    let permission = LocalNetworkPermission(publish: { handle.publish($0) }, log: { handle.log($0, $1) })
    state.pointee = Unmanaged.passRetained(LocalNetworkState(host: handle, permission: permission)).toOpaque()
    return 0
}

func localNetworkConfigure(_ state: UnsafeMutableRawPointer?, _ config: UnsafePointer<permissions_config>?) -> Int32 {
    guard let state else { return -EINVAL }
    let plugin = Unmanaged<LocalNetworkState>.fromOpaque(state).takeUnretainedValue()
    do {
        plugin.permission.apply(try SwitchConfig.parse(configEntries(config), section: "local-network",
                                                       log: plugin.host))
        return 0
    } catch {
        plugin.host.log(.error, "\(error.description); keeping the last good configuration")
        return -EINVAL
    }
}

func localNetworkValidate(_ state: UnsafeMutableRawPointer?, _ config: UnsafePointer<permissions_config>?) -> Int32 {
    do {
        _ = try SwitchConfig.parse(configEntries(config), section: "local-network", warn: { _ in })
        return 0
    } catch {
        reportProblem(config, error.description)
        return -EINVAL
    }
}

func localNetworkFini(_ state: UnsafeMutableRawPointer?) {
    guard let state else { return }
    Unmanaged<LocalNetworkState>.fromOpaque(state).takeRetainedValue().permission.stop()
}

/// What init hands the host as `state`.
final class LocalNetworkState {
    let host: HostHandle
    let permission: LocalNetworkPermission

    init(host: HostHandle, permission: LocalNetworkPermission) {
        self.host = host
        self.permission = permission
    }
}

nonisolated(unsafe) let descriptor = makeDescriptor(
    name: "local-network", version: "1.0",
    description: "Local network access, from the kernel's links and addresses (rtnetlink)",
    permissions: ["local-network"], initialize: localNetworkInit, configure: localNetworkConfigure,
    finish: localNetworkFini, validate: localNetworkValidate)

/// The one exported symbol. `public`: an internal function is dead-stripped from an
/// optimised (whole-module) build, `@c` or not.
@c(permissions_plugin_entry_v1)
public func permissionsPluginEntry() -> UnsafePointer<permissions_plugin> { descriptor }
