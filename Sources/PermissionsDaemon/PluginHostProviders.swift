package import PermissionsPluginHost
package import PermissionsService

/// The plugin host is what serves the plugins' permissions to the service. Declared
/// here, in the wiring, because the service and the host know nothing of each other.
extension PluginHost: PluginProviders {
    package var pluginList: [PluginEntry] {
        infos.map { PluginEntry(name: $0.name, version: $0.version, state: $0.state.rawValue, permissions: $0.permissions) }
    }

    package func pluginName(providing permission: String) -> String? {
        providers[permission]?.info.name
    }
}
