internal import Glibc
internal import SystemPrimitives
internal import UserSockets

/// Serves one connection at a time, each bounded: a request must come within
/// `timeoutMilliseconds` and the reply go out within it too, and the connect to
/// the user's socket is bounded by `UserSocket.connectTimeoutMilliseconds`, so a
/// caller that is stuck or hostile delays the next one by about a second, never
/// wedges the connector.
struct ConnectorServer {
    static let timeoutMilliseconds = 1000

    let listening: Int32
    let root: String
    let log: ConnectorLog

    func run() -> Never {
        while true {
            switch UnixSocket.accept(listening) {
            case .success(let fd):
                serve(fd)
                close(fd)
            case .failure(let error) where [ECONNABORTED, EPROTO, EPERM].contains(error.rawValue):
                continue  // that caller is gone, or was refused by a security module: the next
            case .failure(let error) where [EMFILE, ENFILE, ENOBUFS, ENOMEM].contains(error.rawValue):
                log.log(.warning, "cannot accept a connection: \(error); trying again in 100 ms")
                sleepNanoseconds(100_000_000)
            case .failure(let error):
                log.log(.error, "cannot accept connections: \(error)")
                exit(1)
            }
        }
    }

    /// One caller: its request, the checks, the reply.
    private func serve(_ fd: Int32) {
        let caller: UnixSocket.Credentials
        switch UnixSocket.peerCredentials(fd) {
        case .failure(let error):
            return log.log(.warning, "refused a caller: cannot tell who it is: \(error)")
        case .success(let credentials): caller = credentials
        }
        let who = "pid \(caller.pid) (uid \(caller.uid))"
        _ = UnixSocket.setTimeouts(fd, milliseconds: Self.timeoutMilliseconds)
        func refuse(_ failure: UserSocketFailure, _ priority: ConnectorLog.Priority = .warning) {
            log.log(priority, "refused \(who): \(failure)")
            _ = UnixSocket.send(fd, ConnectorProtocol.reply(-failure.errno.rawValue))
        }
        let message: UnixSocket.Message
        switch UnixSocket.receive(fd, capacity: ConnectorProtocol.requestSize + 1) {
        case .failure(let error) where error.rawValue == EAGAIN:
            return log.log(.warning, "refused \(who): no request within \(Self.timeoutMilliseconds) ms")
        case .failure(let error):
            return log.log(.warning, "refused \(who): cannot read its request: \(error)")
        case .success(let received): message = received
        }
        // Refused only once its request is read: a socket closed with a message
        // unread is reset, and the caller would get ECONNRESET instead of the reply.
        guard caller.uid == 0 else {
            if let passed = message.fd { close(passed) }
            return refuse(UserSocketFailure(Errno(rawValue: EACCES), "only root may ask"))
        }
        if let passed = message.fd {
            close(passed)
            return refuse(UserSocketFailure(Errno(rawValue: EINVAL), "a request carrying a descriptor"))
        }
        let request: ConnectorProtocol.Request
        switch ConnectorProtocol.Request.decode(message.bytes, truncated: message.truncated) {
        case .failure(let failure): return refuse(failure)
        case .success(let decoded): request = decoded
        }
        guard request.uid != 0 else {
            return refuse(UserSocketFailure(Errno(rawValue: EPERM), "uid 0 is no user whose socket it connects"))
        }
        guard ConnectorProtocol.allowedNames.contains(request.name) else {
            return refuse(UserSocketFailure(Errno(rawValue: EPERM), "\"\(request.name.escapedForMessage)\" is not "
                                            + "a socket it connects (only "
                                            + ConnectorProtocol.allowedNames.sorted().joined(separator: ", ") + ")"))
        }
        switch UserSocket.connect(root: root, uid: request.uid, name: request.name) {
        case .failure(let failure):
            // A missing socket or nobody listening is the user's PipeWire not
            // running: no refusal of anyone, said at info.
            let plain = [ENOENT, ECONNREFUSED].contains(failure.errno.rawValue)
            refuse(failure, plain ? .info : .warning)
        case .success(let socket):
            defer { close(socket) }
            if case .failure(let error) = UnixSocket.send(fd, ConnectorProtocol.reply(0), passing: socket) {
                return log.log(.warning, "could not hand \(who) user \(request.uid)'s \(request.name): \(error)")
            }
            log.log(.debug, "handed \(who) user \(request.uid)'s \(request.name)")
        }
    }
}
