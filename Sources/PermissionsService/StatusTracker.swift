package import PermissionsModel
package import PermissionsStore
internal import PermissionsSupport
internal import DBusKit
internal import SystemPrimitives

/// Who a status and its changes are for: one user's view (their own decisions and
/// session grants count), or everyone's (what is true for a user with no decision
/// of their own: device and service state, admin policy, unassigned denies).
package enum Audience: Hashable, Sendable {
    case everyone
    case user(UInt32)
    /// One user's view of an app identified by its script (kind `script`): as
    /// `.user`, except that an admin allow= does not count (the path is the caller's
    /// own claim); deny= does. A script's own reads and its app stream are in it;
    /// the broadcast and user streams tell an app id as any other caller has it.
    case script(UInt32)

    /// The user whose decisions count: nil for everyone.
    var uid: UInt32? {
        switch self {
        case .everyone: nil
        case .user(let uid), .script(let uid): uid
        }
    }

    /// The admin's entry for `app` as it counts in this view.
    func policy(_ snapshot: Snapshot, for app: String) -> Policy {
        let policy = snapshot.policy(for: app)
        if case .script = self, policy == .allow { return .none }
        return policy
    }
}

/// The service's logic without the bus: combines what the plugins publish (pushed
/// to `publish`; read from their `SnapshotSource` when a plugin's state changes)
/// and what the configuration says with stored decisions and session grants into
/// statuses, and reports each real change of an app's status once per audience,
/// through `emit`. PermissionsService owns one and puts it on the bus; unit tests
/// drive one with an `InMemoryDecisionStore` and a fake source.
///
/// Users: a decision and a session grant belong to one (uid, app, permission) and
/// count only in that user's view. Admin policy from the configuration is
/// machine-wide. An unassigned row (migrated from a store without users) counts
/// for every user if it is a deny, and for nobody if it is a grant (fail closed).
///
/// Confined to the service's queue.
package final class StatusTracker {
    package let store: any DecisionStoring
    /// Where snapshots come from, in order: the first that declares a permission
    /// serves it (the plugins, then the configuration: plugins win a name clash).
    let sources: [any SnapshotSource]
    /// The configuration's permissions, the last of `sources`.
    let configured = DeclaredPermissions()
    /// One real change of a status as `audience` sees it: StatusChanged(app,
    /// permission, status); app "" stands for every app (a service-level change).
    /// A change of one user's decision is told to `.user(uid)` only (and to
    /// `.script(uid)` if that user is in `scriptUsers`); a change for everyone is
    /// told to `.everyone`, to each of `users` and to each of `scriptUsers`.
    package var emit: (_ audience: Audience, _ app: String, _ permission: String, _ status: Status) -> Void
    /// The users whose own view of everyone-level changes is wanted (those with a
    /// subscriber); each gets the change as it applies to them.
    package var users: () -> [UInt32] = { [] }
    /// The users with a subscriber identified by its script (kind `script`): their
    /// view as `.script` is wanted too.
    package var scriptUsers: () -> [UInt32] = { [] }
    /// The snapshots clients last heard about (what signals were computed from).
    private(set) var snapshots: [String: Snapshot] = [:]
    /// Users' own snapshots clients last heard about, by permission and uid: a
    /// user listed sees theirs instead of `snapshots` (a plugin's publish_for_user;
    /// camera and microphone from each user's own PipeWire).
    private(set) var userSnapshots: [String: [UInt32: Snapshot]] = [:]
    /// "allow-session" grants: (uid, app, permission) -> the requesters' unique names
    /// (see SessionGrants.swift).
    var sessionGrants: [DecisionKey: Set<String>] = [:]
    /// Rows with an end that had passed when their commit was applied (a short grant
    /// behind a slow commit), by key, with their `setAt`: no read ever counted
    /// them, so their removal tells no change.
    private var neverInForce: [DecisionKey: Int64] = [:]
    /// While a write's outcome is handled: the one instant at which its rows are
    /// judged in force or expired, by the check that fills `neverInForce` and by the
    /// signals alike (a row that expired between the two was neither).
    private var outcomeInstant: Int64?
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
                 emit: @escaping (_ audience: Audience, _ app: String, _ permission: String, _ status: Status) -> Void
                    = { _, _, _, _ in }) {
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
        sources.contains { $0.declares(permission) }
    }

    /// The snapshot clients last heard about (what signals were computed from).
    package func snapshot(_ permission: String) -> Snapshot {
        snapshots[permission] ?? .unpublished(permission)
    }

    /// The snapshot as `audience` last heard about it: the user's own if there is
    /// one, else the machine-wide one. Everyone's view is the machine-wide one.
    package func snapshot(_ permission: String, for audience: Audience) -> Snapshot {
        if let uid = audience.uid, let own = userSnapshots[permission]?[uid] { return own }
        return snapshot(permission)
    }

    /// What the users' own snapshots of the permission are now, from the first
    /// source that declares it.
    func currentUserSnapshots(_ permission: String) -> [UInt32: Snapshot] {
        guard let source = sources.first(where: { $0.declares(permission) }) else { return [:] }
        return source.userSnapshots(for: permission).mapValues(inForce)
    }

    /// What the permission's state is now, from the first source that declares it.
    func currentSnapshot(_ permission: String) -> Snapshot {
        inForce(sources.lazy.compactMap { $0.snapshot(for: permission) }.first ?? .unpublished(permission))
    }

    /// A source's snapshot as it counts: "disabled" instead of "available" while the
    /// fail-safe holds.
    private func inForce(_ snapshot: Snapshot) -> Snapshot {
        var snapshot = snapshot
        if disabledForLackOfConfiguration, snapshot.service == .available {
            snapshot.service = .disabled
            snapshot.details.removeAll { $0.key == SwitchConfig.disabledByKey }
            snapshot.details.append(.init(SwitchConfig.disabledByKey, "configuration"))
        }
        return snapshot
    }

    /// The status of `app` for one user (their decisions count), or for everyone.
    /// `asTold`: as clients were last told, which counts a row that has expired but
    /// whose removal (and its signal) has not come yet.
    package func status(_ audience: Audience, app: String, permission: String, asTold: Bool = false) -> Status {
        let s = snapshot(permission, for: audience)
        return effectiveStatus(service: s.service, policy: audience.policy(s, for: app),
                               decision: decision(audience, app, permission, asTold: asTold))
    }

    package func status(uid: UInt32, app: String, permission: String) -> Status {
        status(.user(uid), app: app, permission: permission)
    }

    /// The user decision in force for `audience`.
    func decision(_ audience: Audience, _ app: String, _ permission: String, asTold: Bool = false) -> Decision? {
        decisionInForce(audience, app, permission, asTold: asTold)?.decision
    }

    /// The user decision in force for `audience`, and where it comes from (the one
    /// home of the rule, which GetDetails shows too): an unassigned deny (for every
    /// user), else the user's own stored one, else their session grant. `asTold`
    /// counts rows that expired but are still stored: their removal, which tells
    /// clients, has not come yet (unless no read ever counted them).
    package func decisionInForce(_ audience: Audience, _ app: String, _ permission: String,
                                 asTold: Bool = false) -> DecisionInForce? {
        func row(_ uid: UInt32?) -> StoredDecision? {
            let key = DecisionKey(uid: uid, app, permission)
            // now: .min: whatever is stored, expired or not.
            if asTold, let stored = store.decision(key, now: .min), neverInForce[key] != stored.setAt { return stored }
            return store.decision(key, now: outcomeInstant ?? currentMicroseconds())
        }
        if let unassigned = row(nil), unassigned.decision == .denied { return .stored(unassigned) }
        guard let uid = audience.uid else { return nil }
        if let stored = row(uid) { return .stored(stored) }
        return hasSessionGrant(DecisionKey(uid: uid, app, permission)) ? .session : nil
    }

    /// Everyone, then each user with a subscriber, then each with a script's.
    private var allAudiences: [Audience] {
        [.everyone] + users().map { .user($0) } + scriptUsers().map { .script($0) }
    }

    /// Who a change of `owner`'s row can concern: that user (and their scripts'
    /// view, if one subscribed), or, for an unassigned row (which may be a deny in
    /// force for all), everyone.
    func audiences(of owner: UInt32?) -> [Audience] {
        guard let owner else { return allAudiences }
        return [.user(owner)] + (scriptUsers().contains(owner) ? [.script(owner)] : [])
    }

    /// Runs `change` and tells each of `audiences` whose status of each pair it changed.
    func signalling<T>(_ audiences: [Audience], _ pairs: [(app: String, permission: String)],
                               _ change: () throws -> T) rethrows -> T {
        let before = statuses(audiences, pairs)
        let result = try change()
        tellChanges(audiences, pairs, before)
        return result
    }

    /// Each pair's status for each of `audiences` now: what `tellChanges` compares with.
    func statuses(_ audiences: [Audience], _ pairs: [(app: String, permission: String)], asTold: Bool = false) -> [[Status]] {
        pairs.map { pair in audiences.map { status($0, app: pair.app, permission: pair.permission, asTold: asTold) } }
    }

    /// Tells each of `audiences` whose status of each pair is no longer as `before`.
    func tellChanges(_ audiences: [Audience], _ pairs: [(app: String, permission: String)], _ before: [[Status]]) {
        for (pair, old) in zip(pairs, before) where isKnown(pair.permission) {
            for (audience, was) in zip(audiences, old) {
                let now = status(audience, app: pair.app, permission: pair.permission)
                if now != was { emit(audience, pair.app, pair.permission, now) }
            }
        }
    }

    /// Commits a write, then runs `committed` (with the write's row count and the
    /// pairs), tells `audiences` what it changed for `pairs`, and calls `done`.
    /// `pairs` is asked for just before memory changes (what the write touches
    /// then, after the writes made before it). A failed write changes nothing and
    /// tells nothing.
    private func write<T>(_ change: DecisionWrite, audiences: @escaping () -> [Audience],
                          pairs: @escaping () -> [(app: String, permission: String)],
                          committed: @escaping (_ count: Int, _ pairs: [(app: String, permission: String)]) -> T,
                          done: @escaping (Result<T, any Error>) -> Void) {
        // Every decision the service stores goes through here: none that the methods
        // could not name (StoredName) is made, whatever the caller's path was.
        if case .set(let row) = change, !Validate.isAppID(row.appID) || !Validate.isPermissionName(row.permission) {
            return done(.failure(UnnameableDecision(row: row)))
        }
        store.commit(change) { [self] in
            let (audiences, pairs) = (audiences(), pairs())
            // As clients were told: a row that expired just before this write, and
            // whose removal has not signalled yet, is what they last heard.
            let before = statuses(audiences, pairs, asTold: true)
            return { [self] outcome in
                switch outcome {
                case .failure(let error):
                    done(.failure(error))
                case .success(let count):
                    outcomeInstant = currentMicroseconds()
                    let result = committed(count, pairs)
                    tellChanges(audiences, pairs, before)
                    outcomeInstant = nil
                    done(.success(result))
                }
            }
        }
    }

    /// A plugin published: its snapshot is the permission's state now, where it
    /// holds. Signals what really changed for apps.
    package func publish(_ publication: Publication) {
        switch publication.scope {
        case .machine:
            // While held, only the name is kept: its state is taken whole on release,
            // with whatever else changed meanwhile.
            if held != nil {
                held?.insert(publication.permission)
                return
            }
            show(publication.permission, inForce(publication.snapshot))
        case .user(let uid):
            if held != nil {
                held?.insert(publication.permission)
                return
            }
            showUser(publication.permission, uid, inForce(publication.snapshot))
        }
    }

    /// Recomputes a permission's snapshot from its source (a plugin came, went or
    /// changed state; the configuration changed) and signals what really changed for apps.
    package func refresh(_ permission: String) {
        if held != nil {
            held?.insert(permission)
            return
        }
        show(permission, currentSnapshot(permission))
        let current = currentUserSnapshots(permission)
        for uid in Set(userSnapshots[permission, default: [:]].keys).union(current.keys).sorted() {
            showUser(permission, uid, current[uid])
        }
    }

    /// `new` is user `uid`'s own state of the permission now (nil: they have none,
    /// and see the machine-wide one): kept as what they last heard about, with a
    /// signal for each real change, to that user's streams alone (never broadcast).
    private func showUser(_ permission: String, _ uid: UInt32, _ new: Snapshot?) {
        let old = snapshot(permission, for: .user(uid))
        if let new, isKnown(permission) {
            userSnapshots[permission, default: [:]][uid] = new
        } else {
            userSnapshots[permission]?[uid] = nil
            if userSnapshots[permission]?.isEmpty == true { userSnapshots[permission] = nil }
        }
        let now = snapshot(permission, for: .user(uid))
        guard old != now, !quiet else { return }
        tell(permission, from: old, to: now, audiences: audiences(of: uid))
    }

    /// `new` is the permission's state now: kept as what clients last heard about,
    /// with a signal for each real change.
    private func show(_ permission: String, _ new: Snapshot) {
        let old = snapshot(permission)
        guard old != new else { return }
        snapshots[permission] = isKnown(permission) ? new : nil
        if quiet { return }
        // A user with a state of their own does not see the machine-wide one change.
        let own = userSnapshots[permission] ?? [:]
        tell(permission, from: old, to: new, audiences: allAudiences.filter { $0.uid.map { own[$0] == nil } ?? true })
    }

    /// Signals to each of `audiences` what a change of the snapshot they see, from
    /// `old` to `new`, changed for apps: the service level for every app, then each
    /// app whose admin entry changed.
    private func tell(_ permission: String, from old: Snapshot, to new: Snapshot, audiences: [Audience]) {
        let serviceChanged = old.serviceLevelStatus != new.serviceLevelStatus
        if serviceChanged {
            for audience in audiences { emit(audience, "", permission, new.serviceLevelStatus) }
        }
        let apps = Set(old.policies.keys).union(new.policies.keys).filter { old.policy(for: $0) != new.policy(for: $0) }
        for app in apps.sorted() {
            for audience in audiences {
                let decision = self.decision(audience, app, permission)
                let before = effectiveStatus(service: old.service, policy: audience.policy(old, for: app),
                                             decision: decision)
                let after = effectiveStatus(service: new.service, policy: audience.policy(new, for: app),
                                            decision: decision)
                // A service-level change already told every app about disabled/unsupported.
                if before != after, !(serviceChanged && (after == .disabled || after == .unsupported)) {
                    emit(audience, app, permission, after)
                }
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

    /// SetDecision: stores `uid`'s decision (their session grant for the pair ends)
    /// and signals the change to that user, then calls `done` (after the commit).
    /// A failed write changes nothing, in memory or on disk (the session grant
    /// included).
    package func setDecision(uid: UInt32, app: String, permission: String, decision: Decision, setBy: String,
                             expiresAt: Int64? = nil, done: @escaping (Result<Void, any Error>) -> Void) {
        let key = DecisionKey(uid: uid, app, permission)
        // A write that changes nothing is not made; while writes are in flight the
        // row may be about to change, so then it is.
        let stored = store.decision(key)
        if !store.writesInFlight, stored?.decision == decision, stored?.expiresAt == nil, expiresAt == nil {
            return done(.success(()))
        }
        let row = StoredDecision(uid: uid, appID: app, permission: permission, decision: decision,
                                 setAt: currentMicroseconds(), setBy: setBy, expiresAt: expiresAt)
        write(.set(row), audiences: { [self] in audiences(of: uid) }, pairs: { [(app, permission)] },
              committed: { [self] _, _ in
                  endSessionGrant(key)
                  if let expiresAt, expiresAt <= outcomeInstant ?? currentMicroseconds() { neverInForce[key] = row.setAt }
              }, done: done)
    }

    /// ResetDecisions: removes one owner's decisions of `app` for `names` (all when
    /// empty), and a user's session grants of them; signals the changes, and gives
    /// `done` how many stored rows went. `uid` nil resets unassigned rows. A failed
    /// write changes nothing (session grants included).
    package func resetDecisions(uid: UInt32?, app: String, names: [String],
                                done: @escaping (Result<Int, any Error>) -> Void) {
        // What the reset touches, taken when it is applied: rows and grants as they are then.
        write(.reset(uid: uid, app: app, permissions: names), audiences: { [self] in audiences(of: uid) },
              pairs: { [self] in
                  // A stored app id that is not valid (StoredName) is no caller's: removing
                  // its rows changes no status anyone can read, so nothing is told.
                  guard Validate.isAppID(app) else { return [] }
                  let stored = store.list(app: app)
                      .filter { $0.uid == uid && (names.isEmpty || names.contains($0.permission)) }.map(\.permission)
                  let granted = uid.map { sessionGrantedPermissions(uid: $0, app: app, among: names) } ?? []
                  return (stored + granted.filter { !stored.contains($0) }).map { (app, $0) }
              },
              committed: { [self] removed, pairs in
                  if let uid { for pair in pairs { endSessionGrant(DecisionKey(uid: uid, app, pair.permission)) } }
                  return removed
              }, done: done)
    }

    /// Gives the unassigned rows of `app` for `names` (all when empty) to `uid` (a
    /// row of the user's own for the same pair stays), with the signals that
    /// implies (an unassigned deny ends for everyone else); `done` gets how many
    /// unassigned rows were settled.
    package func assign(app: String, names: [String], to uid: UInt32, done: @escaping (Result<Int, any Error>) -> Void) {
        write(.assign(app: app, permissions: names, to: uid),
              audiences: { [self] in
                  var audiences = allAudiences
                  for audience in self.audiences(of: uid) where !audiences.contains(audience) { audiences.append(audience) }
                  return audiences
              },
              pairs: { [self] in
                  store.list(app: app).filter { $0.uid == nil && (names.isEmpty || names.contains($0.permission)) }
                      .map { (app: app, permission: $0.permission) }
              },
              committed: { [self] settled, pairs in
                  // As a decision set for the user: their session grants of these pairs end.
                  for pair in pairs { endSessionGrant(DecisionKey(uid: uid, pair.app, pair.permission)) }
                  return settled
              }, done: done)
    }

    /// Removes decisions whose time has come, with the signals that implies (from
    /// what clients were told: the expired row, unless no read ever counted it);
    /// `done` gets false if one could not be removed (the rest are left for a later try).
    package func removeExpired(now: Int64 = currentMicroseconds(), done: @escaping (Bool) -> Void) {
        let rows = store.expired(now: now)
        guard !rows.isEmpty else { return done(true) }
        var left = rows.count
        var failed = false
        for row in rows {
            write(.remove(row), audiences: { [self] in audiences(of: row.uid) }, pairs: { [(row.appID, row.permission)] },
                  committed: { [self] _, _ in
                      // The row is gone; its entry has served this removal's "before".
                      if neverInForce[row.key] == row.setAt { neverInForce[row.key] = nil }
                  },
                  done: { outcome in
                      if case .failure(let error) = outcome {
                          logError("cannot remove an expired decision: \(error); retrying in a minute")
                          failed = true
                      }
                      left -= 1
                      if left == 0 { done(!failed) }
                  })
        }
    }
}

/// A decision refused before it is stored: its app id or permission is not one the
/// methods accept, so no method could name the row (only a bug can ask for one).
struct UnnameableDecision: Error, CustomStringConvertible {
    let row: StoredDecision
    var description: String {
        "refusing to store a decision for the app id \"\(row.appID.escapedForMessage)\" and the permission "
            + "\"\(row.permission.escapedForMessage)\": not valid"
    }
}
