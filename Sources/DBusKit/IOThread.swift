internal import CDBus
internal import Glibc
internal import SystemPrimitives

/// Serves an attached connection's file descriptors (libdbus's `DBusWatch`es)
/// from a thread of its own: it polls them and handles what is ready with
/// `queue.sync`, which runs inline on this thread when the serial queue is idle.
///
/// Why not dispatch sources: with a read source per socket, every message cost
/// libdispatch's manager thread an epoll wake-up, an ioctl, a hand-off to a worker
/// and a re-arm — 14 system calls and two thread switches per method call, where a
/// plain libdbus loop needs four (measured with `permissions-bench core`). Here a
/// call costs a poll, the reads and the write, on one thread.
///
/// Everything libdbus does still happens on the connection's queue, as before; this
/// thread only waits and then enters the queue.
///
/// A poll that fails does not spin: ENOMEM is retried with a back-off (said once),
/// and any other error stops serving the connection and disconnects it, so that its
/// owner sees the failure (`Connection.failure`) instead of a silent busy loop.
///
/// `@unchecked Sendable`: `watches`, `stopped` and `connection` are guarded by
/// `mutex`; `inIO` is touched only on the connection's queue.
final class IOThread: @unchecked Sendable {
    /// Weak: the connection may go while the thread sits in poll.
    private weak var connection: Connection?
    private var mutex = pthread_mutex_t()
    /// Enabled watches and what to poll them for (under `mutex`).
    private var watches: [OpaquePointer: (fd: Int32, events: Int16)] = [:]
    private var stopped = false
    /// True while this thread handles input on the queue (queue only).
    var inIO = false
    /// A pipe that wakes poll when the watch set changes or on stop.
    private let wakeRead: Int32
    private let wakeWrite: Int32

    init(connection: Connection) {
        self.connection = connection
        pthread_mutex_init(&mutex, nil)
        var fds: [Int32] = [0, 0]
        if pipe(&fds) != 0 { fatalError("pipe: \(errnoName(errno))") }
        for fd in fds {  // pipe2() is not exported to Swift by Glibc
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        wakeRead = fds[0]
        wakeWrite = fds[1]
    }

    /// Starts the thread, which holds a reference to this object until it ends.
    func start() {
        var thread = pthread_t()
        let me = Unmanaged.passRetained(self).toOpaque()
        guard pthread_create(&thread, nil, ioThreadMain, me) == 0 else { fatalError("cannot start the D-Bus I/O thread") }
        pthread_detach(thread)
    }

    /// Ends the thread at its next wake-up; it handles nothing more.
    func stop() {
        pthread_mutex_lock(&mutex)
        let already = stopped
        stopped = true
        pthread_mutex_unlock(&mutex)
        if !already { wake() }
    }

    /// The pipe stays open until this object goes (the thread holds it while it
    /// runs), so a late wake never writes to a reused descriptor.
    private func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    deinit {
        close(wakeRead)
        close(wakeWrite)
        pthread_mutex_destroy(&mutex)
    }

    /// Records a watch's state (called by libdbus, on the queue).
    func update(_ watch: OpaquePointer, removed: Bool = false) {
        let fd = dbus_watch_get_unix_fd(watch)
        let flags = dbus_watch_get_flags(watch)
        var events: Int16 = 0
        if flags & DBUS_WATCH_READABLE.rawValue != 0 { events |= Int16(POLLIN) }
        if flags & DBUS_WATCH_WRITABLE.rawValue != 0 { events |= Int16(POLLOUT) }
        let enabled = !removed && dbus_watch_get_enabled(watch) != 0 && events != 0
        pthread_mutex_lock(&mutex)
        watches[watch] = enabled ? (fd, events) : nil
        let stopped = self.stopped
        pthread_mutex_unlock(&mutex)
        // While handling input, the thread rebuilds its poll set right after.
        if !inIO, !stopped { wake() }
    }

    fileprivate func run() {
        var drain = [UInt8](repeating: 0, count: 64)
        var backoff = PollBackoff()
        // The poll set and what became ready, rebuilt in place on every turn: a turn
        // allocates nothing (in a one-call-at-a-time exchange, a turn is a call).
        var fds: [pollfd] = []
        var polled: [OpaquePointer] = []
        var ready: [(OpaquePointer, UInt32)] = []
        while true {
            fds.removeAll(keepingCapacity: true)
            polled.removeAll(keepingCapacity: true)
            fds.append(pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0))
            pthread_mutex_lock(&mutex)
            for (watch, entry) in watches {
                polled.append(watch)
                fds.append(pollfd(fd: entry.fd, events: entry.events, revents: 0))
            }
            let stop = stopped
            pthread_mutex_unlock(&mutex)
            if stop { break }
            if case .failure(let error) = valueOrErrno({ poll(&fds, nfds_t(fds.count), -1) }) {
                let code = error.rawValue
                // Retrying at once would spin a core for as long as the error lasts.
                if code == ENOMEM || code == EAGAIN {
                    if backoff.start() { report("D-Bus I/O: poll failed: \(errnoName(code)); retrying with back-off") }
                    backoff.wait()
                    continue
                }
                // EINVAL (more descriptors than RLIMIT_NOFILE allows), EFAULT: nothing
                // will change by trying again, so this connection stops being served.
                return fail("D-Bus I/O: poll failed: \(errnoName(code)); the connection is no longer served")
            }
            // A closed wake-up pipe (POLLNVAL) would be reported on every poll.
            if fds[0].revents & Int16(POLLNVAL | POLLERR) != 0 {
                return fail("D-Bus I/O: the I/O thread's wake-up pipe failed; the connection is no longer served")
            }
            if fds[0].revents != 0 { while read(wakeRead, &drain, drain.count) > 0 {} }
            ready.removeAll(keepingCapacity: true)
            for (index, watch) in polled.enumerated() {
                let flags = Self.watchFlags(revents: fds[index + 1].revents)
                if flags != 0 { ready.append((watch, flags)) }
            }
            if ready.isEmpty {
                backoff.reset()
                continue
            }
            pthread_mutex_lock(&mutex)
            let current = stopped ? nil : self.connection
            pthread_mutex_unlock(&mutex)
            guard let connection = current else { break }
            let handled = connection.queue.sync { handle(ready, on: connection) }
            if handled {
                backoff.reset()
            } else {
                if backoff.start() {
                    report("D-Bus I/O: out of memory handling the connection; retrying with back-off")
                }
                backoff.wait()
            }
        }
    }

    /// Hands libdbus the watches that poll reported, then dispatches what they read
    /// (on the connection's queue). False if libdbus ran out of memory.
    private func handle(_ ready: [(OpaquePointer, UInt32)], on connection: Connection) -> Bool {
        // Stopped (the connection closed) since the poll: nothing more is handled.
        pthread_mutex_lock(&mutex)
        let stop = stopped
        pthread_mutex_unlock(&mutex)
        if stop { return true }
        inIO = true
        defer { inIO = false }
        // dbus_watch_handle is false when libdbus ran out of memory; the watch is
        // still ready, so the next poll returns at once for it.
        var handled = true
        for (watch, flags) in ready {
            // A watch removed since the poll must not be touched: libdbus freed it.
            pthread_mutex_lock(&mutex)
            let live = !stopped && watches[watch] != nil
            pthread_mutex_unlock(&mutex)
            if live, dbus_watch_handle(watch, flags) == 0 { handled = false }
        }
        connection.dispatchPending()
        return handled
    }

    /// libdbus's watch flags for what poll reported. POLLNVAL (the descriptor was
    /// closed under libdbus) counts as an error, which makes libdbus disconnect:
    /// ignored, it would be reported again by every poll, and the thread would spin.
    static func watchFlags(revents: Int16) -> UInt32 {
        var flags: UInt32 = 0
        if revents & Int16(POLLIN) != 0 { flags |= DBUS_WATCH_READABLE.rawValue }
        if revents & Int16(POLLOUT) != 0 { flags |= DBUS_WATCH_WRITABLE.rawValue }
        if revents & Int16(POLLHUP) != 0 { flags |= DBUS_WATCH_HANGUP.rawValue }
        if revents & Int16(POLLERR | POLLNVAL) != 0 { flags |= DBUS_WATCH_ERROR.rawValue }
        return flags
    }

    /// Tells the connection's owner (`Connection.onError`), on the queue.
    private func report(_ text: String) {
        pthread_mutex_lock(&mutex)
        let current = stopped ? nil : self.connection
        pthread_mutex_unlock(&mutex)
        guard let connection = current else { return }
        connection.queue.async { connection.onError?(BusError(BusError.failed, text)) }
    }

    /// Ends the thread and disconnects the connection, as if the bus had closed it:
    /// its owner sees `onDisconnect`, with `Connection.failure` saying why.
    private func fail(_ text: String) {
        pthread_mutex_lock(&mutex)
        let current = stopped ? nil : self.connection
        stopped = true
        pthread_mutex_unlock(&mutex)
        guard let connection = current else { return }
        connection.queue.async { connection.servingFailed(BusError(BusError.failed, text)) }
    }
}

/// The wait between retries of a poll that failed for want of memory: 1 ms,
/// doubling up to 1 s, until a poll succeeds again.
struct PollBackoff {
    private(set) var milliseconds = 0

    /// Starts backing off (or goes on); true the first time, to say it once.
    mutating func start() -> Bool {
        let first = milliseconds == 0
        milliseconds = first ? 1 : min(milliseconds * 2, 1000)
        return first
    }

    mutating func reset() { milliseconds = 0 }

    func wait() {
        sleepNanoseconds(UInt64(milliseconds) * 1_000_000)
    }
}

private func ioThreadMain(_ data: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    Unmanaged<IOThread>.fromOpaque(data!).takeRetainedValue().run()
    return nil
}

// libdbus's watch functions for an attached connection. `data` is the connection,
// unretained: the connection removes these functions before it goes.

private func ioThread(_ data: UnsafeMutableRawPointer?) -> IOThread? {
    Unmanaged<Connection>.fromOpaque(data!).takeUnretainedValue().ioThread
}

func ioAddWatch(_ watch: OpaquePointer?, _ data: UnsafeMutableRawPointer?) -> dbus_bool_t {
    guard let watch, let thread = ioThread(data) else { return 0 }
    thread.update(watch)
    return 1
}

func ioRemoveWatch(_ watch: OpaquePointer?, _ data: UnsafeMutableRawPointer?) {
    guard let watch else { return }
    ioThread(data)?.update(watch, removed: true)
}

func ioToggleWatch(_ watch: OpaquePointer?, _ data: UnsafeMutableRawPointer?) {
    guard let watch else { return }
    ioThread(data)?.update(watch)
}
