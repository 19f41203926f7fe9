internal import Glibc

/// Log lines on stderr, one per event, with a syslog priority prefix (`<3>`…`<7>`)
/// that journald understands when the daemon runs as a systemd service.
///
/// `@unchecked Sendable`: `verbose` and `quietBelow` are set once at start-up
/// before any other thread exists; each line is written with one `write(2)`,
/// which does not interleave.
package final class Log: @unchecked Sendable {
    package static let shared = Log()
    package var verbose = false
    /// Lines of a lower priority (a larger number) than this are not written:
    /// `--check-config` shows its problems, not the plugins' start-up chatter.
    package var quietBelow: Priority = .debug

    package enum Priority: Int32 { case error = 3, warning = 4, notice = 5, info = 6, debug = 7 }

    package func log(_ priority: Priority, _ message: String) {
        if priority == .debug, !verbose { return }
        if priority.rawValue > quietBelow.rawValue { return }
        let line = "<\(priority.rawValue)>permissionsd: \(message)\n"
        line.utf8CString.withUnsafeBufferPointer { buf in
            _ = write(2, buf.baseAddress, buf.count - 1)
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
