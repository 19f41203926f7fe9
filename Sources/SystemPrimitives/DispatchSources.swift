internal import CDispatch
internal import Glibc

/// A dispatch source: its event handler runs on its queue when the kernel has
/// something for it (a descriptor readable, a timer due, a signal). Made
/// suspended: set the handlers, then `resume`. `cancel` stops it; the cancel
/// handler then runs once on the queue, after any event handler under way.
///
/// The handlers are held by libdispatch's object, through its context (released by
/// its finalizer), so they live as long as it does. Cancel a source before the
/// last reference to it goes: libdispatch unregisters a source released uncancelled
/// and drops its cancel handler unrun (as with the overlay's sources), so a
/// descriptor the handler was to close would leak.
///
/// `@unchecked Sendable`: one immutable reference to a dispatch source, whose calls
/// may be made from any thread; the handlers are set before `resume`, once.
public class Source: @unchecked Sendable {
    let raw: dispatch_source_t
    private let handlers: Handlers

    fileprivate init(type: dispatch_source_type_t, handle: UInt, queue: Queue) {
        raw = dispatch_source_create(type, handle, 0, queue.raw)
        handlers = Handlers()
        dispatch_set_context(object, Unmanaged.passRetained(handlers).toOpaque())
        dispatch_set_finalizer_f(object) { context in Unmanaged<Handlers>.fromOpaque(context!).release() }
        // Always a cancel handler, whether or not one is set: once cancelled, the
        // handlers are dropped (no event handler runs after the cancel handler), as
        // libdispatch drops the overlay's blocks, so a handler that holds its own
        // source is not a cycle that outlives the cancel.
        dispatch_source_set_cancel_handler_f(raw) { context in
            let handlers = Unmanaged<Handlers>.fromOpaque(context!).takeUnretainedValue()
            let cancel = handlers.cancel
            handlers.event = nil
            handlers.cancel = nil
            cancel?()
        }
    }

    deinit { DispatchSymbols.release(object) }

    private var object: dispatch_object_t { dispatch_object_t(_ds: raw) }

    public func setEventHandler(handler: @escaping () -> Void) {
        handlers.event = handler
        dispatch_source_set_event_handler_f(raw) { context in
            Unmanaged<Handlers>.fromOpaque(context!).takeUnretainedValue().event?()
        }
    }

    public func setCancelHandler(handler: @escaping () -> Void) {
        handlers.cancel = handler
    }

    public func resume() { dispatch_resume(object) }
    public func cancel() { dispatch_source_cancel(raw) }
    public var isCancelled: Bool { dispatch_source_testcancel(raw) != 0 }

    /// `@unchecked Sendable`: written before the source is resumed, read (and, at
    /// the cancel, cleared) only by its handlers after, on its queue. The handlers
    /// need not be `Sendable` (as with the overlay's sources): whoever makes a
    /// source sets them and then runs only on the source's queue what they touch,
    /// which serialises every use.
    private final class Handlers: @unchecked Sendable {
        var event: (() -> Void)?
        var cancel: (() -> Void)?
    }
}

/// Fires when `fileDescriptor` is readable.
public final class ReadSource: Source, @unchecked Sendable {
    public init(fileDescriptor: Int32, queue: Queue) {
        super.init(type: DispatchSymbols.readType, handle: UInt(fileDescriptor), queue: queue)
    }
}

/// Fires when `signal` is delivered to the process (through a signalfd; the signal
/// must be blocked or ignored for its default action not to run).
public final class SignalSource: Source, @unchecked Sendable {
    public init(signal: Int32, queue: Queue) {
        super.init(type: DispatchSymbols.signalType, handle: UInt(signal), queue: queue)
    }
}

/// Fires at a deadline, once or then every interval.
public final class TimerSource: Source, @unchecked Sendable {
    public init(queue: Queue) {
        super.init(type: DispatchSymbols.timerType, handle: 0, queue: queue)
    }

    /// Once, at `deadline`.
    public func schedule(deadline: Deadline) {
        dispatch_source_set_timer(raw, deadline.rawValue, DISPATCH_TIME_FOREVER, 0)
    }

    /// At `deadline`, then every `repeating`.
    public func schedule(deadline: Deadline, repeating: Deadline.Interval) {
        dispatch_source_set_timer(raw, deadline.rawValue, UInt64(max(0, repeating.nanoseconds)), 0)
    }
}

/// Looks up, now, the libdispatch symbols that queues and sources need
/// (DispatchSymbols), if that was not done yet. Every library with a copy of its
/// own of this module (each plugin) has its own lookup: a plugin calls this from
/// its entry point (PluginKit's `makeDescriptor`), which the host calls in the
/// plugin's own turn to open, before the next plugin's dlopen, whose constructor
/// may hold the loader's lock for good.
public func resolveDispatchSymbols() { DispatchSymbols.resolve() }

/// What of libdispatch Swift cannot import, looked up in the loaded library:
/// - the constants its headers give as addresses of variables of an incomplete type
///   (`DISPATCH_SOURCE_TYPE_READ` is `&_dispatch_source_type_read`);
/// - `dispatch_release`, which the header marks unavailable in Swift (for the
///   overlay's objects, which release themselves).
///
/// All at once, when the first queue is made (`Queue.init` asks for them), never
/// one by one at first use: dlsym takes the dynamic loader's lock, which a plugin's
/// constructor that never returns holds for good inside dlopen. Looked up later, a
/// first source or a first release (a stop's) would wait on that lock forever. The
/// daemon makes its queue before it loads a plugin; a plugin calls
/// `resolveDispatchSymbols` from its entry point.
enum DispatchSymbols {
    /// Drops the reference an object was made with (a `_create` call's).
    static func release(_ object: dispatch_object_t) { found.release(object) }

    static var readType: OpaquePointer { found.readType }
    static var timerType: OpaquePointer { found.timerType }
    static var signalType: OpaquePointer { found.signalType }
    static var concurrentAttribute: OpaquePointer { found.concurrentAttribute }

    /// Looks every symbol up, if that was not done yet.
    static func resolve() { _ = found }

    private typealias ReleaseFunction = @convention(c) (dispatch_object_t) -> Void

    private struct Found {
        let release = unsafeBitCast(find("dispatch_release"), to: ReleaseFunction.self)
        let readType = find("_dispatch_source_type_read")
        let timerType = find("_dispatch_source_type_timer")
        let signalType = find("_dispatch_source_type_signal")
        let concurrentAttribute = find("_dispatch_queue_attr_concurrent")
    }

    // nonisolated(unsafe): written once, by its lazy initialisation (which Swift
    // runs once, under its own lock), and only read after.
    nonisolated(unsafe) private static let found = Found()

    private static func find(_ symbol: String) -> OpaquePointer {
        guard let address = dlsym(UnsafeMutableRawPointer(bitPattern: 0), symbol) else {
            fatalError("libdispatch has no \(symbol)")
        }
        return OpaquePointer(address)
    }
}
