package import DBusKit
internal import PermissionsSupport
internal import SystemPrimitives

/// App identities of connected callers, keyed by unique bus name, so that only a
/// caller's first call costs a round trip to the bus daemon
/// (`GetConnectionCredentials`). An entry is dropped when the bus reports that the
/// unique name has gone (`NameOwnerChanged`); unique names are never reused.
///
/// The files of a caller's process are read off the queue, by `resolver`, with a
/// deadline: a caller whose files do not answer (a FUSE file system of its own)
/// gets `UnknownCaller`, and nobody else waits for it.
///
/// Confined to the service queue, like the connection; so is every piece of its
/// state (the resolver's included).
package final class CallerCache {
    private let connection: Connection
    let resolver: IdentityResolver
    private var known: [String: AppIdentity] = [:]
    private var waiting: [String: [(Result<AppIdentity, IdentityError>) -> Void]] = [:]
    /// Called with a unique name when it leaves the bus (one match rule for all).
    package var onLeave: [(String) -> Void] = []
    /// The configuration's interpreters, read by the resolver threads at each
    /// identification (callers already identified keep their identity).
    private let interpreters: Locked<Interpreters>

    /// Why no caller can be taken for the host's (the host's mount namespace cannot be
    /// read), or nil; for GetDiagnostics. Read on the service queue, from /proc: a
    /// few microseconds, and only doctor asks.
    package let hostNamespaceProblem: () -> String?

    /// The process whose mount namespace is the host's ([identity] host-pid=, or the
    /// daemon's --host-pid), read like `interpreters`.
    private let hostPID: Locked<(pid: UInt32, startTime: String?)>
    /// The reader as configured, for pinning a new host process.
    private let pinnedReader: IdentityReader

    package init(connection: Connection, reader: IdentityReader) {
        self.connection = connection
        let reader = { var pinned = reader; pinned.pinHost(); return pinned }()
        let interpreters = Locked(reader.interpreters)
        let hostPID = Locked((pid: reader.hostPID, startTime: reader.hostStartTime))
        self.interpreters = interpreters
        self.hostPID = hostPID
        resolver = IdentityResolver(queue: connection.queue) { pid, uid in
            var reader = reader
            reader.interpreters = interpreters.withLock { $0 }
            (reader.hostPID, reader.hostStartTime) = hostPID.withLock { $0 }
            return reader.identify(pid: pid, uid: uid)
        }
        hostNamespaceProblem = {
            var reader = reader
            (reader.hostPID, reader.hostStartTime) = hostPID.withLock { $0 }
            return reader.hostNamespaceProblem()
        }
        pinnedReader = reader
        connection.subscribe(SignalMatch(sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                         interface: "org.freedesktop.DBus", member: "NameOwnerChanged")) {
            [unowned self] message in
            let args = message.arguments()
            guard args.count == 3, let name = args[0].stringValue, name.hasPrefix(":"),
                  args[2].stringValue == "" else { return }
            self.known[name] = nil
            for handler in self.onLeave { handler(name) }
        }
    }

    package var count: Int { known.count }

    /// Replaces the interpreters ([identity] interpreters=) for the callers identified from now on.
    package func setInterpreters(_ new: Interpreters) {
        interpreters.withLock { $0 = new }
    }

    /// Replaces the host's process ([identity] host-pid=). Callers identified under
    /// the old one are identified again at their next call: an identity must never
    /// outlive a stricter rule. After start-up, logs a host namespace that cannot be read.
    package func setHostPID(_ new: UInt32) {
        var pinned = pinnedReader
        pinned.hostPID = new
        pinned.pinHost()
        let host = (pid: new, startTime: pinned.hostStartTime)
        // The same PID again (a configuration applied again) keeps its first pin: the
        // process that has it now may not be the one named.
        guard hostPID.withLock({ old in
            guard old.pid != new else { return false }
            old = host
            return true
        }) else { return }
        known = [:]
        guard hostChecked else { return }  // start-up: `checkHostNamespace` tells, once
        logInfo("the host's mount namespace is now PID \(new)'s")
        checkHostNamespace()
    }

    /// Logs that the host's mount namespace cannot be read, if so: at start-up, once
    /// the configuration has said which process is the host, and at each change.
    package func checkHostNamespace() {
        hostChecked = true
        if let problem = hostNamespaceProblem() { logWarning(problem) }
    }
    private var hostChecked = false

    /// The identity of a caller already identified, without waiting; nil otherwise,
    /// and nil again once NameOwnerChanged has reported it gone: after a wait
    /// (polkit, which may ask its user), nil means the leave was already handled,
    /// and state kept for the caller then would never be dropped.
    package func cached(_ sender: String) -> AppIdentity? { known[sender] }

    /// Whether a connection of `uid` is identified and still on the bus.
    package func hasConnection(uid: UInt32) -> Bool { known.values.contains { $0.uid == uid } }

    /// Calls `done` with the caller's identity: at once if known, else after asking
    /// the bus. A caller that has left the bus (or whose process is gone) gets
    /// `UnknownCaller`, never a fallback identity.
    package func identify(_ sender: String, done: @escaping (Result<AppIdentity, IdentityError>) -> Void) {
        if let identity = known[sender] { return done(.success(identity)) }
        if waiting[sender] != nil {
            waiting[sender]!.append(done)
            return
        }
        waiting[sender] = [done]
        let message: Message
        do {
            message = try Message.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                             interface: "org.freedesktop.DBus", member: "GetConnectionCredentials")
            try message.append(.string(sender))
        } catch {
            return finish(sender, .failure(IdentityError("invalid sender \(sender.escapedForMessage)")))
        }
        connection.call(message, timeoutMilliseconds: 5000) { [unowned self] result in
            let (pid, uid): (UInt32, UInt32)
            switch self.credentials(sender, result) {
            case .failure(let error): return self.finish(sender, .failure(error))
            case .success(let ids): (pid, uid) = ids
            }
            // /proc is read off the queue; then, back on it, the bus is asked whether
            // the connection still exists (confirm), in that order.
            self.resolver.resolve(pid: pid, uid: uid) { outcome in
                switch self.identity(sender, pid: pid, outcome) {
                case .failure(let error): self.finish(sender, .failure(error))
                case .success(let identity): self.confirm(sender, identity) { self.finish(sender, $0) }
                }
            }
        }
    }

    /// The process and user id in the bus's answer to GetConnectionCredentials.
    private func credentials(_ sender: String, _ result: Result<Message, BusError>)
        -> Result<(UInt32, UInt32), IdentityError>
    {
        switch result {
        case .failure(let error) where error.name == BusError.noReply:
            // The bus answers GetConnectionCredentials at once: its answer was late
            // because the daemon was behind on the messages before it.
            return .failure(IdentityError(
                "cannot read the credentials of \(sender): the bus's answer was not read within 5 s "
                    + "(the daemon is behind on its incoming messages)"))
        case .failure(let error):
            return .failure(IdentityError("cannot read the credentials of \(sender): \(error.message)"))
        case .success(let reply):
            let credentials = reply.arguments().first?.stringKeyedEntries ?? []
            let uid = credentials.first { $0.0 == "UnixUserID" }?.1.uint32Value
            let pid = credentials.first { $0.0 == "ProcessID" }?.1.uint32Value
            guard let uid, let pid else {
                return .failure(IdentityError("the bus gave no user or process id for \(sender)"))
            }
            return .success((pid, uid))
        }
    }

    private func identity(_ sender: String, pid: UInt32, _ outcome: IdentityResolver.Outcome)
        -> Result<AppIdentity, IdentityError>
    {
        switch outcome {
        case .read(.success(let identity)):
            return .success(identity)
        case .read(.failure(.unreadable(let why))):
            return .failure(IdentityError("cannot identify \(sender) (pid \(pid)): \(why)"))
        case .read(.failure(.invalid(let id))):
            return .failure(IdentityError("caller \(sender) has an invalid app id \"\(id.escapedForMessage)\""))
        case .timedOut:
            logWarning("caller \(sender) (pid \(pid)): identity did not resolve within \(resolver.deadlineDescription); "
                       + "\(resolver.threadsInUse) of \(resolver.maxThreads) identity reads in progress or stuck")
            return .failure(IdentityError(
                "cannot identify \(sender) (pid \(pid)): identity did not resolve within \(resolver.deadlineDescription)"))
        case .noThread(let why):
            return .failure(IdentityError("cannot identify \(sender) (pid \(pid)): \(why)"))
        }
    }

    /// The process may have exited and its PID been reused between the bus reading
    /// its credentials and us reading /proc. Its connection then closed with it:
    /// asking the bus whether the name still exists, after reading /proc, closes
    /// that window (the check polkit added for CVE-2021-3560).
    private func confirm(_ sender: String, _ identity: AppIdentity,
                         done: @escaping (Result<AppIdentity, IdentityError>) -> Void) {
        let message: Message
        do {
            message = try Message.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                             interface: "org.freedesktop.DBus", member: "NameHasOwner")
            try message.append(.string(sender))
        } catch {
            let why = "cannot ask the bus whether \(sender) is still there: \(error.message)"
            return done(.failure(IdentityError(why)))
        }
        connection.call(message, timeoutMilliseconds: 5000) { [unowned self] result in
            guard case .success(let reply) = result, reply.arguments().first?.boolValue == true else {
                return done(.failure(IdentityError("\(sender) left the bus while being identified")))
            }
            self.known[sender] = identity
            done(.success(identity))
        }
    }

    private func finish(_ sender: String, _ result: Result<AppIdentity, IdentityError>) {
        let callbacks = waiting.removeValue(forKey: sender) ?? []
        for callback in callbacks { callback(result) }
    }
}
