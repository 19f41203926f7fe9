import Glibc
import Testing
import SystemPrimitives

@Suite("valueOrErrno and Errno")
struct SystemCallsTests {
    @Test func aFailureIsItsErrno() {
        let result = valueOrErrno { close(-1) }
        #expect(result == .failure(Errno(rawValue: EBADF)))
        #expect(errnoName(EBADF) == "Bad file descriptor (errno 9)")
        #expect(Errno(rawValue: ENOENT).text == "No such file or directory")
    }

    @Test func anInterruptedCallIsMadeAgain() {
        var calls = 0
        let result = valueOrErrno { () -> Int32 in
            calls += 1
            if calls < 3 {
                errno = EINTR
                return -1
            }
            return 7
        }
        #expect(result == .success(7))
        #expect(calls == 3)
    }

    @Test func writeAllWritesEverything() throws {
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        defer { close(fds[0]) }
        let bytes = [UInt8](repeating: 0x61, count: 1000)
        try writeAll(fds[1], bytes).get()
        close(fds[1])
        var back = [UInt8](repeating: 0, count: 2000)
        let n = valueOrErrno { read(fds[0], &back, back.count) }
        #expect(n == .success(1000))
        #expect(throws: Errno(rawValue: EBADF)) { try writeAll(-1, bytes).get() }
    }

    /// A non-blocking pipe, more bytes than it holds, a reader that reads only after
    /// the writer found it full: every byte arrives, in order (the writer waited for
    /// room instead of failing with EAGAIN half way).
    @Test func writeAllWaitsForRoomOnANonBlockingPipe() async throws {
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        defer { close(fds[0]) }
        _ = fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK)
        let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 % 251) }
        let readEnd = fds[0]
        let reader = Task.detached { () -> [UInt8] in
            var got: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while case .success(let n) = valueOrErrno({ read(readEnd, &chunk, chunk.count) }), n > 0 {
                got += chunk[0..<n]
            }
            return got
        }
        try writeAll(fds[1], bytes).get()
        close(fds[1])
        #expect(await reader.value == bytes)
    }
}
