import Foundation
import Testing
import PermissionsTestSupport

/// A bad command-line value is a usage error (exit 2) that quotes it, escaped: an
/// empty value, one with a leading space, and one with a control character each
/// read as what they are, never as a message that hides them ("invalid
/// --decisions-idle : seconds") or a line of output that the value breaks.
@Suite struct UsageErrorTests {
    static let daemon = binDir + "/permissionsd"
    static let connector = binDir + "/permissionsd-connector"
    static let ctl = binDir + "/permissionsctl"

    private func refused(_ program: String, _ arguments: [String], quoting shown: String) throws {
        let r = try run(program, arguments)
        #expect(r.status == 2, "\(arguments): \(r.stderr)")
        #expect(r.stderr.contains(shown), "\(arguments): \(r.stderr)")
        #expect(r.stderr.split(separator: "\n").count == 2, "one line and the hint: \(r.stderr)")
    }

    @Test func theDaemonsValuesAreQuoted() throws {
        for value in ["", " 5", "-1", "86401", "1\n2", "99999999999999999999"] {
            let shown = "\"" + value.replacingOccurrences(of: "\n", with: "\\x0a") + "\""
            try refused(Self.daemon, ["--decisions-idle", value], quoting: "invalid --decisions-idle \(shown)")
        }
        try refused(Self.daemon, ["--host-pid", " 1"], quoting: "invalid --host-pid \" 1\"")
        try refused(Self.daemon, ["--user-runtime-root", "run\nuser"], quoting: "\"run\\x0auser\"")
        try refused(Self.daemon, ["--connector-socket", ""], quoting: "--connector-socket must be an absolute path: \"\"")
        try refused(Self.daemon, ["stray\u{1b}[2J"], quoting: "unexpected argument \"stray\\x1b[2J\"")
        try refused(Self.daemon, ["--no-such\nthing"], quoting: "unknown option \"--no-such\\x0athing\"")
    }

    @Test func theConnectorsAndPermissionsctlsToo() throws {
        try refused(Self.connector, ["--listen", "x\ny"], quoting: "--listen must be an absolute path: \"x\\x0ay\"")
        try refused(Self.connector, ["--user-runtime-root", ""], quoting: "must be an absolute path: \"\"")
        try refused(Self.ctl, ["--bogus\t"], quoting: "unknown option \"--bogus\\x09\"")
    }
}
