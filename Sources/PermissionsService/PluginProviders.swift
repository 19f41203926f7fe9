package import PermissionsModel

/// What the service needs of the plugins: their permissions' snapshots (as a
/// `SnapshotSource`), the list the Plugins property shows, and which plugin declares
/// a permission. The daemon gives it the plugin host (its wiring makes the host one);
/// unit tests give it a fake. The service depends on this protocol, not on the
/// host, so that it can be built and tested without loading a plugin.
///
/// What the plugins publish comes the other way, pushed: `PermissionsService.publish`.
///
/// Used on the service's queue only.
package protocol PluginProviders: SnapshotSource {
    /// The plugins as the Plugins property shows them (loaded, unavailable, and the
    /// refused files that stand for a name), sorted by name.
    var pluginList: [PluginEntry] { get }
    /// The name of the plugin that declares `permission` (serving it or not), or nil.
    func pluginName(providing permission: String) -> String?
    /// Whether the plugin serving `permission` enforces it (opens remotes for it).
    func enforces(_ permission: String) -> Bool
    /// Opens remote `id` for (uid, app) to `permission`'s backend: `done` gets the
    /// descriptor (the caller's) or a negative errno, on the service's queue.
    /// `returned` is called there once the plugin's call has returned: after
    /// `done`, and maybe long after a `done` of -ETIMEDOUT. Until then the call
    /// holds a thread, which the service counts (`EnforcedRemotes.inPlugin`).
    func openRemote(id: UInt64, uid: UInt32, pid: UInt32, app: String, permission: String,
                    done: @escaping (Int32) -> Void, returned: @escaping () -> Void)
    /// Remote `id`'s status is now `status`: its plugin narrows or widens it.
    func remoteStatus(id: UInt64, permission: String, status: String)
}

extension PluginProviders {
    // Providers that enforce nothing (unit tests' fakes).
    package func enforces(_ permission: String) -> Bool { false }
    package func openRemote(id: UInt64, uid: UInt32, pid: UInt32, app: String, permission: String,
                            done: @escaping (Int32) -> Void, returned: @escaping () -> Void) {
        done(-95 /* ENOTSUP */)
        returned()
    }
    package func remoteStatus(id: UInt64, permission: String, status: String) {}
}

/// One plugin as the Plugins property shows it: (name, version, state, permissions).
package struct PluginEntry: Sendable, Equatable {
    package var name: String
    package var version: String
    /// "loading", "loaded" or "unavailable".
    package var state: String
    package var permissions: [String]

    package init(name: String, version: String, state: String, permissions: [String]) {
        self.name = name
        self.version = version
        self.state = state
        self.permissions = permissions
    }
}
