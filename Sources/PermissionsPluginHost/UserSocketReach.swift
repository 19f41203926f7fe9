internal import Glibc
internal import SystemPrimitives
internal import PermissionsSupport
internal import UserSockets

/// How the daemon connects a plugin to a user's own socket (connect_user_socket,
/// ABI 1.3): ROOT/UID/NAME, checked to be that user's (`UserSocket.connect`),
/// first under the daemon's own privileges, then, when those fall short, through
/// permissionsd-connector, which holds CAP_DAC_OVERRIDE for exactly this
/// (doc/threat-model.md, "Reaching each user's PipeWire").
///
/// Any thread: the plugins call it from threads of their own. It blocks for as long
/// as the two attempts take, at most about a second.
final class UserSocketReach: Sendable {
    let root: String
    /// The connector's socket; nil: none (a daemon not on the system bus, unless
    /// told with --connector-socket).
    let connectorSocket: String?
    /// Users for whom "neither works" was logged, until a connection works again.
    private let loggedUnreachable = Locked<Set<UInt32>>([])

    init(root: String, connectorSocket: String?) {
        self.root = root
        self.connectorSocket = connectorSocket
    }

    /// A connected socket, non-blocking and close-on-exec, the caller's to close;
    /// or the negative errno the ABI documents.
    func connect(uid: UInt32, name: String) -> Int32 {
        let direct = UserSocket.connect(root: root, uid: uid, name: name)
        let failure: UserSocketFailure
        switch direct {
        case .success(let fd): return connected(uid, fd)
        case .failure(let error): failure = error
        }
        // A verdict on the socket itself is the connector's too: not asked.
        guard failure.isPrivilege else {
            Log.shared.log(.debug, "user \(uid)'s \(name): \(failure)")
            return -failure.errno.rawValue
        }
        guard let connectorSocket else {
            unreachable(uid, name, "\(failure), and no connector is configured (--connector-socket)")
            return -EACCES
        }
        switch ConnectorClient.connect(via: connectorSocket, uid: uid, name: name) {
        case .success(let fd):
            return connected(uid, fd)
        case .failure(.refused(let error)) where error.rawValue == EACCES:
            // The connector's privileges fell short too (or it refused this daemon).
            unreachable(uid, name, "\(failure), and the connector refused it: \(error) (its log says why)")
            return -EACCES
        case .failure(.refused(let error)):
            // A verdict on the socket, which the connector logged.
            Log.shared.log(.debug, "user \(uid)'s \(name): the connector refused: \(error)")
            return -error.rawValue
        case .failure(.unreachable(let why)):
            unreachable(uid, name, "\(failure), and \(why)")
            return -EACCES
        }
    }

    private func connected(_ uid: UInt32, _ fd: Int32) -> Int32 {
        loggedUnreachable.withLock { _ = $0.remove(uid) }
        return fd
    }

    /// One line per user while it lasts, with the remedy.
    private func unreachable(_ uid: UInt32, _ name: String, _ what: String) {
        guard loggedUnreachable.withLock({ $0.insert(uid).inserted }) else { return }
        Log.shared.log(.warning, "cannot reach user \(uid)'s \(name) under this daemon's privileges: \(what); "
                       + "start permissionsd-connector.socket (doc/admin.md, \"Users' PipeWire\")")
    }
}
