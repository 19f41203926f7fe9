internal import DBusKit
public import PluginKit
internal import CPermissionsPlugin
internal import Glibc
public import Dispatch

/// What the daemon knows about one plugin file it found.
public struct PluginInfo: Sendable {
    public enum State: String, Sendable {
        /// Being opened and started.
        case loading
        /// Serving its permissions.
        case loaded
        /// Found but not serving: rejected file, failed or blocked init, flooding.
        /// Its permissions, if it declared any, are "unsupported".
        case unavailable
    }
    public var name: String
    public var version: String
    public var state: State
    public var permissions: [String]
    public var file: String
    /// Why it is unavailable.
    public var reason = ""
}

/// Loads plugin libraries, runs their code off the daemon's queue under a
/// watchdog, and carries their publications to the service.
///
/// Confined to the daemon queue. Plugin code runs on each plugin's own call
/// queue; a call that does not return within `deadline` makes the plugin
/// unavailable (its thread is left blocked: a thread cannot be killed safely), and
/// everything it does afterwards is ignored.
///
/// `@unchecked Sendable`: every property is touched only on `queue`; the closures
/// that capture the host and cross to a plugin's call queue only hop back to
/// `queue` before touching it.
public final class PluginHost: @unchecked Sendable {
    public private(set) var plugins: [LoadedPlugin] = [] {
        didSet { providersCache = nil }
    }
    /// `providers`, rebuilt when a plugin comes, goes or changes: every GetStatus asks.
    private var providersCache: [String: LoadedPlugin]?
    /// Files that never became plugins (not a library, wrong ABI, …).
    public private(set) var rejected: [PluginInfo] = []
    let queue: DispatchQueue
    var deadline: DispatchTimeInterval = .seconds(2)
    private var config: [ConfigEntry] = []

    /// Publications, on the daemon queue.
    var onPublish: ((LoadedPlugin, [Snapshot]) -> Void)?
    /// A plugin changed state or came or went; on the daemon queue.
    var onChange: ((LoadedPlugin) -> Void)?

    public init(queue: DispatchQueue) {
        self.queue = queue
    }

    public var infos: [PluginInfo] {
        (plugins.map(\.info) + rejected).sorted { $0.name < $1.name }
    }

    /// Permission name to the plugin that declared it (loaded or not).
    public var providers: [String: LoadedPlugin] {
        if let providersCache { return providersCache }
        var map: [String: LoadedPlugin] = [:]
        for plugin in plugins where plugin.info.state != .loading {
            for permission in plugin.info.permissions { map[permission] = plugin }
        }
        providersCache = map
        return map
    }

    /// Loads every `libpermissions-<name>.so` in the directories, in order; the first
    /// plugin to claim a name or a permission wins. Each rejected file gets one log
    /// line naming it and the reason; the others still load. `done` runs once every
    /// plugin has started, failed or passed its deadline.
    public func loadAll(from directories: [String], config: [ConfigEntry], done: @escaping () -> Void) {
        self.config = config
        var files: [(String, String)] = []
        var seen = Set<String>()
        for directory in directories {
            for file in Self.pluginFiles(in: directory) {
                let name = Self.pluginName(file)
                guard !seen.contains(name) else {
                    logInfo("plugin \(directory)/\(file): skipped, a plugin named \"\(name)\" was found first")
                    continue
                }
                seen.insert(name)
                files.append((directory + "/" + file, name))
            }
        }
        // Opened one after another, in order, so that the first plugin to claim a
        // permission wins; their inits then run side by side.
        var remaining = files.count + 1
        func settled() {
            remaining -= 1
            if remaining == 0 { done() }
        }
        func openNext(_ index: Int) {
            guard index < files.count else { return settled() }
            load(path: files[index].0, name: files[index].1, opened: { openNext(index + 1) }, done: settled)
        }
        openNext(0)
    }

    static func pluginFiles(in directory: String) -> [String] {
        Files.list(directory).filter(isPluginFile)
    }

    static func isPluginFile(_ name: String) -> Bool {
        name.hasPrefix("libpermissions-") && name.hasSuffix(".so") && name.count > "libpermissions-.so".count
    }

    static func pluginName(_ file: String) -> String {
        String(file.dropFirst("libpermissions-".count).dropLast(".so".count))
    }

    private func reject(_ plugin: LoadedPlugin, _ reason: String) {
        logWarning("plugin \(plugin.path): skipped: \(reason)")
        plugins.removeAll { $0 === plugin }
        rejected.removeAll { $0.file == plugin.path }
        rejected.append(PluginInfo(name: plugin.name, version: "", state: .unavailable, permissions: [],
                                   file: plugin.path, reason: reason))
        onChange?(plugin)
    }

    func makeUnavailable(_ plugin: LoadedPlugin, _ reason: String) {
        guard plugin.info.state != .unavailable, plugins.contains(where: { $0 === plugin }) else { return }
        plugin.closeHostCalls()
        plugin.info.state = .unavailable
        plugin.info.reason = reason
        logWarning("plugin \(plugin.path): unavailable: \(reason)")
        onChange?(plugin)
    }

    /// Runs plugin code on its call queue; `then` runs on the daemon queue with the
    /// result, unless the deadline passed first: then the plugin is made
    /// unavailable and `timedOut` runs instead. Exactly one of them runs.
    private func call<R: Sendable>(_ plugin: LoadedPlugin, _ what: String, _ body: @escaping @Sendable () -> R,
                                   then: @escaping (R) -> Void, timedOut: @escaping () -> Void = {}) {
        var finished = false
        let settle = QueueConfined({ () -> Bool in
            if finished { return false }
            finished = true
            return true
        })
        let confinedThen = QueueConfined(then)
        let confinedTimedOut = QueueConfined(timedOut)
        plugin.callQueue.async {
            let result = body()
            self.queue.async {
                if settle.value() { confinedThen.value(result) }
            }
        }
        queue.asyncAfter(deadline: .now() + deadline) { [weak self] in
            guard settle.value() else { return }
            self?.makeUnavailable(plugin, "\(what) did not return within the deadline; plugin abandoned")
            confinedTimedOut.value()
        }
    }

    /// Opens and starts one plugin file: `opened` runs once the descriptor was
    /// accepted or rejected, `done` once the plugin is loaded or unavailable.
    func load(path: String, name: String, opened: @escaping () -> Void = {}, done: @escaping () -> Void) {
        let plugin = LoadedPlugin(path: path, name: name, daemonQueue: queue)
        plugin.infoChanged = { [unowned self] in self.providersCache = nil }
        plugin.drain = { [unowned self] p, batch in
            p.latest.merge(batch.map { ($0.permission, $0) }) { $1 }
            if p.info.state == .loaded { self.onPublish?(p, batch) }
        }
        plugin.misbehaved = { [unowned self] p, reason in self.makeUnavailable(p, reason) }
        plugins.append(plugin)
        call(plugin, "opening", { plugin.open() }, then: { [unowned self] refusal in
            defer { opened() }
            if let refusal {
                self.reject(plugin, refusal)
                return done()
            }
            // Every plugin opened before this one counts, started or not.
            let taken = self.plugins.filter { $0 !== plugin }
            if let clash = plugin.info.permissions.first(where: { p in taken.contains { $0.info.permissions.contains(p) } }),
               let owner = taken.first(where: { $0.info.permissions.contains(clash) }) {
                self.reject(plugin, "permission \"\(clash)\" is already provided by plugin \"\(owner.name)\"")
                return done()
            }
            self.call(plugin, "init", { plugin.start() }, then: { [unowned self] rc in
                // It may have been given up on during init (it broke the ABI, say).
                guard plugin.info.state == .loading else { return done() }
                guard rc == 0 else {
                    let reason = rc == -ENOTSUP || rc == -ENODEV ? "its backend is not available on this system"
                        : rc > 0 ? "init returned \(rc), outside the ABI (0 or a negative errno)"
                        : "init failed: \(errnoName(-rc))"
                    plugin.info.state = .unavailable
                    plugin.info.reason = reason
                    plugin.closeHostCalls()
                    logInfo("plugin \(path): unavailable: \(reason)")
                    self.onChange?(plugin)
                    return done()
                }
                self.configure(plugin, self.config)  // the newest: it may have changed during init
                plugin.info.state = .loaded
                logInfo("plugin \(name) \(plugin.info.version) loaded from \(path): "
                        + plugin.info.permissions.joined(separator: ", "))
                self.onChange?(plugin)
                done()
            }, timedOut: done)
        }, timedOut: { opened(); done() })
    }

    /// Hands `config` to one plugin; `done` gets its reason when it rejected it, or
    /// nil (accepted, or abandoned at the deadline: then it serves nothing anyway).
    private func configure(_ plugin: LoadedPlugin, _ config: [ConfigEntry],
                           done: @escaping (String?) -> Void = { _ in }) {
        call(plugin, "configure", { plugin.configure(config) }, then: { result in
            guard result.rc != 0 else { return done(nil) }
            logWarning("plugin \(plugin.name): rejected the new configuration (\(errnoName(-result.rc))); "
                       + "it keeps the last good one")
            var reason = result.reason ?? "plugin \(plugin.name) rejected it (\(errnoName(-result.rc)))"
            if let cut = reason.firstRange(of: "; keeping the last good configuration") { reason = String(reason[..<cut.lowerBound]) }
            done(reason)
        }, timedOut: { done(nil) })
    }

    /// One plugin's answer to a configuration.
    struct ConfigureResult {
        let plugin: LoadedPlugin
        /// Why it rejected the configuration; nil if it took it.
        let rejection: String?
    }

    /// Passes a configuration to every loaded plugin (or to `only` those), and to
    /// plugins loaded from now on; `done` gets each one's answer once all answered.
    func configureAll(_ config: [ConfigEntry], only: [LoadedPlugin]? = nil,
                             done: @escaping ([ConfigureResult]) -> Void = { _ in }) {
        self.config = config
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

    /// Checks a configuration with every plugin without applying it; `done` gets the
    /// first problem, or nil. ABI 1 has no way to ask a plugin that, so today this
    /// accepts everything and the daemon validates by applying (`configureAll`)
    /// and rolling back; a plugin `validate` entry, once the ABI has one, is
    /// called from here.
    func validateAll(_ config: [ConfigEntry], done: @escaping (String?) -> Void) {
        done(nil)
    }

    /// A plugin file appeared, changed or went (from the directory watcher).
    func fileChanged(directory: String, file: String, present: Bool) {
        let path = directory + "/" + file
        let name = Self.pluginName(file)
        rejected.removeAll { $0.file == path }
        if let old = plugins.first(where: { $0.path == path }) {
            // Replaced or removed: stop the old one. Its code stays mapped (a Swift or C
            // library cannot be unloaded safely while threads or data may point into it).
            logInfo("plugin \(path) was \(present ? "replaced" : "removed"); stopping \(old.name)")
            old.closeHostCalls()
            plugins.removeAll { $0 === old }
            old.callQueue.async { old.stop() }
            onChange?(old)
        }
        guard present else { return }
        if let other = plugins.first(where: { $0.name == name }) {
            logInfo("plugin \(path): skipped, a plugin named \"\(name)\" is loaded from \(other.path)")
            return
        }
        load(path: path, name: name) {}
    }

    /// Stops every plugin (fini), before exit: all at once, each on its own call
    /// queue, and waits for them under one deadline, so that plugins stuck in fini
    /// delay the exit by one deadline in all, not one each.
    public func stopAll() {
        let started = monotonicNanoseconds()
        let end = DispatchTime.now() + deadline
        let stopping = plugins.filter { $0.info.state == .loaded }.map { plugin in
            let done = DispatchSemaphore(value: 0)
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

func errnoName(_ code: Int32) -> String {
    "\(String(cString: strerror(code))) (errno \(code))"
}
