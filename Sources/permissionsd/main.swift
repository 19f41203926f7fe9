// permissionsd: the permissions service. Options are permissionsd(8)'s (doc/man/); everything else
// lives in PermissionsDaemon (start-up and wiring) and the other Permissions* targets (Sources/README.md).
import CLISupport
import CShims
import DBusKit
import Glibc
import PermissionsModel
import PermissionsDaemon
import PermissionsSupport

// SIGTERM and SIGINT blocked first, before option parsing or anything else of ours,
// so that a stop sent the moment the process exists stays pending until
// Daemon.run's signal sources take it (a clean stop, exit 0) instead of killing
// the process with the default action. What remains before this line is the
// dynamic loader and the Swift runtime's own start-up; a service manager that
// must not lose a stop there starts the daemon with them blocked (the mask is
// inherited across exec). --help, --version and usage errors exit normally.
do {
    var stopSignals = sigset_t()
    sigemptyset(&stopSignals)
    sigaddset(&stopSignals, SIGTERM)
    sigaddset(&stopSignals, SIGINT)
    pthread_sigmask(SIG_BLOCK, &stopSignals, nil)
}
// Then descriptors 0-2 open before anything opens a file (see StandardDescriptors).
StandardDescriptors.ensureOpen()

let usage = """
    Usage: permissionsd [OPTIONS]

    Serve org.example.Permissions on a D-Bus bus.

      --system             the system bus (the default)
      --session            the session bus
      --address ADDRESS    the bus at ADDRESS
      --config-dir DIR     configuration directory (default /etc/permissions)
      --state-dir DIR      where decisions are stored (default /var/lib/permissions on
                           the system bus, ~/.local/state/permissions otherwise)
      --plugin-dir DIR     a plugin directory; may repeat (default: the build tree when
                           run from one, then <exe>/../lib/permissions/plugins,
                           /usr/local/lib/permissions/plugins, /usr/lib/permissions/plugins)
                           An installed daemon's defaults are the directories of its
                           install (scripts/install --sysconfdir, --localstatedir, --prefix).
      --host-pid PID|self  the process whose mount namespace is the host's (default 1
                           on the system bus, permissionsd itself (self) otherwise):
                           callers elsewhere get no executable-path identity
      --user-runtime-root DIR
                           where each user's runtime directory is, DIR/UID
                           (default /run/user on the system bus; on a session bus
                           or --address, the user's own environment decides unless
                           this is given)
      --connector-socket PATH
                           where permissionsd-connector listens, asked for a
                           user's socket this daemon may not connect to itself
                           (default /run/permissionsd-connector.socket on the
                           system bus; none otherwise unless this is given)
      --decisions-idle SECONDS
                           how long the stored decisions of a user who is not here
                           (no connection, subscription, session grant, waiting
                           call or prompt, PipeWire remote) stay in memory
                           (default 300); their next call reads them again
      --verbose            log debug messages
      --check-config       check the configuration (and each plugin's part of it)
                           as the daemon would, print every problem, apply nothing;
                           exit 0 if it is valid, 1 if not
      --version            show the package and interface versions
      -h, --help           show this help

    Started by D-Bus activation with no bus option, it serves the bus that
    started it (DBUS_STARTER_ADDRESS, DBUS_STARTER_BUS_TYPE).

    """

let specs = ["system", "session", "verbose", "help", "version", "check-config"].map { OptionSpec($0) }
    + ["address", "config-dir", "state-dir", "plugin-dir", "host-pid", "user-runtime-root",
       "connector-socket", "decisions-idle"].map { OptionSpec($0, takesValue: true) }

/// The options, checked; --help, --version, --check-config and usage errors exit here.
/// A function, not top-level code: a global `var` would be shared mutable state.
func parsedOptions() -> DaemonOptions {
    var options = DaemonOptions()
    do {
        let parsed = try parseOptions(Array(CommandLine.arguments.dropFirst()), specs: specs, stopAtFirstPositional: false)
        try answerHelpAndVersion(parsed, usage: usage) { Versions.line(program: "permissionsd") }
        let busChoices = ["system", "session", "address"].filter(parsed.has)
        if busChoices.count > 1 { throw UsageError(description: "choose one of --system, --session, --address") }
        if busChoices.isEmpty, let starter = Activation.starterBus() { options.bus = starter }
        if parsed.has("session") { options.bus = .session }
        if let address = parsed.last("address") { options.bus = .address(address) }
        if let dir = parsed.last("config-dir") { options.configDirectory = dir }
        options.stateDirectory = parsed.last("state-dir")
        options.pluginDirectories = parsed.all("plugin-dir")
        if let pid = parsed.last("host-pid") {
            // "self": the daemon's own namespace is the host's (a container whose apps
            // share it, where PID 1 of the host cannot be read).
            if pid == "self" {
                options.hostPID = UInt32(getpid())
            } else {
                guard let value = UInt32(pid), value > 0 else {
                    throw UsageError(description: "invalid --host-pid \(pid.quotedForUsage)")
                }
                options.hostPID = value
            }
        }
        if let root = parsed.last("user-runtime-root") {
            guard root.hasPrefix("/") else {
                throw UsageError(description: "--user-runtime-root must be an absolute path: \(root.quotedForUsage)")
            }
            options.userRuntimeRoot = root
        }
        if let socket = parsed.last("connector-socket") {
            guard socket.hasPrefix("/") else {
                throw UsageError(description: "--connector-socket must be an absolute path: \(socket.quotedForUsage)")
            }
            options.connectorSocket = socket
        }
        if let idle = parsed.last("decisions-idle") {
            guard let seconds = Int(idle), (0...86_400).contains(seconds) else {
                throw UsageError(description: "invalid --decisions-idle \(idle.quotedForUsage): seconds, from 0 to 86400")
            }
            options.decisionsIdleSeconds = seconds
        }
        options.verbose = parsed.has("verbose")
        InstalledPaths.applyDefaults(to: &options, parsed: parsed)
        if parsed.has("check-config") {
            ConfigCheck.run(configDirectory: options.configDirectory, pluginDirectories: options.resolvedPluginDirectories)
        }
    } catch {
        printError("permissionsd: \(error)\nTry 'permissionsd --help'.")
        exit(2)
    }
    return options
}

cshims_tune_malloc()  // see cshims.h: before any other thread allocates
let options = parsedOptions()
Daemon(options: options).run()
