internal import CInstallPaths
import CLISupport
import PermissionsDaemon
internal import DBusKit

/// The default directories scripts/install wrote into this copy of the daemon
/// (`CInstallPaths`): SYSCONFDIR/permissions, LOCALSTATEDIR/lib/permissions and
/// PREFIX/lib/permissions/plugins. In a build tree they are empty, and the built-in
/// defaults of `DaemonOptions` apply.
enum InstalledPaths {
    static var configDirectory: String? { field(permissions_installed_config_dir()) }
    static var stateDirectory: String? { field(permissions_installed_state_dir()) }
    static var pluginDirectory: String? { field(permissions_installed_plugin_dir()) }

    private static func field(_ value: UnsafePointer<CChar>?) -> String? {
        guard let value, value.pointee != 0 else { return nil }
        return String(cString: value)
    }

    /// Fills in what the command line left to the defaults. The state directory is
    /// the installed one on the system bus only: on a session bus the daemon runs
    /// as a user, whose decisions live in their own XDG state directory.
    static func applyDefaults(to options: inout DaemonOptions, parsed: ParsedOptions) {
        if !parsed.has("config-dir"), let configDirectory { options.configDirectory = configDirectory }
        if options.stateDirectory == nil, options.bus == .system, let stateDirectory {
            options.stateDirectory = stateDirectory
        }
        if options.pluginDirectories.isEmpty, let pluginDirectory { options.pluginDirectories = [pluginDirectory] }
    }
}
