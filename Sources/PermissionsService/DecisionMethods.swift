internal import PermissionsModel
internal import DBusKit
internal import PermissionsSupport
internal import PermissionsStore
internal import PermissionsIdentity
internal import SystemPrimitives

// The methods that read and change stored decisions. Each v1 method (GetStatusForApp,
// SetDecision, ResetDecisions, ListDecisions) is about the caller's own uid; its
// *ForUser twin takes the uid first and, for another user's, needs an admin. The
// unassigned rows of a migrated store have methods of their own (admins only).
// Part of PermissionsService; confined to its queue.
extension PermissionsService {
    /// A uid a call names: any but (uid_t)-1, which is no user's.
    func validUID(_ value: DBusValue) -> Result<UInt32, BusError> {
        let uid = value.uint32Value ?? UInt32.max
        guard uid != UInt32.max else {
            return .failure(PermissionsError.invalidArgument("invalid uid \(uid): (uid_t)-1 is no user's"))
        }
        return .success(uid)
    }

    /// For the *ForUser methods: the named uid and the arguments after it; for the
    /// v1 ones: nil (the caller's own) and all the arguments.
    func target(_ call: MethodCall, forUser: Bool) -> Result<(uid: UInt32?, arguments: ArraySlice<DBusValue>), BusError> {
        guard forUser else { return .success((nil, call.arguments[...])) }
        return validUID(call.arguments[0]).map { ($0, call.arguments.dropFirst()) }
    }

    /// Runs `body` with the uid whose decisions the caller may `change` or read:
    /// - its own (`uid` nil, or its own uid): any caller of the host that is not
    ///   sandboxed or unverified; to change them, polkit's `manage-own` on the
    ///   system bus (see Authorizer);
    /// - another user's: an admin (root, or polkit's `manage`).
    ///
    /// `unreadable`: what to do instead when the user's decisions cannot be read
    /// (by default the call is answered StorageFailed).
    func asOwnerOrAdmin(_ call: MethodCall, uid: UInt32?, change: Bool,
                        unreadable: ((_ uid: UInt32, _ error: any Error) -> Void)? = nil,
                        _ body: @escaping (_ caller: AppIdentity, _ uid: UInt32) -> Void) {
        withCaller(call, evenIfUnreadable: unreadable != nil) { [unowned self] identity in
            let own = uid == nil || uid == identity.uid
            let action: Authorizer.Action? = own ? (change ? .manageOwn : nil) : .manage
            self.authorizer.check(identity, sender: call.sender, action: action) { refusal in
                if let refusal {
                    let member = call.message.member ?? ""
                    let whose = own ? "" : " for uid \(uid!)"
                    return call.fail(refusal.error("\(member)\(whose) is not allowed"))
                }
                // Another user's (the caller's own are loaded): named by an admin, loaded first.
                let owner = uid ?? identity.uid
                self.whenLoaded(call, owner, unreadable: unreadable.map { handler in { handler(owner, $0) } }) {
                    body(identity, owner)
                }
            }
        }
    }

    /// GetStatusForApp(ss) and GetStatusForUser(uss): an app's status for a user.
    func getStatusForApp(_ call: MethodCall, forUser: Bool = false) {
        let target = target(call, forUser: forUser)
        guard case .success(let (uid, arguments)) = target else { return call.fail(target.error!) }
        let appResult = validAppID(arguments[arguments.startIndex])
        let permissionResult = knownPermission(arguments[arguments.startIndex + 1])
        guard case .success(let app) = appResult else { return call.fail(appResult.error!) }
        guard case .success(let permission) = permissionResult else { return call.fail(permissionResult.error!) }
        asOwnerOrAdmin(call, uid: uid, change: false) { [unowned self] _, uid in
            call.reply([.string(self.status(uid: uid, app: app, permission: permission).rawValue)])
        }
    }

    /// SetDecision(sss) and SetDecisionForUser(usss).
    func setDecision(_ call: MethodCall, forUser: Bool = false) {
        let target = target(call, forUser: forUser)
        guard case .success(let (uid, arguments)) = target else { return call.fail(target.error!) }
        let first = arguments.startIndex
        let appResult = validAppID(arguments[first])
        let permissionResult = knownPermission(arguments[first + 1])
        guard case .success(let app) = appResult else { return call.fail(appResult.error!) }
        guard case .success(let permission) = permissionResult else { return call.fail(permissionResult.error!) }
        let word = arguments[first + 2].stringValue ?? ""
        guard let decision = Decision(rawValue: word) else {
            return call.fail(PermissionsError.invalidArgument(
                "invalid decision \"\(word.escapedForMessage)\": expected \"authorized\" or \"denied\""))
        }
        asOwnerOrAdmin(call, uid: uid, change: true) { [unowned self] identity, uid in
            self.tracker.setDecision(uid: uid, app: app, permission: permission, decision: decision,
                                     setBy: "uid \(identity.uid) (\(identity.appID))") { outcome in
                // The reply goes once the decision is on disk; a failure changed nothing,
                // in memory or on disk (a session grant included).
                if case .failure(let error) = outcome {
                    if decision == .denied { self.holdRemotes(uid: uid, app: app, permissions: [permission]) }
                    return call.fail(PermissionsError.storageFailed("cannot store the decision: \(error)"))
                }
                self.releaseRemotes(uid: uid, app: app, permissions: [permission])
                call.reply()
            }
        }
    }

    /// The permission names of a reset or an assignment: each once, each valid, or,
    /// for a reset (`stored`), the name a list gives a stored one that is not
    /// (StoredName), standing for it.
    func permissionNames(_ value: DBusValue, stored: Bool = false) -> Result<[String], BusError> {
        var seen = Set<String>()
        var names: [String] = []
        for name in value.stringArray ?? [] where seen.insert(name).inserted {
            guard let permission = stored ? StoredName.permission(named: name)
                                          : Validate.isPermissionName(name) ? name : nil
            else { return .failure(PermissionsError.invalidPermissionName(name)) }
            names.append(permission)
        }
        return .success(names)
    }

    /// The app id a reset or a list names: a valid app id, or the name a list gives
    /// a stored id that is not valid (`invalid:…`, StoredName), standing for it, so
    /// that every stored row can be listed and removed.
    func storedAppID(_ value: DBusValue) -> Result<String, BusError> {
        let name = value.stringValue ?? ""
        if let id = StoredName.appID(named: name) { return .success(id) }
        // The id itself, as a migrated row held it: say what names it.
        let hint = name.hasPrefix(StoredName.invalidPrefix) ? ""
            : "; a stored app id that is not valid is named as the lists show it, here \""
                + StoredName.app(name).escapedForMessage + "\""
        return .failure(PermissionsError.invalidArgument("invalid app id \"\(name.escapedForMessage)\"\(hint)"))
    }

    /// A stored row as the lists give it: a(sssxs) (app, permission, decision, set at
    /// in µs, set by), with what no method accepts named (StoredName) and a setter's
    /// control characters escaped, so that every row is listed, and as its name.
    func listed(_ row: StoredDecision) -> [DBusValue] {
        [.string(StoredName.app(row.appID)), .string(StoredName.permission(row.permission)),
         .string(row.decision.rawValue), .int64(row.setAt), .string(row.setBy.escapedForLog)]
    }

    /// ResetDecisions(sas) and ResetDecisionsForUser(usas).
    func resetDecisions(_ call: MethodCall, forUser: Bool = false) {
        let target = target(call, forUser: forUser)
        guard case .success(let (uid, arguments)) = target else { return call.fail(target.error!) }
        let appResult = storedAppID(arguments[arguments.startIndex])
        let namesResult = permissionNames(arguments[arguments.startIndex + 1], stored: true)
        guard case .success(let app) = appResult else { return call.fail(appResult.error!) }
        guard case .success(let names) = namesResult else { return call.fail(namesResult.error!) }
        // A user whose rows cannot be read (a damaged page, a decision word of a newer
        // version) can still have them removed: the reset is made in the file alone,
        // by owner, app and permission, as every write is, and counts what went
        // there. It is the way out short of stopping the daemon; the next call of
        // that user tries the load again.
        let unreadable = { [unowned self] (uid: UInt32, error: any Error) in
            logWarning("the decisions of uid \(uid) cannot be read (\(error)); resetting those of "
                       + "\(app.escapedForLog) in the file alone")
            self.reset(call, uid: uid, app: app, names: names)
        }
        asOwnerOrAdmin(call, uid: uid, change: true, unreadable: unreadable) { [unowned self] _, uid in
            self.reset(call, uid: uid, app: app, names: names)
        }
    }

    /// ListDecisions(s) and ListDecisionsForUser(us): one user's rows, of every app
    /// or one: a(sssxs) (app, permission, decision, set at in µs, set by).
    func listDecisions(_ call: MethodCall, forUser: Bool = false) {
        let target = target(call, forUser: forUser)
        guard case .success(let (uid, arguments)) = target else { return call.fail(target.error!) }
        let filterResult = appFilter(arguments[arguments.startIndex])
        guard case .success(let filter) = filterResult else { return call.fail(filterResult.error!) }
        asOwnerOrAdmin(call, uid: uid, change: false) { [unowned self] _, uid in
            // Not a row whose end has passed: the expiry timer removes only rows in
            // memory, so one that ended while its user was not loaded is still there
            // in the turn of the load that read it (the timer comes after).
            let now = currentMicroseconds()
            let rows = self.store.list(app: filter).filter { $0.uid == uid && $0.isInForce(at: now) }
            call.reply([.array(elementSignature: "(sssxs)", rows.map { .structure(self.listed($0)) })])
        }
    }

    /// "" for every app, or a stored app id's name (see `storedAppID`).
    func appFilter(_ value: DBusValue) -> Result<String?, BusError> {
        if value.stringValue?.isEmpty ?? true { return .success(nil) }
        return storedAppID(value).map { $0 }
    }

    /// ListAllDecisions(s): every user's rows and the unassigned ones (admins):
    /// a(xsssxs) (owner uid, or -1 for unassigned; then as ListDecisions).
    func listAllDecisions(_ call: MethodCall) {
        let filterResult = appFilter(call.arguments[0])
        guard case .success(let filter) = filterResult else { return call.fail(filterResult.error!) }
        asAdmin(call) { [unowned self] _ in
            // From the file, not memory: every user's rows, loaded or not, without
            // loading them all (off the serving queue, as a user's load is).
            self.store.readAll(app: filter) { [weak self] result in
                guard let self, !call.isAnswered else { return }
                switch result {
                case .failure(let error):
                    call.fail(PermissionsError.storageFailed("cannot read the stored decisions: \(error)"))
                case .success(let all):
                    // Not a row whose end has passed: one of a user not loaded stays in
                    // the file until their next load (the expiry timer sees memory only).
                    let now = currentMicroseconds()
                    let rows = all.filter { $0.isInForce(at: now) }
                    call.reply([.array(elementSignature: "(xsssxs)", rows.map { row in
                        .structure([.int64(row.uid.map { Int64($0) } ?? -1)] + self.listed(row))
                    })])
                }
            }
        }
    }

    /// AssignDecisions(sasu): gives unassigned rows of an app to a user (admins).
    /// Not those of an app id that is not valid: no app has it, so it would apply to
    /// nobody; they can only be reset.
    func assignDecisions(_ call: MethodCall) {
        if let name = call.arguments[0].stringValue, StoredName.namesInvalidAppID(name) {
            return call.fail(PermissionsError.invalidArgument(
                "\"\(name.escapedForMessage)\" names a stored app id that is not valid: no app has it, so its "
                    + "decisions cannot be given to a user; remove them with ResetUnassignedDecisions"))
        }
        let appResult = validAppID(call.arguments[0])
        let namesResult = permissionNames(call.arguments[1])
        let uidResult = validUID(call.arguments[2])
        guard case .success(let app) = appResult else { return call.fail(appResult.error!) }
        guard case .success(let names) = namesResult else { return call.fail(namesResult.error!) }
        guard case .success(let uid) = uidResult else { return call.fail(uidResult.error!) }
        asAdmin(call) { [unowned self] _ in
            // The user the rows go to is named: loaded first, so that their own rows
            // (which stay) are known and the signals computed from them.
            self.whenLoaded(call, uid) { self.assign(call, app: app, names: names, to: uid) }
        }
    }

    private func assign(_ call: MethodCall, app: String, names: [String], to uid: UInt32) {
        tracker.assign(app: app, names: names, to: uid) { outcome in
            switch outcome {
            case .success(let settled): call.reply([.uint32(UInt32(settled))])
            case .failure(let error): call.fail(PermissionsError.storageFailed("cannot assign decisions: \(error)"))
            }
        }
    }

    /// ResetUnassignedDecisions(sas): removes unassigned rows of an app (admins),
    /// named as ListAllDecisions lists them.
    func resetUnassigned(_ call: MethodCall) {
        let appResult = storedAppID(call.arguments[0])
        let namesResult = permissionNames(call.arguments[1], stored: true)
        guard case .success(let app) = appResult else { return call.fail(appResult.error!) }
        guard case .success(let names) = namesResult else { return call.fail(namesResult.error!) }
        asAdmin(call) { [unowned self] _ in
            self.reset(call, uid: nil, app: app, names: names)
        }
    }

    /// Resets one owner's rows and replies with how many went.
    private func reset(_ call: MethodCall, uid: UInt32?, app: String, names: [String]) {
        tracker.resetDecisions(uid: uid, app: app, names: names) { [unowned self] outcome in
            switch outcome {
            case .success(let removed):
                if let uid { releaseRemotes(uid: uid, app: app, permissions: names.isEmpty ? nil : names) }
                call.reply([.uint32(UInt32(removed))])
            // Nothing changed, in memory or on disk (session grants included); the
            // connections the reset would have narrowed are narrowed (EnforcedRemotes).
            case .failure(let error):
                if let uid { holdRemotes(uid: uid, app: app, permissions: names.isEmpty ? nil : names) }
                call.fail(PermissionsError.storageFailed("cannot reset decisions: \(error)"))
            }
        }
    }

    /// Runs `body` if the caller is an admin (see Authorizer): ListAllDecisions and
    /// the unassigned rows' methods.
    func asAdmin(_ call: MethodCall, action: Authorizer.Action = .manage, _ body: @escaping (AppIdentity) -> Void) {
        withCaller(call) { [unowned self] identity in
            self.authorizer.check(identity, sender: call.sender, action: action) { refusal in
                if let refusal {
                    let member = call.message.member ?? ""
                    return call.fail(refusal.error("\(member) is not allowed"))
                }
                body(identity)
            }
        }
    }
}
