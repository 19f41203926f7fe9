internal import CPermissionsPlugin
internal import Glibc
import Dispatch

/// What the daemon knows about one plugin file it found.
public struct PluginInfo: Sendable {
    public enum State: String, Sendable { case loaded, unavailable }
    public var name: String
    public var version: String
    public var state: State
    public var permissions: [String]
    public var file: String
}

/// Loads plugin libraries and carries their publications to the service.
///
/// Loading, init, configure and fini happen on the service queue. Plugins may
/// publish from any thread: the host copies the snapshot during the call and hands
/// it to `deliver`, which hops to the service queue.
public final class PluginHost {
    public private(set) var plugins: [LoadedPlugin] = []
    /// Files that were rejected, for the Plugins property.
    public private(set) var unavailable: [PluginInfo] = []
    private let deliver: @Sendable (Snapshot) -> Void

    /// `deliver` receives every accepted publication, on any thread.
    public init(deliver: @escaping @Sendable (Snapshot) -> Void) {
        self.deliver = deliver
    }

    public var infos: [PluginInfo] {
        (plugins.map(\.info) + unavailable).sorted { $0.name < $1.name }
    }

    /// Permission name to the plugin providing it.
    public var providers: [String: LoadedPlugin] {
        var map: [String: LoadedPlugin] = [:]
        for plugin in plugins where plugin.info.state == .loaded {
            for permission in plugin.info.permissions { map[permission] = plugin }
        }
        return map
    }

    /// Loads every `libpermissions-<name>.so` in the directories, in order; the first
    /// plugin to claim a name or a permission wins. Each rejected file gets one log
    /// line naming it and the reason; the others still load.
    public func loadAll(from directories: [String], config: [ConfigEntry]) {
        var seen = Set<String>()
        for directory in directories {
            for file in Self.pluginFiles(in: directory) {
                let name = String(file.dropFirst("libpermissions-".count).dropLast(".so".count))
                guard !seen.contains(name) else {
                    logInfo("plugin \(directory)/\(file): skipped, a plugin named \"\(name)\" is already loaded")
                    continue
                }
                seen.insert(name)
                load(path: directory + "/" + file, name: name, config: config)
            }
        }
    }

    static func pluginFiles(in directory: String) -> [String] {
        Files.list(directory).filter {
            $0.hasPrefix("libpermissions-") && $0.hasSuffix(".so") && $0.count > "libpermissions-.so".count
        }
    }

    private func reject(_ path: String, _ name: String, _ reason: String) {
        logWarning("plugin \(path): skipped: \(reason)")
        unavailable.append(PluginInfo(name: name, version: "", state: .unavailable, permissions: [], file: path))
    }

    func load(path: String, name: String, config: [ConfigEntry]) {
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            let reason = dlerror().map { String(cString: $0) } ?? "dlopen failed"
            return reject(path, name, "not a loadable library (\(reason))")
        }
        guard let symbol = dlsym(handle, PERMISSIONS_PLUGIN_ENTRY) else {
            dlclose(handle)
            return reject(path, name, "no entry symbol \(PERMISSIONS_PLUGIN_ENTRY)")
        }
        let entry = unsafeBitCast(symbol, to: permissions_plugin_entry_fn.self)
        guard let descriptor = entry() else {
            dlclose(handle)
            return reject(path, name, "the entry point returned NULL")
        }
        let d = descriptor.pointee
        guard d.abi_version == PERMISSIONS_PLUGIN_ABI_VERSION else {
            dlclose(handle)
            return reject(path, name, "ABI version \(d.abi_version), this daemon supports \(PERMISSIONS_PLUGIN_ABI_VERSION)")
        }
        guard Int(d.struct_size) >= MemoryLayout<permissions_plugin>.size else {
            dlclose(handle)
            return reject(path, name, "descriptor of \(d.struct_size) bytes is smaller than ABI 1's \(MemoryLayout<permissions_plugin>.size)")
        }
        let declaredName = d.name.map { String(cString: $0) } ?? ""
        guard declaredName == name else {
            dlclose(handle)
            return reject(path, name, "it calls itself \"\(declaredName.escapedForMessage)\", the file name says \"\(name)\"")
        }
        var permissions: [String] = []
        if var cursor = d.permissions {
            while let p = cursor.pointee, permissions.count < 256 {
                permissions.append(String(cString: p))
                cursor += 1
            }
        }
        if let bad = permissions.first(where: { !Validate.isPermissionName($0) }) {
            dlclose(handle)
            return reject(path, name, "invalid permission name \"\(bad.escapedForMessage)\"")
        }
        let taken = providers
        if let clash = permissions.first(where: { taken[$0] != nil }) {
            dlclose(handle)
            return reject(path, name, "permission \"\(clash)\" is already provided by plugin \"\(taken[clash]!.info.name)\"")
        }
        guard d.`init` != nil else {
            dlclose(handle)
            return reject(path, name, "the descriptor has no init function")
        }
        let info = PluginInfo(name: name, version: d.version.map { String(cString: $0) } ?? "",
                              state: .loaded, permissions: permissions, file: path)
        let plugin = LoadedPlugin(handle: handle, descriptor: descriptor, info: info, deliver: deliver)
        // Listed before init, so that what it publishes during init is accepted.
        plugins.append(plugin)
        let rc = plugin.start()
        guard rc == 0 else {
            let reason = rc == -ENOTSUP || rc == -ENODEV
                ? "its backend is not available on this system" : "init failed: \(errnoName(-rc))"
            logInfo("plugin \(path): unavailable: \(reason)")
            plugin.info.state = .unavailable
            return
        }
        plugin.configure(config)
        logInfo("plugin \(name) \(info.version) loaded from \(path): \(permissions.joined(separator: ", "))")
    }

    /// Passes a new configuration to every loaded plugin.
    public func configureAll(_ config: [ConfigEntry]) {
        for plugin in plugins where plugin.info.state == .loaded { plugin.configure(config) }
    }

    /// Stops every plugin (fini), before exit.
    public func stopAll() {
        for plugin in plugins where plugin.info.state == .loaded { plugin.stop() }
    }
}

func errnoName(_ code: Int32) -> String {
    "\(String(cString: strerror(code))) (errno \(code))"
}
