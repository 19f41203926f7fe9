import Foundation
import PermissionsTestSupport

/// dbus's own system bus configuration (`/usr/share/dbus-1/system.conf`, as the
/// machine has it), made into a private bus's: its policy exactly, on a socket of
/// the test's, with the test's policy and activation directories. A bus that
/// allows everything hides policy bugs (a daemon's call to an agent that no
/// policy file allows); this one has them as a real system bus has them.
enum StockSystemBusConfig {
    static let path = "/usr/share/dbus-1/system.conf"

    /// What makes the file the machine's one system bus rather than a private
    /// bus: its user, daemonizing, pid file, syslog, the machine's service and
    /// policy directories (and the setuid helper that activates from them).
    /// Each must be there to be removed: a system.conf that changed shape fails
    /// the test that uses it rather than running a bus nobody looked at.
    private static let machineOnly = [
        #"<user>[^<]*</user>"#,
        #"<fork\s*/>"#,
        #"<pidfile>[^<]*</pidfile>"#,
        #"<syslog\s*/>"#,
        #"<standard_system_servicedirs\s*/>"#,
        #"<servicehelper>[^<]*</servicehelper>"#,
        #"<include(\s[^>]*)?>[^<]*</include>"#,
        #"<includedir>[^<]*</includedir>"#,
    ]

    /// The configuration text: listening on `socket`, with `policyDirectory`'s
    /// `*.conf` files included after the stock policy (where the machine's
    /// system.d is) and `serviceDirectory` as the only activation directory.
    static func text(socket: String, policyDirectory: String, serviceDirectory: String?) throws -> String {
        var text = try String(contentsOfFile: path, encoding: .utf8)
        for pattern in machineOnly {
            guard text.range(of: pattern, options: .regularExpression) != nil else {
                throw HarnessError(description: "\(path) has no \(pattern) any more: look at it again")
            }
            text = text.replacingOccurrences(of: pattern, with: "", options: .regularExpression)
        }
        let listen = #"<listen>[^<]*</listen>"#
        guard text.range(of: listen, options: .regularExpression) != nil else {
            throw HarnessError(description: "\(path) has no <listen>")
        }
        text = text.replacingOccurrences(of: listen, with: "<listen>unix:path=\(socket)</listen>",
                                         options: .regularExpression)
        // What the tests rely on: it denies what no policy file allows.
        for rule in [#"<deny own="*"/>"#, #"<deny send_type="method_call"/>"#] where !text.contains(rule) {
            throw HarnessError(description: "\(path) no longer has \(rule)")
        }
        let added = (serviceDirectory.map { "  <servicedir>\($0)</servicedir>\n" } ?? "")
            + "  <includedir>\(policyDirectory)</includedir>\n"
        guard let end = text.range(of: "</busconfig>", options: .backwards) else {
            throw HarnessError(description: "\(path) has no </busconfig>")
        }
        text.replaceSubrange(end.lowerBound..<end.lowerBound, with: added)
        return text
    }
}
