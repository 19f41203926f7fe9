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

/// A log reader that is behind: a pipe that nobody reads, full before the daemon
/// starts, as its standard error (a stuck journald, a supervisor that stopped
/// reading).
extension LoggingTests {
    /// The daemon owns its name and answers every caller while no line of its log
    /// can be written; lines past what it keeps for the reader are dropped, and the
    /// count is written once the reader reads again.
    /// Also with the pipe non-blocking (a supervisor or forwarder sharing it may set
    /// O_NONBLOCK, which is the pipe's flag): lines wait for room all the same,
    /// none is cut, and what was dropped is counted.
    @Test(.hangGuard, arguments: [false, true])
    func aLogReaderThatIsBehindHoldsNoCaller(nonBlocking: Bool) throws {
        let pipe = try FullPipe(nonBlocking: nonBlocking)
        let daemon = try DaemonUnderTest(bus: bus, start: false)
        daemon.standardError = pipe.writeHandle
        // Waits for the name: with its lines written where it logs, the daemon never
        // got past its first.
        try daemon.start()
        // Each agent registered and unregistered is two lines with its path: 2 000
        // of them, with a path of 200 bytes, are about 900 KiB, far more than the
        // pipe (64 KiB) and the daemon's 256 KiB hold.
        let script = """
            import dbus
            bus = dbus.SystemBus()
            service = dbus.Interface(bus.get_object("org.example.Permissions", "/org/example/Permissions"),
                                     "org.example.Permissions")
            for i in range(2000):
                path = dbus.ObjectPath("/agent/%d/%s" % (i, "x" * 200))
                service.RegisterAgent(path)
                service.UnregisterAgent(path)
            print("done")
            """
        let registrations = try run("/usr/bin/python3", ["-c", script], environment: bus.environment)
        #expect(registrations.status == 0 && registrations.stdout == "done\n", "\(registrations.stderr)")
        #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"not-determined\"\n")

        let reader = LineCollector(pipe.readHandle)
        let notice = try reader.next(timeout: 30) { $0.contains(" log lines were dropped: the log's reader was behind") }
        #expect(notice.hasPrefix("<4>permissionsd: "), "\(notice)")
        let dropped = Int(notice.dropFirst("<4>permissionsd: ".count).prefix { $0.isNumber }) ?? 0
        #expect(dropped > 0, "\(notice)")
        // What was kept came through whole and in order: the first registration's
        // line before the notice.
        let lines = reader.all
        let first = try #require(lines.firstIndex { $0.contains(" /agent/0/x") && $0.hasSuffix(" of uid 0 registered") },
                                 "\(lines.prefix(20))")
        #expect(first < lines.firstIndex(of: notice)!)
        // Whole lines: each but the first (after the pipe's filler) starts with its
        // priority, none has another glued to it.
        let cut = lines.dropFirst().filter { !$0.hasPrefix("<") || $0.dropFirst().contains("<6>permissionsd: ") }
        #expect(cut.isEmpty, "\(cut.prefix(3))")
        // Lines logged after the reader came back are written again.
        #expect(try daemon.call("RegisterAgent", "o", "/agent/after").status == 0)
        _ = try reader.next(timeout: 15) { $0.hasSuffix(" /agent/after of uid 0 registered") }
    }
}

/// A pipe whose write end is full, so that the next write(2) to it blocks (or,
/// `nonBlocking`, fails with EAGAIN: the pipe is left O_NONBLOCK, for everyone who
/// shares it).
final class FullPipe {
    let readHandle: FileHandle
    let writeHandle: FileHandle

    init(nonBlocking: Bool = false) throws {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw HarnessError(description: "pipe: \(errno)") }
        let flags = fcntl(ends[1], F_GETFL)
        _ = fcntl(ends[1], F_SETFL, flags | O_NONBLOCK)
        let chunk = [UInt8](repeating: 0x2e, count: 4096)
        while write(ends[1], chunk, chunk.count) > 0 {}
        if !nonBlocking { _ = fcntl(ends[1], F_SETFL, flags) }
        readHandle = FileHandle(fileDescriptor: ends[0], closeOnDealloc: true)
        writeHandle = FileHandle(fileDescriptor: ends[1], closeOnDealloc: true)
    }
}
