internal import PermissionsModel
internal import DBusKit
internal import PermissionsSupport
internal import PermissionsIdentity
internal import PermissionsStore
internal import SystemPrimitives

/// What a subscriber is told: every change its user sees (their own decisions,
/// for every app, and the everyone-level changes), or only one app's (the
/// everyone-level changes for every app, "", and that app's own).
///
/// Each stream has its own serial sequence, counting exactly the changes its
/// subscribers are told, so that a gap means "a change was missed, re-read", and
/// nobody can infer from gaps what happened in a stream they cannot see (another
/// user's decisions, or, for a sandboxed app, its user's other apps).
enum Stream: Hashable {
    case user(UInt32)
    case app(UInt32, String)
    /// The app stream of a caller identified by its script: its changes as the
    /// `.script` audience sees them (an admin allow= does not count).
    case script(UInt32, String)

    var uid: UInt32 {
        switch self {
        case .user(let uid), .app(let uid, _), .script(let uid, _): uid
        }
    }

    /// The Subscribe option that names this kind of stream.
    var scope: String {
        switch self {
        case .user: "user"
        case .app, .script: "app"
        }
    }

    /// The audience whose changes the stream is told.
    var audience: Audience {
        if case .script(let uid, _) = self { return .script(uid) }
        return .user(uid)
    }

    /// Whether a change of `app` ("" = every app) for this stream's user belongs in it.
    func carries(_ app: String) -> Bool {
        switch self {
        case .user: true
        case .app(_, let own), .script(_, let own): app.isEmpty || app.utf8.elementsEqual(own.utf8)
        }
    }
}

/// Subscribe / Unsubscribe, and the delivery of StatusChanged: broadcast for
/// everyone-level changes, unicast to each subscriber for its stream. Part of
/// PermissionsService; confined to its queue.
extension PermissionsService {
    /// Where unicast StatusChanged signals come from, so that a client (or a
    /// GDBus signal subscription) can tell its own stream from the broadcast one
    /// at /org/example/Permissions, which carries another serial sequence.
    package static let subscriptionPath = BusNames.objectPath + "/Subscription"

    func subscribe(_ call: MethodCall) {
        var scope: String?
        for (key, value) in call.arguments[0].stringKeyedEntries ?? [] where key == "scope" {
            guard case .variant(.string(let word)) = value else {
                return call.fail(Self.optionTypeError("scope", expected: "a string (s)", given: value))
            }
            guard word == "user" || word == "app" else {
                return call.fail(PermissionsError.invalidArgument(
                    "invalid scope \"\(word.escapedForMessage)\": expected \"user\" or \"app\""))
            }
            scope = word
        }
        withCaller(call) { [unowned self] identity in
            // A sandboxed or unverified caller is one app: it never sees its user's others.
            let confined = ![.executable, .systemdUnit, .script].contains(identity.kind)
            if confined, scope == "user" {
                return call.fail(PermissionsError.notAuthorized(
                    "scope \"user\" is not allowed: \(identity.appID) (\(identity.kind.rawValue)) may follow only "
                        + "its own app"))
            }
            let stream: Stream = (scope ?? (confined ? "app" : "user")) != "app" ? .user(identity.uid)
                : identity.kind == .script ? .script(identity.uid, identity.appID) : .app(identity.uid, identity.appID)
            // Each stream counts its own changes, so a user's stream is ahead of any of its
            // apps': moving a subscription to another stream would make its serials go
            // backwards (or jump), which its subscriber takes for missed changes.
            if let current = self.subscribers[call.sender], current != stream {
                return call.fail(PermissionsError.invalidArgument(
                    "\(call.sender) has subscribed with scope \"\(current.scope)\"; a subscription keeps its scope "
                        + "(each scope has serials of its own): call Unsubscribe first"))
            }
            self.subscribers[call.sender] = stream
            call.reply([.uint64(self.serial(of: stream))])
        }
    }

    func unsubscribe(_ call: MethodCall) {
        guard subscribers.removeValue(forKey: call.sender) != nil else {
            return call.fail(PermissionsError.invalidArgument("\(call.sender) has not subscribed"))
        }
        call.reply()
    }

    /// The users with a subscriber, for the tracker's per-user signals: of a user or
    /// app stream, or (`scripts`) of a script's app stream.
    func subscribedUsers(scripts: Bool) -> [UInt32] {
        Array(Set(subscribers.values.filter { ($0.audience == .script($0.uid)) == scripts }.map(\.uid))).sorted()
    }

    /// The serial last sent in a stream (epoch in the high 32 bits, as ChangeSerial).
    func serial(of stream: Stream) -> UInt64 {
        serials.last(.stream(stream))
    }

    /// The serial of one more change told in `sequence`. When its serials are used
    /// up (ChangeSerials), a new epoch is stored first; if it cannot be, the daemon
    /// stops (`stopOnFault`), as it would refuse a start, and nil is returned: a
    /// serial told without it could repeat one of the next start's.
    func nextSerial(_ sequence: ChangeSerials.Sequence) -> UInt64? {
        let before = serials.epoch
        do {
            let serial = try serials.next(sequence) {
                try store.nextEpoch(clockSeconds: currentMicroseconds() / 1_000_000)
            }
            if serials.epoch != before {
                logInfo("the change serials of epoch \(before) are used up; they go on in epoch \(serials.epoch)")
            }
            return serial
        } catch {
            stopOnFault("the change serials of epoch \(before) are used up, and there is no new epoch: \(error)")
            return nil
        }
    }

    /// Tells one change to its audience: everyone-level ones are broadcast (with
    /// ChangeSerial's sequence); a user's are unicast to that user's subscribers
    /// whose stream carries it, each with its stream's next serial.
    func deliver(_ audience: Audience, app: String, permission: String, _ status: Status) {
        let arguments: (UInt64) -> [DBusValue] = {
            [.string(app), .string(permission), .string(status.rawValue), .uint64($0)]
        }
        switch audience {
        case .everyone:
            guard let serial = nextSerial(.broadcast) else { return }
            logDebug("StatusChanged(\"\(app)\", \(permission), \(status.rawValue), \(serial)) to everyone")
            try? connection.emitSignal(path: Self.objectPath, interface: Self.interfaceName,
                                       member: "StatusChanged", arguments(serial))
        case .user, .script:
            // One signal per stream that carries it, copied to each of its subscribers
            // (DBusKit's sendCopies); only streams with a subscriber count.
            var destinations: [Stream: [String]] = [:]
            for (name, stream) in subscribers where stream.audience == audience && stream.carries(app) {
                destinations[stream, default: []].append(name)
            }
            for (stream, names) in destinations {
                guard let serial = nextSerial(.stream(stream)) else { return }
                logDebug("StatusChanged(\"\(app)\", \(permission), \(status.rawValue), \(serial)) to "
                         + names.joined(separator: ", "))
                guard let signal = try? Message.signal(path: Self.subscriptionPath, interface: Self.interfaceName,
                                                       member: "StatusChanged"),
                      (try? signal.append(arguments(serial))) != nil else { continue }
                try? connection.sendCopies(of: signal, to: names)
            }
        }
    }
}
