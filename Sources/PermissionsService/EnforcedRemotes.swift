internal import PermissionsModel
internal import DBusKit
internal import PermissionsIdentity
internal import PermissionsStore
internal import PermissionsSupport
internal import SystemPrimitives
internal import Glibc

/// One connection OpenPipeWireRemote handed out: to the backend of `permission`
/// (its plugin enforces it), for `app` of user `uid`. It reaches what the
/// permission covers only while the app's status is "authorized": every change of
/// that status is told to the plugin, which narrows or widens the connection.
struct EnforcedRemote {
    let id: UInt64
    let audience: Audience
    let app: String
    let permission: String
    let pid: UInt32
    /// When it was handed out (µs since the epoch); 0 while it is being opened.
    var openedAt: Int64 = 0
    /// The status the plugin was last told (at opening: "authorized").
    var told: Status = .authorized
    var uid: UInt32 { audience.uid ?? 0 }
    var key: HeldKey { HeldKey(uid: uid, app: app, permission: permission) }
}

/// A user's app's permission whose stricter decision could not be stored.
struct HeldKey: Hashable {
    let uid: UInt32
    let app: String
    let permission: String
}

/// The open remotes, by id, with a count per user. Confined to the service queue.
struct EnforcedRemotes {
    /// How many remotes one user may hold at once: each is a client of their own
    /// PipeWire, which the daemon follows and narrows on every change.
    static let perUser = 64
    /// How many one user, and all users, may have being opened at once by one
    /// plugin: each call waits on a thread of its own for up to 1.5 s (a hung
    /// PipeWire), and a plugin slower than the deadline keeps it after the caller
    /// was answered, so the count is of calls the plugin has not returned from
    /// (`inPlugin`). By plugin: one that never returns holds its own opens back,
    /// not another plugin's.
    static let openingPerUser = 4
    static let openingInAll = 16
    private(set) var byID: [UInt64: EnforcedRemote] = [:]
    /// open_remote calls that have not returned, by plugin and user.
    private var inPlugin: [OpenCaller: Int] = [:]
    struct OpenCaller: Hashable {
        let plugin: String
        let uid: UInt32
    }
    private var nextID: UInt64 = 1
    /// Denies and resets that could not be stored (a full disk): until a decision
    /// for the key is stored, its remotes are narrowed and no new one is opened,
    /// whatever the status reads (failing closed).
    var held = Set<HeldKey>()

    func count(uid: UInt32) -> Int { byID.values.count { $0.uid == uid } }
    /// open_remote calls into `plugin` of `uid` (nil: of every user) that have not returned.
    func opening(plugin: String, uid: UInt32?) -> Int {
        inPlugin.reduce(0) { $0 + ($1.key.plugin == plugin && (uid == nil || $1.key.uid == uid) ? $1.value : 0) }
    }
    mutating func openCallStarted(_ caller: OpenCaller) { inPlugin[caller, default: 0] += 1 }
    mutating func openCallReturned(_ caller: OpenCaller) {
        inPlugin[caller, default: 0] -= 1
        if inPlugin[caller] == 0 { inPlugin[caller] = nil }
    }
    /// Users with open remotes, by view: their changes must be computed (StatusTracker.users).
    func users(scripts: Bool) -> [UInt32] {
        Array(Set(byID.values.filter { ($0.audience == .script($0.uid)) == scripts }.map(\.uid))).sorted()
    }

    mutating func add(audience: Audience, app: String, permission: String, pid: UInt32) -> UInt64 {
        defer { nextID += 1 }
        byID[nextID] = EnforcedRemote(id: nextID, audience: audience, app: app, permission: permission, pid: pid)
        return nextID
    }

    @discardableResult
    mutating func remove(_ id: UInt64) -> EnforcedRemote? { byID.removeValue(forKey: id) }

    subscript(id: UInt64) -> EnforcedRemote? {
        get { byID[id] }
        set { byID[id] = newValue }
    }
}

/// OpenPipeWireRemote and ListPipeWireRemotes: connections to a backend that
/// reach only what the app is allowed, for as long as it is. Part of
/// PermissionsService; confined to its queue.
extension PermissionsService {
    func openPipeWireRemote(_ call: MethodCall) {
        // Options: none yet; unknown keys are ignored, as Request's are, so that
        // newer clients work with this daemon.
        let permission: String
        switch knownPermission(call.arguments[0]) {
        case .failure(let error): return call.fail(error)
        case .success(let name): permission = name
        }
        guard plugins.enforces(permission) else {
            return call.fail(PermissionsError.notSupported(
                "\"\(permission.escapedForMessage)\" is not enforced: no plugin opens connections for it"))
        }
        withCaller(call) { [unowned self] identity in
            let status = self.status(of: identity, permission: permission)
            guard status == .authorized else {
                return call.fail(PermissionsError.notAuthorized(
                    "\(permission) is \"\(status.rawValue)\" for \(identity.appID.escapedForMessage): "
                        + "a connection needs \"authorized\""))
            }
            guard !self.remotes.held.contains(HeldKey(uid: identity.uid, app: identity.appID, permission: permission)) else {
                return call.fail(PermissionsError.notAuthorized(
                    "\(permission) for \(identity.appID.escapedForMessage): a deny that could not be stored holds "
                        + "until a decision is stored"))
            }
            let caller = EnforcedRemotes.OpenCaller(plugin: self.plugins.pluginName(providing: permission) ?? "",
                                                    uid: identity.uid)
            if let limit = self.remoteLimit(caller) { return call.fail(limit) }
            let audience = self.audience(of: identity)
            let id = self.remotes.add(audience: audience, app: identity.appID, permission: permission,
                                      pid: identity.pid)
            self.remotes.openCallStarted(caller)
            self.plugins.openRemote(id: id, uid: identity.uid, pid: identity.pid, app: identity.appID,
                                    permission: permission,
                                    done: { [unowned self] fd in self.remoteOpened(id, fd: fd, call: call) },
                                    returned: { [weak self] in self?.remotes.openCallReturned(caller) })
        }
    }

    /// LimitExceeded when the user holds as many remotes as it may, or has (or
    /// every user has) as many being opened by the plugin.
    private func remoteLimit(_ caller: EnforcedRemotes.OpenCaller) -> BusError? {
        let uid = caller.uid
        if remotes.count(uid: uid) >= EnforcedRemotes.perUser {
            return PermissionsError.limitExceeded(
                "user \(uid) holds \(EnforcedRemotes.perUser) connections; the limit is \(EnforcedRemotes.perUser)")
        }
        if remotes.opening(plugin: caller.plugin, uid: uid) >= EnforcedRemotes.openingPerUser {
            return PermissionsError.limitExceeded("user \(uid) has \(EnforcedRemotes.openingPerUser) connections being "
                                                  + "opened by plugin \(caller.plugin); the limit is "
                                                  + "\(EnforcedRemotes.openingPerUser)")
        }
        if remotes.opening(plugin: caller.plugin, uid: nil) >= EnforcedRemotes.openingInAll {
            return PermissionsError.limitExceeded("\(EnforcedRemotes.openingInAll) connections are being opened by "
                                                  + "plugin \(caller.plugin); the limit is \(EnforcedRemotes.openingInAll)")
        }
        return nil
    }

    /// The plugin answered open_remote: hand the descriptor over, or say why not.
    private func remoteOpened(_ id: UInt64, fd: Int32, call: MethodCall) {
        guard fd >= 0 else {
            let remote = remotes.remove(id)
            let why = fd == -ENODEV
                ? "user \(remote?.uid ?? 0) has no \(remote?.permission ?? "") backend running now"
                : "cannot open a connection: \(errnoName(-fd))"
            return call.fail(PermissionsError.unavailable(why))
        }
        // The service keeps no copy: the connection must end when the app closes it.
        let descriptor = FileDescriptor(adopting: fd)
        guard var remote = remotes[id] else {
            // It ended while it was being opened (the plugin saw its client go).
            return call.fail(PermissionsError.unavailable("the connection ended as it was opened"))
        }
        remote.openedAt = currentMicroseconds()
        remotes[id] = remote
        logInfo("remote \(id): \(remote.permission) for \(remote.app.escapedForLog) of uid \(remote.uid) "
                + "(pid \(remote.pid))")
        call.reply([.unixFD(descriptor)])
        // The status may have changed while the plugin opened it.
        recheckRemotes(permission: remote.permission)
    }

    /// Tells the plugin of every open remote of `permission` (nil: all) whose
    /// status is no longer what it was told. Called on every status change the
    /// tracker signals, and when a remote has just been handed out.
    func recheckRemotes(permission: String?) {
        // Those being opened are told once open (remoteOpened): a plugin may not know
        // the id before open_remote has returned.
        for (id, remote) in remotes.byID where remote.openedAt != 0 && (permission == nil || remote.permission == permission) {
            let now = remotes.held.contains(remote.key) ? .denied
                : tracker.status(remote.audience, app: remote.app, permission: remote.permission)
            guard now != remote.told else { continue }
            remotes[id]?.told = now
            logInfo("remote \(id): \(remote.permission) is now \(now.rawValue) for \(remote.app.escapedForLog) "
                    + "of uid \(remote.uid): " + (now == .authorized ? "given back" : "taken away"))
            plugins.remoteStatus(id: id, permission: remote.permission, status: now.rawValue)
        }
    }

    /// A deny or a reset of `app`'s `permissions` (nil: all) for user `uid` could
    /// not be stored: the status stays what it was, but the remotes it would
    /// have narrowed are narrowed anyway (failing closed), until a decision for
    /// them is stored (`releaseRemotes`).
    func holdRemotes(uid: UInt32, app: String, permissions: [String]?) {
        setHeld(true, uid: uid, app: app, permissions: permissions)
    }

    /// A decision for `app`'s `permissions` (nil: all) of user `uid` was stored:
    /// their remotes follow the status again.
    func releaseRemotes(uid: UInt32, app: String, permissions: [String]?) {
        setHeld(false, uid: uid, app: app, permissions: permissions)
    }

    /// Held on the decision's key, not on the remotes open now: one opened later
    /// is refused as well.
    private func setHeld(_ held: Bool, uid: UInt32, app: String, permissions: [String]?) {
        let names = permissions ?? self.permissions.filter { plugins.enforces($0) }
        let keys = names.map { HeldKey(uid: uid, app: app, permission: $0) }
        let before = remotes.held
        if held { remotes.held.formUnion(keys) } else { remotes.held.subtract(keys) }
        guard remotes.held != before else { return }
        if held { logWarning("a stricter decision for \(app.escapedForLog) of uid \(uid) could not be stored: its "
                             + "connections to \(names.joined(separator: ", ")) are narrowed until one is") }
        recheckRemotes(permission: nil)
    }

    /// The plugin says a remote ended (the app closed it, the backend went, or the
    /// plugin stopped).
    /// Also when its plugin stopped (its fini disconnects what it made) or was
    /// given up (the daemon then stops: PluginHost.onEnforcementLost).
    package func remoteClosed(_ id: UInt64) {
        guard let remote = remotes.remove(id) else { return }
        if remote.openedAt != 0 {
            logInfo("remote \(id): \(remote.permission) for \(remote.app.escapedForLog) of uid \(remote.uid) closed")
        }
    }

    /// ListPipeWireRemotes() -> a(tusssx): the caller's user's open remotes (every
    /// user's for root): id, uid, app id, permission, status as last told, opened at.
    func listPipeWireRemotes(_ call: MethodCall) {
        withCaller(call) { [unowned self] identity in
            let rows = self.remotes.byID.values
                .filter { $0.openedAt != 0 && (identity.uid == 0 || $0.uid == identity.uid) }
                .sorted { $0.id < $1.id }
                .map { r -> DBusValue in
                    .structure([.uint64(r.id), .uint32(r.uid), .string(r.app), .string(r.permission),
                                .string(r.told.rawValue), .int64(r.openedAt)])
                }
            call.reply([.array(elementSignature: "(tusssx)", rows)])
        }
    }
}
