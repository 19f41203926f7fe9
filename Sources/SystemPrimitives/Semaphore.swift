internal import CDispatch

/// How a wait on a `Semaphore` or a `Group` ended.
public enum WaitResult: Sendable {
    case success
    case timedOut
}

/// A dispatch semaphore: `wait` takes one of its count, waiting for a `signal`
/// when there is none.
///
/// `@unchecked Sendable`: one immutable reference to a dispatch semaphore, whose
/// calls may be made from any thread.
public final class Semaphore: @unchecked Sendable {
    private let raw: dispatch_semaphore_t

    public init(value: Int) {
        DispatchSymbols.resolve()  // its deinit's release, looked up now (DispatchSymbols)
        raw = dispatch_semaphore_create(value)
    }
    deinit { DispatchSymbols.release(dispatch_object_t(_dsema: raw)) }

    public func signal() { _ = dispatch_semaphore_signal(raw) }

    public func wait() { _ = dispatch_semaphore_wait(raw, DISPATCH_TIME_FOREVER) }

    public func wait(timeout: Deadline) -> WaitResult {
        dispatch_semaphore_wait(raw, timeout.rawValue) == 0 ? .success : .timedOut
    }
}

/// A dispatch group: counts work entered and not yet left, and waits for none.
///
/// `@unchecked Sendable`: as `Semaphore`.
public final class Group: @unchecked Sendable {
    private let raw: dispatch_group_t

    public init() {
        DispatchSymbols.resolve()
        raw = dispatch_group_create()
    }
    deinit { DispatchSymbols.release(dispatch_object_t(_dg: raw)) }

    public func enter() { dispatch_group_enter(raw) }
    public func leave() { dispatch_group_leave(raw) }

    public func wait() { _ = dispatch_group_wait(raw, DISPATCH_TIME_FOREVER) }

    public func wait(timeout: Deadline) -> WaitResult {
        dispatch_group_wait(raw, timeout.rawValue) == 0 ? .success : .timedOut
    }
}
