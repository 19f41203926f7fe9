internal import Glibc
public import SystemPrimitives

/// The protocol between permissionsd and permissionsd-connector, version 1: the
/// one place it is written down (permissionsd-connector(8) describes it too).
///
/// A Unix socket of type SOCK_SEQPACKET: each message arrives whole or not at all,
/// and the connector sees where one ends. Only root may ask (the socket is root's,
/// mode 0600, and the connector checks the caller's SO_PEERCRED). One request and
/// one reply per connection; the connector then closes it.
///
/// Request, 72 bytes, in the byte order of the machine (both ends run on it):
///
///     offset  size  field
///          0     4  magic: 0x50434E00 ("PCN" and a zero byte) | version (1)
///          4     4  uid: the user whose socket is wanted, never 0
///          8    64  name: the socket's file name in ROOT/UID, NUL-terminated,
///                   the rest of the field ignored; one of `allowedNames`
///
/// Reply, 8 bytes:
///
///     offset  size  field
///          0     4  magic, as in the request (a reply of this version)
///          4     4  result: 0, with the connected socket in SCM_RIGHTS; or a
///                   negative errno, with nothing attached
///
/// Results: 0; -EINVAL (a request of another size, another magic, a name with no
/// NUL), -EPROTONOSUPPORT (the magic of another version), -EACCES (a caller that
/// is not root), -EPERM (uid 0, a name not allowed, a file or directory that is
/// not the user's, a socket served by another user), -ENOENT, -ECONNREFUSED
/// (nobody listens), -ETIMEDOUT (nobody accepts), or any other errno of the
/// system calls of `UserSocket.connect`. A request that does not come within the
/// connector's timeout gets no reply: the connection is closed.
///
/// A later version changes the version in the magic; a connector answers a magic
/// of another version -EPROTONOSUPPORT in a reply of its own version, so that an
/// older daemon and a newer connector (or the reverse) tell each other apart.
public enum ConnectorProtocol {
    public static let version: UInt32 = 1
    static let magicBase: UInt32 = 0x5043_4E00
    public static let magic: UInt32 = magicBase | version
    public static let nameCapacity = 64
    public static let requestSize = 8 + nameCapacity
    public static let replySize = 8
    /// The sockets the connector connects: PipeWire's, and nothing else.
    public static let allowedNames: Set<String> = ["pipewire-0"]

    public struct Request: Equatable, Sendable {
        public let uid: UInt32
        public let name: String

        public init(uid: UInt32, name: String) {
            self.uid = uid
            self.name = name
        }

        /// The request's 72 bytes; the name cut to fit (a longer one is no
        /// `UserSocket.isFileName`, refused before it is sent).
        public var bytes: [UInt8] {
            var bytes = [UInt8](repeating: 0, count: requestSize)
            withUnsafeBytes(of: magic) { bytes.replaceSubrange(0..<4, with: $0) }
            withUnsafeBytes(of: uid) { bytes.replaceSubrange(4..<8, with: $0) }
            let name = Array(self.name.utf8.prefix(nameCapacity - 1))
            bytes.replaceSubrange(8..<(8 + name.count), with: name)
            return bytes
        }

        /// The request in `bytes` (`truncated`: the message was longer than them;
        /// read it into room for one byte more than a request, so that a longer one shows),
        /// or the errno to answer and why, for the log line. Checks the form only:
        /// who may ask, and which names and uids, are the connector's to decide.
        public static func decode(_ bytes: [UInt8], truncated: Bool) -> Result<Request, UserSocketFailure> {
            guard bytes.count == requestSize, !truncated else {
                return .failure(UserSocketFailure(Errno(rawValue: EINVAL), "a request of "
                                                  + (truncated ? "more than \(requestSize)" : "\(bytes.count)")
                                                  + " bytes, not \(requestSize)"))
            }
            let word = bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 0, as: UInt32.self) }
            guard word == magic else {
                let otherVersion = word & ~0xFF == magicBase
                return .failure(UserSocketFailure(Errno(rawValue: otherVersion ? EPROTONOSUPPORT : EINVAL),
                                                  otherVersion ? "a request of protocol version \(word & 0xFF)"
                                                      : "a request without the magic word"))
            }
            let uid = bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 4, as: UInt32.self) }
            let field = bytes[8...]
            guard let end = field.firstIndex(of: 0) else {
                return .failure(UserSocketFailure(Errno(rawValue: EINVAL), "a request whose name has no NUL"))
            }
            return .success(Request(uid: uid, name: String(decoding: field[..<end], as: UTF8.self)))
        }
    }

    /// A reply's 8 bytes.
    public static func reply(_ result: Int32) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: replySize)
        withUnsafeBytes(of: magic) { bytes.replaceSubrange(0..<4, with: $0) }
        withUnsafeBytes(of: result) { bytes.replaceSubrange(4..<8, with: $0) }
        return bytes
    }

    /// The result a reply carries, or nil when it is not a reply of this version.
    public static func result(ofReply bytes: [UInt8]) -> Int32? {
        guard bytes.count == replySize,
              bytes.withUnsafeBytes({ $0.loadUnaligned(fromByteOffset: 0, as: UInt32.self) }) == magic else { return nil }
        return bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 4, as: Int32.self) }
    }
}

/// The daemon's side: asks the connector for a user's socket.
public enum ConnectorClient {
    /// The bound on one whole exchange with the connector (its own connect to the
    /// user's socket waits at most `UserSocket.connectTimeoutMilliseconds` of it).
    public static let timeoutMilliseconds = 1000

    public enum Failure: Error, Sendable {
        /// The connector could not be asked: its socket is missing, refuses, or
        /// did not answer in time; or what it answered is not this protocol.
        case unreachable(UserSocketFailure)
        /// It answered: no connection, for this reason (its log line has the details).
        case refused(Errno)
    }

    /// Asks the connector listening at `path` for user `uid`'s socket `name`: a
    /// connected stream socket, non-blocking and close-on-exec, the caller's to
    /// close. Blocks at most about `timeoutMilliseconds`. What comes back is checked
    /// again here: a socket, served by a process running as `uid`.
    public static func connect(via path: String, uid: UInt32, name: String,
                               timeoutMilliseconds: Int = timeoutMilliseconds) -> Result<Int32, Failure> {
        let socket: Int32
        switch UnixSocket.make(.sequentialPacket) {
        case .failure(let error): return .failure(.unreachable(UserSocketFailure(error, "cannot make a socket")))
        case .success(let fd): socket = fd
        }
        defer { close(socket) }
        let start = monotonicNanoseconds()
        func unreachable(_ error: Errno, _ what: String) -> Result<Int32, Failure> {
            let timedOut = error.rawValue == EAGAIN
            return .failure(.unreachable(UserSocketFailure(timedOut ? Errno(rawValue: ETIMEDOUT) : error,
                                                           timedOut ? "\(what): no answer within "
                                                               + "\(timeoutMilliseconds) ms" : what)))
        }
        if case .failure(let error) = UnixSocket.setTimeouts(socket, milliseconds: timeoutMilliseconds)
            .flatMap({ UnixSocket.connect(socket, to: path) }) {
            return unreachable(error, "cannot connect to the connector at \(path)")
        }
        if case .failure(let error) = UnixSocket.send(socket, ConnectorProtocol.Request(uid: uid, name: name).bytes) {
            return unreachable(error, "cannot send the connector at \(path) a request")
        }
        // What is left of the bound, for the answer.
        let spent = Int((monotonicNanoseconds() - start) / 1_000_000)
        _ = UnixSocket.setTimeouts(socket, milliseconds: max(timeoutMilliseconds - spent, 1))
        let message: UnixSocket.Message
        switch UnixSocket.receive(socket, capacity: ConnectorProtocol.replySize + 1) {
        case .failure(let error): return unreachable(error, "no answer from the connector at \(path)")
        case .success(let received): message = received
        }
        guard let result = ConnectorProtocol.result(ofReply: message.bytes), !message.truncated,
              (result == 0) == (message.fd != nil) else {
            if let fd = message.fd { close(fd) }
            return .failure(.unreachable(UserSocketFailure(Errno(rawValue: EPROTO), message.bytes.isEmpty
                                                           ? "the connector at \(path) closed the connection"
                                                           : "the connector at \(path) answered outside its protocol")))
        }
        guard let fd = message.fd else { return .failure(.refused(Errno(rawValue: -result))) }
        // Checked again: whatever the connector is, it cannot hand this process a
        // connection to a server that is not the user's, nor anything else.
        var status = stat()
        guard case .success = valueOrErrno({ fstat(fd, &status) }), status.st_mode & S_IFMT == S_IFSOCK,
              case .success(let peer) = UnixSocket.peerCredentials(fd), peer.uid == uid,
              case .success = UnixSocket.setNonBlocking(fd) else {
            close(fd)
            return .failure(.refused(Errno(rawValue: EPERM)))
        }
        return .success(fd)
    }
}
