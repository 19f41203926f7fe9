import Foundation
import Testing
import PermissionsTestSupport

/// Real programs whose executable has no links, calling the real daemon: busctl
/// run from a memfd (its /proc/PID/exe reads "/memfd:busctl (deleted)", a path
/// that names no file), and a copy of busctl unlinked while it runs. Each is
/// `unverified`, never an `executable` with that path.
@Suite struct UnlinkedExecutableTests {
    let bus: TestBus
    let daemon: DaemonUnderTest

    init() throws {
        bus = try TestBus()
        daemon = try DaemonUnderTest(bus: bus, config: "[location]\nenabled=true\n")
    }

    /// busctl's bytes copied into a memfd named "busctl" and executed from it
    /// (python3's os.memfd_create, then execve of /proc/self/fd/N).
    private func busctlFromMemfd(_ arguments: [String], asNobody: Bool = false) throws -> CommandResult {
        let script = """
            import os, sys
            fd = os.memfd_create("busctl", 0)
            with open("/usr/bin/busctl", "rb") as f:
                os.write(fd, f.read())
            os.execve("/proc/self/fd/%d" % fd, ["busctl"] + sys.argv[1:], os.environ)
            """
        return try run("/usr/bin/python3", ["-c", script, "--address=\(bus.address)"] + arguments, asNobody: asNobody)
    }

    private static let details = ["--json=short", "call", "org.example.Permissions", "/org/example/Permissions",
                                  "org.example.Permissions", "GetDetails", "s", "location"]

    @Test func aProgramRunFromAMemfdIsUnverified() throws {
        let details = try busctlFromMemfd(Self.details)
        #expect(details.status == 0, "\(details.stderr)")
        #expect(details.stdout.contains("\"app-id\":{\"type\":\"s\",\"data\":\"unverified:/memfd:busctl\"}"),
                "\(details.stdout)")
        #expect(details.stdout.contains("\"identity-kind\":{\"type\":\"s\",\"data\":\"unverified\"}"), "\(details.stdout)")
        #expect(daemon.isRunning)
    }

    /// Such a caller may not read its user's decisions (GetDetailsForApp and the
    /// other methods named in the interface's "Who may do what"), and the refusal
    /// says why it is unverified: its executable has no name, not a mount namespace
    /// of its own, which it does not have.
    @Test func theRefusalOfAnUnverifiedCallerGivesItsReason() throws {
        let refused = try busctlFromMemfd(["call", "org.example.Permissions", "/org/example/Permissions",
                                           "org.example.Permissions", "GetDetailsForApp", "ss", "org.example.Maps",
                                           "location"], asNobody: true)
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("GetDetailsForApp is not allowed: unverified:/memfd:busctl is unverified: "
                                        + "its executable has no name in any file system"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("mount namespace"), "\(refused.stderr)")
    }

    /// A grant stored for the path "/memfd:busctl" (an admin's, by name) is not lent
    /// to whatever runs from a memfd of that name: the id it gets is not that path.
    @Test func aMemfdBorrowsNoStoredDecisionOfItsName() throws {
        #expect(try daemon.ctl("grant", "/memfd:busctl", "location").status == 0)
        let status = try busctlFromMemfd(["call", "org.example.Permissions", "/org/example/Permissions",
                                          "org.example.Permissions", "GetStatus", "s", "location"])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout == "s \"not-determined\"\n")
    }

    /// A copy of busctl that unlinks itself before it calls (its exe then reads
    /// "<path> (deleted)"): unverified, under the path without the mark.
    @Test func aProgramWhoseExecutableWasDeletedIsUnverified() throws {
        let directory = try makeTemporaryDirectory("unlinked")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // The kernel's path: without the "//" a temporary directory's name may have.
        let resolved = try #require(realpath(directory, nil))
        defer { free(resolved) }
        let copy = String(cString: resolved) + "/busctl"
        try FileManager.default.copyItem(atPath: "/usr/bin/busctl", toPath: copy)
        // python3 opens the copy, unlinks it, and executes it through the descriptor
        // it kept: busctl then runs from a file with no links.
        let script = """
            import os, sys
            fd = os.open(sys.argv[1], os.O_RDONLY)
            os.unlink(sys.argv[1])
            os.execve("/proc/self/fd/%d" % fd, ["busctl"] + sys.argv[2:], os.environ)
            """
        let details = try run("/usr/bin/python3", ["-c", script, copy, "--address=\(bus.address)"] + Self.details)
        #expect(details.status == 0, "\(details.stderr)")
        #expect(details.stdout.contains("\"app-id\":{\"type\":\"s\",\"data\":\"unverified:\(copy)\"}"), "\(details.stdout)")
        #expect(details.stdout.contains("\"identity-kind\":{\"type\":\"s\",\"data\":\"unverified\"}"), "\(details.stdout)")
    }
}
