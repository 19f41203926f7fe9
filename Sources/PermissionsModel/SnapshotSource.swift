/// Where the service reads what a permission's state is now: the plugin host, and,
/// in unit tests, a fake.
package protocol SnapshotSource: AnyObject {
    /// The permissions this source declares (served or not).
    var declaredPermissions: Set<String> { get }
    /// The permission's snapshot now ("unsupported" while it is declared but not
    /// served), or nil if this source does not declare it.
    func snapshot(for permission: String) -> Snapshot?
    /// Whether this source declares the permission: `snapshot(for:) != nil`, without
    /// building the snapshot (asked on every GetStatus).
    func declares(_ permission: String) -> Bool
    /// Users' own snapshots of the permission, by uid: each user listed sees theirs
    /// instead of `snapshot(for:)`.
    func userSnapshots(for permission: String) -> [UInt32: Snapshot]
}

extension SnapshotSource {
    package func declares(_ permission: String) -> Bool { snapshot(for: permission) != nil }
    package func userSnapshots(for permission: String) -> [UInt32: Snapshot] { [:] }
}
