import Foundation
import Testing
import PermissionsTestSupport

/// Where the daemon's log lines go (permissionsd(8), DIAGNOSTICS): the journal when
/// standard error is the stream JOURNAL_STREAM names, standard error when it is open
/// and not /dev/null, else syslog through /dev/log with facility LOG_DAEMON.
@Suite struct LoggingTests {
    let bus: TestBus

    init() throws { bus = try TestBus() }

    /// A line every start logs, at priority info (6).
    static let ownedLine = "serving org.example.Permissions as "

    @Test func standardErrorGetsPrefixedLines() throws {
        let daemon = try DaemonUnderTest(bus: bus)
        let line = try daemon.waitForLog(Self.ownedLine)
        #expect(line.hasPrefix("<6>permissionsd: "), "\(line)")
    }

    @Test func theJournalStreamGetsLinesWithoutTheIdentifier() throws {
        let daemon = try DaemonUnderTest(bus: bus, start: false)
        daemon.logFileIsJournalStream = true
        try daemon.start()
        let line = try daemon.waitForLog(Self.ownedLine)
        #expect(line.hasPrefix("<6>") && !line.contains("permissionsd: "), "\(line)")
    }

    @Test func aJournalStreamThatIsNotStandardErrorIsNotTheJournal() throws {
        let daemon = try DaemonUnderTest(bus: bus, start: false)
        // An inherited JOURNAL_STREAM whose stream is not this process's standard error
        // (a shell started from a service, then redirected): the identifier stays.
        daemon.environment["JOURNAL_STREAM"] = "1:1"
        try daemon.start()
        let line = try daemon.waitForLog(Self.ownedLine)
        #expect(line.hasPrefix("<6>permissionsd: "), "\(line)")
    }

    @Test(arguments: ["2>/dev/null", "2>&-"])
    func withoutStandardErrorLinesGoToSyslog(redirection: String) throws {
        let syslog = try SyslogListener()
        let daemon = try DaemonUnderTest(bus: bus, start: false)
        daemon.launcher = syslog.launcher(redirection: redirection)
        try daemon.start()
        let datagram = try syslog.next { $0.contains(Self.ownedLine) }
        // <PRI>: facility LOG_DAEMON (3) * 8 + priority info (6); then glibc's
        // timestamp and the identifier with the daemon's pid.
        let pid = try #require(daemon.pid)
        #expect(datagram.hasPrefix("<30>"), "\(datagram)")
        #expect(datagram.contains(" permissionsd[\(pid)]: "), "\(datagram)")
        // Nothing went to the log file, and the daemon serves.
        #expect(!daemon.log.contains(Self.ownedLine), "\(daemon.log)")
        #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"not-determined\"\n")
        // A closed descriptor 2 was opened on /dev/null, so that no file the daemon
        // opened (the store) took its place.
        let stderrTarget = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/2")
        #expect(stderrTarget == "/dev/null", "\(stderrTarget)")
    }
}

/// A syslog daemon's socket, /dev/log, for a daemon run in a mount namespace whose
/// /dev is a directory of the test's: the devices it needs, bound from the real
/// /dev, and `log`, a datagram socket this listener reads.
final class SyslogListener {
    let directory: String
    private let fd: Int32

    init() throws {
        directory = try makeTemporaryDirectory("syslog-dev")
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError(description: "socket: \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = directory + "/log"
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            path.utf8CString.withUnsafeBytes { raw.copyMemory(from: $0) }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else { throw HarnessError(description: "bind \(path): \(errno)") }
    }

    /// A launcher for DaemonUnderTest: a mount namespace of its own with this /dev, and
    /// standard error redirected by `redirection` (a shell redirection).
    func launcher(redirection: String) -> [String] {
        let script = """
            for name in null zero full random urandom; do
                : > "$0/$name" && mount --bind "/dev/$name" "$0/$name" || exit 1
            done
            mount --rbind "$0" /dev || exit 1
            exec "$@" \(redirection)
            """
        return ["/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script, directory]
    }

    /// The first datagram that `matches`, waited for up to `timeout`.
    func next(timeout: TimeInterval = 15, _ matches: (String) -> Bool) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        var seen: [String] = []
        while true {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { throw HarnessError(description: "no matching syslog line within \(timeout) s: \(seen)") }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, Int32(left * 1000) + 1) > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 65536)
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { continue }
            let line = String(decoding: buffer[..<count], as: UTF8.self)
            if matches(line) { return line }
            seen.append(line)
        }
    }

    deinit {
        close(fd)
        try? FileManager.default.removeItem(atPath: directory)
    }
}
