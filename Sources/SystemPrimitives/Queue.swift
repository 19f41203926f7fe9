internal import CDispatch

// libdispatch through its C API (the toolchain's CDispatch module), not through the
// Swift overlay `import Dispatch`: the toolchain builds libswiftDispatch against
// _Concurrency, _StringProcessing and _RegexParser, so the overlay alone makes every
// program and plugin that uses a queue load, relocate and register those three
// libraries at each start, and keep 1.6 MiB of them resident (doc/performance.md,
// "The Swift Dispatch overlay, dropped"). The daemon and the plugins use queues,
// semaphores, groups and three kinds of source; this file and its neighbours wrap
// those.
//
// Work is handed to libdispatch as a context pointer and a C function (the `_f`
// calls): an escaping closure is boxed and retained across the call, a `sync`
// closure is passed by address, since it runs before the call returns.

/// A dispatch queue: serial unless made concurrent. Work runs on libdispatch's
/// threads, one item at a time on a serial queue, in the order it was submitted.
///
/// Work that may block beside other work belongs on a serial queue of its own
/// (`runOnItsOwn`), never on a concurrent queue.
///
/// `@unchecked Sendable`: it holds one immutable reference to a dispatch queue, and
/// libdispatch's queue calls may be made from any thread.
public final class Queue: @unchecked Sendable {
    let raw: dispatch_queue_t

    /// How much of the CPU a queue's work asks for: libdispatch runs the work of
    /// a queue below the default on threads of a higher nice value (utility 2,
    /// background 10), so that it gives way to the serving queue's callers.
    public enum Priority: UInt32, Sendable {
        // libdispatch's QOS_CLASS_* values, which its Linux headers do not name.
        case background = 0x09
        case utility = 0x11
        case `default` = 0x15
    }

    /// A queue of its own; `label` names its threads in debuggers and `ps -L`.
    /// `target`: a queue whose threads (and order) this one's work shares.
    public init(label: String, priority: Priority = .default, concurrent: Bool = false, target: Queue? = nil) {
        DispatchSymbols.resolve()  // before any plugin can hold the loader's lock (DispatchSymbols)
        var attributes = concurrent ? DispatchSymbols.concurrentAttribute : nil
        if priority != .default {
            attributes = dispatch_queue_attr_make_with_qos_class(attributes, priority.rawValue, 0)
        }
        raw = dispatch_queue_create(label, attributes)
        if let target { dispatch_set_target_queue(dispatch_object_t(_dq: raw), target.raw) }
    }

    deinit { DispatchSymbols.release(dispatch_object_t(_dq: raw)) }

    /// Runs `work`, which may block, on a serial queue of its own; returns at once.
    /// Serial queues run on libdispatch's overcommit pool, which gives a queue with
    /// work an idle thread or a new one at once, up to 255 threads (beyond, work
    /// waits for one of them to be done). Concurrent queues (and the global ones)
    /// share a pool of one thread per core, which grows by about one thread a
    /// second while all of its threads are blocked: on 2 cores, two blocked items
    /// held back everything queued after them.
    public static func runOnItsOwn(label: String, priority: Priority = .default,
                                   execute work: @escaping @Sendable () -> Void) {
        Queue(label: label, priority: priority).async(execute: work)
    }

    /// Runs `work` on the queue later; returns at once.
    public func async(execute work: @escaping @Sendable () -> Void) {
        dispatch_async_f(raw, Work.retained(work), Work.runOnce)
    }

    /// Runs `work` on the queue once `deadline` has passed; returns at once.
    public func asyncAfter(deadline: Deadline, execute work: @escaping @Sendable () -> Void) {
        dispatch_after_f(deadline.rawValue, raw, Work.retained(work), Work.runOnce)
    }

    /// Runs `body` on the queue and waits for it: what it returns or throws is
    /// this call's. Never from the queue itself (a serial queue would deadlock).
    public func sync<T, E: Error>(execute body: () throws(E) -> T) throws(E) -> T {
        var result: Result<T, E>?
        withoutActuallyEscaping(body) { body in
            var run: () -> Void = {
                do throws(E) { result = .success(try body()) } catch { result = .failure(error) }
            }
            withUnsafeMutablePointer(to: &run) { pointer in
                dispatch_sync_f(raw, pointer) { context in
                    context!.assumingMemoryBound(to: (() -> Void).self).pointee()
                }
            }
        }
        return try result!.get()
    }

    /// Stops the process when the calling code is not running on this queue
    /// (libdispatch's dispatch_assert_queue): a method that touches state only
    /// this queue may touch says so with it.
    public func assertCurrent() {
        dispatch_assert_queue(raw)
    }
}

/// Hands libdispatch's threads the process's main thread and never returns: what
/// a program that only serves queues calls at the end of its start.
public func runDispatchMain() -> Never {
    dispatch_main()
}

/// A closure carried through libdispatch's context pointer.
final class Work {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }

    /// A +1 reference for a call that runs it once (`runOnce` takes it back).
    static func retained(_ body: @escaping @Sendable () -> Void) -> UnsafeMutableRawPointer {
        Unmanaged.passRetained(Work(body)).toOpaque()
    }

    /// Runs the work a `retained` context carries, and drops it.
    static var runOnce: @convention(c) (UnsafeMutableRawPointer?) -> Void {
        { context in Unmanaged<Work>.fromOpaque(context!).takeRetainedValue().body() }
    }
}
