internal import Glibc
internal import PermissionsModel
internal import PermissionsSupport
internal import SystemPrimitives
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
//
// The steps one copy goes through, one plugin call each, are PluginResolution's.

extension PluginHost {
    /// Makes `name` served by its first loadable copy. `opened` runs once that copy
    /// was opened (its permissions claimed) or none was found, `done` once it serves,
    /// failed to start, or none was found. Events for a name being resolved are
    /// handled once the resolution ends. `turn` holds its copies' claims until the
    /// names before it have claimed theirs (`ClaimTurns`), and `mappingTurn` their
    /// dlopen until the names before it have had theirs return (`MappingTurns`); by
    /// default neither waits.
    func resolve(_ name: String, turn: @escaping (@escaping () -> Void) -> Void = { $0() },
                 mappingTurn: PluginResolution.MappingTurn? = nil,
                 opened: @escaping () -> Void = {}, done: @escaping () -> Void = {}) {
        guard !resolving.contains(name) else {
            resolveAgain.insert(name)
            opened()
            mappingTurn?.over()
            return done()
        }
        resolving.insert(name)
        var openedCalled = false
        let markOpened = {
            if !openedCalled {
                openedCalled = true
                opened()
            }
            // A name that gave up (every copy refused, or none returned from
            // dlopen) passes its mapping turn here; one that claimed passed it
            // already, when its dlopen returned or when it claimed.
            mappingTurn?.over()
        }
        let paths = directories.map { $0 + "/" + Self.fileName(name) }
        let candidates = paths.filter(Files.exists)
        // A file gone is forgotten: the same file refused again later is logged again.
        for path in paths where !candidates.contains(path) { refusals[path] = nil }
        let resolution = PluginResolution(host: self, name: name, candidates: candidates, turn: turn,
                                          mappingTurn: mappingTurn, opened: markOpened) {
            [unowned self] in
            markOpened()
            resolving.remove(name)
            done()
            if resolveAgain.remove(name) != nil { resolve(name) }
        }
        resolution.next()
    }

    /// No copy of `name` loads (`standIn`: the first one refused, if any): nothing
    /// serves the name any more.
    func noCopyLoads(_ name: String, current: LoadedPlugin?, standIn: PluginInfo?) {
        if let current {
            logInfo("plugin \(current.path) \(Files.exists(current.path) ? "no longer loads" : "was removed"); "
                    + "stopping \(name)")
            retire(current)
        }
        let before = refusedNames[name]
        refusedNames[name] = standIn
        if let current {
            onChange?(current)
            // Its permissions are free: a copy refused for claiming one may load now.
            for other in refusedNames.keys.sorted() where other != name { resolve(other) }
        } else if before?.file != standIn?.file || before?.reason != standIn?.reason {
            onListChange?()
        }
    }

    /// A plugin object for one copy, wired to the host.
    func makePlugin(path: String, name: String) -> LoadedPlugin {
        let plugin = LoadedPlugin(path: path, name: name, daemonQueue: queue, userSockets: userSockets,
                                  copyDirectory: copyDirectory)
        plugin.infoChanged = { [unowned self] in self.providersCache = nil }
        plugin.drain = { [unowned self] p, batch in
            for publication in batch {
                switch publication.scope {
                case .machine: p.latest[publication.permission] = publication.snapshot
                case .user(let uid): p.latestForUser[publication.permission, default: [:]][uid] = publication.snapshot
                }
            }
            if p.info.state == .loaded, plugins.contains(where: { $0 === p }) {
                self.onPublish?(p, batch)
            }
        }
        plugin.misbehaved = { [unowned self] p, reason in self.makeUnavailable(p, reason) }
        plugin.remoteClosed = { [unowned self] _, id in self.onRemoteClosed?(id) }
        return plugin
    }

    /// A copy that refused the configuration in force: unavailable (its permissions
    /// "unsupported"), one log line, and the refusal shown in ConfigStatus. It is tried
    /// again when another configuration is applied.
    func refuseConfiguration(_ plugin: LoadedPlugin, _ problem: String) {
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
    func takeOver(_ plugin: LoadedPlugin, from current: LoadedPlugin?, finished: () -> Void) {
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
    /// may point into it). If fini cannot be called (an open_remote of its still
    /// runs) while it has remotes open, nothing will disconnect or narrow them: as
    /// for a plugin given up with remotes open, the daemon stops
    /// (`onEnforcementLost`), and the next start disconnects them.
    private func retire(_ plugin: LoadedPlugin) {
        let remotes = plugin.openRemoteCount
        plugin.closeHostCalls()
        plugins.removeAll { $0 === plugin }
        plugin.callQueue.async { [weak self] in
            guard !plugin.stop(), remotes > 0, let self else { return }
            queue.async { [weak self] in
                self?.onEnforcementLost?(plugin.name, remotes, "its fini could not be called: an open_remote "
                                         + "still ran 2 s after its stop began")
            }
        }
    }
}
