import PermissionsModel
internal import DBusKit
import PermissionsSupport
import PermissionsConfig
internal import SystemPrimitives

/// Decides which configuration is in force, and applies each one whole or not at all.
///
/// - The files are read, parsed and waited for (while an editor saves) away from
///   the serving queue, by ConfigReader; this class gets each reading whole
///   (`offer`), on the serving queue, and the switch to it is quick: the daemon's
///   own keys and declared permissions checked, the service's settings set.
/// - A new configuration is validated as a whole before any of it applies: every
///   file must parse, the daemon's own keys and declared permissions must be valid,
///   and every plugin must accept its part: first through its `validate` entry
///   (ABI 1.1), which checks without applying; a plugin without one can only say
///   no by refusing `configure`, so the plugins are then configured and, when one
///   rejects its part, those that accepted theirs are configured again with the
///   last good configuration (a rollback); meanwhile the service holds back state
///   changes, so clients see nothing of a refused configuration. Plugins are called
///   on their own threads (PluginHost), never on the serving queue.
/// - Readings that come while one is being tried wait, and only the latest of them
///   is tried next: each supersedes those before it.
/// - A file or drop-in directory that exists but cannot be read (a dangling link,
///   EACCES, ELOOP) is an error, never "absent": the configuration is kept.
/// - At start-up, configuration files that cannot be used mean the last good copy
///   (LastGoodConfiguration); with no copy, the fail-safe: every permission reads
///   "disabled" until a usable configuration arrives. Never "no restrictions". The
///   copy is written on a queue of its own (it is fsynced), once the plugins have
///   taken the configuration it holds and before the service switches to it.
///
/// The outcome is the service's ConfigGeneration and ConfigStatus. Confined to the
/// daemon queue.
///
/// It talks to the plugins, the service and the last good copy through protocols
/// of its own (ConfigurablePlugins, ConfiguredService, LastGoodStore), so that unit
/// tests drive it with fakes and no bus (Tests/PermissionsCoreTests/ConfigApplierTests.swift).
final class ConfigApplier<Plugins: ConfigurablePlugins> {
    /// The host's process for [identity] host-pid= (nil: the key is absent); the
    /// daemon's --host-pid, when given, wins over the key.
    var hostPID: (CoreConfig.HostPID?) -> UInt32 = { _ in 1 }
    let lastGood: any LastGoodStore
    let host: Plugins
    let service: any ConfiguredService
    let queue: Queue
    /// Writes the last good copy, off the serving queue.
    private let saving = Queue(label: "org.example.Permissions.last-good", priority: .utility)

    /// The configuration in force, what it says, and the plugins' part of it.
    private var applied: [ConfigEntry] = []
    private var appliedSettings = ConfigFiles.Settings([])
    private var appliedForPlugins: [ConfigEntry] = []
    private var core = CoreConfig()
    private var generation: UInt32 = 0
    /// Why the daemon does not run on its configuration files (set at start-up when
    /// they could not be used; cleared once they can).
    private var degraded: String?
    /// A configuration is being tried (or start-up has not put one in force yet):
    /// readings wait for it.
    private var applying = true
    /// The latest reading that came meanwhile.
    private var waiting: ConfigReading?
    /// Until start-up's configuration is in force (`save`).
    private var startingUp = true

    init(lastGood: any LastGoodStore, host: Plugins, service: any ConfiguredService, queue: Queue) {
        self.lastGood = lastGood
        self.host = host
        self.service = service
        self.queue = queue
    }

    // MARK: Start-up

    /// Once the plugins are loaded: puts start-up's reading of the configuration
    /// files in force, else the last good copy, else the fail-safe; then `done`.
    func start(_ reading: ConfigReading, done: @escaping () -> Void) {
        let finished = { [self] in
            startingUp = false
            applying = false
            done()
            tryWaiting()
        }
        switch reading.entries {
        case .failure(let error):
            startDegraded(error.description, finished)
        case .success(let entries):
            tryApply(entries, settings: reading.settings, keep: true) { [self] outcome in
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
        // Read here, on the serving queue: only at start-up, before the name is owned.
        switch lastGood.load() {
        case nil:
            failSafe("no last good configuration")
        case .failure(let error)?:
            failSafe("the last good configuration cannot be read either (\(error))")
        case .success(let entries)?:
            tryApply(entries, settings: ConfigFiles.Settings(entries), keep: false) { [self] outcome in
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

    /// A reading of the files after start-up's (ConfigReader).
    func offer(_ reading: ConfigReading) {
        if applying {
            if let superseded = waiting {
                logDebug("reading \(superseded.number) of the configuration superseded by reading \(reading.number)")
            }
            waiting = reading
            return
        }
        consider(reading)
    }

    private func tryWaiting() {
        guard let reading = waiting else { return }
        waiting = nil
        consider(reading)
    }

    private func consider(_ reading: ConfigReading) {
        let entries: [ConfigEntry]
        switch reading.entries {
        case .failure(let error): return refuse(error.description)
        case .success(let read): entries = read
        }
        if !service.disabledForLackOfConfiguration, reading.settings == appliedSettings {
            // Nothing to apply. The files say what is in force (again): say so.
            if degraded != nil { logInfo("the configuration files now say what is in force; running on them") }
            degraded = nil
            applied = entries
            return publishState(status: "ok")
        }
        applying = true
        logInfo("configuration changed; applying it")
        tryApply(entries, settings: reading.settings, keep: true) { [self] outcome in
            applying = false
            switch outcome {
            case .applied: accepted()
            case .rejected(let problem): refuse(problem)
            }
            tryWaiting()
        }
    }

    // MARK: Applying

    private enum Outcome {
        case applied
        case rejected(String)
    }

    /// Validates `entries` as a whole, then applies all of them, or none; once every
    /// plugin has taken them, and before the service switches to them, `keep` makes
    /// them the last good copy.
    private func tryApply(_ entries: [ConfigEntry], settings: ConfigFiles.Settings, keep: Bool,
                          done: @escaping (Outcome) -> Void) {
        var problems: [String] = []
        let (newCore, forPlugins) = CoreConfig.split(entries, previous: core, reject: { problems.append($0) })
        let declared = newCore.declaredSnapshots(entries: forPlugins, providedByPlugins: host.declaredPermissions,
                                                 previous: service.declared, reject: { problems.append($0) })
        if let problem = problems.first { return done(.rejected(problem)) }
        host.validateAll(forPlugins) { [self] problems in
            if let problem = problems.first { return done(.rejected(problem)) }
            service.holdChanges()
            host.configure(forPlugins, only: nil) { [self] results in
                if let rejection = results.lazy.compactMap(\.rejection).first {
                    // Undone: those that took it go back to the last good configuration.
                    let accepted = results.filter { $0.rejection == nil }.map(\.plugin)
                    host.configure(appliedForPlugins, only: accepted) { [self] _ in
                        service.releaseChanges()
                        done(.rejected(rejection))
                    }
                    return
                }
                // The switch: one block on the serving queue, after the copy is kept.
                let switchOver = { [self] in
                    core = newCore
                    service.takeSettings(newCore, hostPID: hostPID(newCore.hostPID))
                    for warning in ConfigWarnings.of(entries, interpreters: newCore.interpreters) {
                        logWarning(warning.escapedForLog)
                    }
                    service.setDeclared(declared)
                    service.disabledForLackOfConfiguration = false
                    applied = entries
                    appliedSettings = settings
                    appliedForPlugins = forPlugins
                    service.releaseChanges()
                    done(.applied)
                }
                if keep, !(startingUp && lastGood.holds(entries)) {
                    save(entries, then: switchOver)
                } else {
                    switchOver()
                }
            }
        }
    }

    /// Writes `entries` as the last good copy, off the serving queue (it is fsynced),
    /// then runs `then` on it. Start-up's first configuration looks first, here, at
    /// whether the copy holds it already, as it does at every start but the first
    /// after a change: then the switch does not wait for a turn of the saving queue
    /// (doc/performance.md, "Start-up's own work, counted"). The look is made in
    /// the block that switches, so what it saw is what the copy holds when the
    /// configuration goes into force; the serving queue serves nobody yet.
    private func save(_ entries: [ConfigEntry], then: @escaping () -> Void) {
        let lastGood = lastGood
        let queue = queue
        let then = QueueConfined(then)
        saving.async {
            lastGood.save(entries)
            queue.async { then.value() }
        }
    }

    /// The configuration files are in force.
    private func accepted() {
        generation += 1
        if degraded != nil { logInfo("the configuration files can be used again; running on them") }
        degraded = nil
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
