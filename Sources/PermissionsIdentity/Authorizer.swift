package import DBusKit
internal import Glibc

/// Decides who may use admin methods and register agents.
///
/// - root always;
/// - on a session bus (or a given address), the daemon's own uid;
/// - on the system bus, whoever polkit authorizes for the action
///   (`CheckAuthorization`, asynchronous; polkit may ask the user through its own
///   agent). Actions are shipped in dbus/org.example.Permissions.policy.
///
/// Sandboxed callers (flatpak, snap) are never admins and never agents, whatever
/// their uid: the sandbox is the boundary the user relies on.
package final class Authorizer {
    package enum Action: String, Sendable {
        case manage = "org.example.permissions.manage"
        case agent = "org.example.permissions.agent"
    }

    let connection: Connection
    let systemBus: Bool

    package init(connection: Connection, systemBus: Bool) {
        self.connection = connection
        self.systemBus = systemBus
    }

    /// Calls `done(nil)` if allowed, else `done(reason)`.
    package func check(_ identity: AppIdentity, sender: String, action: Action, done: @escaping (String?) -> Void) {
        if identity.kind == .flatpak || identity.kind == .snap {
            return done("sandboxed apps (\(identity.appID)) may not do this")
        }
        if identity.uid == 0 { return done(nil) }
        if !systemBus {
            return done(identity.uid == getuid() ? nil : "uid \(identity.uid) is not the service's user")
        }
        checkPolkit(sender: sender, action: action, done: done)
    }

    private func checkPolkit(sender: String, action: Action, done: @escaping (String?) -> Void) {
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
            return done("cannot ask polkit: \(error.message)")
        }
        // Interactive authentication can take a while; the caller waits, nobody else does.
        connection.call(message, timeoutMilliseconds: 120_000) { result in
            switch result {
            case .failure(let error):
                done("polkit could not be asked (\(error.name)): \(error.message)")
            case .success(let reply):
                guard case .structure(let fields)? = reply.arguments().first, fields.first?.boolValue != nil else {
                    return done("polkit gave a malformed answer")
                }
                done(fields[0].boolValue == true ? nil : "polkit refused \(action.rawValue)")
            }
        }
    }
}
