import Foundation
import Testing
import PermissionsTestSupport

/// Identity borrowed through a mount namespace (issue 13, item 5), with real
/// processes: a caller in an unprivileged user namespace bind-mounts its own
/// program (busctl) over /usr/bin/gdbus, for which a grant is stored, and calls.
@Suite struct IdentityBorrowingTests {
    let bus: TestBus
    let daemon: DaemonUnderTest

    init() throws {
        bus = try TestBus()
        daemon = try DaemonUnderTest(bus: bus, config: "[location]\nenabled=true\n")
    }

    /// busctl, run as /usr/bin/gdbus inside a user and mount namespace of its own.
    private func busctlPosingAsGdbus(_ arguments: [String]) throws -> CommandResult {
        let quoted = (["--address=\(bus.address)"] + arguments).map { "'" + $0 + "'" }.joined(separator: " ")
        return try run("/usr/bin/unshare", ["--user", "--map-root-user", "--mount", "/bin/sh", "-c",
                                            "mount --bind /usr/bin/busctl /usr/bin/gdbus && exec /usr/bin/gdbus \(quoted)"])
    }

    @Test func boundOverExecutableBorrowsNothing() throws {
        #expect(try daemon.ctl("grant", "/usr/bin/gdbus", "location").status == 0)
        // The real /usr/bin/gdbus has the grant.
        let real = try daemon.gdbusCall("GetStatus", "location")
        #expect(real.stdout == "('authorized',)\n", "\(real.stderr)")

        let status = try busctlPosingAsGdbus(["call", "org.example.Permissions", "/org/example/Permissions",
                                              "org.example.Permissions", "GetStatus", "s", "location"])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout == "s \"not-determined\"\n")
        let details = try busctlPosingAsGdbus(["--json=short", "call", "org.example.Permissions",
                                               "/org/example/Permissions", "org.example.Permissions",
                                               "GetDetails", "s", "location"])
        #expect(details.status == 0, "\(details.stderr)")
        #expect(details.stdout.contains("\"app-id\":{\"type\":\"s\",\"data\":\"unverified:/usr/bin/gdbus\"}"), "\(details.stdout)")
        #expect(details.stdout.contains("\"identity-kind\":{\"type\":\"s\",\"data\":\"unverified\"}"), "\(details.stdout)")
    }
}
