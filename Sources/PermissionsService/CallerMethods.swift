internal import PermissionsModel
internal import DBusKit
internal import PermissionsStore
internal import PermissionsIdentity
internal import SystemPrimitives

// The caller-scoped methods: GetStatus, GetAll, GetDetails (and GetDetailsForApp,
// its twin for any app of the caller's user). The app is the
// caller, as its bus credentials identify it, and the user is the caller's uid.
// Part of PermissionsService; confined to its queue.
extension PermissionsService {
    func getStatus(_ call: MethodCall) {
        switch knownPermission(call.arguments[0]) {
        case .failure(let error): call.fail(error)
        case .success(let permission):
            withCaller(call) { [unowned self] identity in
                call.reply([.string(self.status(of: identity, permission: permission).rawValue)])
            }
        }
    }

    func getAll(_ call: MethodCall) {
        withCaller(call) { [unowned self] identity in
            call.reply([.stringDictionary(self.permissions.map {
                ($0, self.status(of: identity, permission: $0).rawValue)
            })])
        }
    }

    func getDetails(_ call: MethodCall) {
        switch knownPermission(call.arguments[0]) {
        case .failure(let error): call.fail(error)
        case .success(let permission):
            withCaller(call) { [unowned self] identity in
                call.reply([self.details(identity: identity, permission: permission)])
            }
        }
    }

    /// GetDetailsForApp(ss): GetDetails for any app of the caller's own user, as a
    /// settings page shows it (as GetStatusForApp: the caller's user's view, a path
    /// as an executable's).
    func getDetailsForApp(_ call: MethodCall) {
        let appResult = validAppID(call.arguments[0])
        let permissionResult = knownPermission(call.arguments[1])
        guard case .success(let app) = appResult else { return call.fail(appResult.error!) }
        guard case .success(let permission) = permissionResult else { return call.fail(permissionResult.error!) }
        asOwnerOrAdmin(call, uid: nil, change: false) { [unowned self] _, uid in
            call.reply([.vardict(self.details(.user(uid), app: app, permission: permission))])
        }
    }

    /// GetDetails' dictionary: what lies behind the caller's own status.
    func details(identity: AppIdentity, permission: String) -> DBusValue {
        var pairs: [(String, DBusValue)] = [("identity-kind", .string(identity.kind.rawValue))]
        if let interpreter = identity.interpreter { pairs.append(("interpreter", .string(interpreter))) }
        pairs += details(audience(of: identity), app: identity.appID, permission: permission)
        return .vardict(pairs)
    }

    /// The keys GetDetails and GetDetailsForApp share, for `app` as `audience` sees
    /// it. The decision is the one in force (StatusTracker.decisionInForce), with
    /// its scope: "unassigned" (a deny from a store without users, in force for
    /// every user), "always" (the user's stored one) or "session" (their session
    /// grant). "policy" is the admin's entry as it counts in the view: for a script,
    /// an allow= is "none", and "policy-ignored" says so.
    func details(_ audience: Audience, app: String, permission: String) -> [(String, DBusValue)] {
        // The user's own state (their devices), never another user's.
        let s = tracker.snapshot(permission, for: audience)
        let policy = audience.policy(s, for: app)
        var pairs: [(String, DBusValue)] = [
            ("app-id", .string(app)),
            ("uid", .uint32(audience.uid ?? UInt32.max)),
            ("status", .string(tracker.status(audience, app: app, permission: permission).rawValue)),
            ("service-state", .string(s.service.rawValue)),
            ("policy", .string(policy.rawValue)),
        ]
        if s.service == .disabled {
            let by = s.details.last { $0.key == SwitchConfig.disabledByKey }?.value
            pairs.append(("disabled-by", .string(by == "configuration" || by == "device" ? by! : "unknown")))
        }
        if policy != s.policy(for: app) { pairs.append(("policy-ignored", .string(s.policy(for: app).rawValue))) }
        switch tracker.decisionInForce(audience, app, permission) {
        case .stored(let stored)?:
            pairs.append(("decision", .string(stored.decision.rawValue)))
            pairs.append(("decision-scope", .string(stored.uid == nil ? "unassigned" : "always")))
            pairs.append(("decision-set-by", .string(stored.setBy.escapedForLog)))
            pairs.append(("decision-set-at", .int64(stored.setAt)))
            if let expires = stored.expiresAt { pairs.append(("decision-expires-at", .int64(expires))) }
        case .session?:
            pairs.append(("decision", .string("authorized")))
            pairs.append(("decision-scope", .string("session")))
        case nil:
            pairs.append(("decision", .string("none")))
        }
        pairs.append(("plugin", .string(plugins.pluginName(providing: permission) ?? (declared[permission] != nil ? "config" : ""))))
        pairs.append(("plugin-details", .stringDictionary(s.details.map { ($0.key, $0.value) })))
        pairs.append(("devices", .array(elementSignature: "a{ss}", s.devices.map { device in
            .stringDictionary(device.map { ($0.key, $0.value) })
        })))
        return pairs
    }
}
