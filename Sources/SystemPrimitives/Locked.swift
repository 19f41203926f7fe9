internal import Glibc

/// A value shared between threads, guarded by a pthread mutex.
///
/// Not `Synchronization.Mutex`: in this toolchain it is a futex inside an
/// uninstrumented library, so ThreadSanitizer cannot see the order it gives and
/// reports every access under it as a race (`scripts/stress --sanitize thread`).
/// TSan intercepts pthread_mutex_lock and unlock, so with this lock it sees the
/// real happens-before edges and still finds real races.
public final class Locked<Value: Sendable>: @unchecked Sendable {
    // @unchecked: `value` is read and written only inside withLock, between
    // pthread_mutex_lock and pthread_mutex_unlock of `mutex`; the mutex itself lives
    // at a fixed heap address for the object's life, as pthread requires.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    public init(_ value: Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        self.value = value
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with the value, holding the lock; never call withLock again from
    /// inside it (the mutex is not recursive).
    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
