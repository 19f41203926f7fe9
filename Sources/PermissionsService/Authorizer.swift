package import DBusKit
package import PermissionsIdentity
internal import Glibc

/// Decides who may read or change stored decisions, and register agents.
///
/// - Sandboxed callers (flatpak, snap) may do none of it, whatever their uid: the
///   sandbox is the boundary the user relies on. Unverified ones (a mount
///   namespace of their own) may do none of it unless they are root: their app
///   is not known.
/// - Reading one's own user's decisions (no action) needs nothing more.
/// - Otherwise root always; on a session bus (or a given address) the daemon's
///   own uid (there is one user there); on the system bus whoever polkit
///   authorizes for the action (`CheckAuthorization`, asynchronous; polkit may ask
///   the user through its own agent). The actions are in
///   dbus/org.example.Permissions.policy: `manage-own` (one's own decisions,
///   active local sessions by default), `manage` (anyone's: admins), `agent`.
package final class Authorizer {
    package enum Action: String, Sendable {
        /// Change another user's decisions, list everyone's.
        case manage = "org.example.permissions.manage"
        /// Change one's own user's decisions.
        case manageOwn = "org.example.permissions.manage-own"
        case agent = "org.example.permissions.agent"
    }

    let outgoing: OutgoingCalls
    let systemBus: Bool

    /// polkit's checks go through `outgoing`, counted against the caller's uid.
    package init(outgoing: OutgoingCalls, systemBus: Bool) {
        self.outgoing = outgoing
        self.systemBus = systemBus
    }

    /// Why a call is not allowed.
    package enum Refusal {
        /// Not authorized, and why: NotAuthorized.
        case notAuthorized(String)
        /// Not asked: the caller's user is over its share of the daemon's calls to
        /// polkit (LimitExceeded, as it is).
        case limited(BusError)

        /// The error to answer with; `what` says what was not allowed (NotAuthorized).
        package func error(_ what: String) -> BusError {
            switch self {
            case .notAuthorized(let why): PermissionsError.notAuthorized("\(what): \(why)")
            case .limited(let error): error
            }
        }
    }

    /// Calls `done(nil)` if allowed, else `done(refusal)`. `action` nil: reading the
    /// caller's own user's decisions.
    package func check(_ identity: AppIdentity, sender: String, action: Action?, done: @escaping (Refusal?) -> Void) {
        if identity.kind == .flatpak || identity.kind == .snap {
            return done(.notAuthorized("sandboxed apps (\(identity.appID)) may not do this"))
        }
        // Root is root in any mount namespace (a user namespace's root is not uid 0 on the bus).
        if identity.uid == 0 { return done(nil) }
        if identity.kind == .unverified {
            // Its own reason (a mount namespace of its own, or an executable with no
            // name): the one the identity was made with, not a guess.
            return done(.notAuthorized("\(identity.appID) is unverified: \(identity.unverifiedReason); such callers "
                                       + "may not do this"))
        }
        guard let action else { return done(nil) }
        if !systemBus {
            return done(identity.uid == getuid() ? nil : .notAuthorized("uid \(identity.uid) is not the service's user"))
        }
        checkPolkit(sender: sender, uid: identity.uid, action: action, done: done)
    }

    private func checkPolkit(sender: String, uid: UInt32, action: Action, done: @escaping (Refusal?) -> Void) {
        let message: Message
        do {
            message = try Message.methodCall(destination: "org.freedesktop.PolicyKit1",
                                             path: "/org/freedesktop/PolicyKit1/Authority",
                                             interface: "org.freedesktop.PolicyKit1.Authority",
                                             member: "CheckAuthorization")
            let subject = DBusValue.structure([.string("system-bus-name"), .vardict([("name", .string(sender))])])
            try message.append(subject, .string(action.rawValue), .stringDictionary([]),
                               .uint32(1) /* AllowUserInteraction */, .string(""))
        } catch {
            return done(.notAuthorized("cannot ask polkit: \(error.message)"))
        }
        // Interactive authentication can take a while; the caller waits, and so may
        // the user's other checks once they hold its share (OutgoingCalls); nobody
        // else does.
        outgoing.call(message, for: uid, timeoutMilliseconds: 120_000) { result in
            switch result {
            case .failure(let error) where OutgoingCalls.isLimit(error):
                done(.limited(error))
            case .failure(let error):
                done(.notAuthorized("polkit could not be asked (\(error.name)): \(error.message)"))
            case .success(let reply):
                guard case .structure(let fields)? = reply.arguments().first, fields.first?.boolValue != nil else {
                    return done(.notAuthorized("polkit gave a malformed answer"))
                }
                done(fields[0].boolValue == true ? nil : .notAuthorized("polkit refused \(action.rawValue)"))
            }
        }
    }
}
