internal import DBusKit
internal import Glibc
import PermissionsModel
import PermissionsSupport
import PermissionsPluginHost
import PermissionsConfig
import PermissionsDaemon
import CLISupport
internal import SystemPrimitives

/// `permissionsd --check-config`: checks the configuration as the running daemon
/// would before applying it (ConfigApplier.tryApply), and applies nothing: every
/// file must parse, the daemon's own keys and declared permissions must be valid,
/// and every plugin must accept its sections through its `validate` entry (the
/// plugins are loaded and started for that, with no configuration, and stopped).
/// Unlike the daemon, which stops at the first problem, it reports every one it
/// can find, one "FILE:LINE: reason" line each on stderr, like `sshd -t`, and the
/// warnings of ConfigWarnings ("FILE:LINE: warning: ..."), which do not fail the
/// check. A plugin without a `validate` entry checks its sections only when they
/// are applied.
/// No bus, no store, no state directory: it can run before the daemon ever has.
enum ConfigCheck {
    static func run(configDirectory: String, pluginDirectories: [String]) -> Never {
        // Warnings and errors only (a plugin that does not load, say): the problems
        // are the output, not the plugins' start-up lines.
        Log.shared.quietBelow = .warning
        let queue = Queue(label: "org.example.Permissions.check-config")
        queue.async { check(configDirectory: configDirectory, pluginDirectories: pluginDirectories, queue: queue) }
        runDispatchMain()
    }

    /// On `queue`, as the plugin host wants.
    private static func check(configDirectory: String, pluginDirectories: [String], queue: Queue) {
        let files = ConfigFiles(directory: configDirectory)
        let reading = files.readEach()
        var problems = reading.problems.map(\.description)
        // A typo in the path would otherwise check nothing and pass.
        var st = stat()
        if stat(configDirectory, &st) != 0 || (st.st_mode & S_IFMT) != S_IFDIR {
            problems.append("\(configDirectory): no such directory")
        }
        let (core, forPlugins) = CoreConfig.split(reading.entries, previous: CoreConfig(),
                                                  reject: { problems.append($0) })
        let warnings = ConfigWarnings.of(reading.entries, interpreters: core.interpreters)
        let host = PluginHost(queue: queue)
        host.loadAll(from: pluginDirectories, config: []) {
            let provided = Set(host.providers.keys)
            let declared = core.declaredSnapshots(entries: forPlugins, providedByPlugins: provided,
                                                  reject: { problems.append($0) })
            problems += unchecked(forPlugins, provided: provided, declared: Set(declared.keys),
                                  pluginDirectories: pluginDirectories)
            host.validateAll(forPlugins) { pluginProblems in
                problems += pluginProblems
                host.stopAll()
                finish(problems, warnings: warnings, files: files)
            }
        }
    }

    /// A section that no loaded plugin provides and the configuration does not
    /// declare: its keys cannot be checked, so the check cannot pass (fail
    /// closed: "OK" would only mean no plugin was found, e.g. a wrong --plugin-dir).
    /// One line per section, at its first entry.
    private static func unchecked(_ entries: [ConfigEntry], provided: Set<String>, declared: Set<String>,
                                  pluginDirectories: [String]) -> [String] {
        var seen = Set<String>()
        return entries.compactMap { entry in
            guard !provided.contains(entry.section), !declared.contains(entry.section),
                  seen.insert(entry.section).inserted else { return nil }
            return "\(entry.origin): [\(entry.section)]: no plugin loaded (from "
                + pluginDirectories.joined(separator: ", ") + ") provides \"\(entry.section)\", "
                + "and the configuration does not declare it: its keys are not checked"
        }
    }

    /// Problems make the exit status 1; warnings (ConfigWarnings) are printed the
    /// same way and leave it 0.
    private static func finish(_ problems: [String], warnings: [String], files: ConfigFiles) -> Never {
        for problem in problems + warnings { printError(problem.escapedForLog) }
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
