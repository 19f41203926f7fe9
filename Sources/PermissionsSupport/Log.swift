internal import Glibc

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
/// standard error.
///
/// `@unchecked Sendable`: `verbose`, `quietBelow` and `sink` are set once at
/// start-up before any other thread exists; each line is written with one
/// `write(2)` (or one `vsyslog`), which does not interleave.
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

    package func log(_ priority: Priority, _ message: String) {
        if priority == .debug, !verbose { return }
        if priority.rawValue > quietBelow.rawValue { return }
        switch sink {
        case .syslog:
            message.withCString { text in
                withVaList([text]) { vsyslog(priority.rawValue, "%s", $0) }
            }
        case .journal:
            write("<\(priority.rawValue)>\(message)\n")
        case .standardError:
            write("<\(priority.rawValue)>permissionsd: \(message)\n")
        }
    }

    private func write(_ line: String) {
        line.utf8CString.withUnsafeBufferPointer { buf in
            _ = Glibc.write(2, buf.baseAddress, buf.count - 1)
        }
    }

    /// Chooses the sink by the order above, from the environment and what descriptor 2
    /// is. Call once, after `StandardDescriptors.ensureOpen`.
    package func useBestSink(environment journalStream: String? = Log.environment("JOURNAL_STREAM")) {
        sink = Self.bestSink(journalStream: journalStream, standardError: Self.status(of: 2))
        if sink == .syslog { openlog(Self.syslogIdentifier, LOG_PID, LOG_DAEMON) }
    }

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
