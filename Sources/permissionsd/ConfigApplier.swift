import PermissionsModel
internal import DBusKit
internal import Dispatch
import PermissionsSupport
import PermissionsPluginHost
import PermissionsConfig
import PermissionsService

/// Decides which configuration is in force, and applies each one whole or not at all.
///
/// - A new configuration is validated as a whole before any of it applies: every
///   file must parse, the daemon's own keys and declared permissions must be valid,
///   and every plugin must accept its part: first through its `validate` entry
///   (ABI 1.1), which checks without applying; a plugin without one can only say
///   no by refusing `configure`, so the plugins are then configured and, when one
///   rejects its part, those that accepted theirs are configured again with the
///   last good configuration (a rollback); meanwhile the service holds back state
///   changes, so clients see nothing of a refused configuration.
/// - A file of the configuration that is gone (an editor's save renames the old file
///   away before it writes the new one) puts everything off until it is back, or
///   until it has been gone for a whole `settleWindow`: then it is really gone. Each
///   file has its own window (one gone later waits its full window too).
/// - A file or drop-in directory that exists but cannot be read (a dangling link,
///   EACCES, ELOOP) is an error, never "absent": the configuration is kept.
/// - At start-up, configuration files that cannot be used mean the last good copy
///   (LastGoodConfiguration); with no copy, the fail-safe: every permission reads
///   "disabled" until a usable configuration arrives. Never "no restrictions".
///
/// The outcome is the service's ConfigGeneration and ConfigStatus. Confined to the
/// daemon queue.
final class ConfigApplier {
    /// The host's process for [identity] host-pid= (nil: the key is absent); the
    /// daemon's --host-pid, when given, wins over the key.
    var hostPID: (CoreConfig.HostPID?) -> UInt32 = { _ in 1 }
    static let settleWindow = DispatchTimeInterval.milliseconds(500)

    let files: ConfigFiles
    let lastGood: LastGoodConfiguration
    let host: PluginHost
    let service: PermissionsService
    let queue: DispatchQueue

    /// The configuration in force, and the plugins' part of it.
    private var applied: [ConfigEntry] = []
    private var appliedForPlugins: [ConfigEntry] = []
    private var core = CoreConfig()
    private var generation: UInt32 = 0
    /// Why the daemon does not run on its configuration files (set at start-up when
    /// they could not be used; cleared once they can).
    private var degraded: String?
    /// The files of the configuration last read: one of them gone means wait.
    private var knownFiles: Set<String> = []
    /// Since when each file of the configuration has been gone or unfinished.
    private var missingSince: [String: DispatchTime] = [:]
    /// Counts scheduled readings, so that one superseded does nothing when it comes.
    private var wakeUps = 0
    private var reloadScheduled = false
    /// A configuration is being tried (or start-up has not put one in force yet):
    /// readings wait for it.
    private var applying = true
    private var reloadWhenApplied = false
    /// Parts of the configuration created and not yet closed by their writer
    /// (ConfigWatcher): not whole yet, so they count as not there.
    var beingWritten: () -> Set<String> = { [] }
    /// Handles the file events queued now and returns how many there were so far
    /// (ConfigWatcher.catchUp): a reading is trusted only if none came during it.
    var catchUp: () -> UInt64 = { 0 }

    init(files: ConfigFiles, lastGood: LastGoodConfiguration, host: PluginHost, service: PermissionsService,
         queue: DispatchQueue) {
        self.files = files
        self.lastGood = lastGood
        self.host = host
        self.service = service
        self.queue = queue
    }

    // MARK: Start-up

    /// Once the plugins are loaded: puts the configuration files in force, else the
    /// last good copy, else the fail-safe; then `done`.
    func start(done: @escaping () -> Void) {
        let finished = { [self] in
            applying = false
            done()
            reloadIfAsked()
        }
        let reading = files.read()
        knownFiles = Set(reading.files)
        switch reading.entries {
        case .failure(let error):
            startDegraded(error.description, finished)
        case .success(let entries):
            tryApply(entries) { [self] outcome in
                switch outcome {
                case .applied:
                    accepted()
                    finished()
                case .rejected(let problem):
                    startDegraded(problem, finished)
                }
            }
        }
    }

    private func startDegraded(_ problem: String, _ done: @escaping () -> Void) {
        let failSafe = { [self] (why: String) in
            degraded = "\(why); every permission is disabled until a usable configuration arrives"
            service.disabledForLackOfConfiguration = true
            logError("\(problem); \(degraded!)".escapedForLog)
            publishState(status: "degraded: \(problem); \(degraded!)")
            done()
        }
        switch lastGood.load() {
        case nil:
            failSafe("no last good configuration")
        case .failure(let error)?:
            failSafe("the last good configuration cannot be read either (\(error))")
        case .success(let entries)?:
            tryApply(entries) { [self] outcome in
                switch outcome {
                case .applied:
                    generation += 1
                    degraded = "started from the last good configuration, \(lastGood.path)"
                    logError("\(problem); \(degraded!)".escapedForLog)
                    publishState(status: "degraded: \(problem); \(degraded!)")
                    done()
                case .rejected(let copyProblem):
                    failSafe("the last good configuration is refused too (\(copyProblem))")
                }
            }
        }
    }

    // MARK: Reloading

    /// The watcher saw a change: reads the files again, once for a burst of events.
    func changed() {
        guard !reloadScheduled else { return }
        reloadScheduled = true
        let me = QueueConfined(self)
        queue.async {
            me.value.reloadScheduled = false
            me.value.reload()
        }
    }

    private func reloadIfAsked() {
        if reloadWhenApplied {
            reloadWhenApplied = false
            reload()
        }
    }

    private func reload() {
        if applying {
            reloadWhenApplied = true
            return
        }
        // What the files held while no event came: an event during the reading (a file
        // created, say, but not yet written) has scheduled another reading.
        let events = catchUp()
        let reading = files.read()
        guard catchUp() == events else { return }
        var present = Set(reading.files)
        if let unlisted = reading.unlisted {
            // Which of its files are there is not known: none counts as gone.
            present.formUnion(knownFiles.filter { Files.directoryName($0) == unlisted })
        }
        let gone = knownFiles.subtracting(present)
        let unfinished = beingWritten()
        // Each file waited for has its own window: applied as gone only when it has
        // been gone (or unfinished) for all of it, so the log line is true of each.
        let waiting = gone.union(unfinished)
        let now = DispatchTime.now()
        missingSince = missingSince.filter { waiting.contains($0.key) }
        let newlyMissing = waiting.filter { missingSince[$0] == nil }
        for file in newlyMissing { missingSince[file] = now }
        if let latest = missingSince.values.max(), now < latest + Self.settleWindow {
            if !newlyMissing.isEmpty {
                logDebug(("\(newlyMissing.sorted().joined(separator: ", ")) gone or being written; waiting up to "
                          + "\(Self.settleWindowMilliseconds) ms for \(newlyMissing.count == 1 ? "it" : "them") to be back whole")
                         .escapedForLog)
            }
            return wakeUp(at: latest + Self.settleWindow)
        }
        if !gone.isEmpty {
            logInfo(("\(gone.sorted().joined(separator: ", ")) gone for \(Self.settleWindowMilliseconds) ms; "
                     + "applying the configuration without \(gone.count == 1 ? "it" : "them")").escapedForLog)
        }
        if !unfinished.isEmpty {
            logInfo(("\(unfinished.sorted().joined(separator: ", ")) still open for writing after "
                     + "\(Self.settleWindowMilliseconds) ms; reading \(unfinished.count == 1 ? "it" : "them") as it is")
                    .escapedForLog)
        }
        missingSince = [:]
        wakeUps += 1  // a pending wake-up has nothing left to do
        knownFiles = present

        let entries: [ConfigEntry]
        switch reading.entries {
        case .failure(let error): return refuse(error.description)
        case .success(let read): entries = read
        }
        if !service.disabledForLackOfConfiguration, ConfigFiles.sameSettings(entries, applied) {
            // Nothing to apply. The files say what is in force (again): say so.
            if degraded != nil { logInfo("the configuration files now say what is in force; running on them") }
            degraded = nil
            applied = entries
            return publishState(status: "ok")
        }
        applying = true
        logInfo("configuration changed; applying it")
        tryApply(entries) { [self] outcome in
            applying = false
            switch outcome {
            case .applied: accepted()
            case .rejected(let problem): refuse(problem)
            }
            reloadIfAsked()
        }
    }

    private static var settleWindowMilliseconds: Int {
        if case .milliseconds(let ms) = settleWindow { return ms }
        return 0
    }

    /// Reads again at `deadline`, unless a later reading has settled things first.
    private func wakeUp(at deadline: DispatchTime) {
        wakeUps += 1
        let wakeUp = wakeUps
        let me = QueueConfined(self)
        queue.asyncAfter(deadline: deadline) {
            guard me.value.wakeUps == wakeUp else { return }
            me.value.reload()
        }
    }

    // MARK: Applying

    private enum Outcome {
        case applied
        case rejected(String)
    }

    /// Validates `entries` as a whole, then applies all of them, or none.
    private func tryApply(_ entries: [ConfigEntry], done: @escaping (Outcome) -> Void) {
        var problems: [String] = []
        let (newCore, forPlugins) = CoreConfig.split(entries, previous: core, reject: { problems.append($0) })
        let declared = newCore.declaredSnapshots(entries: forPlugins, providedByPlugins: Set(host.providers.keys),
                                                 previous: service.declared, reject: { problems.append($0) })
        if let problem = problems.first { return done(.rejected(problem)) }
        host.validateAll(forPlugins) { [self] problems in
            if let problem = problems.first { return done(.rejected(problem)) }
            service.holdChanges()
            host.configureAll(forPlugins) { [self] results in
                if let rejection = results.lazy.compactMap(\.rejection).first {
                    // Undone: those that took it go back to the last good configuration.
                    let accepted = results.filter { $0.rejection == nil }.map(\.plugin)
                    host.configureAll(appliedForPlugins, only: accepted) { [self] _ in
                        service.releaseChanges()
                        done(.rejected(rejection))
                    }
                    return
                }
                core = newCore
                service.noAgentDefaults = newCore.noAgent
                service.agentTimeoutMilliseconds = Int32(newCore.agentTimeoutSeconds * 1000)
                service.callLimits = newCore.callLimits
                service.setInterpreters(newCore.interpreters)
                service.setHostPID(hostPID(newCore.hostPID))
                for warning in ConfigWarnings.of(entries, interpreters: newCore.interpreters) {
                    logWarning(warning.escapedForLog)
                }
                service.setDeclared(declared)
                service.disabledForLackOfConfiguration = false
                applied = entries
                appliedForPlugins = forPlugins
                service.releaseChanges()
                done(.applied)
            }
        }
    }

    /// The configuration files are in force.
    private func accepted() {
        generation += 1
        if degraded != nil { logInfo("the configuration files can be used again; running on them") }
        degraded = nil
        lastGood.save(applied)
        publishState(status: "ok")
        host.retryConfigurationRefusals()
    }

    /// A plugin that came while the daemon runs refused the configuration in force
    /// (logged by the host; it does not serve): shown until another one applies.
    func pluginRefused(_ problem: String) {
        publishState(status: degraded.map { "degraded: \(problem); \($0)" } ?? "kept: \(problem)")
    }

    private func refuse(_ problem: String) {
        logError("\(problem); keeping the last good configuration".escapedForLog)
        publishState(status: degraded.map { "degraded: \(problem); \($0)" } ?? "kept: \(problem)")
    }

    private func publishState(status: String) {
        service.setConfigState(generation: generation, status: status)
    }
}
