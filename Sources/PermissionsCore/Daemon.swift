internal import PluginKit
public import DBusKit
internal import Glibc
internal import Dispatch

/// How permissionsd was asked to run (its command-line options).
public struct DaemonOptions: Sendable {
    public var bus: Bus = .system
    public var configDirectory = "/etc/permissions"
    public var stateDirectory: String?
    public var pluginDirectories: [String] = []
    public var verbose = false

    public init() {}

    /// The state directory: as given, else /var/lib/permissions on the system bus
    /// and $XDG_STATE_HOME/permissions (~/.local/state/permissions) otherwise.
    public var resolvedStateDirectory: String {
        if let stateDirectory { return stateDirectory }
        if bus == .system { return "/var/lib/permissions" }
        if let xdg = getenv("XDG_STATE_HOME").map({ String(cString: $0) }), xdg.hasPrefix("/") {
            return xdg + "/permissions"
        }
        let home = getenv("HOME").map { String(cString: $0) } ?? "/root"
        return home + "/.local/state/permissions"
    }

    /// The plugin directories: as given, else the directory of the executable when it
    /// holds plugins (a build tree: `swift run permissionsd` finds the plugins the same
    /// build made), then <exe>/../lib/permissions/plugins, /usr/local/lib/… and /usr/lib/….
    public var resolvedPluginDirectories: [String] {
        if !pluginDirectories.isEmpty { return pluginDirectories }
        var result: [String] = []
        if let exe = Files.readLink("/proc/self/exe"), let slash = exe.lastIndex(of: "/") {
            let dir = String(exe[..<slash])
            if !PluginHost.pluginFiles(in: dir).isEmpty { result.append(dir) }
            result.append(dir + "/../lib/permissions/plugins")
        }
        return result + ["/usr/local/lib/permissions/plugins", "/usr/lib/permissions/plugins"]
    }
}

/// permissionsd: wires the bus, the store, the plugins and the config together on
/// one serial queue, then serves until SIGTERM/SIGINT or the bus goes away.
public final class Daemon {
    let options: DaemonOptions
    let queue = DispatchQueue(label: "org.example.Permissions")
    private var connection: Connection!
    private var service: PermissionsService!
    private var host: PluginHost!
    private var watcher: ConfigWatcher?
    private var pluginWatcher: PluginDirectoryWatcher?
    private var lastConfig: [ConfigEntry] = []
    private var coreConfig = CoreConfig()
    private var signalSources: [any DispatchSourceSignal] = []
    private static let queueKey = DispatchSpecificKey<Bool>()

    public init(options: DaemonOptions) {
        self.options = options
        queue.setSpecific(key: Self.queueKey, value: true)
    }

    /// Starts on the queue and never returns.
    public func run() -> Never {
        Log.shared.verbose = options.verbose
        signal(SIGPIPE, SIG_IGN)
        // A parent may have left SIGTERM/SIGINT blocked in the mask we inherit (a
        // process spawned from a dispatch thread does); we handle them ourselves.
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGINT)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        let me = QueueConfined(self)
        queue.async { me.value.start() }
        dispatchMain()
    }

    private func fail(_ message: String) -> Never {
        logError(message)
        exit(1)
    }

    private func start() {
        let stateDirectory = options.resolvedStateDirectory
        guard Files.makeDirectories(stateDirectory, mode: 0o700) else {
            fail("cannot create the state directory \(stateDirectory): \(String(cString: strerror(errno)))")
        }
        let store: DecisionStore
        do {
            store = try DecisionStore(path: stateDirectory + "/decisions.sqlite")
        } catch {
            fail("cannot open the decision store: \(error)")
        }
        do {
            connection = try Connection.open(options.bus, queue: queue)
        } catch {
            fail("cannot connect to the bus: \(error)")
        }
        connection.onError = { logWarning("D-Bus: \($0.message)") }
        connection.onDisconnect = { [unowned self] in
            // A connection we could not serve is a failure, for the service manager to restart.
            if let failure = self.connection.failure {
                logError("\(failure.message); exiting")
                exit(1)
            }
            logInfo("the bus closed the connection; exiting")
            exit(0)
        }

        host = PluginHost(queue: queue)
        let callers = CallerCache(connection: connection, reader: IdentityReader())
        service = PermissionsService(connection: connection, store: store, plugins: host, callers: callers,
                                     authorizer: Authorizer(connection: connection, systemBus: options.bus == .system))
        host.onPublish = { [unowned self] _, batch in
            for snapshot in batch { self.service.refresh(snapshot.permission) }
        }
        host.onChange = { [unowned self] plugin in self.service.pluginChanged(plugin) }
        host.onListChange = { [unowned self] in self.service.pluginsChanged() }
        service.expireDecisions()  // those that ran out while the daemon was stopped
        service.quiet = true  // no signals for the first snapshots, before we own the name
        let configFiles = ConfigFiles(directory: options.configDirectory)
        do {
            lastConfig = try configFiles.load()
        } catch {
            logError("\(error); starting with no configuration")
        }
        let directories = options.resolvedPluginDirectories
        host.loadAll(from: directories, config: applyCoreConfig(lastConfig)) { [unowned self] in
            // Every plugin has started (or failed, or passed its deadline). Publications
            // made during init were queued before this runs, so they are in.
            self.serve(directories: directories, configFiles: configFiles, stateDirectory: stateDirectory)
        }
    }

    /// Second half of start-up: watch config and plugin directories, own the name.
    private func serve(directories: [String], configFiles: ConfigFiles, stateDirectory: String) {
        if host.plugins.isEmpty {
            logWarning("no plugin loaded from \(directories.joined(separator: ", "))")
        }
        watcher = ConfigWatcher(files: configFiles, queue: queue) { [unowned self] in self.reloadConfig(configFiles) }
        pluginWatcher = PluginDirectoryWatcher(directories: directories, queue: queue,
                                               fileChanged: { [unowned self] name in self.host.fileChanged(name: name) },
                                               rescan: { [unowned self] in self.host.rescan() })
        host.rescan()  // what came or changed while the plugins were loading, before the watch
        service.quiet = false
        service.pluginsChanged()

        do {
            switch try connection.requestName(PermissionsService.busName) {
            case .primaryOwner, .alreadyOwner: break
            case .exists, .inQueue: fail("\(PermissionsService.busName) is already owned on this bus")
            }
        } catch {
            fail("cannot own \(PermissionsService.busName): \(error)")
        }
        for number in [SIGTERM, SIGINT] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { [unowned self] in self.stop() }
            source.resume()
            signalSources.append(source)
        }
        logInfo("serving \(PermissionsService.busName) as \(connection.uniqueName) with "
                + "\(service.permissions.count) permissions from \(host.plugins.count) plugins; "
                + "store \(stateDirectory)/decisions.sqlite")
    }

    private func reloadConfig(_ files: ConfigFiles) {
        let entries: [ConfigEntry]
        do {
            entries = try files.load()
        } catch {
            logError("\(error); keeping the last good configuration")
            return
        }
        guard entries != lastConfig else { return }
        lastConfig = entries
        logInfo("configuration changed; applying it")
        host.configureAll(applyCoreConfig(entries))
    }

    /// Takes the daemon's own keys (CoreConfig) and returns the plugins' entries.
    private func applyCoreConfig(_ entries: [ConfigEntry]) -> [ConfigEntry] {
        let (core, rest) = CoreConfig.split(entries, previous: coreConfig)
        coreConfig = core
        service.noAgentDefaults = core.noAgent
        service.broker.agentTimeoutMilliseconds = Int32(core.agentTimeoutSeconds * 1000)
        service.setDeclared(core.declaredSnapshots(entries: rest, providedByPlugins: Set(host.providers.keys),
                                                   previous: service.declared))
        return rest
    }

    private func stop() {
        logInfo("stopping")
        service.broker.shutdown()
        connection.flush()
        host.stopAll()
        connection.close()
        exit(0)
    }
}
