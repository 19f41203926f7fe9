internal import SystemPrimitives
import Foundation
import Testing
@testable import PermissionsIdentity

/// `IdentityResolver` against reads that never return: a real blocking open of a
/// FIFO that has no writer (what a caller's FUSE file system can do to an open of
/// its .flatpak-info), next to the real `IdentityReader` over a stand-in /proc.
@Suite("Identity reads off the serving queue")
final class IdentityResolverTests {
    let root: TempDirectory
    let queue = Queue(label: "resolver-test")
    let fifo: String
    /// Signalled by each stalling read as it starts.
    let stalled = Semaphore(value: 0)
    /// The FIFO held open for writing once the stalls are released (see `release`).
    private var writer: Int32 = -1

    init() throws {
        root = try TempDirectory()
        fifo = root.url("stall")
        #expect(mkfifo(fifo, 0o600) == 0)
        // Process 7 is an ordinary host process.
        try root.write("7/stat", IdentityReaderTests.statLine(pid: 7, startTime: 4711))
        try root.inHostMountNamespace(7)
        try root.symlink("7/exe", to: "/usr/bin/true")
    }

    deinit {
        release()
        close(writer)
    }

    /// Processes from 1000 up stall: their read opens the FIFO, which blocks until
    /// someone opens it for writing. The others are read from the stand-in /proc.
    func makeResolver(maxThreads: Int = 4) -> IdentityResolver {
        let reader = IdentityReader(procRoot: root.path)
        let (fifo, stalled) = (self.fifo, self.stalled)
        return IdentityResolver(queue: queue, maxThreads: maxThreads) { pid, uid in
            guard pid >= 1000 else { return reader.identify(pid: pid, uid: uid) }
            stalled.signal()
            let fd = open(fifo, O_RDONLY)
            if fd >= 0 { close(fd) }
            return .failure(.unreadable("released"))
        }
    }

    /// Opens the FIFO for writing (O_RDWR never blocks) and keeps it open: every
    /// stalled read returns, and any read still to come does not stall.
    func release() {
        if writer < 0 { writer = open(fifo, O_RDWR | O_CLOEXEC) }
    }

    /// What a resolution came to, and when.
    final class Answer: @unchecked Sendable {
        // @unchecked Sendable: `value` and `time` are written once, on the resolver's
        // queue, before `done` is signalled, and read only after waiting for it.
        enum Value: Equatable { case identified(String), timedOut, failed(String) }
        private let done = Semaphore(value: 0)
        private(set) var value: Value?
        private(set) var time = Date.distantFuture

        func set(_ outcome: IdentityResolver.Outcome) {
            switch outcome {
            case .read(.success(let identity)): value = .identified(identity.appID)
            case .read(.failure(let failure)): value = .failed("\(failure)")
            case .timedOut: value = .timedOut
            case .noThread(let why): value = .failed(why)
            }
            time = Date()
            done.signal()
        }

        func wait(timeout: TimeInterval = 10) -> Value? {
            guard done.wait(timeout: .now() + timeout) == .success else { return nil }
            done.signal()
            return value
        }
    }

    func resolve(_ resolver: IdentityResolver, _ pid: UInt32) -> Answer {
        let answer = Answer()
        queue.sync { resolver.resolve(pid: pid, uid: 1000) { answer.set($0) } }
        return answer
    }

    func threadsInUse(_ resolver: IdentityResolver) -> Int { queue.sync { resolver.threadsInUse } }

    @Test func aStuckReadGetsTheDeadlineAnswerAndOthersAreServedMeanwhile() throws {
        let resolver = makeResolver()
        let asked = Date()
        let stuck = resolve(resolver, 1000)
        #expect(stalled.wait(timeout: .now() + 10) == .success)

        let other = resolve(resolver, 7)
        #expect(other.wait() == .identified("/usr/bin/true"))
        #expect(stuck.wait() == .timedOut)
        #expect(other.time < stuck.time, "the other caller waited for the stuck one")
        #expect(stuck.time.timeIntervalSince(asked) >= 0.95)  // Date is the wall clock, the deadline monotonic
        #expect(stuck.time.timeIntervalSince(asked) < 5.0)
        // The thread is still stuck in its read, and still counts.
        #expect(threadsInUse(resolver) == 1)
        #expect(resolver.deadlineDescription == "1 s")
    }

    @Test func stuckReadsHoldAtMostTheCapAndNewReadsWaitTheirDeadline() throws {
        let resolver = makeResolver(maxThreads: 4)
        let stuck = (1000..<1004).map { resolve(resolver, $0) }
        for _ in stuck { #expect(stalled.wait(timeout: .now() + 10) == .success) }
        #expect(threadsInUse(resolver) == 4)

        // Every thread is held: these wait for one, and get the deadline answer. Read,
        // process 7 would be identified at once, so it never was.
        let stalling = resolve(resolver, 1004)
        let ordinary = resolve(resolver, 7)
        #expect(ordinary.wait() == .timedOut)
        #expect(stalling.wait() == .timedOut)
        for answer in stuck { #expect(answer.wait() == .timedOut) }
        #expect(stalled.wait(timeout: .now()) == .timedOut, "a fifth read was started")
        #expect(threadsInUse(resolver) == 4)

        // A thread whose read returns goes to the next resolution waiting.
        let next = resolve(resolver, 7)
        release()
        #expect(next.wait() == .identified("/usr/bin/true"))
    }
}
