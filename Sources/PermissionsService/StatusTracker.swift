package import PermissionsModel
package import PermissionsStore
internal import PermissionsSupport

/// The service's logic without the bus: combines what a `SnapshotSource` (the
/// plugin host) and the configuration say with stored decisions and session grants
/// into statuses, and reports each real change of an app's status once, through
/// `emit`. PermissionsService owns one and puts it on the bus; unit tests drive one
/// with an `InMemoryDecisionStore` and a fake source.
///
/// Confined to the service's queue.
package final class StatusTracker {
    package let store: any DecisionStoring
    /// Where snapshots come from, in order: the first that declares a permission
    /// serves it (the plugins, then the configuration: plugins win a name clash).
    let sources: [any SnapshotSource]
    /// The configuration's permissions, the last of `sources`.
    let configured = DeclaredPermissions()
    /// One real change of a status: StatusChanged(app, permission, status); app ""
    /// stands for every app (a service-level change).
    package var emit: (_ app: String, _ permission: String, _ status: Status) -> Void
    /// The snapshots clients last heard about (what signals were computed from).
    private(set) var snapshots: [String: Snapshot] = [:]
    /// "allow-session" grants: (app, permission) -> the requesters' unique names
    /// (see SessionGrants.swift).
    var sessionGrants: [DecisionKey: Set<String>] = [:]
    /// While true (start-up, before the name is owned), snapshots are taken without signals.
    package var quiet = false
    /// While a new configuration is tried (see ConfigApplier), the permissions whose
    /// state changed: clients hear about them once the outcome is known, so a
    /// configuration that is rolled back sends nothing.
    private var held: Set<String>?
    /// Fail-safe: no configuration could be read at start and none was kept, so every
    /// permission that would be available reads "disabled" (the configuration may
    /// have switched it off or denied apps, and nobody can tell).
    package var disabledForLackOfConfiguration = false {
        didSet {
            if disabledForLackOfConfiguration != oldValue { for permission in permissions { refresh(permission) } }
        }
    }
    /// Permissions declared in the configuration ([permissions] declare=), with the
    /// snapshot their own section gives; plugins win a name clash.
    package var declared: [String: Snapshot] { configured.snapshots }

    package init(store: any DecisionStoring, source: any SnapshotSource,
                 emit: @escaping (_ app: String, _ permission: String, _ status: Status) -> Void = { _, _, _ in }) {
        self.store = store
        self.sources = [source, configured]
        self.emit = emit
    }

    /// Known permissions: those the plugins declare (served or not) and those the
    /// configuration declares.
    package var permissions: [String] {
        sources.reduce(into: Set<String>()) { $0.formUnion($1.declaredPermissions) }.sorted()
    }

    package func isKnown(_ permission: String) -> Bool {
        sources.contains { $0.snapshot(for: permission) != nil }
    }

    /// The snapshot clients last heard about (what signals were computed from).
    package func snapshot(_ permission: String) -> Snapshot {
        snapshots[permission] ?? .unpublished(permission)
    }

    /// What the permission's state is now, from the first source that declares it.
    func currentSnapshot(_ permission: String) -> Snapshot {
        var snapshot = sources.lazy.compactMap { $0.snapshot(for: permission) }.first ?? .unpublished(permission)
        if disabledForLackOfConfiguration, snapshot.service == .available { snapshot.service = .disabled }
        return snapshot
    }

    package func status(app: String, permission: String) -> Status {
        let s = snapshot(permission)
        return effectiveStatus(service: s.service, policy: s.policy(for: app), decision: decision(app, permission))
    }

    /// The user decision in force: a stored one, else a session grant.
    func decision(_ app: String, _ permission: String) -> Decision? {
        if let stored = store.decision(app: app, permission: permission) { return stored.decision }
        return hasSessionGrant(app, permission) ? .authorized : nil
    }

    /// Recomputes a permission's snapshot and signals what really changed for apps.
    package func refresh(_ permission: String) {
        if held != nil {
            held?.insert(permission)
            return
        }
        let new = currentSnapshot(permission)
        let old = snapshot(permission)
        guard old != new else { return }
        snapshots[permission] = isKnown(permission) ? new : nil
        if quiet { return }
        let serviceChanged = old.serviceLevelStatus != new.serviceLevelStatus
        if serviceChanged { emit("", permission, new.serviceLevelStatus) }
        let apps = Set(old.policies.keys).union(new.policies.keys).filter { old.policy(for: $0) != new.policy(for: $0) }
        for app in apps.sorted() {
            let decision = self.decision(app, permission)
            let before = effectiveStatus(service: old.service, policy: old.policy(for: app), decision: decision)
            let after = effectiveStatus(service: new.service, policy: new.policy(for: app), decision: decision)
            // A service-level change already told every app about disabled/unsupported.
            if before != after, !(serviceChanged && (after == .disabled || after == .unsupported)) {
                emit(app, permission, after)
            }
        }
    }

    /// Replaces the configuration-declared permissions.
    package func setDeclared(_ new: [String: Snapshot]) {
        let names = Set(declared.keys).union(new.keys)
        configured.snapshots = new
        for name in names.sorted() { refresh(name) }
    }

    /// Changes are being held back (see `held`).
    package var isHolding: Bool { held != nil }

    /// Holds back state changes (see `held`) until `releaseChanges`.
    package func holdChanges() {
        if held == nil { held = [] }
    }

    /// Applies the changes held back, with their signals.
    package func releaseChanges() {
        guard let permissions = held else { return }
        held = nil
        for permission in permissions.sorted() { refresh(permission) }
    }

    // MARK: Decisions

    /// SetDecision: stores the decision (a session grant for the pair ends) and
    /// signals the change. A failed write throws and changes nothing, in memory or
    /// on disk (the session grant included).
    package func setDecision(app: String, permission: String, decision: Decision, setBy: String) throws {
        let before = status(app: app, permission: permission)
        let stored = store.decision(app: app, permission: permission)
        if stored?.decision == decision, stored?.expiresAt == nil { return }
        try store.set(app: app, permission: permission, decision: decision, setBy: setBy)
        endSessionGrant(app, permission)
        let after = status(app: app, permission: permission)
        if before != after { emit(app, permission, after) }
    }

    /// ResetDecisions: removes the app's decisions and session grants for `names`
    /// (all when empty), signals the changes, and returns how many stored rows went.
    /// A failed write throws and changes nothing (session grants included).
    package func resetDecisions(app: String, names: [String]) throws -> Int {
        let stored = names.isEmpty ? store.list(app: app).map(\.permission) : names
        let affected = stored + sessionGrantedPermissions(app: app, among: names).filter { !stored.contains($0) }
        let before = affected.map { status(app: app, permission: $0) }
        let removed = try store.reset(app: app, permissions: names)
        for permission in affected { endSessionGrant(app, permission) }
        for (permission, old) in zip(affected, before) where isKnown(permission) {
            let new = status(app: app, permission: permission)
            if new != old { emit(app, permission, new) }
        }
        return removed
    }

    /// Removes decisions whose time has come, with the signals that implies. False
    /// if one could not be removed (the rest are left for a later try).
    package func removeExpired(now: Int64 = currentMicroseconds()) -> Bool {
        for row in store.expired(now: now) {
            let s = snapshot(row.permission)
            let before = effectiveStatus(service: s.service, policy: s.policy(for: row.appID), decision: row.decision)
            do {
                try store.remove(row)
            } catch {
                logError("cannot remove an expired decision: \(error); retrying in a minute")
                return false
            }
            let after = status(app: row.appID, permission: row.permission)
            if before != after, isKnown(row.permission) { emit(row.appID, row.permission, after) }
        }
        return true
    }
}
