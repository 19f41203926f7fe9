// The PipeWire plugin: `camera` and `microphone` from the user's PipeWire graph
// (see README.md). This file is only the C ABI's glue; PipeWireWatcher does the
// work, once PipeWireStart has found a PipeWire socket. The host calls these on the
// plugin's own host thread, one at a time.
import PipeWireAccess
public import CPermissionsPlugin
internal import Glibc
import PluginKit
internal import SystemPrimitives

func pipewireInit(_ host: UnsafePointer<permissions_host>?,
                  _ state: UnsafeMutablePointer<UnsafeMutableRawPointer?>?) -> Int32 {
    guard let host, let state else { return -EINVAL }
    let handle = HostHandle(host)
    switch PipeWireStart.start(host: handle) {
    case .success(let plugin):
        // Released in fini, after the thread that calls back into it has been joined.
        state.pointee = Unmanaged.passRetained(plugin).toOpaque()
        return 0
    case .failure(let error):
        handle.log(.error, "\(error.what) failed: \(errnoName(error.code))")
        return -(error.code == 0 ? EIO : error.code)
    }
}

func pipewireConfigure(_ state: UnsafeMutableRawPointer?, _ config: UnsafePointer<permissions_config>?) -> Int32 {
    guard let state else { return -EINVAL }
    return Unmanaged<PipeWireStart>.fromOpaque(state).takeUnretainedValue().configure(configEntries(config))
}

func pipewireFini(_ state: UnsafeMutableRawPointer?) {
    guard let state else { return }
    Unmanaged<PipeWireStart>.fromOpaque(state).takeRetainedValue().stop()
}

/// open_remote (ABI 1.3), on the host's thread for this plugin: see AppRemotes.swift.
func pipewireOpenRemote(_ state: UnsafeMutableRawPointer?, _ remote: UnsafePointer<permissions_remote>?) -> Int32 {
    guard let state, let request = RemoteRequest(remote) else { return -EINVAL }
    return Unmanaged<PipeWireStart>.fromOpaque(state).takeUnretainedValue().openRemote(request)
}

/// remote_status (ABI 1.3), on the host's thread for this plugin.
func pipewireRemoteStatus(_ state: UnsafeMutableRawPointer?, _ id: UInt64, _ status: UnsafePointer<CChar>?) {
    guard let state, let status else { return }
    Unmanaged<PipeWireStart>.fromOpaque(state).takeUnretainedValue().remoteStatus(id, String(cString: status))
}

nonisolated(unsafe) let descriptor = makeDescriptor(
    name: "pipewire", version: "1.1",
    description: "Cameras and microphones: Video/Source and Audio/Source nodes of the user's PipeWire",
    permissions: DevicePermission.allCases.map(\.rawValue),
    initialize: pipewireInit, configure: pipewireConfigure, finish: pipewireFini,
    enforcement: Enforcement(permissions: DevicePermission.allCases.map(\.rawValue),
                             open: pipewireOpenRemote, status: pipewireRemoteStatus))

/// The entry point. `public`: an internal function that nothing in the module calls
/// is dropped by whole-module optimisation in release builds, `@c` or not, and the
/// library would then export no entry at all (plugin.map hides everything else).
@c(permissions_plugin_entry_v1)
public func permissionsPluginEntry() -> UnsafePointer<permissions_plugin> { descriptor }
