internal import PermissionsModel
internal import DBusKit
internal import PermissionsStore
internal import PermissionsSupport
internal import PermissionsIdentity
internal import SystemPrimitives

// Request and RequestMany: the caller's status, or, when nobody has decided yet,
// a prompt through the registered agent; what the user answered, stored; and agent
// registration. Part of PermissionsService; confined to its queue.
extension PermissionsService {
    /// Options a request may carry: "reason" (s, shown to the user), "accuracy"
    /// (s, location only: the accuracy the app wants) and "parent_window" (s, the
    /// app's window, for the agent to put its prompt over: ParentWindow.swift).
    /// Unknown keys are ignored so that newer clients work with this daemon
    /// (StartRequest's "handle_token" is read by StartRequest itself).
    struct RequestOptions {
        var reason = ""
        var details: [(String, DBusValue)] = []
    }

    /// An option of the wrong type: InvalidArgument naming the type given, so the
    /// caller sees what was wrong, not only what was wanted.
    static func optionTypeError(_ key: String, expected: String, given value: DBusValue) -> BusError {
        let given = if case .variant(let inner) = value { inner.signature } else { value.signature }
        return PermissionsError.invalidArgument(
            "option \"\(key.escapedForMessage)\" must be \(expected), not \"\(given.escapedForMessage)\"")
    }

    func requestOptions(_ value: DBusValue) -> Result<RequestOptions, BusError> {
        var options = RequestOptions()
        for (key, value) in value.stringKeyedEntries ?? [] {
            switch key {
            case "reason":
                guard case .variant(.string(let reason)) = value else {
                    return .failure(Self.optionTypeError("reason", expected: "a string (s)", given: value))
                }
                guard reason.utf8.count <= 1024 else {
                    return .failure(PermissionsError.invalidArgument(
                        "option \"reason\" is \(reason.utf8.count) bytes; the limit is 1024"))
                }
                options.reason = reason
            case "accuracy":
                guard case .variant(.string(let accuracy)) = value else {
                    return .failure(Self.optionTypeError("accuracy", expected: "a string (s)", given: value))
                }
                guard LocationAccuracy.levels.contains(accuracy) else {
                    return .failure(PermissionsError.invalidArgument(
                        "invalid accuracy \"\(accuracy.escapedForMessage)\": expected one of "
                            + LocationAccuracy.levels.joined(separator: ", ")))
                }
                options.details.append(("accuracy", .string(accuracy)))
            case "parent_window":
                guard case .variant(.string(let window)) = value else {
                    return .failure(Self.optionTypeError("parent_window", expected: "a string (s)", given: value))
                }
                if let problem = ParentWindow.problem(window) {
                    return .failure(PermissionsError.invalidArgument(
                        "invalid parent_window \"\(window.escapedForMessage)\": \(problem)"))
                }
                // The portal's convention: "" is no window.
                if !window.isEmpty { options.details.append(("parent-window", .string(window))) }
            default:
                continue
            }
        }
        return .success(options)
    }

    func request(_ call: MethodCall) {
        let permissionResult = knownPermission(call.arguments[0])
        let optionsResult = requestOptions(call.arguments[1])
        guard case .success(let permission) = permissionResult else { return call.fail(permissionResult.error!) }
        guard case .success(let options) = optionsResult else { return call.fail(optionsResult.error!) }
        withCaller(call) { [unowned self] identity in
            self.ask(identity, permission, options, sender: call.sender) { outcome, _ in
                switch outcome {
                case .success(let status): call.reply([.string(status.rawValue)])
                case .failure(let error): call.fail(error)
                }
            }
        }
    }

    /// One permission after another, each with its own prompt if needed, like the
    /// "request everything at first launch" flow. An error (an answer that could not
    /// be stored) ends it there: the call fails with it, and nothing more is asked.
    func requestMany(_ call: MethodCall) {
        // Each permission once, in the order first given: a duplicate is not a second prompt.
        var seen = Set<String>()
        let names = (call.arguments[0].stringArray ?? []).filter { seen.insert($0).inserted }
        for name in names {
            if case .failure(let error) = knownPermission(.string(name)) { return call.fail(error) }
        }
        let optionsResult = requestOptions(call.arguments[1])
        guard case .success(let options) = optionsResult else { return call.fail(optionsResult.error!) }
        withCaller(call) { [unowned self] identity in
            var results: [(String, String)] = []
            func next(_ index: Int) {
                guard index < names.count else { return call.reply([.stringDictionary(results)]) }
                self.ask(identity, names[index], options, sender: call.sender) { outcome, _ in
                    guard case .success(let status) = outcome else { return call.fail(outcome.error!) }
                    results.append((names[index], status.rawValue))
                    next(index + 1)
                }
            }
            next(0)
        }
    }

    /// Answers at once unless the status is not-determined; then prompts. Once the
    /// service is stopping nothing is asked: `done` gets Cancelled (RequestMany's
    /// next permission, reached while the stop gives a stored answer its outcome).
    func ask(_ identity: AppIdentity, _ permission: String, _ options: RequestOptions, sender: String,
             handle: String? = nil, done: @escaping AskDone) {
        guard !stopping else { return done(.failure(Self.stoppingError), .ended) }
        let current = status(of: identity, permission: permission)
        guard current == .notDetermined else { return done(.success(current), .answered) }
        // Only an agent of the caller's own uid may ask: other users' agents count as none.
        guard broker.hasAgent(for: identity.uid) else { return done(.success(noAgentAnswer(permission)), .answered) }
        let details: [(String, DBusValue)] = [("identity-kind", .string(identity.kind.rawValue)),
                                              ("uid", .uint32(identity.uid))] + options.details
        broker.ask(uid: identity.uid, app: identity.appID, permission: permission, script: identity.kind == .script,
                   reason: options.reason, details: details, sender: sender, handle: handle, done: done)
    }

    /// The permission's `no-agent` setting, except that a degraded store (its
    /// decisions lost at start-up, stored denies included) never lets a setting grant:
    /// only a user's answer may then authorize.
    func noAgentAnswer(_ permission: String) -> Status {
        let configured = noAgentDefaults[permission] ?? .notDetermined
        guard configured == .authorized, store.degradedReason != nil else { return configured }
        // Debug only: the degraded state itself was logged loudly at start-up.
        logDebug("\(permission): no-agent=authorized not applied while the decision store is degraded")
        return .notDetermined
    }

    /// Stores what the user answered, for the prompt's user, and returns the status
    /// to reply with, or, if the answer cannot be stored, StorageFailed for every
    /// waiter: nothing is stored or changed and no signal is sent. An error rather
    /// than the unchanged status, so that no requester takes "not-determined" for
    /// the user's answer.
    ///
    /// An unverified caller's app is not known beyond this run of it: its "always"
    /// is a session grant, and its deny answers this prompt only; nothing is stored.
    func settle(_ prompt: Prompt, _ answer: AgentAnswer, _ expiresAt: Int64?, _ agent: Agent,
                _ done: @escaping (Result<Status, BusError>) -> Void) {
        // After the writes already made (a SetDecision of the same pair may be in a
        // commit): the check below must see them, or the answer would be stored over
        // a decision made before it.
        // The prompt kept its user here (Residency); loaded first all the same, since
        // what is stored must be checked against their rows.
        loads.whenLoaded(prompt.uid) { [weak self] loaded in
            guard let self else { return }
            if case .failure(let error) = loaded {
                return done(.failure(PermissionsError.storageFailed(
                    "cannot read the decisions of uid \(prompt.uid) to store the answer: \(error)")))
            }
            self.store.afterWrites { [weak self] in self?.settleNow(prompt, answer, expiresAt, agent, done) }
        }
    }

    private func settleNow(_ prompt: Prompt, _ answer: AgentAnswer, _ expiresAt: Int64?, _ agent: Agent,
                           _ done: @escaping (Result<Status, BusError>) -> Void) {
        // Every requester left while the answer waited for earlier writes: the prompt
        // was cancelled ("nothing stored"), so nothing is.
        guard !prompt.finished else { return done(.success(undecided(prompt))) }
        let (uid, app, permission) = (prompt.uid, prompt.app, prompt.permission)
        let before = tracker.status(prompt.audience, app: app, permission: permission)
        // Decided meanwhile (an admin, a config lock, a device gone): the newer fact wins.
        guard before == .notDetermined else { return done(.success(before)) }
        let setBy = "user via agent \(agent.owner)"
        let unverified = app.hasPrefix(AppIdentity.unverifiedPrefix)
        let requesters = Set(prompt.waiters.map(\.sender))
        switch answer {
        case .allowOnce:
            return done(.success(.authorized))
        case .allowAlways where unverified, .allowSession:
            tracker.grantSession(uid: uid, app: app, permission: permission, to: requesters)
            return done(.success(tracker.status(prompt.audience, app: app, permission: permission)))
        case .deny where unverified:
            return done(.success(.denied))
        case .dismiss:
            return done(.success(before))
        case .allowAlways, .deny:
            // An end that passed while the answer waited for earlier writes: it
            // answers the requests it was given for, and stores nothing.
            if let expiresAt, expiresAt <= currentMicroseconds() { return done(.success(answered(answer))) }
        }
        tracker.setDecision(uid: uid, app: app, permission: permission, decision: answer == .deny ? .denied : .authorized,
                            setBy: setBy, expiresAt: expiresAt) { [weak self] outcome in
            guard let self else { return }
            if case .failure(let error) = outcome {
                logError("cannot store the answer \(answer.rawValue) for uid \(uid), \(app) / \(permission): \(error)")
                return done(.failure(PermissionsError.storageFailed(
                    "cannot store the answer \"\(answer.rawValue)\" for \"\(app.escapedForMessage)\" / "
                        + "\"\(permission.escapedForMessage)\": \(error)")))
            }
            if expiresAt != nil { self.scheduleExpiry() }
            let now = self.tracker.status(prompt.audience, app: app, permission: permission)
            // Not determined now only if the end passed during the commit (the row
            // was never in force): still the user's answer to these requests.
            done(.success(now == .notDetermined ? answered(answer) : now))
        }
    }

    /// What a stored answer is, as a status.
    private func answered(_ answer: AgentAnswer) -> Status { answer == .deny ? .denied : .authorized }

    func undecided(_ prompt: Prompt) -> Status {
        tracker.status(prompt.audience, app: prompt.app, permission: prompt.permission)
    }

    func registerAgent(_ call: MethodCall) {
        guard case .objectPath(let path) = call.arguments[0] else { return call.fail(PermissionsError.invalidArgument("expected an object path")) }
        asAdmin(call, action: .agent) { [unowned self] identity in
            // polkit may have taken a while (asking its user): a connection that left
            // meanwhile has had its leave handled, so its agent would never be
            // unregistered, and its user's prompts would go to nobody instead of
            // getting their no-agent answer.
            guard self.callers.cached(call.sender) != nil else {
                return call.fail(PermissionsError.unknownCaller("\(call.sender) left the bus while being authorized"))
            }
            let registered = self.broker.agents.count { $0.uid == identity.uid }
            guard registered < self.callLimits.agentsPerUser else {
                return call.fail(PermissionsError.limitExceeded(
                    "uid \(identity.uid) has \(registered) agents registered, the limit "
                    + "(\(self.callLimits.agentsPerUser) per user, [service] agents-per-user); \(path) was not registered"))
            }
            guard self.broker.register(owner: call.sender, path: path, uid: identity.uid) else {
                return call.fail(PermissionsError.invalidArgument("agent \(path) is already registered"))
            }
            call.reply()
            // After the reply: an agent waiting for it can then take the check.
            if let agent = self.broker.agents.last { self.broker.probe(agent) }
        }
    }

    func unregisterAgent(_ call: MethodCall) {
        guard case .objectPath(let path) = call.arguments[0] else { return call.fail(PermissionsError.invalidArgument("expected an object path")) }
        guard broker.unregister(owner: call.sender, path: path) else {
            return call.fail(PermissionsError.invalidArgument("no agent \(path) registered by \(call.sender)"))
        }
        call.reply()
    }
}
