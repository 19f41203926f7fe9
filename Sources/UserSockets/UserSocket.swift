internal import CShims
internal import Glibc
public import SystemPrimitives

/// Why a user's socket was not connected: the errno that the plugin ABI's
/// connect_user_socket and the connector's reply carry, and what failed, for the
/// one log line.
public struct UserSocketFailure: Error, Sendable, CustomStringConvertible {
    public let errno: Errno
    public let reason: String
    /// This process's privileges fell short: the kernel refused a search, a stat or
    /// the connect itself (EACCES, EPERM). The connector, which holds
    /// CAP_DAC_OVERRIDE, may get further. Every other failure is a verdict on the
    /// socket itself (missing, not the user's, nobody listening) that the connector
    /// would give too.
    public let isPrivilege: Bool

    public init(_ errno: Errno, _ reason: String, isPrivilege: Bool = false) {
        self.errno = errno
        self.reason = reason
        self.isPrivilege = isPrivilege
    }

    /// "REASON: Strerror (errno N)".
    public var description: String { "\(reason): \(errno)" }
}

/// A user's own socket, ROOT/UID/NAME, connected only when it is that user's: the
/// one resolve-and-verify both the daemon (its direct attempt, for
/// connect_user_socket) and permissionsd-connector use.
///
/// 1. ROOT opened as a directory without following a symbolic link (O_PATH,
///    O_DIRECTORY, O_NOFOLLOW); UID under it the same way, through that fd.
/// 2. UID is a directory owned by uid (fstat).
/// 3. NAME in it, not followed (fstatat, AT_SYMLINK_NOFOLLOW), is a socket owned
///    by uid.
/// 4. connect(2) through /proc/self/fd/DIRFD/NAME, the directory checked in 2 (not
///    the path, which may have been swapped since), a wait for a full backlog
///    bounded by `timeoutMilliseconds`.
/// 5. The process listening on what was connected runs as uid (SO_PEERCRED).
///
/// Step 5 is what makes the others race-free: whatever a rename or a symbolic link
/// made the path resolve to between the checks and the connect, the connection
/// handed over is one to a server run by that user, which the user could have
/// handed over themselves. Steps 1 to 3 refuse the plain mistakes early, with a
/// reason a log line can name.
public enum UserSocket {
    /// The bound on connect(2)'s wait while the server's backlog is full.
    public static let connectTimeoutMilliseconds = 500

    /// Whether `name` is one file name: not empty, no "/", not "." or "..", no NUL,
    /// shorter than the connector's field for it.
    public static func isFileName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        return !bytes.isEmpty && bytes.count < ConnectorProtocol.nameCapacity && !bytes.contains(0)
            && !bytes.contains(UInt8(ascii: "/")) && name != "." && name != ".."
    }

    /// A connected stream socket to ROOT/UID/NAME, non-blocking and close-on-exec,
    /// the caller's to close; or why not.
    public static func connect(root: String, uid: UInt32, name: String,
                               timeoutMilliseconds: Int = connectTimeoutMilliseconds)
        -> Result<Int32, UserSocketFailure>
    {
        let directory = "\(root)/\(uid)"
        let path = "\(directory)/\(name)"
        guard isFileName(name) else {
            return .failure(UserSocketFailure(Errno(rawValue: EINVAL), "\"\(name.escapedForMessage)\" is not a file name"))
        }
        let rootFD: Int32
        switch valueOrErrno({ open(root, cshims_O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }) {
        case .failure(let error): return .failure(failure(error, "cannot open \(root)"))
        case .success(let fd): rootFD = fd
        }
        defer { close(rootFD) }
        let dirFD: Int32
        switch valueOrErrno({ openat(rootFD, String(uid), cshims_O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }) {
        case .failure(let error) where error.rawValue == ENOTDIR || error.rawValue == ELOOP:
            return .failure(UserSocketFailure(Errno(rawValue: EPERM), "\(directory) is not a directory (\(error.text))"))
        case .failure(let error): return .failure(failure(error, "cannot open \(directory)"))
        case .success(let fd): dirFD = fd
        }
        defer { close(dirFD) }

        var status = stat()
        if case .failure(let error) = valueOrErrno({ fstat(dirFD, &status) }) {
            return .failure(failure(error, "cannot stat \(directory)"))
        }
        guard status.st_mode & S_IFMT == S_IFDIR else {
            return .failure(UserSocketFailure(Errno(rawValue: EPERM), "\(directory) is not a directory"))
        }
        guard status.st_uid == uid else {
            return .failure(UserSocketFailure(Errno(rawValue: EPERM),
                                              "\(directory) is owned by uid \(status.st_uid), not \(uid)"))
        }
        if case .failure(let error) = valueOrErrno({ fstatat(dirFD, name, &status, AT_SYMLINK_NOFOLLOW) }) {
            return .failure(failure(error, "cannot stat \(path)"))
        }
        guard status.st_mode & S_IFMT == S_IFSOCK else {
            return .failure(UserSocketFailure(Errno(rawValue: EPERM),
                                              "\(path) is not a socket (\(kind(status.st_mode)))"))
        }
        guard status.st_uid == uid else {
            return .failure(UserSocketFailure(Errno(rawValue: EPERM),
                                              "\(path) is owned by uid \(status.st_uid), not \(uid)"))
        }

        let socket: Int32
        switch UnixSocket.make(.stream) {
        case .failure(let error): return .failure(UserSocketFailure(error, "cannot make a socket"))
        case .success(let fd): socket = fd
        }
        let connected = UnixSocket.setTimeouts(socket, milliseconds: timeoutMilliseconds)
            .flatMap { UnixSocket.connect(socket, to: "/proc/self/fd/\(dirFD)/\(name)") }
        if case .failure(let error) = connected {
            close(socket)
            if error.rawValue == EAGAIN {
                return .failure(UserSocketFailure(Errno(rawValue: ETIMEDOUT),
                                                  "\(path) accepted no connection within \(timeoutMilliseconds) ms"))
            }
            return .failure(failure(error, "cannot connect to \(path)"))
        }
        switch UnixSocket.peerCredentials(socket) {
        case .failure(let error):
            close(socket)
            return .failure(UserSocketFailure(error, "cannot tell who serves \(path)"))
        case .success(let peer) where peer.uid != uid:
            close(socket)
            return .failure(UserSocketFailure(Errno(rawValue: EPERM), "\(path) is served by uid \(peer.uid) "
                                              + "(pid \(peer.pid)), not \(uid)"))
        case .success:
            break
        }
        // Handed over as a plain non-blocking socket: no timeouts of ours left on it.
        let handed = UnixSocket.setTimeouts(socket, milliseconds: 0).flatMap { UnixSocket.setNonBlocking(socket) }
        if case .failure(let error) = handed {
            close(socket)
            return .failure(UserSocketFailure(error, "cannot make the connection to \(path) non-blocking"))
        }
        return .success(socket)
    }

    /// A system call's failure: a privilege one when the kernel said EACCES or EPERM.
    private static func failure(_ error: Errno, _ what: String) -> UserSocketFailure {
        UserSocketFailure(error, what, isPrivilege: error.rawValue == EACCES || error.rawValue == EPERM)
    }

    /// What a file that is not a socket is, for the log line.
    private static func kind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFLNK: "a symbolic link"
        case S_IFREG: "a regular file"
        case S_IFDIR: "a directory"
        case S_IFIFO: "a FIFO"
        default: "a device or another kind of file"
        }
    }
}
