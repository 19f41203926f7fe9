internal import SystemPrimitives
internal import Glibc

/// Runs identity reads (`IdentityReader.identify`: a caller's /proc entry, and
/// `.flatpak-info` through the caller's own root directory) off the serving queue,
/// with a deadline and a cap on the threads they hold.
///
/// A caller controls what its root directory is: a FUSE file system of its own can
/// make an open or a read there block for ever, and such a thread cannot be
/// cancelled. So each read runs on a thread of its own, at most `maxThreads` at
/// once, and a thread counts against the cap until its read returns, however late
/// (stuck ones for good). A resolution waits for a free thread, and is answered
/// `.timedOut` once `deadlineMilliseconds` have passed since it was asked for, whether it was
/// still waiting or reading; a read that returns later is dropped. Callers whose
/// identity is already known never come here, so they are served whatever is stuck.
///
/// Threads of our own, not dispatch's pool: a stuck block would hold one of the
/// pool's threads, which the serving queue and the plugins' queues run on.
///
/// Confined to `queue`; only `read` runs on the resolver threads, and its result
/// is handed back to `queue`.
final class IdentityResolver {
    typealias Read = @Sendable (_ pid: UInt32, _ uid: UInt32) -> Result<AppIdentity, IdentityReader.Failure>

    enum Outcome {
        case read(Result<AppIdentity, IdentityReader.Failure>)
        /// Not resolved within the deadline (waiting for a thread, or reading).
        case timedOut
        /// No thread could be started (the system's limit).
        case noThread(String)
    }

    let queue: Queue
    let read: Read
    let maxThreads: Int
    let deadlineMilliseconds: Int
    /// Threads started whose read has not returned: running, or stuck for good.
    private(set) var threadsInUse = 0
    /// Resolutions waiting for a thread, oldest first.
    private var waiting: [Job] = []

    private final class Job {
        let pid: UInt32
        let uid: UInt32
        /// nil once answered.
        var done: ((Outcome) -> Void)?
        init(pid: UInt32, uid: UInt32, done: @escaping (Outcome) -> Void) {
            self.pid = pid
            self.uid = uid
            self.done = done
        }
        func answer(_ outcome: Outcome) {
            guard let done else { return }
            self.done = nil
            done(outcome)
        }
    }

    init(queue: Queue, maxThreads: Int = 4, deadlineMilliseconds: Int = 1000, read: @escaping Read) {
        self.queue = queue
        self.maxThreads = maxThreads
        self.deadlineMilliseconds = deadlineMilliseconds
        self.read = read
    }

    /// The deadline as messages say it ("1 s", "250 ms").
    var deadlineDescription: String {
        deadlineMilliseconds % 1000 == 0 ? "\(deadlineMilliseconds / 1000) s" : "\(deadlineMilliseconds) ms"
    }

    /// Reads the identity of process `pid`; `done` runs once, on the queue.
    func resolve(pid: UInt32, uid: UInt32, done: @escaping (Outcome) -> Void) {
        queue.assertCurrent()
        let job = Job(pid: pid, uid: uid, done: done)
        // Weak: the timer and the thread may outlive the resolver (in tests).
        let expire = QueueConfined({ [weak self] in
            self?.waiting.removeAll { $0 === job }
            job.answer(.timedOut)
        })
        queue.asyncAfter(deadline: .now() + .milliseconds(deadlineMilliseconds)) { expire.value() }
        if threadsInUse < maxThreads {
            start(job)
        } else {
            waiting.append(job)
        }
    }

    private func start(_ job: Job) {
        threadsInUse += 1
        let returned = QueueConfined({ [weak self] (result: Result<AppIdentity, IdentityReader.Failure>) in
            guard let self else { return }
            self.threadsInUse -= 1
            job.answer(.read(result))
            while self.threadsInUse < self.maxThreads, !self.waiting.isEmpty {
                self.start(self.waiting.removeFirst())
            }
        })
        let (read, queue, pid, uid) = (self.read, self.queue, job.pid, job.uid)
        let error = startDetachedThread {
            let result = read(pid, uid)
            queue.async { returned.value(result) }
        }
        if error != 0 {
            threadsInUse -= 1
            job.answer(.noThread("cannot start a thread to read its identity: \(errnoName(error))"))
        }
    }
}

/// What a resolver thread runs; passed to it retained, and released by it.
private final class ThreadBody {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}

private func resolverThreadMain(_ context: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    Unmanaged<ThreadBody>.fromOpaque(context!).takeRetainedValue().run()
    return nil
}

/// Starts `body` on a new detached thread; returns 0 or pthread_create's error.
private func startDetachedThread(_ body: @escaping @Sendable () -> Void) -> Int32 {
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    let context = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    var thread = pthread_t()
    let error = pthread_create(&thread, &attributes, resolverThreadMain, context)
    if error != 0 { Unmanaged<ThreadBody>.fromOpaque(context).release() }
    return error
}
