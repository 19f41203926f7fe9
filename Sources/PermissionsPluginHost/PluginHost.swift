package import SystemPrimitives
package import PermissionsModel
internal import CPermissionsPlugin
internal import Glibc
internal import PermissionsSupport

/// What the daemon knows about one plugin file it found.
package struct PluginInfo: Sendable, Equatable {
    package enum State: String, Sendable {
        /// Being opened and started.
        case loading
        /// Serving its permissions.
        case loaded
        /// Found but not serving: rejected file, failed or blocked init, flooding.
        /// Its permissions, if it declared any, are "unsupported".
        case unavailable
    }
    package var name: String
    package var version: String
    package var state: State
    package var permissions: [String]
    package var file: String
    /// Why it is unavailable.
    package var reason = ""

    /// What the Plugins property shows of it: the file and the reason left out, so
    /// that a change of either alone is not announced as a change of the property.
    package var announced: PluginInfo {
        PluginInfo(name: name, version: version, state: state, permissions: permissions, file: "")
    }
}

/// Loads plugin libraries, runs their code off the daemon's queue under a
/// watchdog, and carries their publications to the service.
///
/// One plugin serves each name: the copy in the first directory, in directory
/// order, that loads (PluginSelection.swift). A copy that comes, goes or changes is
/// started and configured before it takes over from the one serving, so that apps
/// never see an unconfigured plugin, and a swap that changes nothing for them costs
/// no signal.
///
/// Confined to the daemon queue. Plugin code runs on each plugin's own call
/// queue; a call that does not return within `deadline` makes the plugin
/// unavailable (its thread is left blocked: a thread cannot be killed safely), and
/// everything it does afterwards is ignored.
///
/// `@unchecked Sendable`: every property is touched only on `queue`; the closures
/// that capture the host and cross to a plugin's call queue only hop back to
/// `queue` before touching it.
package final class PluginHost: SnapshotSource, @unchecked Sendable {
    /// The plugins serving (or unavailable), one per name.
    package internal(set) var plugins: [LoadedPlugin] = [] {
        didSet { providersCache = nil }
    }
    /// `providers`, rebuilt when a plugin comes, goes or changes: every GetStatus asks.
    var providersCache: [String: LoadedPlugin]?
    /// Names no copy of which loads: the first directory's refused copy stands for the
    /// name in the Plugins property.
    var refusedNames: [String: PluginInfo] = [:]
    /// Files that never became plugins (not a library, wrong ABI, …), one per name.
    package var rejected: [PluginInfo] { refusedNames.values.sorted { $0.name < $1.name } }
    /// Copies being started to take over their name (not serving yet), by name.
    var starting: [String: LoadedPlugin] = [:]
    /// The last refusal of each file, so that a file still refused for the same
    /// reason (touched, or looked at again) is neither logged nor opened again.
    var refusals: [String: Refusal] = [:]
    /// Names being resolved, and those to resolve again once that is done.
    var resolving = Set<String>()
    var resolveAgain = Set<String>()
    /// The plugin directories, in order (the first holding a loadable copy wins).
    var directories: [String] = []
    let queue: Queue
    var deadline: Deadline.Interval = .seconds(2)
    var config: [ConfigEntry] = []
    /// Grows with each configureAll: a plugin configured with an older one while it
    /// was starting is configured again when it takes over.
    var configGeneration = 0 {
        didSet { generationNow.withLock { $0 = configGeneration } }
    }
    /// `configGeneration`, for a plugin's call queue: a step run ahead with an
    /// older configuration is not made (PluginResolution.start).
    let generationNow = Locked(0)
    /// Names whose copy refused the configuration in force (PluginSelection).
    var configRefusals = Set<String>()

    /// What a serving plugin published (each permission's snapshot, machine-wide or
    /// one user's), handed on as it came; on the daemon queue.
    package var onPublish: ((LoadedPlugin, [Publication]) -> Void)?
    /// A plugin changed state or came or went; on the daemon queue.
    package var onChange: ((LoadedPlugin) -> Void)?
    /// The refused files that stand for names changed (the Plugins property); on the
    /// daemon queue.
    package var onListChange: (() -> Void)?
    /// A remote a plugin opened has ended (ABI 1.3's remote_closed, or its plugin
    /// stopped serving); on the daemon queue.
    package var onRemoteClosed: ((UInt64) -> Void)?
    /// A plugin with remotes open was given up: nothing narrows those connections
    /// any more, and the host cannot end them itself (the app holds the only
    /// descriptor). The daemon stops, so that its connections to the backends go
    /// and the next start destroys what the plugin made (the plugin's name, the
    /// number of remotes, the reason); on the daemon queue.
    package var onEnforcementLost: ((String, Int, String) -> Void)?
    /// A copy starting refused the configuration in force ("FILE:LINE: reason"); on
    /// the daemon queue.
    package var onConfigurationRefused: ((String) -> Void)?

    /// While set, a copy that has opened waits here before its init runs
    /// (`holdStarts`): the daemon lets the plugins open while the rest of its
    /// start-up runs, and start once the hooks above are set.
    private var heldStarts: [() -> Void]?

    /// Whether inits are held (`heldStarts` set), for a plugin's call queue that
    /// may start its init ahead (PluginResolution.open): set before the hooks are
    /// read by anything init can cause, cleared only once they are set.
    let startsHeld = Locked(false)

    /// Copies that open from now on wait before init until `releaseStarts()`.
    package func holdStarts() {
        if heldStarts == nil { heldStarts = [] }
        startsHeld.withLock { $0 = true }
    }

    /// Runs the inits held since `holdStarts()`, in the order their copies opened.
    package func releaseStarts() {
        let held = heldStarts ?? []
        heldStarts = nil
        startsHeld.withLock { $0 = false }
        for start in held { start() }
    }

    /// Runs `start` now, or once `releaseStarts()` is called.
    func whenStartsAllowed(_ start: @escaping () -> Void) {
        if heldStarts != nil { heldStarts!.append(start) } else { start() }
    }

    struct Refusal: Equatable {
        let reason: String
        /// The content refused, when it could be read.
        let hash: UInt64?
    }

    /// The directory holding each user's runtime directory (ROOT/UID), handed to
    /// plugins as the host struct's `user_runtime_root`, and how their
    /// connect_user_socket reaches a socket in it (directly, else through the
    /// connector at `connectorSocket`): set on a daemon that serves many users, nil
    /// on one that serves one user.
    let userSockets: UserSocketReach?

    /// Where the plugins' private copies are made when it can hold them on a disk
    /// (PrivateCopy): the state directory. Nil: each copy is a memfd.
    let copyDirectory: String?

    package init(queue: Queue, userRuntimeRoot: String? = nil, connectorSocket: String? = nil,
                 copyDirectory: String? = nil) {
        self.queue = queue
        self.copyDirectory = copyDirectory
        self.userSockets = userRuntimeRoot.map { UserSocketReach(root: $0, connectorSocket: connectorSocket) }
    }

    package var infos: [PluginInfo] {
        (plugins.map(\.info) + rejected).sorted { $0.name < $1.name }
    }

    /// Permission name to the plugin that declared it (loaded or not).
    package var providers: [String: LoadedPlugin] {
        if let providersCache { return providersCache }
        var map: [String: LoadedPlugin] = [:]
        for plugin in plugins where plugin.info.state != .loading {
            for permission in plugin.info.permissions { map[permission] = plugin }
        }
        providersCache = map
        return map
    }

    /// A permission's state now: its plugin's last publication while the plugin
    /// serves it, "unsupported" while it does not; nil if no plugin declares it.
    package func snapshot(for permission: String) -> Snapshot? {
        guard let provider = providers[permission] else { return nil }
        guard provider.info.state == .loaded else { return .unpublished(permission) }
        return provider.latest[permission] ?? .unpublished(permission)
    }

    /// The users' own snapshots of a permission (publish_for_user) while its plugin
    /// serves it; none otherwise, and every user then sees `snapshot(for:)`.
    package func userSnapshots(for permission: String) -> [UInt32: Snapshot] {
        guard let provider = providers[permission], provider.info.state == .loaded else { return [:] }
        return provider.latestForUser[permission] ?? [:]
    }

    package func declares(_ permission: String) -> Bool { providers.keys.contains(permission) }

    package var declaredPermissions: Set<String> { Set(providers.keys) }

    /// Loads every `libpermissions-<name>.so` in the directories: for each name, the
    /// first copy in directory order that loads; the first plugin to claim a
    /// permission wins. Each refused file gets one log line naming it and the
    /// reason; the others still load. `done` runs once every plugin has started,
    /// failed or passed its deadline.
    package func loadAll(from directories: [String], config: [ConfigEntry], done: @escaping () -> Void) {
        self.config = config
        self.directories = directories
        var names: [String] = []
        for directory in directories {
            for file in Self.pluginFiles(in: directory) where !names.contains(Self.pluginName(file)) {
                names.append(Self.pluginName(file))
            }
        }
        // Read and checked side by side (megabytes each), but mapped one after
        // another, in order (MappingTurns), and their permissions claimed in that
        // order, so that the first plugin to claim a permission wins (ClaimTurns);
        // their inits then run side by side.
        var remaining = names.count + 1
        func settled() {
            remaining -= 1
            if remaining == 0 { done() }
        }
        let turns = ClaimTurns()
        let mappings = MappingTurns()
        for (index, name) in names.enumerated() {
            resolve(name, turn: { turns.when(index, $0) },
                    mappingTurn: PluginResolution.MappingTurn(turns: mappings, index: index),
                    opened: { turns.claimed(index) }, done: settled)
        }
        settled()
    }

    package static func pluginFiles(in directory: String) -> [String] {
        Files.list(directory).filter(isPluginFile)
    }

    static func isPluginFile(_ name: String) -> Bool {
        name.hasPrefix("libpermissions-") && name.hasSuffix(".so") && name.count > "libpermissions-.so".count
    }

    static func pluginName(_ file: String) -> String {
        String(file.dropFirst("libpermissions-".count).dropLast(".so".count))
    }

    static func fileName(_ name: String) -> String { "libpermissions-\(name).so" }

    /// Gives up on a plugin: serving, or starting to. Its host calls are closed.
    func makeUnavailable(_ plugin: LoadedPlugin, _ reason: String) {
        let serving = plugins.contains { $0 === plugin }
        guard plugin.info.state != .unavailable, serving || starting[plugin.name] === plugin else {
            // An init that ran ahead (PluginResolution.open) misbehaved before the
            // copy's opening was looked at: given up once it is (wasOpened).
            if !serving, plugin.info.state == .loading, plugin.givenUpEarly == nil { plugin.givenUpEarly = reason }
            return
        }
        let remotes = plugin.openRemoteCount
        plugin.closeHostCalls()
        plugin.info.state = .unavailable
        plugin.info.reason = reason
        logWarning("plugin \(plugin.path): unavailable: \(reason)")
        if serving { onChange?(plugin) }
        if remotes > 0 { onEnforcementLost?(plugin.name, remotes, reason) }
    }

    /// Runs plugin code on its call queue; `then` runs on the daemon queue with the
    /// result, unless the deadline passed first: then the plugin is made
    /// unavailable and `timedOut` runs instead. Exactly one of them runs.
    ///
    /// With `turn`, the call and its deadline wait until `turn` starts them, on
    /// whatever thread that is, and `returned` gets the result on the plugin's call
    /// queue as soon as `body` returns, before `then` is queued (MappingTurns).
    /// With `through`, the call is made from that serial queue's thread, in the
    /// call queue's turn (`Queue.sync`, which runs it on the calling thread when the
    /// call queue is idle, as it is between a plugin's steps): calls handed one
    /// after another to the same `through` run back to back on one thread, with no
    /// wake-up of another between them (MappingTurns.mapper).
    func call<R: Sendable>(_ plugin: LoadedPlugin, _ what: String, _ body: @escaping @Sendable () -> R,
                           then: @escaping (R) -> Void, timedOut: @escaping () -> Void = {},
                           turn: ((@escaping @Sendable () -> Void) -> Void)? = nil, through: Queue? = nil,
                           returned: @escaping @Sendable (R) -> Void = { _ in }) {
        let settle = Self.firstToSettle()
        let confinedThen = QueueConfined(then)
        let confinedTimedOut = QueueConfined(timedOut)
        let start: @Sendable () -> Void = { [queue, deadline, weak self] in
            // The deadline runs from the start, wherever the call then waits.
            self?.startDeadline(plugin, what, after: deadline, settle: settle, timedOut: confinedTimedOut)
            let run: @Sendable () -> Void = {
                let result = body()
                returned(result)
                queue.async {
                    if settle.value() { confinedThen.value(result) }
                }
            }
            if let through {
                through.async { plugin.callQueue.sync(execute: run) }
            } else {
                plugin.callQueue.async(execute: run)
            }
        }
        if let turn { turn(start) } else { start() }
    }

    /// `call`, for a call that may have run ahead (AheadCall): its outcome, come or
    /// still on its way (then waited for, with the deadline from now), is handled
    /// in one of this queue's turns, behind what the plugin queued for this queue
    /// during the call (its publications' drain), as a call's result that comes
    /// back is (`call`): a result goes to `then`; a call not made because the
    /// plugin stopped taking calls gives it up; a call skipped is made as `call`
    /// makes it, with `body`. Without `ahead`, `call`. Exactly one of `then` and
    /// `timedOut` runs.
    func call<R: Sendable>(_ plugin: LoadedPlugin, _ what: String, ahead: AheadCall<R>?,
                           orRun body: @escaping @Sendable () -> R,
                           then: @escaping (R) -> Void, timedOut: @escaping () -> Void = {}) {
        guard let ahead else { return call(plugin, what, body, then: then, timedOut: timedOut) }
        let settle = Self.firstToSettle()
        let confinedThen = QueueConfined(then)
        let confinedTimedOut = QueueConfined(timedOut)
        // In a turn of its own even when the outcome is already here: no thread is
        // woken for it, this queue's is running.
        let handle: @Sendable (AheadCall<R>.Outcome) -> Void = { [queue, weak self] outcome in
            let host = self
            queue.async {
                guard settle.value() else { return }
                switch outcome {
                case .returned(let result): confinedThen.value(result)
                case .closed: host?.noLongerTakesCalls(plugin, timedOut: confinedTimedOut.value)
                case .skipped: host?.call(plugin, what, body, then: confinedThen.value, timedOut: confinedTimedOut.value)
                }
            }
        }
        if let outcome = ahead.take(orLater: handle) {
            handle(outcome)
        } else {
            startDeadline(plugin, what, after: deadline, settle: settle, timedOut: confinedTimedOut)
        }
    }

    /// A step that was not made because the plugin had stopped taking calls (it
    /// broke the ABI on a thread of its own, say): given up, with its own reason,
    /// whether or not the daemon queue has seen that yet, and never called.
    private func noLongerTakesCalls(_ plugin: LoadedPlugin, timedOut: () -> Void) {
        makeUnavailable(plugin, plugin.closedBecause ?? "it no longer takes calls")
        timedOut()
    }

    /// A call's deadline: if it passes before the call settled, the plugin is made
    /// unavailable and `timedOut` runs. Any thread (`deadline` is the daemon
    /// queue's: the caller reads it there).
    private func startDeadline(_ plugin: LoadedPlugin, _ what: String, after deadline: Deadline.Interval,
                               settle: QueueConfined<() -> Bool>, timedOut: QueueConfined<() -> Void>) {
        queue.asyncAfter(deadline: .now() + deadline) { [weak self] in
            guard settle.value() else { return }
            self?.makeUnavailable(plugin, "\(what) did not return within the deadline; plugin abandoned")
            timedOut.value()
        }
    }

    /// A call's result and its deadline race: this says true to the first of them
    /// to ask, false to the other. Asked on the daemon queue only.
    static func firstToSettle() -> QueueConfined<() -> Bool> {
        var finished = false
        return QueueConfined({
            if finished { return false }
            finished = true
            return true
        })
    }

    /// Hands `config` to one plugin; `done` gets its reason when it rejected it, or
    /// nil (accepted, or abandoned at the deadline: then it serves nothing anyway).
    /// With `ahead`, the configure that ran ahead, if it did (AheadCall).
    func configure(_ plugin: LoadedPlugin, _ config: [ConfigEntry], logRejection: Bool = true,
                   ahead: AheadCall<(rc: Int32, reason: String?)>? = nil,
                   done: @escaping (String?) -> Void = { _ in }) {
        let then: ((rc: Int32, reason: String?)) -> Void = { result in
            guard result.rc != 0 else { return done(nil) }
            if logRejection {
                logWarning("plugin \(plugin.name): rejected the new configuration (\(errnoName(-result.rc))); "
                           + "it keeps the last good one")
            }
            var reason = result.reason ?? "plugin \(plugin.name) rejected it (\(errnoName(-result.rc)))"
            if let cut = reason.firstOccurrence(of: "; keeping the last good configuration") { reason = String(reason[..<cut.lowerBound]) }
            done(reason)
        }
        call(plugin, "configure", ahead: ahead, orRun: { plugin.configure(config) }, then: then, timedOut: { done(nil) })
    }

    /// One plugin's answer to a configuration.
    package struct ConfigureResult {
        package let plugin: LoadedPlugin
        /// Why it rejected the configuration; nil if it took it.
        package let rejection: String?
    }

    /// Passes a configuration to every loaded plugin (or to `only` those), and to
    /// plugins loaded from now on; `done` gets each one's answer once all answered.
    package func configureAll(_ config: [ConfigEntry], only: [LoadedPlugin]? = nil,
                      done: @escaping ([ConfigureResult]) -> Void = { _ in }) {
        self.config = config
        configGeneration += 1
        let targets = (only ?? plugins).filter { $0.info.state == .loaded }
        guard !targets.isEmpty else { return done([]) }
        var answers: [String?] = Array(repeating: nil, count: targets.count)
        var waiting = targets.count
        for (index, plugin) in targets.enumerated() {
            configure(plugin, config) { rejection in
                answers[index] = rejection
                waiting -= 1
                if waiting == 0 { done(zip(targets, answers).map { ConfigureResult(plugin: $0, rejection: $1) }) }
            }
        }
    }

    /// Asks every loaded plugin that has a validate function whether it accepts
    /// `config`, without applying it (plugins without one accept it: their configure
    /// checks it). `completion` runs on the daemon queue with the problems, by
    /// plugin name, each "FILE:LINE: reason" as the plugin reported it; empty when
    /// every plugin accepts. With nothing to ask, it runs before validateAll
    /// returns. A plugin that does not answer within the deadline is made
    /// unavailable (it will never be configured) and reports nothing.
    package func validateAll(_ config: [ConfigEntry], completion: @escaping ([String]) -> Void) {
        let asked = plugins.filter { $0.info.state == .loaded }.sorted { $0.name < $1.name }
        var answers = [[String]](repeating: [], count: asked.count)
        var remaining = asked.count + 1
        func answered() {
            remaining -= 1
            if remaining == 0 { completion(answers.flatMap { $0 }) }
        }
        for (index, plugin) in asked.enumerated() {
            call(plugin, "validate", { plugin.validate(config) }, then: { problems in
                answers[index] = problems
                answered()
            }, timedOut: answered)
        }
        answered()
    }

    /// A plugin file appeared, changed or went (from the directory watcher).
    package func fileChanged(name: String) {
        resolve(name)
    }

    /// Removes the kept copies (PrivateCopy) of the copy directory that no plugin
    /// of this process was given; once start-up's rescan is over.
    package func removeUnusedCopies() {
        if let copyDirectory { PrivateCopy.removeUnused(directory: copyDirectory) }
    }

    /// Every name looked at again: a directory came or went, or inotify lost events.
    /// `done` runs once each name's resolution has ended (or, for a name being
    /// resolved already, has been queued to run again).
    package func rescan(done: @escaping () -> Void = {}) {
        var names = Set(plugins.map(\.name)).union(starting.keys).union(refusedNames.keys)
        for directory in directories {
            for file in Self.pluginFiles(in: directory) { names.insert(Self.pluginName(file)) }
        }
        var remaining = names.count + 1
        func settled() {
            remaining -= 1
            if remaining == 0 { done() }
        }
        for name in names.sorted() { resolve(name, done: settled) }
        settled()
    }

    /// Stops every plugin (fini), before exit: all at once, each on its own call
    /// queue, and waits for them under one deadline, so that plugins stuck in fini
    /// delay the exit by one deadline in all, not one each.
    package func stopAll() {
        let started = monotonicNanoseconds()
        let loaded = plugins.filter { $0.info.state == .loaded }
        // fini's deadline, after the wait for the open_remote calls under way, if any.
        let remoteWait = loaded.contains { $0.openRemoteCallsUnderWay } ? LoadedPlugin.openRemoteWaitSeconds : 0
        let end = Deadline.now() + .seconds(remoteWait) + deadline
        let stopping = loaded.map { plugin in
            let done = Semaphore(value: 0)
            plugin.callQueue.async {
                plugin.stop()
                done.signal()
            }
            return (plugin, done)
        }
        let stuck = stopping.filter { $0.1.wait(timeout: end) == .timedOut }.map(\.0.name)
        for name in stuck {
            logWarning("plugin \(name): fini did not return within the deadline")
        }
        logInfo("stopped \(stopping.count) plugins in \((monotonicNanoseconds() - started) / 1_000_000) ms"
                + (stuck.isEmpty ? "" : "; \(stuck.count) did not return from fini within the deadline"))
    }
}
