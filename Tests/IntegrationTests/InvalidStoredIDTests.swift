import Foundation
import Testing
import PermissionsTestSupport

/// Rows no method could name, from a store of an older version that took app ids
/// this one refuses (`../etc/x`, a line break in an id, a permission "Camera!", a
/// NUL in who set it): migrated as unassigned, listed under names (`invalid:…`,
/// escaped), and removed by the admin methods through those names; nothing but a
/// hand edit of the file could remove them before.
@Suite struct InvalidStoredIDTests {
    let bus: TestBus
    let daemon: DaemonUnderTest

    init() throws {
        bus = try TestBus()
        daemon = try DaemonUnderTest(bus: bus, start: false)
        let state = daemon.stateDirectory
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try sqlite3(".read '\(packageRoot)/Tests/fixtures/store/before-users.sql'")
        try sqlite3("""
            INSERT INTO decisions VALUES ('../etc/x', 'location', 'denied', 4, 'uid 0 (old)', NULL);
            INSERT INTO decisions VALUES ('org.evil' || char(10) || 'x', 'camera', 'denied', 5, 'uid 0' || char(0), NULL);
            INSERT INTO decisions VALUES ('org.example.Old', 'Camera!', 'denied', 6, 'uid 0 (old)', NULL);
            INSERT INTO decisions VALUES ('org.example.Old', 'location', 'denied', 7, 'uid 0 (old)', NULL);
            """)
        try daemon.start()
    }

    @discardableResult
    private func sqlite3(_ sql: String) throws -> String {
        let r = try run("/usr/bin/sqlite3", [daemon.stateDirectory + "/decisions.sqlite", sql])
        guard r.status == 0 else { throw HarnessError(description: "sqlite3: \(r.stderr)") }
        return r.stdout
    }

    private func allRows() throws -> [String] {
        let r = try daemon.ctl("list", "--all")
        #expect(r.status == 0, "\(r.stderr)")
        return r.stdout.split(separator: "\n").dropFirst().map { $0.split(separator: " ", omittingEmptySubsequences: true)
            .prefix(4).joined(separator: " ") }
    }

    @Test func everyMigratedRowIsListedByAName() throws {
        // In the store's order: by the ids themselves.
        #expect(try allRows() == [
            "unassigned invalid:../etc/x location denied",
            "unassigned /usr/bin/busctl location denied",
            "unassigned /usr/bin/gdbus camera authorized",
            "unassigned /usr/bin/gdbus location authorized",
            "unassigned invalid:org.evil\\x0ax camera denied",
            "unassigned org.example.Old invalid:Camera! denied",
            "unassigned org.example.Old location denied",
        ])
        let listed = try daemon.call("ListAllDecisions", "s", "").stdout
        #expect(listed.contains("-1 \"invalid:../etc/x\" \"location\" \"denied\" 4 \"uid 0 (old)\""), "\(listed)")
        // A NUL in who set it is escaped: the reply is still a valid message.
        #expect(listed.contains("-1 \"invalid:org.evil\\\\x0ax\" \"camera\" \"denied\" 5 \"uid 0\\\\x00\""), "\(listed)")
        #expect(listed.contains("-1 \"org.example.Old\" \"invalid:Camera!\" \"denied\" 6 "), "\(listed)")
        // The name is also a list's filter.
        #expect(try daemon.call("ListAllDecisions", "s", "invalid:../etc/x").stdout.hasPrefix("a(xsssxs) 1 -1 "))
    }

    @Test func theAdminMethodsRemoveThemByTheirNames() throws {
        // The raw id is still refused, with the name to use instead.
        let raw = try daemon.ctl("reset", "--unassigned", "../etc/x")
        #expect(raw.status != 0)
        #expect(raw.stderr.contains("org.example.Permissions.Error.InvalidArgument"), "\(raw.stderr)")
        #expect(raw.stderr.contains("invalid app id \"../etc/x\"; a stored app id that is not valid is named as the "
                                    + "lists show it, here \"invalid:../etc/x\""), "\(raw.stderr)")
        // No app has such an id: its rows cannot be given to a user, only removed.
        let assign = try daemon.ctl("assign", "invalid:../etc/x", "root")
        #expect(assign.status != 0)
        #expect(assign.stderr.contains("org.example.Permissions.Error.InvalidArgument"), "\(assign.stderr)")
        #expect(assign.stderr.contains("names a stored app id that is not valid"), "\(assign.stderr)")

        #expect(try daemon.ctl("reset", "--unassigned", "invalid:../etc/x").stdout == "removed 1 decision(s)\n")
        #expect(try daemon.call("ResetUnassignedDecisions", "sas", "invalid:org.evil\\x0ax", "0").stdout == "u 1\n")
        // A permission no method accepts, by its name, alone: the app's other row stays.
        #expect(try daemon.ctl("reset", "--unassigned", "org.example.Old", "invalid:Camera!").stdout
                == "removed 1 decision(s)\n")
        #expect(try allRows() == ["unassigned /usr/bin/busctl location denied",
                                  "unassigned /usr/bin/gdbus camera authorized",
                                  "unassigned /usr/bin/gdbus location authorized",
                                  "unassigned org.example.Old location denied"])
        #expect(daemon.isRunning)

        // Gone from the file too.
        daemon.stop()
        #expect(try sqlite3("SELECT app_id, permission FROM user_decisions WHERE uid = -1 ORDER BY app_id, permission")
                == "/usr/bin/busctl|location\n/usr/bin/gdbus|camera\n/usr/bin/gdbus|location\norg.example.Old|location\n")
    }
}
