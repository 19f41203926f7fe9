internal import PermissionsModel
public import DBusKit
internal import Glibc
internal import CShims
import PermissionsSupport
import PermissionsStore
import PermissionsPluginHost
import PermissionsIdentity
import PermissionsConfig
import PermissionsService
internal import SystemPrimitives

/// How permissionsd was asked to run (its command-line options).
public struct DaemonOptions: Sendable {
    public var bus: Bus = .system
    public var configDirectory = "/etc/permissions"
    public var stateDirectory: String?
    public var pluginDirectories: [String] = []
    public var verbose = false
    /// How long a user who is not here keeps their decisions in memory (--decisions-idle).
    public var decisionsIdleSeconds = 300
    /// The process whose mount namespace counts as the host's (IdentityReader), as
    /// given; else see `resolvedHostPID`.
    public var hostPID: UInt32?
    /// Where each user's runtime directory is (ROOT/UID), as given; else see
    /// `resolvedUserRuntimeRoot`.
    public var userRuntimeRoot: String?
    /// Where permissionsd-connector listens, as given; else see
    /// `resolvedConnectorSocket`.
    public var connectorSocket: String?

    public init() {}

    /// The connector's socket on the system bus: the path of
    /// dbus/permissionsd-connector.socket's ListenSequentialPacket=.
    public static let systemConnectorSocket = "/run/permissionsd-connector.socket"

    /// Where plugins' connect_user_socket asks permissionsd-connector when the
    /// daemon's own privileges fall short: as given, else the connector unit's
    /// socket on the system bus; nil (no connector) otherwise.
    public var resolvedConnectorSocket: String? {
        if let connectorSocket { return connectorSocket }
        return bus == .system ? Self.systemConnectorSocket : nil
    }

    /// What plugins are told of users' runtime directories: as given, else
    /// /run/user on the system bus (many users, each with their own PipeWire and the
    /// like there); nil on a session bus or a given address without the option
    /// (one user, whose own environment says where).
    public var resolvedUserRuntimeRoot: String? {
        if let userRuntimeRoot { return userRuntimeRoot }
        return bus == .system ? "/run/user" : nil
    }

    /// PID 1 on the system bus, where many users share the daemon and a hardened unit
    /// gives the daemon a mount namespace of its own. On a session bus or a given
    /// address (one user; a daemon not running as root cannot read PID 1's
    /// namespace, which would make every caller "unverified"), the daemon itself.
    public var resolvedHostPID: UInt32 {
        if let hostPID { return hostPID }
        return bus == .system ? 1 : UInt32(getpid())
    }

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
///
/// A stop may come at any moment, from the first instruction of `run` on: during
/// start-up it ends start-up (the name is never owned), later it ends serving. Either
/// way every waiting call is answered, every open prompt cancelled, the plugins are
/// stopped, and the exit status is 0.
public final class Daemon {
    let options: DaemonOptions
    let queue = Queue(label: "org.example.Permissions")
    private var connection: Connection!
    private var service: PermissionsService!
    private var store: DecisionCommitter?
    private var host: PluginHost!
    private var pluginWatcher: PluginDirectoryWatcher?
    private var config: ConfigApplier<PluginHost>!
    /// Reads the configuration files for `config`, on a queue of its own.
    private var configReader: ConfigReader!
    /// The store and the bus connection, each from its own thread at start-up,
    /// until both have come (`storeAndBusOpened`).
    private var openedStore: Result<DecisionCommitter, StartFailure>?
    private var connectedBus: Result<Connection.Connected, BusError>?
    /// Start-up's blocks are done (`start`): called by the last one.
    private var startBlocksDone: () -> Void = {}
    /// Who is calling, for the service; made with the bus connection.
    private var callers: CallerCache!
    private var signalSources: [SignalSource] = []
    /// The name is owned (start-up is over).
    private var serving = false

    public init(options: DaemonOptions) {
        self.options = options
    }

    /// Starts on the queue and never returns.
    public func run() -> Never {
        // Stop requests first, before anything else runs. SIGTERM and SIGINT are
        // blocked in this thread before any other thread exists (every thread
        // inherits the mask, and dispatch's threads block them anyway), so one that
        // comes early stays pending until the signal sources' signalfd takes it.
        // Not SIG_IGN: setting it discards a signal already pending, and until the
        // sources are registered an ignored signal is thrown away unless every
        // thread blocks it (a SIGTERM just after start-up was lost that way).
        var stopSignals = sigset_t()
        sigemptyset(&stopSignals)
        sigaddset(&stopSignals, SIGTERM)
        sigaddset(&stopSignals, SIGINT)
        pthread_sigmask(SIG_BLOCK, &stopSignals, nil)
        // The log's settings and its writer, before the first thread that may log
        // (the stop signals' handler) exists: Log reads them unlocked.
        Log.shared.verbose = options.verbose
        Log.shared.useBestSink()
        let me = QueueConfined(self)
        // Taken on a queue of their own, so that a serving queue held in the kernel
        // (a hung disk while the store opens at start-up) cannot keep a stop waiting
        // for ever: the stop runs on the serving queue, and ends the process long
        // before `stopDeadline` unless that queue is held; then the deadline does.
        let signals = Queue(label: "org.example.Permissions.stop-signals")
        let queue = self.queue
        for number in [SIGTERM, SIGINT] {
            let source = SignalSource(signal: number, queue: signals)
            source.setEventHandler {
                queue.async { me.value.stop() }
                signals.asyncAfter(deadline: .now() + .seconds(Self.stopDeadline)) { Self.stopOverdue() }
            }
            source.resume()
            signalSources.append(source)
        }
        signal(SIGPIPE, SIG_IGN)
        // On this thread, through sync (which runs the block on the caller when the
        // queue is idle, as it is here): with async, start-up's first block waited
        // for a dispatch thread to be made and woken (doc/performance.md,
        // "Start-up's own work, counted"). What it queues runs on dispatch's threads.
        queue.sync { me.value.start() }
        // Not dispatch_main() (`runDispatchMain`): it parks this thread in sigsuspend
        // with an empty mask, which unblocks SIGTERM here until the signal sources
        // are registered; a signal then would take its default action. This thread
        // keeps them blocked.
        while true { pause() }
    }

    /// How long a stop may take before the process ends without it: more than the
    /// store's wait for a commit (DecisionCommitter.stopWait) and the plugins' for
    /// fini together.
    static let stopDeadline = 15

    /// The stop has not ended the process by its deadline: the serving queue is held
    /// (in the kernel, by a hung disk under the store). Ends it anyway, with a
    /// failure status: the store may not have been closed.
    private static func stopOverdue() -> Never {
        logError("the stop did not end within \(stopDeadline) s (the serving queue is held: a hung disk?); "
                 + "exiting without it")
        endProcess(1)
    }

    private func fail(_ message: String) -> Never {
        store?.close()
        logError(message)
        Self.endProcess(1)
    }

    /// Ends the process at once, without exit handlers or library destructors. A
    /// plugin thread may still be inside dlopen (a constructor that never returns
    /// holds the dynamic loader's lock, which exit() takes to run destructors, so
    /// exit() would wait forever), or inside code a destructor would tear down.
    /// Nothing of ours needs them: a decision is on disk before its reply is sent,
    /// and the log's last lines are waited for here (for at most
    /// `Log.exitFlushMilliseconds`: a reader that is behind does not hold the exit).
    private static func endProcess(_ status: Int32) -> Never {
        Log.shared.flush()
        _exit(status)
    }

    /// --decisions-idle; in debug builds PERMISSIONS_DEBUG_EVICT_EVERY_MS=N (for
    /// tests) looks every N ms and lets go every user whom only their presence
    /// keeps (ResidencySettings.presencePins), to force loads in the middle of a run.
    private var residencySettings: ResidencySettings {
        let idle = options.decisionsIdleSeconds * 1000
        // At 0, a look every second: a user goes at the first one after they left.
        var settings = ResidencySettings(idleMilliseconds: idle, sweepMilliseconds: idle == 0 ? 1000 : nil)
        #if DEBUG
        if let value = getenv("PERMISSIONS_DEBUG_EVICT_EVERY_MS"), let every = Int(String(cString: value)), every > 0 {
            settings = ResidencySettings(idleMilliseconds: 0, sweepMilliseconds: every, presencePins: false)
        }
        #endif
        return settings
    }

    private func start() {
        // The plugins load side by side with the rest of start-up (the store, the
        // bus, the service), which they do not need: their files are read and
        // checked on their own queues meanwhile, and each comes back to this queue
        // to open (dlopen, one plugin after another) while the store is opened on a
        // thread of its own, and between the blocks that follow it (the bus, the
        // service). Their inits wait for the service (holdStarts), once the host's
        // hooks are set. Start-up goes on when both the plugins and the service are
        // done.
        let directories = options.resolvedPluginDirectories
        let stateDirectory = options.resolvedStateDirectory
        // Before the plugins: their private copies are made in it (PrivateCopy).
        guard Files.makeDirectories(stateDirectory, mode: 0o700) else {
            fail("cannot create the state directory \(stateDirectory): \(errnoName(errno))")
        }
        host = PluginHost(queue: queue, userRuntimeRoot: options.resolvedUserRuntimeRoot,
                          connectorSocket: options.resolvedConnectorSocket, copyDirectory: stateDirectory)
        var startingParts = 2  // the plugins' loading, and the service
        let partDone = { [unowned self] in
            startingParts -= 1
            if startingParts == 0 { self.pluginsLoaded(directories: directories, stateDirectory: stateDirectory) }
        }
        startBlocksDone = partDone
        // The store and the bus wait more than they compute (the disk; the bus
        // daemon's answers to the authentication and Hello): each is opened on a
        // thread of its own, side by side, so that the plugins' steps, which come
        // back to this queue, go on meanwhile (opened here, the store kept their
        // openings waiting for milliseconds), and handed to this queue once both
        // are, to be used only here from then on. They are asked for before the
        // plugins' reads, so that their threads come first: the service they lead
        // to is what the plugins' inits wait for. The connection is attached to
        // this queue, and its handlers set, in one block: none of its messages is
        // routed before them (a Disconnected routed before them was dropped). A
        // store that cannot be opened is said before a bus that cannot be reached.
        let me = QueueConfined(self)
        let queue = self.queue
        let bus = options.bus
        Queue.runOnItsOwn(label: "org.example.Permissions.store-open") {
            let opened = QueueConfined(Self.openStore(stateDirectory: stateDirectory, queue: queue))
            queue.async {
                me.value.openedStore = opened.value
                me.value.storeAndBusOpened(stateDirectory: stateDirectory)
            }
        }
        Queue.runOnItsOwn(label: "org.example.Permissions.bus-connect") {
            let connected = Result { () throws(BusError) in try Connection.connect(bus) }
            queue.async {
                me.value.connectedBus = connected
                me.value.storeAndBusOpened(stateDirectory: stateDirectory)
            }
        }

        // Loaded with no configuration, then given one as a whole (ConfigApplier):
        // nothing is announced before the name is owned. Done: every plugin has
        // started (or failed, or passed its deadline); publications made during
        // init were queued before that, so they are in.
        host.holdStarts()
        host.loadAll(from: directories, config: [], done: partDone)
    }

    /// The decision store, opened, with this start's serial epoch begun; or why not.
    private static func openStore(stateDirectory: String, queue: Queue) -> Result<DecisionCommitter, StartFailure> {
        let store: DecisionCommitter
        do {
            // Commits run on the store's own queue, so that reads never wait for an fsync.
            store = DecisionCommitter(try DecisionStore(path: stateDirectory + "/decisions.sqlite"), queue: queue)
        } catch {
            return .failure(StartFailure(message: "cannot open the decision store: \(error)"))
        }
        do {
            // Stored while the plugins load; waited for before serving (StartEpoch).
            try store.beginStartEpoch(clockSeconds: currentMicroseconds() / 1_000_000)
        } catch {
            return .failure(StartFailure(message: "cannot start serving: \(error)"))
        }
        return .success(store)
    }

    private struct StartFailure: Error {
        let message: String
    }

    /// The store is open and the bus connected: the connection served from here
    /// now, then the service.
    private func storeAndBusOpened(stateDirectory: String) {
        // A store that cannot be opened is said at once, without waiting for a bus
        // that may never answer the handshake (libdbus has no timeout there).
        if case .failure(let failure)? = openedStore { fail(failure.message) }
        guard case .success(let store)? = openedStore, let connected = connectedBus else { return }
        (openedStore, connectedBus) = (nil, nil)
        self.store = store
        serveConnection(connected)
        // In the same block: the plugins' steps that came meanwhile (openings,
        // claims) have nothing to do that does not wait for the service anyway.
        makeService(store: store, stateDirectory: stateDirectory)
    }

    /// The connection served on this queue, with its handlers set in the same
    /// block, before anything it receives is routed.
    private func serveConnection(_ connected: Result<Connection.Connected, BusError>) {
        do {
            connection = try Connection.open(connected.get(), queue: queue)
        } catch {
            fail("cannot connect to the bus: \(error)")
        }
        connection.onError = { logWarning("D-Bus: \($0.message)") }
        connection.onDisconnect = { [unowned self] in
            // A connection we could not serve is a failure, for the service manager to restart.
            self.store?.close()
            if let failure = self.connection.failure {
                logError("\(failure.message); exiting")
                Self.endProcess(1)
            }
            logInfo("the bus closed the connection; exiting")
            Self.endProcess(0)
        }
    }

    /// Start-up's last block: the service, the host's hooks into it, and the
    /// configuration's reader.
    private func makeService(store: DecisionCommitter, stateDirectory: String) {
        var reader = IdentityReader()
        reader.hostPID = options.resolvedHostPID
        callers = CallerCache(connection: connection, reader: reader)
        do {
            let outgoing = OutgoingCalls(connection: connection)
            service = try PermissionsService(connection: connection, store: store, plugins: host, callers: callers,
                                             authorizer: Authorizer(outgoing: outgoing, systemBus: options.bus == .system),
                                             outgoing: outgoing, residency: residencySettings)
        } catch {
            fail("cannot start serving: \(error)")
        }
        service.stopOnFault = { [unowned self] reason in
            logError("\(reason); stopping")
            // As a block of its own (see stop), not inside the handler that found it.
            let me = QueueConfined(self)
            self.queue.async { me.value.stop(status: 1) }
        }
        host.onPublish = { [unowned self] _, publications in self.service.publish(publications) }
        host.onRemoteClosed = { [unowned self] id in self.service.remoteClosed(id) }
        host.onEnforcementLost = { [unowned self] name, count, reason in
            self.service.stopOnFault("plugin \(name), which enforced \(count) connection(s) to its backend, was given up "
                                     + "(\(reason)): stopping, so that nothing it handed out stays unnarrowed; the "
                                     + "next start disconnects them")
        }
        host.onChange = { [unowned self] plugin in
            self.service.pluginChanged(permissions: Set(plugin.info.permissions).union(plugin.latest.keys)
                .union(plugin.latestForUser.keys))
        }
        host.onListChange = { [unowned self] in self.service.pluginsChanged() }
        host.onConfigurationRefused = { [unowned self] problem in self.config.pluginRefused(problem) }
        service.expireDecisions()  // those that ran out while the daemon was stopped
        service.quiet = true  // no signals for the first snapshots, before we own the name
        // Read and watched on a queue of their own; an edit made during start-up is
        // read again, and applied once the first configuration is in force.
        configReader = ConfigReader(files: ConfigFiles(directory: options.configDirectory), serving: queue)
        config = ConfigApplier(lastGood: LastGoodConfiguration(stateDirectory: stateDirectory), host: host,
                               service: service, queue: queue)
        config.hostPID = { [options] configured in
            if let given = options.hostPID { return given }
            switch configured {
            case .pid(let pid)?: return pid
            case .daemon?: return UInt32(getpid())
            case nil: return options.resolvedHostPID
            }
        }
        configReader.deliver = { [unowned self] reading in self.config.offer(reading) }
        host.releaseStarts()
        configReader.readEarly()
        startBlocksDone()
    }

    /// The plugins are loaded and the rest of start-up is done: the configuration
    /// is read and put in force, then the name is owned.
    private func pluginsLoaded(directories: [String], stateDirectory: String) {
        config.start(configReader.start()) { [unowned self] in
            // The configuration has said which process is the host's by now.
            callers.checkHostNamespace()
            serve(directories: directories, stateDirectory: stateDirectory)
        }
    }

    /// Second half of start-up: watch config and plugin directories, own the name.
    private func serve(directories: [String], stateDirectory: String) {
        if host.plugins.isEmpty {
            logWarning("no plugin loaded from \(directories.joined(separator: ", "))")
        }
        pluginWatcher = PluginDirectoryWatcher(directories: directories, queue: queue,
                                               fileChanged: { [unowned self] name in self.host.fileChanged(name: name) },
                                               rescan: { [unowned self] in self.host.rescan() })
        do {
            try store?.startEpochStored()  // before anything can send a serial of it
        } catch {
            fail("cannot start serving: \(error)")
        }
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
        serving = true
        // What came or changed while the plugins were loading: looked at once the
        // watch is set (so nothing falls between the two) and the name owned (it
        // reads and hashes every plugin file again, which no first call needs; a
        // change it finds is announced like any later one). Start-up's tail ends
        // with it.
        host.rescan(done: { [host] in
            // The kept copies of plugins no longer here, once the rescan has found the files.
            host?.removeUnusedCopies()
            Self.startUpOver()
        })
        logInfo("serving \(PermissionsService.busName) as \(connection.uniqueName) with "
                + "\(service.permissions.count) permissions from \(host.plugins.count) plugins; "
                + "store \(stateDirectory)/decisions.sqlite")
    }

    /// Once start-up's tail (the rescan) is over, what it leaves resident for
    /// nothing is given back.
    private static func startUpOver() {
        // Start-up's buffers (plugin files, the store's load) are freed by now, but
        // glibc keeps freed heap resident until told: about 2 MiB of idle RSS.
        _ = cshims_malloc_trim()
        // Start-up ran code that will not run again (the loader, the runtime's
        // registration, plugin loading and the rescan, the store's opening):
        // mapped, it stays resident, and the kernel keeps mapped code from
        // reclaim. Unmapped here, after the rescan, so that its code does not fault
        // straight back in; what runs again later comes back from the page cache.
        // Off the serving queue: the walk takes the loader's lock, which a plugin
        // loaded later may hold in its constructor for good.
        Queue.runOnItsOwn(label: "org.example.Permissions.code-pages", priority: .utility) {
            let released = cshims_release_code_pages()
            logDebug("start-up over: the mappings of \(released / 1024) KiB of code on disk released")
        }
    }

    /// Answers what waits, stops the plugins and exits with `status` (0; 1 when the
    /// service found a fault it cannot serve on, `stopOnFault`). Runs on the queue as one
    /// block that ends the process, so nothing else runs on the queue meanwhile:
    /// calls that arrive now are not read (the bus answers them NoReply once we
    /// are gone), no reply or timer of a call in flight runs, and start-up, if it
    /// is not over, never continues (the name is never owned). During start-up
    /// only the parts made so far exist (none, if the signal came before start()).
    ///
    /// The store closes first (after the commit in progress, if any, whose writes
    /// are answered with their outcome, or as unknown if it has not ended within
    /// DecisionCommitter.stopWait; writes still waiting are not made), before
    /// anything that can block (a flush to the bus, a plugin's stop, the last log
    /// lines to a reader that is behind): its WAL goes into the file
    /// and its EXCLUSIVE lock is released even if the process never finishes
    /// exiting (a resolver thread stuck on a caller's FUSE files keeps the fd table
    /// of an `_exit`ed process alive), so a new daemon can start meanwhile. Nothing
    /// after this writes to it: shutdown answers and cancels, it stores nothing.
    private func stop(status: Int32 = 0) {
        if service != nil { service.beginStopping() }
        store?.close()
        logInfo(serving ? "stopping" : "stopping during start-up")
        if service != nil { service.shutdown() }
        if connection != nil { connection.flush() }
        if host != nil { host.stopAll() }
        if connection != nil { connection.close() }
        Self.endProcess(status)
    }
}
