package import PermissionsModel

/// The built-in provider: permissions the configuration declares ([permissions]
/// declare=), served in-process behind the same `SnapshotSource` interface as the
/// plugins. Their snapshots come from their sections (CoreConfig.declaredSnapshots).
///
/// Confined to the service's queue.
package final class DeclaredPermissions: SnapshotSource {
    package internal(set) var snapshots: [String: Snapshot] = [:]

    package init() {}

    package var declaredPermissions: Set<String> { Set(snapshots.keys) }

    package func snapshot(for permission: String) -> Snapshot? { snapshots[permission] }

    package func declares(_ permission: String) -> Bool { snapshots.keys.contains(permission) }
}
