internal import Glibc

// The one place that turns a C call's "-1 and errno" into a typed result and retries
// it when a signal interrupted it (swift-system's `valueOrErrno(retryOnInterrupt:)`):
// a hand-written loop forgets EINTR, or reads errno after something changed it.

/// Runs `call` until it is not interrupted by a signal (EINTR): its value, or the
/// errno of its failure. A failure is -1, the convention of read, write, poll,
/// waitpid, recv and their kin.
public func valueOrErrno<Value: FixedWidthInteger>(_ call: () -> Value) -> Result<Value, Errno> {
    while true {
        let value = call()
        guard value == -1 else { return .success(value) }
        let error = Errno.current
        if error != .interrupted { return .failure(error) }
    }
}

/// Writes all of `bytes` to `fd`, over as many write calls as it takes. A
/// non-blocking `fd` (O_NONBLOCK belongs to the open file, so whoever shares a pipe
/// may have set it) that is full answers EAGAIN: then poll(2) waits for room, as a
/// blocking write would have, rather than leaving the bytes half written.
public func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Result<Void, Errno> {
    bytes.withUnsafeBytes { writeAll(fd, $0) }
}

/// `writeAll` of bytes that are not an array (a buffer being reused).
public func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Result<Void, Errno> {
    var done = 0
    while done < bytes.count {
        let result = valueOrErrno { write(fd, bytes.baseAddress! + done, bytes.count - done) }
        switch result {
        case .failure(let error) where error.rawValue == EAGAIN || error.rawValue == EWOULDBLOCK:
            var room = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            if case .failure(let error) = valueOrErrno({ poll(&room, 1, -1) }) { return .failure(error) }
        case .failure(let error): return .failure(error)
        // Nothing written with room to write: no errno says why, and trying again
        // would spin; EIO is what it amounts to.
        case .success(0): return .failure(Errno(rawValue: EIO))
        case .success(let n): done += n
        }
    }
    return .success(())
}

/// Sleeps the calling thread for `nanoseconds`, the whole time even when signals
/// interrupt it (nanosleep is resumed with what was left).
public func sleepNanoseconds(_ nanoseconds: UInt64) {
    var left = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
    var remaining = timespec()
    _ = valueOrErrno {
        let rc = nanosleep(&left, &remaining)
        left = remaining
        return rc
    }
}
