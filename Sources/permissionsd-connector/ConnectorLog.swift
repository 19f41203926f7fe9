internal import Glibc
internal import SystemPrimitives

/// One line per event on standard error, which systemd connects to the journal:
/// `<N>message` there (journald takes the priority from the prefix and adds the
/// identifier), `<N>permissionsd-connector: message` anywhere else. Not the
/// daemon's `Log` (PermissionsSupport): this program logs a line per refusal,
/// from one thread, and should stay small enough to read whole.
struct ConnectorLog: Sendable {
    enum Priority: Int32 { case error = 3, warning = 4, info = 6, debug = 7 }

    let verbose: Bool
    /// Standard error is the journal's stream (JOURNAL_STREAM is set by systemd
    /// for a service whose output goes there).
    let toJournal = getenv("JOURNAL_STREAM").map { $0.pointee != 0 } ?? false

    func log(_ priority: Priority, _ message: String) {
        if priority == .debug, !verbose { return }
        let prefix = toJournal ? "<\(priority.rawValue)>" : "<\(priority.rawValue)>permissionsd-connector: "
        _ = writeAll(2, Array((prefix + message.escapedForLog + "\n").utf8))
    }
}
