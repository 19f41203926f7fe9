internal import Glibc
internal import PermissionsSupport
internal import SystemPrimitives
internal import Dispatch
internal import PermissionsModel

// Which copy of a plugin serves its name: the first one, in directory order, that
// loads. A copy is looked at again whenever anything happens to its name (a file
// written, renamed, linked, removed, chmod-ed, touched; a directory that came or
// went): the outcome is what a restart would give.
//
// - A copy whose content (ContentHash) did not change is not loaded again: a
//   `touch`, or a file written over with the same build, costs nothing.
// - A refused copy (not a library, wrong ABI, fails its checks, not trusted) gives
//   way to the next directory's; it is logged once while it stays the same.
// - A copy that will serve is started and configured before it takes over from the
//   one serving (a replacement, or a fallback to another directory's copy), so apps
//   see one change from the old state to the configured new one, or none.
// - A copy that refuses the configuration in force (its validate or its configure)
//   never serves: it takes over as unavailable, "rejected the configuration in
//   force: FILE:LINE: reason", and a copy it replaces stops all the same (the
//   stricter rule: the administrator meant the new copy to serve, not the old one,
//   and neither runs unconfigured). It is loaded again once another configuration
//   is applied.

extension PluginHost {
    /// Makes `name` served by its first loadable copy. `opened` runs once that copy
    /// was opened (its permissions claimed) or none was found, `done` once it serves,
    /// failed to start, or none was found. Events for a name being resolved are
    /// handled once the resolution ends.
    func resolve(_ name: String, opened: @escaping () -> Void = {}, done: @escaping () -> Void = {}) {
        guard !resolving.contains(name) else {
            resolveAgain.insert(name)
            opened()
            return done()
        }
        resolving.insert(name)
        var openedCalled = false
        let markOpened = {
            if !openedCalled {
                openedCalled = true
                opened()
            }
        }
        let paths = directories.map { $0 + "/" + Self.fileName(name) }
        let candidates = paths.filter(Files.exists)
        // A file gone is forgotten: the same file refused again later is logged again.
        for path in paths where !candidates.contains(path) { refusals[path] = nil }
        attempt(name, candidates[...], firstRefusal: nil, opened: markOpened) { [unowned self] in
            markOpened()
            resolving.remove(name)
            done()
            if resolveAgain.remove(name) != nil { resolve(name) }
        }
    }

    /// Tries the first of `candidates`, then the next, until one loads.
    private func attempt(_ name: String, _ candidates: ArraySlice<String>, firstRefusal: PluginInfo?,
                         opened: @escaping () -> Void, finished: @escaping () -> Void) {
        let current = plugins.first { $0.name == name }
        guard let path = candidates.first else {
            // No copy loads: nothing serves the name any more.
            if let current {
                logInfo("plugin \(current.path) \(Files.exists(current.path) ? "no longer loads" : "was removed"); "
                        + "stopping \(name)")
                retire(current)
            }
            let before = refusedNames[name]
            refusedNames[name] = firstRefusal
            if let current {
                onChange?(current)
                // Its permissions are free: a copy refused for claiming one may load now.
                for other in refusedNames.keys.sorted() where other != name { resolve(other) }
            } else if before?.file != firstRefusal?.file || before?.reason != firstRefusal?.reason {
                onListChange?()
            }
            return finished()
        }
        let next = candidates.dropFirst()
        let candidate = makePlugin(path: path, name: name)
        func refuse(_ reason: String, hash: UInt64?) {
            let refusal = Refusal(reason: reason, hash: hash)
            if refusals[path] != refusal {
                logWarning("plugin \(path): skipped: \(reason)")
                refusals[path] = refusal
            } else {
                logDebug("plugin \(path): still skipped, as before")
            }
            let info = PluginInfo(name: name, version: "", state: .unavailable, permissions: [], file: path,
                                  reason: reason)
            attempt(name, next, firstRefusal: firstRefusal ?? info, opened: opened, finished: finished)
        }
        call(candidate, "reading", { candidate.read() }, then: { [unowned self] result in
            let hash: UInt64
            switch result {
            case .failure(.missing):
                refusals[path] = nil
                return attempt(name, next, firstRefusal: firstRefusal, opened: opened, finished: finished)
            case .failure(.refused(let reason)): return refuse(reason, hash: nil)
            case .success(let read): hash = read
            }
            if let current, current.path == path, current.contentHash == hash {
                // The copy serving, unchanged (touched, or written over with the same bytes).
                logDebug("plugin \(path): content unchanged; not loaded again")
                // The call's deadline timer keeps the candidate for a while yet.
                candidate.callQueue.async { candidate.discardRead() }
                if refusedNames.removeValue(forKey: name) != nil { onListChange?() }
                return finished()
            }
            if let refused = refusals[path], refused.hash == hash {
                candidate.callQueue.async { candidate.discardRead() }
                return refuse(refused.reason, hash: hash)
            }
            candidate.contentHash = hash
            call(candidate, "opening", { candidate.open() }, then: { [unowned self] refusal in
                if let refusal { return refuse(refusal, hash: hash) }
                // Every plugin opened before this one counts, started or not; the copy it
                // is to replace does not.
                let taken = plugins.filter { $0.name != name } + starting.values.filter { $0.name != name }
                let claimed = Set(taken.flatMap(\.info.permissions))
                if let clash = candidate.info.permissions.first(where: claimed.contains),
                   let owner = taken.first(where: { $0.info.permissions.contains(clash) }) {
                    // Not remembered with its content: it may load once the other plugin goes.
                    return refuse("permission \"\(clash)\" is already provided by plugin \"\(owner.name)\"", hash: nil)
                }
                refusals[path] = nil
                starting[name] = candidate
                opened()
                start(candidate, replacing: current, finished: finished)
            }, timedOut: { refuse("opening did not return within the deadline; plugin abandoned", hash: hash) })
        }, timedOut: { refuse("reading did not return within the deadline", hash: nil) })
    }

    /// A plugin object for one copy, wired to the host.
    private func makePlugin(path: String, name: String) -> LoadedPlugin {
        let plugin = LoadedPlugin(path: path, name: name, daemonQueue: queue)
        plugin.infoChanged = { [unowned self] in self.providersCache = nil }
        plugin.drain = { [unowned self] p, batch in
            p.latest.merge(batch.map { ($0.permission, $0) }) { $1 }
            if p.info.state == .loaded, plugins.contains(where: { $0 === p }) { self.onPublish?(p, batch) }
        }
        plugin.misbehaved = { [unowned self] p, reason in self.makeUnavailable(p, reason) }
        return plugin
    }

    /// init, then configure; then the copy takes over from `current`. What init
    /// publishes is kept back until then: an administrator's settings are in force
    /// from the first moment the plugin's permissions exist.
    private func start(_ plugin: LoadedPlugin, replacing current: LoadedPlugin?, finished: @escaping () -> Void) {
        let takeOver = { [unowned self] in self.takeOver(plugin, from: current, finished: finished) }
        call(plugin, "init", { plugin.start() }, then: { [unowned self] rc in
            // It may have been given up on during init (it broke the ABI, say).
            guard plugin.info.state == .loading else { return takeOver() }
            guard rc == 0 else {
                let reason = rc == -ENOTSUP || rc == -ENODEV ? "its backend is not available on this system"
                    : rc > 0 ? "init returned \(rc), outside the ABI (0 or a negative errno)"
                    : "init failed: \(errnoName(-rc))"
                plugin.info.state = .unavailable
                plugin.info.reason = reason
                plugin.closeHostCalls()
                logInfo("plugin \(plugin.path): unavailable: \(reason)")
                return takeOver()
            }
            let generation = configGeneration
            let config = config
            let refused = { [unowned self] (problem: String) in
                guard plugin.info.state == .loading else { return takeOver() }
                refuseConfiguration(plugin, problem)
                takeOver()
            }
            // Checked as a configuration change is: validate, then configure. A refusal
            // means it never serves (never on its defaults, with the administrator's
            // settings not in force).
            call(plugin, "validate", { plugin.validate(config) }, then: { [unowned self] problems in
                guard plugin.info.state == .loading else { return takeOver() }
                if let problem = problems.first { return refused(problem) }
                configure(plugin, config, logRejection: false) { [unowned self] rejection in
                    if let rejection { return refused(rejection) }
                    guard plugin.info.state == .loading else { return takeOver() }
                    plugin.info.state = .loaded
                    logInfo("plugin \(plugin.name) \(plugin.info.version) loaded from \(plugin.path): "
                            + plugin.info.permissions.joined(separator: ", "))
                    takeOver()
                    // The configuration changed while it was being configured: the
                    // applier did not ask it, so a refusal now takes it out.
                    if generation != configGeneration {
                        configure(plugin, self.config, logRejection: false) { [unowned self] rejection in
                            guard let rejection, plugin.info.state == .loaded,
                                  plugins.contains(where: { $0 === plugin }) else { return }
                            refuseConfiguration(plugin, rejection)
                            onChange?(plugin)
                        }
                    }
                }
            }, timedOut: takeOver)
        }, timedOut: takeOver)
    }

    /// A copy that refused the configuration in force: unavailable (its permissions
    /// "unsupported"), one log line, and the refusal shown in ConfigStatus. It is tried
    /// again when another configuration is applied.
    private func refuseConfiguration(_ plugin: LoadedPlugin, _ problem: String) {
        let reason = "rejected the configuration in force: \(problem)"
        plugin.info.state = .unavailable
        plugin.info.reason = reason
        plugin.closeHostCalls()
        configRefusals.insert(plugin.name)
        logWarning("plugin \(plugin.path): unavailable: \(reason)")
        onConfigurationRefused?(problem)
    }

    /// Another configuration is in force: the copies that refused the last one are
    /// loaded again (started, validated and configured anew).
    package func retryConfigurationRefusals() {
        let names = configRefusals
        configRefusals = []
        for name in names.sorted() {
            plugins.first { $0.name == name }?.contentHash = nil
            resolve(name)
        }
    }

    /// `plugin` serves its name from now on (loaded, or unavailable after a failed
    /// start); the copy that served it is stopped.
    private func takeOver(_ plugin: LoadedPlugin, from current: LoadedPlugin?, finished: () -> Void) {
        starting[plugin.name] = nil
        if let current {
            logInfo(current.path == plugin.path ? "plugin \(current.path) was replaced; stopping the old copy"
                    : "plugin \(plugin.name): \(plugin.path) takes over from \(current.path); stopping that copy")
            retire(current)
        }
        refusedNames[plugin.name] = nil
        plugins.append(plugin)
        if let current { onChange?(current) }
        onChange?(plugin)
        finished()
    }

    /// Stops a plugin that no longer serves: fini on its call queue. Its code stays
    /// mapped (a Swift or C library cannot be unloaded safely while threads or data
    /// may point into it).
    private func retire(_ plugin: LoadedPlugin) {
        plugin.closeHostCalls()
        plugins.removeAll { $0 === plugin }
        plugin.callQueue.async { plugin.stop() }
    }
}
