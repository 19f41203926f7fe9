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
}
