internal import Dispatch
internal import DBusKit
internal import Glibc
import PermissionsModel
import PermissionsSupport
import PermissionsPluginHost
import PermissionsConfig
import CLISupport

/// `permissionsd --check-config`: checks the configuration as the running daemon
/// would before applying it (ConfigApplier.tryApply), and applies nothing: every
/// file must parse, the daemon's own keys and declared permissions must be valid,
/// and every plugin must accept its sections through its `validate` entry (the
/// plugins are loaded and started for that, with no configuration, and stopped).
/// Unlike the daemon, which stops at the first problem, it reports every one it
/// can find, one "FILE:LINE: reason" line each on stderr, like `sshd -t`. A plugin
/// without a `validate` entry checks its sections only when they are applied.
/// No bus, no store, no state directory: it can run before the daemon ever has.
enum ConfigCheck {
    static func run(configDirectory: String, pluginDirectories: [String]) -> Never {
        let queue = DispatchQueue(label: "org.example.Permissions.check-config")
        queue.async { check(configDirectory: configDirectory, pluginDirectories: pluginDirectories, queue: queue) }
        dispatchMain()
    }

    /// On `queue`, as the plugin host wants.
    private static func check(configDirectory: String, pluginDirectories: [String], queue: DispatchQueue) {
        let files = ConfigFiles(directory: configDirectory)
        let reading = files.readEach()
        var problems = reading.problems.map(\.description)
        let (core, forPlugins) = CoreConfig.split(reading.entries, previous: CoreConfig(),
                                                  reject: { problems.append($0) })
        let host = PluginHost(queue: queue)
        host.loadAll(from: pluginDirectories, config: []) {
            _ = core.declaredSnapshots(entries: forPlugins, providedByPlugins: Set(host.providers.keys),
                                       reject: { problems.append($0) })
            host.validateAll(forPlugins) { pluginProblems in
                problems += pluginProblems
                host.stopAll()
                finish(problems, files: files)
            }
        }
    }

    private static func finish(_ problems: [String], files: ConfigFiles) -> Never {
        for problem in problems { printError(problem.escapedForLog) }
        if problems.isEmpty {
            let read = files.files
            print("\(files.directory): configuration OK (\(read.isEmpty ? "no files" : read.joined(separator: ", ")))")
        }
        fflush(nil)
        // As the daemon ends (Daemon.endProcess): a plugin thread may still hold the
        // dynamic loader's lock, which exit() would wait for.
        _exit(problems.isEmpty ? 0 : 1)
    }
}
