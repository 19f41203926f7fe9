internal import Glibc
internal import PermissionsModel
internal import PermissionsSupport
internal import SystemPrimitives

/// One resolution of a name (PluginSelection.swift): its copies tried in directory
/// order until one takes over, or none is left. Each copy goes through the same
/// steps, in this order, each one plugin call whose answer picks the next:
///
/// 1. `read`: the file read and checked (PluginFile), its content hash taken. A
///    copy unchanged since it was loaded, or refused before with the same content,
///    goes no further.
/// 2. `open`: dlopen and the descriptor checked (in loadAll's mapping order), then
///    its permissions claimed (in loadAll's claiming order).
/// 3. `initialize`: init.
/// 4. `validate`: the configuration in force checked, without applying it.
/// 5. `configure`: the configuration in force applied; the copy takes over
///    (`PluginHost.takeOver`), and, if the configuration changed meanwhile, is
///    given the new one too.
///
/// Steps 3 to 5 are made ahead, on the plugin's call queue, as soon as the step
/// before returned well (`Ahead`, AheadCall; init from the mapping turn, when it
/// can): this queue still looks at their answers in turn, so they pick the next
/// step as before; only the hand-overs between them are gone from the time a
/// start waits for.
///
/// A copy refused at steps 1 or 2 gives way to the next one (`refuse`); from step 3
/// on the copy takes over whatever happens, serving or unavailable. What init
/// publishes is kept back until the copy takes over: an administrator's settings
/// are in force from the first moment its permissions exist.
///
/// Confined to the daemon queue, like the host. Each pending call holds the
/// resolution until it answers.
final class PluginResolution {
    /// The copy being tried.
    struct Copy {
        let path: String
        let plugin: LoadedPlugin
        /// The copy serving the name now, which this one would replace.
        let current: LoadedPlugin?
    }

    private unowned let host: PluginHost
    private let name: String
    private var candidates: ArraySlice<String>
    /// The first copy refused: what stands for the name when no copy loads.
    private var firstRefusal: PluginInfo?
    private let opened: () -> Void
    private let finished: () -> Void
    /// Runs the claim of step 2 when it is this name's turn to claim (`ClaimTurns`):
    /// at once, but for the names loadAll resolves side by side.
    private let turn: (@escaping () -> Void) -> Void
    /// This name's place among those loadAll maps one after another; nil: it maps at once.
    private let mappingTurn: MappingTurn?

    /// A name's place in a MappingTurns.
    struct MappingTurn: Sendable {
        let turns: MappingTurns
        let index: Int

        func when(_ map: @escaping @Sendable () -> Void) { turns.when(index, map) }
        /// Its copy's dlopen returned: the permissions it declares, nil if refused.
        /// True when the copy will serve (its claim foreseen).
        func mapped(_ permissions: Set<String>?) -> Bool { turns.mapped(index, permissions: permissions) }
        /// It claimed `permissions`, or gave up (none).
        func over(claiming permissions: [String] = []) { turns.over(index, claiming: permissions) }
    }

    init(host: PluginHost, name: String, candidates: [String], turn: @escaping (@escaping () -> Void) -> Void,
         mappingTurn: MappingTurn?, opened: @escaping () -> Void, finished: @escaping () -> Void) {
        self.host = host
        self.name = name
        self.candidates = candidates[...]
        self.turn = turn
        self.mappingTurn = mappingTurn
        self.opened = opened
        self.finished = finished
    }

    /// Tries the next copy; with none left, nothing serves the name.
    func next() {
        let current = host.plugins.first { $0.name == name }
        guard let path = candidates.popFirst() else {
            host.noCopyLoads(name, current: current, standIn: firstRefusal)
            return finished()
        }
        read(Copy(path: path, plugin: host.makePlugin(path: path, name: name), current: current))
    }

    /// The copy is not used (logged once while it stays the same); the next one is tried.
    private func refuse(_ copy: Copy, _ reason: String, hash: UInt64?) {
        let refusal = PluginHost.Refusal(reason: reason, hash: hash)
        if host.refusals[copy.path] != refusal {
            logWarning("plugin \(copy.path): skipped: \(reason)")
            host.refusals[copy.path] = refusal
        } else {
            logDebug("plugin \(copy.path): still skipped, as before")
        }
        if firstRefusal == nil {
            firstRefusal = PluginInfo(name: name, version: "", state: .unavailable, permissions: [], file: copy.path,
                                      reason: reason)
        }
        next()
    }

    // MARK: 1. read

    private func read(_ copy: Copy) {
        let plugin = copy.plugin
        // The serving copy's stamp and hash, taken here (they are the host queue's).
        var known: (stamp: FileStamp, hash: UInt64)?
        if let current = copy.current, current.path == copy.path, let stamp = current.fileStamp,
           let hash = current.contentHash {
            known = (stamp, hash)
        }
        host.call(plugin, "reading", { [known] in plugin.read(known: known) }, then: { self.wasRead(copy, $0) },
                  timedOut: { self.refuse(copy, "reading did not return within the deadline", hash: nil) })
    }

    private func wasRead(_ copy: Copy, _ result: Result<(hash: UInt64, stamp: FileStamp?), PluginFile.Failure>) {
        let plugin = copy.plugin
        let hash: UInt64
        switch result {
        case .failure(.missing):
            host.refusals[copy.path] = nil
            return next()
        case .failure(.refused(let reason)): return refuse(copy, reason, hash: nil)
        case .success(let read):
            hash = read.hash
            plugin.fileStamp = read.stamp
        }
        if let current = copy.current, current.path == copy.path, current.contentHash == hash {
            // The copy serving, unchanged (touched, or written over with the same bytes).
            logDebug("plugin \(copy.path): content unchanged; not loaded again")
            // The call's deadline timer keeps the candidate for a while yet.
            plugin.callQueue.async { plugin.discardRead() }
            if host.refusedNames.removeValue(forKey: name) != nil { host.onListChange?() }
            return finished()
        }
        if let refused = host.refusals[copy.path], refused.hash == hash {
            plugin.callQueue.async { plugin.discardRead() }
            return refuse(copy, refused.reason, hash: hash)
        }
        plugin.contentHash = hash
        open(copy, hash: hash)
    }

    // MARK: 2. open

    private func open(_ copy: Copy, hash: UInt64) {
        let plugin = copy.plugin
        var mapWhen: ((@escaping @Sendable () -> Void) -> Void)?
        // Init runs ahead when this copy's mapping turn passed because it will serve
        // (its claim foreseen, MappingTurns.mapped) and inits are not held; else it
        // is said skipped, before the opening's result is handed over.
        let ahead = Ahead(generation: host.configGeneration, config: host.config, generationNow: host.generationNow)
        let startsHeld = host.startsHeld
        var mapped: @Sendable (String?) -> Void = { _ in ahead.initialize.finished(.skipped) }
        if let mappingTurn {
            mapWhen = { mappingTurn.when($0) }
            // On the plugin's call queue: `info` is the daemon queue's, not yet set.
            mapped = { refusal in
                // A copy abandoned at its opening's deadline (its host calls closed
                // then) is refused here too: its name keeps the turn for the copy it
                // falls back to, and it is never started.
                let abandoned = plugin.hostCallsClosed
                let serves = mappingTurn.mapped(refusal == nil && !abandoned ? plugin.declaredPermissions : nil)
                guard serves, !startsHeld.withLock({ $0 }) else { return ahead.initialize.finished(.skipped) }
                plugin.callQueue.async { ahead.initialize.finished(.returned(Self.start(plugin, ahead))) }
            }
        }
        host.call(plugin, "opening", { plugin.open() },
                  then: { refusal in self.turn { self.wasOpened(copy, hash: hash, refusal: refusal, ahead: ahead) } },
                  timedOut: {
                      plugin.closeHostCalls()
                      self.refuse(copy, "opening did not return within the deadline; plugin abandoned", hash: hash)
                  },
                  turn: mapWhen, through: mappingTurn?.turns.mapper, returned: mapped)
    }

    private func wasOpened(_ copy: Copy, hash: UInt64, refusal: String?, ahead: Ahead) {
        if let refusal { return refuse(copy, refusal, hash: hash) }
        // Every plugin opened before this one counts, started or not; the copy it
        // is to replace does not.
        let taken = host.plugins.filter { $0.name != name } + host.starting.values.filter { $0.name != name }
        let claimed = Set(taken.flatMap(\.info.permissions))
        if let clash = copy.plugin.info.permissions.first(where: claimed.contains),
           let owner = taken.first(where: { $0.info.permissions.contains(clash) }) {
            // An init that ran ahead (MappingTurns foresaw no clash) is undone: fini.
            if !ahead.initialize.skipped { copy.plugin.callQueue.async { copy.plugin.stop() } }
            // Not remembered with its content: it may load once the other plugin goes.
            return refuse(copy, "permission \"\(clash)\" is already provided by plugin \"\(owner.name)\"", hash: nil)
        }
        host.refusals[copy.path] = nil
        host.starting[name] = copy.plugin
        if let reason = copy.plugin.givenUpEarly { host.makeUnavailable(copy.plugin, reason) }
        mappingTurn?.over(claiming: copy.plugin.info.permissions)
        opened()
        host.whenStartsAllowed { self.initialize(copy, ahead: ahead) }
    }

    // MARK: 3. initialize

    /// Init, validate and configure run ahead on the call queue, each straight
    /// after the step before it went well (init, from the mapper's turn), with the
    /// configuration in force when the copy opened; this queue still looks at each
    /// result in turn, with each step's deadline (AheadCall). A configuration
    /// changed meanwhile is validated and configured as before, by calls of its own.
    private struct Ahead {
        let generation: Int
        let config: [ConfigEntry]
        /// The host's generation as it is now (PluginHost.generationNow).
        let generationNow: Locked<Int>
        let initialize = AheadCall<Int32>()
        let validate = AheadCall<[String]>()
        let configure = AheadCall<(rc: Int32, reason: String?)>()
    }

    /// On the call queue: init, then validate and configure queued behind it if
    /// it went well, each said skipped otherwise before init's result is handed over.
    private static func start(_ plugin: LoadedPlugin, _ ahead: Ahead) -> Int32 {
        let (config, validate, configure) = (ahead.config, ahead.validate, ahead.configure)
        // Whether the next step may be made ahead: not for a plugin that stopped
        // taking calls, nor with a configuration that is no longer the one in force
        // (its calls would wait in front of those for the new one).
        let next: @Sendable () -> AheadCall<Int32>.Outcome? = {
            if !plugin.takesCalls { return .closed }
            if ahead.generationNow.withLock({ $0 }) != ahead.generation { return .skipped }
            return nil
        }
        let rc = plugin.start()
        guard rc == 0 else {
            validate.finished(.skipped)
            configure.finished(.skipped)
            return rc
        }
        plugin.callQueue.async {
            if let stop = next() {
                validate.finished(stop.notMade())
                return configure.finished(stop.notMade())
            }
            let problems = plugin.validate(config)
            if problems.isEmpty {
                plugin.callQueue.async {
                    if let stop = next() { return configure.finished(stop.notMade()) }
                    configure.finished(.returned(plugin.configure(config)))
                }
            } else {
                configure.finished(.skipped)
            }
            validate.finished(.returned(problems))
        }
        return rc
    }

    private func initialize(_ copy: Copy, ahead opened: Ahead) {
        let plugin = copy.plugin
        // Init not made ahead: made now, with the configuration in force now.
        let ranAhead = !opened.initialize.skipped
        let ahead = ranAhead ? opened
            : Ahead(generation: host.configGeneration, config: host.config, generationNow: host.generationNow)
        host.call(plugin, "init", ahead: ranAhead ? ahead.initialize : nil, orRun: { Self.start(plugin, ahead) },
                  then: { self.wasInitialized(copy, rc: $0, ahead: ahead) }, timedOut: { self.takeOver(copy) })
    }

    private func wasInitialized(_ copy: Copy, rc: Int32, ahead: Ahead) {
        let plugin = copy.plugin
        // It may have been given up on during init (it broke the ABI, say).
        guard plugin.info.state == .loading else { return takeOver(copy) }
        guard rc == 0 else {
            let reason = rc == -ENOTSUP || rc == -ENODEV ? "its backend is not available on this system"
                : rc > 0 ? "init returned \(rc), outside the ABI (0 or a negative errno)"
                : "init failed: \(errnoName(-rc))"
            plugin.info.state = .unavailable
            plugin.info.reason = reason
            plugin.closeHostCalls()
            logInfo("plugin \(plugin.path): unavailable: \(reason)")
            return takeOver(copy)
        }
        // Checked as a configuration change is: validate, then configure. A refusal
        // means it never serves (never on its defaults, with the administrator's
        // settings not in force).
        validate(copy, host.config, generation: host.configGeneration,
                 ahead: ahead.generation == host.configGeneration ? ahead : nil)
    }

    // MARK: 4. validate

    private func validate(_ copy: Copy, _ config: [ConfigEntry], generation: Int, ahead: Ahead?) {
        let plugin = copy.plugin
        let then: ([String]) -> Void = { problems in
            guard plugin.info.state == .loading else { return self.takeOver(copy) }
            if let problem = problems.first { return self.refuseConfiguration(copy, problem) }
            self.configure(copy, config, generation: generation, ahead: ahead)
        }
        host.call(plugin, "validate", ahead: ahead?.validate, orRun: { plugin.validate(config) }, then: then,
                  timedOut: { self.takeOver(copy) })
    }

    // MARK: 5. configure

    private func configure(_ copy: Copy, _ config: [ConfigEntry], generation: Int, ahead: Ahead?) {
        let plugin = copy.plugin
        host.configure(plugin, config, logRejection: false, ahead: ahead?.configure) { rejection in
            if let rejection { return self.refuseConfiguration(copy, rejection) }
            guard plugin.info.state == .loading else { return self.takeOver(copy) }
            plugin.info.state = .loaded
            logInfo("plugin \(plugin.name) \(plugin.info.version) loaded from \(plugin.path): "
                    + plugin.info.permissions.joined(separator: ", "))
            self.takeOver(copy)
            if generation != self.host.configGeneration { self.configureAgain(plugin) }
        }
    }

    /// The configuration changed while the copy was being configured: the applier
    /// did not ask it, so a refusal now takes it out.
    private func configureAgain(_ plugin: LoadedPlugin) {
        let host = host
        host.configure(plugin, host.config, logRejection: false) { [unowned host] rejection in
            guard let rejection, plugin.info.state == .loaded,
                  host.plugins.contains(where: { $0 === plugin }) else { return }
            host.refuseConfiguration(plugin, rejection)
            host.onChange?(plugin)
        }
    }

    // MARK: The end

    /// It refused the configuration in force: it takes over as unavailable (and
    /// the copy it replaces stops all the same).
    private func refuseConfiguration(_ copy: Copy, _ problem: String) {
        guard copy.plugin.info.state == .loading else { return takeOver(copy) }
        host.refuseConfiguration(copy.plugin, problem)
        takeOver(copy)
    }

    private func takeOver(_ copy: Copy) {
        host.takeOver(copy.plugin, from: copy.current, finished: finished)
    }
}
