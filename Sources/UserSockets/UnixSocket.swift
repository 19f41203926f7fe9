internal import CShims
internal import Glibc
public import SystemPrimitives

/// The few Unix-socket calls the connector and its clients make, each through
/// `valueOrErrno` (EINTR retried, -1 a typed errno). The ones glibc hides behind
/// _GNU_SOURCE or in CMSG_* macros go through CShims.
public enum UnixSocket {
    /// Who is at the other end of `fd` (SO_PEERCRED): the process that connected,
    /// or, seen from the connecting side, the one that called listen(2).
    public struct Credentials: Sendable, Equatable {
        public let pid: Int32
        public let uid: UInt32
        public let gid: UInt32
    }

    public static func peerCredentials(_ fd: Int32) -> Result<Credentials, Errno> {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
        return valueOrErrno { cshims_peer_credentials(fd, &pid, &uid, &gid) }
            .map { _ in Credentials(pid: pid, uid: uid, gid: gid) }
    }

    public enum Kind: Sendable {
        /// SOCK_STREAM: PipeWire's (and most servers').
        case stream
        /// SOCK_SEQPACKET: the connector's, each message whole.
        case sequentialPacket
    }

    /// A new Unix socket of that kind, close-on-exec.
    public static func make(_ kind: Kind) -> Result<Int32, Errno> {
        let type = kind == .stream ? SOCK_STREAM : SOCK_SEQPACKET
        return valueOrErrno { socket(AF_UNIX, Int32(type.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
    }

    /// Bounds each send (and, for a Unix socket, connect(2) while the listener's
    /// backlog is full) and each receive on `fd` to `milliseconds`; 0 lifts the bound.
    /// Past it, the call fails with EAGAIN.
    public static func setTimeouts(_ fd: Int32, milliseconds: Int) -> Result<Void, Errno> {
        var time = timeval(tv_sec: milliseconds / 1000, tv_usec: (milliseconds % 1000) * 1000)
        for option in [SO_SNDTIMEO, SO_RCVTIMEO] {
            let set = valueOrErrno {
                setsockopt(fd, SOL_SOCKET, option, &time, socklen_t(MemoryLayout<timeval>.size))
            }
            if case .failure(let error) = set { return .failure(error) }
        }
        return .success(())
    }

    /// `sockaddr_un` for `path`, or ENAMETOOLONG when it does not fit (108 bytes
    /// with its NUL).
    static func address(_ path: String) -> Result<sockaddr_un, Errno> {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path), !bytes.contains(0) else {
            return .failure(Errno(rawValue: ENAMETOOLONG))
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        return .success(address)
    }

    /// connect(2) to the socket at `path`. A blocking socket waits while the
    /// listener's backlog is full, at most its send timeout (`setTimeouts`), and then
    /// fails with EAGAIN.
    public static func connect(_ fd: Int32, to path: String) -> Result<Void, Errno> {
        address(path).flatMap { address in
            var address = address
            return valueOrErrno {
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                    }
                }
            }.map { _ in () }
        }
    }

    /// bind(2) and listen(2) at `path`.
    public static func listen(_ fd: Int32, at path: String, backlog: Int32) -> Result<Void, Errno> {
        address(path).flatMap { address in
            var address = address
            let bound = valueOrErrno {
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                    }
                }
            }
            return bound.flatMap { _ in valueOrErrno { Glibc.listen(fd, backlog) } }.map { _ in () }
        }
    }

    /// accept4(2), close-on-exec.
    public static func accept(_ fd: Int32) -> Result<Int32, Errno> {
        valueOrErrno { cshims_accept_cloexec(fd) }
    }

    /// Sends `bytes` as one message, with `passing` in SCM_RIGHTS when given.
    public static func send(_ fd: Int32, _ bytes: [UInt8], passing: Int32? = nil) -> Result<Void, Errno> {
        let sent = valueOrErrno { bytes.withUnsafeBytes { cshims_send_with_fd(fd, $0.baseAddress, $0.count, passing ?? -1) } }
        switch sent {
        case .failure(let error): return .failure(error)
        case .success(let n) where n != bytes.count: return .failure(Errno(rawValue: EMSGSIZE))
        case .success: return .success(())
        }
    }

    /// One message received.
    public struct Message {
        /// Its bytes, at most the size asked for.
        public let bytes: [UInt8]
        /// It was longer than the size asked for, or carried more than one
        /// descriptor (all of them closed then).
        public let truncated: Bool
        /// The descriptor it carried (close-on-exec), the receiver's to close.
        public let fd: Int32?
    }

    /// Receives one message of at most `capacity` bytes; an empty one with no
    /// descriptor is the peer having closed (or having sent an empty message).
    public static func receive(_ fd: Int32, capacity: Int) -> Result<Message, Errno> {
        var buffer = [UInt8](repeating: 0, count: capacity)
        var passed: Int32 = -1
        var truncated: Int32 = 0
        let received = valueOrErrno {
            buffer.withUnsafeMutableBytes { cshims_recv_with_fd(fd, $0.baseAddress, $0.count, &passed, &truncated) }
        }
        return received.map { n in
            Message(bytes: Array(buffer.prefix(n)), truncated: truncated != 0, fd: passed >= 0 ? passed : nil)
        }
    }

    /// Sets O_NONBLOCK on `fd`.
    public static func setNonBlocking(_ fd: Int32) -> Result<Void, Errno> {
        valueOrErrno { fcntl(fd, F_GETFL) }.flatMap { flags in
            valueOrErrno { fcntl(fd, F_SETFL, flags | O_NONBLOCK) }.map { _ in () }
        }
    }
}
