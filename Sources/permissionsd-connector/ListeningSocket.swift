internal import Glibc
internal import SystemPrimitives
internal import UserSockets

/// Where the connector listens: the socket systemd passes (socket activation), or
/// one it makes itself at --listen PATH.
enum ListeningSocket {
    struct Problem: Error, CustomStringConvertible {
        let description: String
    }

    /// The one socket systemd passed, fd 3 (sd_listen_fds(3): LISTEN_PID is this
    /// process, LISTEN_FDS is 1), checked to be a listening SOCK_SEQPACKET socket.
    static func fromSystemd() -> Result<Int32, Problem> {
        let pid = getenv("LISTEN_PID").map { String(cString: $0) }
        let count = getenv("LISTEN_FDS").map { String(cString: $0) }
        for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] { unsetenv(name) }
        guard let pid, Int32(pid) == getpid(), let count else {
            return .failure(Problem(description: "no socket: not started by socket activation "
                                    + "(permissionsd-connector.socket), and no --listen PATH"))
        }
        guard count == "1" else {
            return .failure(Problem(description: "socket activation passed \(count) sockets, not 1"))
        }
        let fd: Int32 = 3
        var type: Int32 = 0
        var listening: Int32 = 0
        var size = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &size) == 0,
              getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) == 0 else {
            return .failure(Problem(description: "the socket passed (fd 3) is not a socket: \(Errno.current)"))
        }
        guard type == Int32(SOCK_SEQPACKET.rawValue), listening != 0 else {
            return .failure(Problem(description: "the socket passed (fd 3) is not a listening SOCK_SEQPACKET "
                                    + "socket (ListenSequentialPacket=)"))
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return .success(fd)
    }

    /// A new listening socket at `path`, mode 0600 (the process's owner alone may
    /// connect: run it as root). A socket left at `path` by an earlier run is
    /// replaced; any other file there is an error.
    static func make(at path: String) -> Result<Int32, Problem> {
        var status = stat()
        if lstat(path, &status) == 0 {
            guard status.st_mode & S_IFMT == S_IFSOCK else {
                return .failure(Problem(description: "--listen \(path): exists and is not a socket"))
            }
            unlink(path)
        }
        let fd: Int32
        switch UnixSocket.make(.sequentialPacket) {
        case .failure(let error): return .failure(Problem(description: "cannot make a socket: \(error)"))
        case .success(let made): fd = made
        }
        // Never reachable by others, not even between bind(2) and chmod(2).
        let mask = umask(0o077)
        let listened = UnixSocket.listen(fd, at: path, backlog: 16)
        umask(mask)
        if case .failure(let error) = listened {
            close(fd)
            return .failure(Problem(description: "cannot listen at \(path): \(error)"))
        }
        if chmod(path, 0o600) != 0 {
            let error = Errno.current
            close(fd)
            return .failure(Problem(description: "cannot make \(path) mode 0600: \(error)"))
        }
        return .success(fd)
    }
}
