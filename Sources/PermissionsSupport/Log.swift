internal import Glibc
internal import SystemPrimitives

/// Log lines, one per event, to wherever the daemon's messages can be read:
///
/// 1. the journal, when standard error is the stream systemd connected it to
///    (`JOURNAL_STREAM` names its device and inode): `<N>message`, journald reads the
///    priority from the prefix and adds the identifier itself;
/// 2. standard error, when it is open and not /dev/null (a pipe to runit's or a
///    container's log, a terminal, a file): `<N>permissionsd: message`;
/// 3. syslog (`/dev/log`), facility `LOG_DAEMON`: what is left when a process
///    supervisor without a journal (dbus-daemon's own activation, an init script)
///    started the daemon with its output on /dev/null or closed.
///
/// The daemon picks the sink once at start-up (`useBestSink`); until then, and in
/// every other program that logs through this (`--check-config`), lines go to
/// standard error. From then on, unless standard error is a regular file (which
/// has no reader to wait for), the daemon's lines are written by a `LogWriter`, on
/// a queue of its own: a reader that is behind costs dropped (and counted) lines,
/// never a caller's answer. `flush` waits for them before the process ends.
///
/// `@unchecked Sendable`: `verbose`, `quietBelow`, `sink` and `writer` are set once
/// at start-up before any other thread exists; each line is written with one
/// `write(2)` (or one `vsyslog`), by one thread at a time once `writer` is set.
package final class Log: @unchecked Sendable {
    package static let shared = Log()
    package var verbose = false
    /// Lines of a lower priority (a larger number) than this are not written:
    /// `--check-config` shows its problems, not the plugins' start-up chatter.
    package var quietBelow: Priority = .debug
    package private(set) var sink: Sink = .standardError

    package enum Priority: Int32 { case error = 3, warning = 4, notice = 5, info = 6, debug = 7 }

    package enum Sink: String, Sendable {
        case journal
        case standardError = "stderr"
        case syslog
    }

    /// Set by `useBestSink`: from then on lines are queued for it, not written here.
    private var writer: LogWriter?

    package func log(_ priority: Priority, _ message: String) {
        if priority == .debug, !verbose { return }
        if priority.rawValue > quietBelow.rawValue { return }
        let line = LogWriter.Line(priority: priority, message: message)
        if let writer { writer.enqueue(line) } else { Self.write(line, to: sink) }
    }

    /// Writes `line` to `sink` now, blocking while the reader is behind.
    private static func write(_ line: LogWriter.Line, to sink: Sink) {
        switch sink {
        case .syslog:
            line.message.withCString { text in
                withVaList([text]) { vsyslog(line.priority.rawValue, "%s", $0) }
            }
        case .journal:
            writeStandardError("<\(line.priority.rawValue)>\(line.message)\n")
        case .standardError:
            writeStandardError("<\(line.priority.rawValue)>permissionsd: \(line.message)\n")
        }
    }

    /// The whole of `text` to descriptor 2 (`writeAll`: across interrupted and
    /// partial writes, and waiting for room when the pipe is non-blocking and full,
    /// so that no line is left half written with the next glued to it). Given up
    /// only when the descriptor fails (EPIPE: the reader is gone).
    private static func writeStandardError(_ text: String) {
        _ = writeAll(2, Array(text.utf8))
    }

    /// Chooses the sink by the order above, from the environment and what descriptor 2
    /// is, and starts writing lines on the writer's queue. Call once, after
    /// `StandardDescriptors.ensureOpen`, before any other thread logs.
    package func useBestSink(environment journalStream: String? = Log.environment("JOURNAL_STREAM")) {
        let standardError = Self.status(of: 2)
        let sink = Self.bestSink(journalStream: journalStream, standardError: standardError)
        self.sink = sink
        if sink == .syslog { openlog(Self.syslogIdentifier, LOG_PID, LOG_DAEMON) }
        // A regular file has no reader to fall behind: its lines are written at
        // once, in order with everything else the daemon does (a test, or an admin
        // reading the file, sees a line before what followed it). A pipe, a socket
        // (the journal's stream) and syslog have a reader, and get the writer.
        if sink == .syslog || !Self.isRegularFile(standardError) {
            writer = LogWriter { Self.write($0, to: sink) }
        }
    }

    static func isRegularFile(_ status: stat?) -> Bool {
        guard let status else { return false }
        return status.st_mode & S_IFMT == S_IFREG
    }

    /// Waits until the lines logged so far are written, for at most
    /// `timeoutMilliseconds`: for the last lines before the process ends. A reader
    /// that is still behind then loses them; the process does not wait for it.
    @discardableResult
    package func flush(timeoutMilliseconds: Int = Log.exitFlushMilliseconds) -> Bool {
        writer?.flush(timeoutMilliseconds: timeoutMilliseconds) ?? true
    }

    /// How long a daemon that is ending waits for its last lines: long enough for
    /// any reader that is reading, short beside a stop's deadline.
    package static let exitFlushMilliseconds = 2_000

    /// openlog keeps the pointer it is given, so the identifier lives for good (a
    /// Swift string's C form lives for the call only). Never written.
    nonisolated(unsafe) private static let syslogIdentifier = strdup("permissionsd")

    /// The rule of `useBestSink`, without side effects.
    static func bestSink(journalStream: String?, standardError: stat?) -> Sink {
        guard let standardError else { return .syslog }
        if let journalStream, Self.isStream(standardError, named: journalStream) { return .journal }
        if Self.isNullDevice(standardError) { return .syslog }
        return .standardError
    }

    /// Whether `status` is the file `JOURNAL_STREAM` names: "DEVICE:INODE", both decimal.
    static func isStream(_ status: stat, named journalStream: String) -> Bool {
        let parts = journalStream.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        return UInt64(status.st_dev) == device && UInt64(status.st_ino) == inode
    }

    /// /dev/null, told by its device number, so that a bind mount or another name for
    /// it counts too.
    static func isNullDevice(_ status: stat) -> Bool {
        guard status.st_mode & S_IFMT == S_IFCHR, let null = Self.status(ofPath: "/dev/null") else { return false }
        return status.st_rdev == null.st_rdev
    }

    static func status(of fd: Int32) -> stat? {
        var st = stat()
        return fstat(fd, &st) == 0 ? st : nil
    }

    static func status(ofPath path: String) -> stat? {
        var st = stat()
        return stat(path, &st) == 0 ? st : nil
    }

    package static func environment(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }
}

/// Descriptors 0, 1 and 2, open whatever the parent left.
package enum StandardDescriptors {
    /// Opens /dev/null on each of descriptors 0-2 that is closed. Call first thing in
    /// `main`: a daemon started with one closed would otherwise get it from its next
    /// `open` (the store's database file, say), and every log line written to
    /// "standard error" would land in that file.
    package static func ensureOpen() {
        for fd: Int32 in 0...2 where fcntl(fd, F_GETFD) == -1 && errno == EBADF {
            let opened = open("/dev/null", O_RDWR)
            // open returns the lowest free descriptor, which is this one; anything else
            // (all of 0-2 taken meanwhile cannot happen: one thread) is closed again.
            if opened >= 0, opened != fd { close(opened) }
        }
    }
}

package func logError(_ m: String) { Log.shared.log(.error, m) }
package func logWarning(_ m: String) { Log.shared.log(.warning, m) }
package func logInfo(_ m: String) { Log.shared.log(.info, m) }
/// The text is built only when debug messages are on (`--verbose`): a signal's
/// debug line per subscriber would otherwise cost a string on every delivery.
package func logDebug(_ m: @autoclosure () -> String) {
    if Log.shared.verbose { Log.shared.log(.debug, m()) }
}
