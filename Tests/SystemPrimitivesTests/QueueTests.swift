import Glibc
import SystemPrimitives
import Testing

/// The queue, semaphore, group and sources over libdispatch's C API
/// (`Queue.swift`, `Deadline.swift`, `DispatchSources.swift`), on real libdispatch
/// threads. Every wait has a deadline; none is a sleep.
@Suite struct QueueTests {
    private struct Refused: Error, Equatable { let value: Int }

    @Test func syncReturnsAndThrowsWhatItsBodyDid() throws {
        let queue = Queue(label: "test.sync")
        #expect(queue.sync { 41 + 1 } == 42)
        #expect(throws: Refused(value: 7)) { try queue.sync { () throws(Refused) -> Int in throw Refused(value: 7) } }
    }

    @Test func aSerialQueueRunsItsWorkInOrderOneAtATime() {
        let queue = Queue(label: "test.order")
        let seen = Locked([Int]())
        let done = Semaphore(value: 0)
        for i in 0..<1000 { queue.async { seen.withLock { $0.append(i) } } }
        queue.async { done.signal() }
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(seen.withLock { $0 } == Array(0..<1000))
    }

    @Test func workRunsOnTheQueueItWasGivenTo() {
        let queue = Queue(label: "test.current")
        let done = Semaphore(value: 0)
        queue.async {
            queue.assertCurrent()  // stops the test process if it were not
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
    }

    @Test func aSemaphoreWithNothingSignalledTimesOut() {
        let semaphore = Semaphore(value: 0)
        #expect(semaphore.wait(timeout: .now() + .milliseconds(20)) == .timedOut)
        semaphore.signal()
        #expect(semaphore.wait(timeout: .now()) == .success)
    }

    @Test func aGroupWaitsForEveryoneWhoEntered() {
        let group = Group()
        let queue = Queue(label: "test.group", concurrent: true)
        let count = Locked(0)
        for _ in 0..<8 {
            group.enter()
            queue.async { count.withLock { $0 += 1 }; group.leave() }
        }
        #expect(group.wait(timeout: .now() + 10) == .success)
        #expect(count.withLock { $0 } == 8)
        group.enter()
        #expect(group.wait(timeout: .now() + .milliseconds(20)) == .timedOut)
        group.leave()
    }

    @Test func asyncAfterRunsNotBeforeItsDeadline() {
        let queue = Queue(label: "test.after")
        let done = Semaphore(value: 0)
        let start = Deadline.now()
        let ranAt = Locked<Deadline?>(nil)
        queue.asyncAfter(deadline: start + .milliseconds(30)) { ranAt.withLock { $0 = .now() }; done.signal() }
        #expect(done.wait(timeout: .now() + 10) == .success)
        let waited = ranAt.withLock { $0! }.uptimeNanoseconds - start.uptimeNanoseconds
        #expect(waited >= 30_000_000, "ran after \(waited) ns")
    }

    @Test func aRepeatingTimerFiresUntilCancelledThenItsCancelHandlerRunsOnce() {
        let queue = Queue(label: "test.timer")
        let fired = Locked(0), cancelled = Locked(0)
        let thrice = Semaphore(value: 0), ended = Semaphore(value: 0)
        let timer = TimerSource(queue: queue)
        timer.setEventHandler {
            if fired.withLock({ $0 += 1; return $0 }) == 3 { thrice.signal() }
        }
        timer.setCancelHandler { cancelled.withLock { $0 += 1 }; ended.signal() }
        timer.schedule(deadline: .now(), repeating: .milliseconds(5))
        timer.resume()
        #expect(thrice.wait(timeout: .now() + 10) == .success)
        queue.sync { timer.cancel() }
        #expect(ended.wait(timeout: .now() + 10) == .success)
        let firedAtCancel = fired.withLock { $0 }
        // Nothing fires after the cancel handler ran: a later event would need
        // the queue, which runs this check's marker only after anything before it.
        queue.sync {}
        #expect(fired.withLock { $0 } == firedAtCancel)
        #expect(cancelled.withLock { $0 } == 1)
        #expect(timer.isCancelled)
    }

    /// A read source runs its handler for each byte written, and once cancelled
    /// its cancel handler, which closes the descriptor, as the daemon's do.
    @Test func aReadSourceReadsUntilCancelledThenClosesItsDescriptor() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        let queue = Queue(label: "test.read")
        let read = Semaphore(value: 0), closed = Semaphore(value: 0)
        let got = Locked([UInt8]())
        let source = ReadSource(fileDescriptor: fds[0], queue: queue)
        source.setEventHandler {
            var byte: UInt8 = 0
            if Glibc.read(fds[0], &byte, 1) == 1 { got.withLock { $0.append(byte) } }
            read.signal()
        }
        source.setCancelHandler { close(fds[0]); closed.signal() }
        source.resume()
        for value: UInt8 in [0x2a, 0x2b] {
            var byte = value
            #expect(write(fds[1], &byte, 1) == 1)
            #expect(read.wait(timeout: .now() + 10) == .success)
        }
        #expect(got.withLock { $0 } == [0x2a, 0x2b])
        source.cancel()
        #expect(closed.wait(timeout: .now() + 10) == .success)
        // Seen from the write end, which stays ours: the number of the read end may
        // be another file's by now (tests run side by side and open descriptors).
        var writeEnd = pollfd(fd: fds[1], events: Int16(POLLOUT), revents: 0)
        #expect(poll(&writeEnd, 1, 0) == 1 && writeEnd.revents & Int16(POLLERR) != 0,
                "the cancel handler closed the read end: no reader left")
        close(fds[1])
    }

    @Test func intervalsCompareBySpanAndSaturate() {
        #expect(Deadline.Interval.seconds(1) == .milliseconds(1000))
        #expect(Deadline.Interval.seconds(Int.max).nanoseconds == Int64.max)
        #expect(Deadline.now() + Double.infinity == .distantFuture)
        #expect(Deadline.now() + 1e300 == .distantFuture)
        #expect(Deadline.now() + Double.nan == .distantFuture)
        // Too far back is already passed, never "never".
        #expect(Deadline.now() + (-Double.infinity) < .now())
        #expect(Deadline.now() + (-1e300) < .now())
        let queue = Queue(label: "test.past"), ran = Semaphore(value: 0)
        queue.asyncAfter(deadline: .now() + (-Double.infinity)) { ran.signal() }
        #expect(ran.wait(timeout: .now() + 10) == .success)
    }

    /// A handler that holds its own source is let go once the source is
    /// cancelled, with or without a cancel handler of its own: each captured
    /// object says when it goes, and every one must.
    @Test func aCancelledSourceLetsGoOfItsHandlers() {
        final class Tracked: Sendable {
            let freed: SystemPrimitives.Semaphore
            init(_ freed: SystemPrimitives.Semaphore) { self.freed = freed }
            deinit { freed.signal() }
        }
        let queue = Queue(label: "test.cycle")
        let freed = Semaphore(value: 0), cancelled = Semaphore(value: 0)
        for i in 0..<100 {
            let tracked = Tracked(freed)
            let timer = TimerSource(queue: queue)
            timer.setEventHandler { _ = tracked; timer.cancel() }
            if i.isMultiple(of: 2) { timer.setCancelHandler { cancelled.signal() } }
            timer.schedule(deadline: .now())
            timer.resume()
        }
        for _ in 0..<50 { #expect(cancelled.wait(timeout: .now() + 10) == .success) }
        var gone = 0
        while gone < 100, freed.wait(timeout: .now() + 10) == .success { gone += 1 }
        #expect(gone == 100, "only \(gone) of 100 handlers were let go")
    }

    /// A background queue's work runs on a thread of a higher nice value than the
    /// default's: what keeps the configuration reader behind the callers.
    @Test func aBackgroundQueueRunsAtALowerPriority() {
        // async, not sync: sync runs its work on the calling thread.
        func niceOfWork(on queue: Queue) -> Int32? {
            let nice = Locked<Int32?>(nil), done = Semaphore(value: 0)
            // 0: the calling thread (on Linux a nice value is per thread).
            queue.async { nice.withLock { $0 = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0) }; done.signal() }
            return done.wait(timeout: .now() + 10) == .success ? nice.withLock { $0 } : nil
        }
        #expect(niceOfWork(on: Queue(label: "test.background", priority: .background)) == 10)
        #expect(niceOfWork(on: Queue(label: "test.default")) == 0)
    }
}
