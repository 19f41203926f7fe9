import Foundation

/// Runs `work`, which may block (a wait with a deadline, a pipe read to its end,
/// a test's body), on a thread that nothing else is queued behind.
///
/// Not on `DispatchQueue.global()` nor on a concurrent queue: those share
/// libdispatch's pool of one thread per core (2 on CI), which grows by about one
/// thread a second while all of them are blocked, so work queued behind a few
/// dozen blocked waits (the whole suite runs at once) waited more than a minute.
/// A serial queue of its own runs on the overcommit pool instead, which takes an
/// idle thread or starts one at once (up to its limit of 255 threads).
public func runBlocking(_ work: @escaping @Sendable () -> Void) {
    DispatchQueue(label: "test.blocking-work").async(execute: work)
}
