import PermissionsModel
import PermissionsPluginHost

/// What ConfigApplier needs of the plugins: which permissions they declare, and a
/// configuration checked (`validateAll`) and given (`configure`) to each. The
/// plugin host in the daemon (below); a fake in unit tests, with no plugin loaded.
///
/// Used on the serving queue; each completion comes back on it.
protocol ConfigurablePlugins: AnyObject {
    /// One plugin, as the answers name it: what a rollback configures again.
    associatedtype Plugin
    /// The permissions the plugins declare: the configuration may not declare them too.
    var declaredPermissions: Set<String> { get }
    /// Every plugin's problems with `config`, which none applies; empty when all accept.
    func validateAll(_ config: [ConfigEntry], completion: @escaping ([String]) -> Void)
    /// Gives `config` to every serving plugin (or to `only` those) and to those that
    /// start from now on; `done` gets each one's answer.
    func configure(_ config: [ConfigEntry], only: [Plugin]?, done: @escaping ([PluginAnswer<Plugin>]) -> Void)
    /// A new configuration is in force: plugins that refused the last one try again.
    func retryConfigurationRefusals()
}

/// One plugin's answer to a configuration.
struct PluginAnswer<Plugin> {
    let plugin: Plugin
    /// Why it refused the configuration; nil if it took it.
    let rejection: String?
}

extension PluginHost: ConfigurablePlugins {
    func configure(_ config: [ConfigEntry], only: [LoadedPlugin]?,
                   done: @escaping ([PluginAnswer<LoadedPlugin>]) -> Void) {
        configureAll(config, only: only) { results in
            done(results.map { PluginAnswer(plugin: $0.plugin, rejection: $0.rejection) })
        }
    }
}
