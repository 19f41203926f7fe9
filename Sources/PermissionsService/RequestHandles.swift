internal import PermissionsModel
internal import DBusKit
internal import PermissionsIdentity
internal import PermissionsSupport
internal import SystemPrimitives

/// One StartRequest under way: the object at `path` until its Response is sent,
/// it is closed, its caller leaves the bus, or the service stops.
final class RequestHandle {
    let path: String
    /// The caller's unique name: the only connection that gets Response and may Close.
    let sender: String
    let identity: AppIdentity
    var uid: UInt32 { identity.uid }
    /// Set when it ends, however: nothing more is asked or sent for it.
    var ended = false
    /// The permissions asked, in order, and the status each got so far.
    let permissions: [String]
    var statuses: [String: Status] = [:]

    init(path: String, sender: String, identity: AppIdentity, permissions: [String]) {
        self.path = path
        self.sender = sender
        self.identity = identity
        self.permissions = permissions
    }
}

/// The open handles, by path, with their counts per connection and per user
/// (requests-per-connection, requests-per-user). Confined to the service queue.
struct RequestHandles {
    private(set) var byPath: [String: RequestHandle] = [:]
    private var bySender: [String: Int] = [:]
    private var byUser: [UInt32: Int] = [:]
    /// For the tokens the service chooses.
    private var nextToken = 0

    func count(sender: String) -> Int { bySender[sender] ?? 0 }
    func count(uid: UInt32) -> Int { byUser[uid] ?? 0 }
    func handles(of sender: String) -> [RequestHandle] { byPath.values.filter { $0.sender == sender } }

    mutating func add(_ handle: RequestHandle) {
        byPath[handle.path] = handle
        bySender[handle.sender, default: 0] += 1
        byUser[handle.uid, default: 0] += 1
    }

    mutating func remove(_ handle: RequestHandle) {
        guard byPath.removeValue(forKey: handle.path) != nil else { return }
        let sent = (bySender[handle.sender] ?? 0) - 1
        bySender[handle.sender] = sent > 0 ? sent : nil
        let held = (byUser[handle.uid] ?? 0) - 1
        byUser[handle.uid] = held > 0 ? held : nil
    }

    /// A path for `sender` that no handle has: the service's own token, "t" and a
    /// number, skipping any a client chose itself.
    mutating func freshPath(sender: String) -> String {
        while true {
            nextToken += 1
            let path = RequestHandlePath.path(sender: sender, token: "t\(nextToken)")
            if byPath[path] == nil { return path }
        }
    }
}

/// StartRequest and the objects it makes (org.example.Permissions.RequestHandle):
/// the answer to a request as a signal, so that no client's call timeout (25 s in
/// libdbus, GDBus, sd-bus and dbus-python) can cancel a prompt the user is still
/// reading. Asks as RequestMany does (Requests.swift), through the same prompts.
/// Part of PermissionsService; confined to its queue.
extension PermissionsService {
    /// Response codes, as xdg-desktop-portal's Request.Response has them.
    static func responseCode(_ end: AskEnd) -> UInt32 { end.rawValue }

    func startRequest(_ call: MethodCall) {
        // Everything checked before anything is made: names, then options.
        var seen = Set<String>()
        let names = (call.arguments[0].stringArray ?? []).filter { seen.insert($0).inserted }
        guard !names.isEmpty else { return call.fail(PermissionsError.invalidArgument("no permission given")) }
        for name in names {
            if case .failure(let error) = knownPermission(.string(name)) { return call.fail(error) }
        }
        let tokenResult = handleToken(call.arguments[1])
        guard case .success(let token) = tokenResult else { return call.fail(tokenResult.error!) }
        let optionsResult = requestOptions(call.arguments[1])
        guard case .success(let options) = optionsResult else { return call.fail(optionsResult.error!) }
        withCaller(call) { [unowned self] identity in
            // Left while it was identified: its leave has been handled, so a handle
            // made now would never be closed.
            guard self.callers.cached(call.sender) != nil else {
                return call.fail(PermissionsError.unknownCaller("\(call.sender) left the bus while being identified"))
            }
            if let refusal = self.handleLimitRefusal(sender: call.sender, uid: identity.uid) {
                return call.fail(refusal)
            }
            let path: String
            if let token {
                path = RequestHandlePath.path(sender: call.sender, token: token)
                // Never renamed: the client subscribed to this path's Response already.
                guard self.requestHandles.byPath[path] == nil else {
                    return call.fail(PermissionsError.invalidArgument(
                        "handle_token \"\(token)\" is in use by \(call.sender): \(path) is still open"))
                }
            } else {
                path = self.requestHandles.freshPath(sender: call.sender)
            }
            let handle = RequestHandle(path: path, sender: call.sender, identity: identity, permissions: names)
            self.requestHandles.add(handle)
            self.connection.export(self.handleObject(handle))
            // The reply goes before any Response: both on this connection, in order.
            call.reply([.objectPath(path)])
            logDebug("request \(path): \(identity.appID) asks for \(names.joined(separator: ", "))")
            self.askNext(handle, options, index: 0, worst: .answered)
        }
    }

    /// The "handle_token" option: nil without one (the service chooses), or the
    /// token, or InvalidArgument quoting it.
    func handleToken(_ value: DBusValue) -> Result<String?, BusError> {
        for (key, value) in value.stringKeyedEntries ?? [] where key == "handle_token" {
            guard case .variant(.string(let token)) = value else {
                return .failure(Self.optionTypeError("handle_token", expected: "a string (s)", given: value))
            }
            if let problem = RequestHandlePath.tokenProblem(token) {
                return .failure(PermissionsError.invalidArgument(
                    "invalid handle_token \"\(token.escapedForMessage)\": \(problem)"))
            }
            return .success(token)
        }
        return .success(nil)
    }

    private func handleLimitRefusal(sender: String, uid: UInt32) -> BusError? {
        let ofSender = requestHandles.count(sender: sender)
        if ofSender >= callLimits.requestsPerConnection {
            return PermissionsError.limitExceeded(
                "StartRequest: \(sender) has \(ofSender) requests open; the limit is "
                    + "\(callLimits.requestsPerConnection) per connection ([service] requests-per-connection)")
        }
        let ofUser = requestHandles.count(uid: uid)
        if ofUser >= callLimits.requestsPerUser {
            return PermissionsError.limitExceeded(
                "StartRequest: uid \(uid) has \(ofUser) requests open; the limit is "
                    + "\(callLimits.requestsPerUser) per user ([service] requests-per-user)")
        }
        return nil
    }

    private func handleObject(_ handle: RequestHandle) -> ExportedObject {
        let close = Method("Close") { [unowned self, weak handle] call in
            guard let handle, !handle.ended else {
                return call.fail(BusError(BusError.unknownObject, "the request has ended"))
            }
            self.close(handle, call)
        }
        return ExportedObject(path: handle.path,
                              interfaces: [Interface(BusNames.requestHandleInterfaceName, methods: [close])],
                              introspection: Self.requestHandleXML)
    }

    /// One permission after another, as RequestMany: an error (an answer that could
    /// not be stored, the service stopping) ends it there. `worst` is the largest
    /// end so far, the Response code.
    private func askNext(_ handle: RequestHandle, _ options: RequestOptions, index: Int, worst: AskEnd) {
        guard !handle.ended else { return }
        guard index < handle.permissions.count else { return respond(handle, worst) }
        let permission = handle.permissions[index]
        ask(handle.identity, permission, options, sender: handle.sender, handle: handle.path) { [weak self] outcome, end in
            guard let self, !handle.ended else { return }
            switch outcome {
            case .failure(let error):
                self.respond(handle, .ended, error: error)
            case .success(let status):
                handle.statuses[permission] = status
                self.askNext(handle, options, index: index + 1, worst: max(worst, end))
            }
        }
    }

    /// Sends the Response, once, to the caller alone, and removes the object.
    /// Permissions not asked (after an error) have their status now.
    private func respond(_ handle: RequestHandle, _ end: AskEnd, error: BusError? = nil) {
        guard !handle.ended else { return }
        let statuses = handle.permissions.map { permission in
            (permission, (handle.statuses[permission] ?? status(of: handle.identity, permission: permission)).rawValue)
        }
        var results: [(String, DBusValue)] = [("statuses", .stringDictionary(statuses))]
        if let error { results += [("error", .string(error.name)), ("message", .string(error.message))] }
        retire(handle)
        logDebug("request \(handle.path): Response \(Self.responseCode(end))" + (error.map { " (\($0.name))" } ?? ""))
        guard let signal = try? Message.signal(path: handle.path, interface: BusNames.requestHandleInterfaceName,
                                               member: "Response"),
              (try? signal.append(.uint32(Self.responseCode(end)), .vardict(results))) != nil
        else { return logError("request \(handle.path): cannot make its Response") }
        do {
            try connection.sendCopies(of: signal, to: [handle.sender])
        } catch {
            logWarning("request \(handle.path): cannot send its Response: \(error)")
        }
    }

    /// Close: from the caller alone. Nothing is stored for it and no Response
    /// follows; its prompt is cancelled unless another request waits for it.
    private func close(_ handle: RequestHandle, _ call: MethodCall) {
        guard call.sender == handle.sender else {
            return call.fail(PermissionsError.notAuthorized(
                "Close: \(handle.path) is the request of another connection; only its caller may close it"))
        }
        retire(handle)
        broker.close(handle: handle.path)
        logDebug("request \(handle.path): closed by its caller")
        call.reply()
    }

    /// Ends a handle without a Response and removes its object.
    private func retire(_ handle: RequestHandle) {
        handle.ended = true
        requestHandles.remove(handle)
        connection.unexport(path: handle.path)
    }

    /// The caller left the bus: as a Close of each of its handles (the broker has
    /// dropped their waits already, with the connection's others).
    func requestHandlesLeft(_ sender: String) {
        for handle in requestHandles.handles(of: sender) { retire(handle) }
    }

    /// The service stops: every open handle gets Response 2 with Cancelled, before
    /// the name is released (the daemon flushes the connection after this).
    func shutdownRequestHandles() {
        let open = requestHandles.byPath.values.sorted { $0.path < $1.path }
        for handle in open { respond(handle, .ended, error: Self.stoppingError) }
    }
}
