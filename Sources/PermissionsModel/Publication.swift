/// Where a published state holds: for the whole machine (every user's view but
/// those of users with a state of their own), or for one user's only (the plugin
/// ABI's publish_for_user).
public enum Scope: Hashable, Sendable {
    case machine
    case user(UInt32)
}

/// One change a provider announces: a permission's state now (its snapshot) and
/// where that holds. The plugin host hands it to the service as it is, so the
/// service never asks the host again for what it was just given.
public struct Publication: Sendable, Equatable {
    public var snapshot: Snapshot
    public var scope: Scope

    public init(_ snapshot: Snapshot, scope: Scope) {
        self.snapshot = snapshot
        self.scope = scope
    }

    public var permission: String { snapshot.permission }
}
