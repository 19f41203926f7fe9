import Foundation
import Testing
import PermissionsTestSupport

// Enforcement under faults: a user's PipeWire that hangs, a deny or an expiry that
// a full disk cannot store. Found by a hostile pass; each failed before its fix.
// Part of EnforcementTests' suite (its setup: users 1 and 2, each with a PipeWire).
extension EnforcementTests {
    /// A user whose own PipeWire does not answer (SIGSTOP: any user may stop their
    /// own, or it may hang) and who asks for two connections at once gets
    /// Unavailable for each, within its own deadline; the plugin stays loaded, and
    /// another user opens a connection meanwhile and loses it to a deny. (Before:
    /// the second open waited behind the first on the plugin's serial queue, the
    /// watchdog counted the wait and gave the plugin up for everyone, and the other
    /// user's connection kept its camera after the deny.)
    @Test func oneUsersHungPipeWireSlowsOnlyThatUsersOpens() throws {
        let one = try startUsers()
        try decide("grant")
        try decide("grant", user: Self.user2)
        let pid = try #require(one.pid)
        #expect(Glibc.kill(pid, SIGSTOP) == 0)
        defer { _ = Glibc.kill(pid, SIGCONT) }
        let first = try openApp()
        let second = try openApp()
        let other = try PipeWireApp(address: bus.address, asUser: Self.user2)
        #expect(try other.firstAnswer() == "synced")
        #expect(other.registry.nodeID("cam-two") != nil)
        for answer in [try first.firstAnswer(), try second.firstAnswer()] {
            #expect(answer.hasPrefix("error org.example.Permissions.Error.Unavailable "), "\(answer)")
        }
        #expect(Glibc.kill(pid, SIGCONT) == 0)

        let plugins = try daemon.ctl("plugins")
        #expect(!plugins.stdout.contains("unavailable"), "\(plugins.stdout)")
        try decide("deny", user: Self.user2)
        try other.waitUntil("user 2's camera gone after a deny", timeout: 1) { $0.nodeID("cam-two") == nil }
    }

    /// A deny that cannot be stored holds on the (user, app, permission), not on the
    /// connections open then: a new connection of the same app is refused. (Before:
    /// it was opened with the camera, the status still reading "authorized".)
    @Test(.enabled(if: StoreFaultTests.canMountTmpfs, "needs mount(2) for a small tmpfs (root)"))
    func aDenyThatCannotBeStoredRefusesNewConnectionsToo() throws {
        try withGrantOnASmallDisk { state in
            let filler = try StoreFaultTests.fill(state)
            defer { unlink(filler) }
            let app = try openApp()
            #expect(try app.firstAnswer() == "synced")
            let refused = try daemon.ctl("deny", "--user", String(Self.user1), appID, "camera")
            #expect(refused.status != 0 && refused.stderr.contains("StorageFailed"), "\(refused.stderr)")
            try app.waitUntil("the camera gone though the deny was not stored", timeout: 1) { $0.nodeID("cam-one") == nil }

            let answer = try openApp().firstAnswer()
            #expect(answer.hasPrefix("error org.example.Permissions.Error.NotAuthorized ") && answer.contains("not be stored"),
                    "\(answer)")
        }
    }

    /// A timed grant that ends while the disk is full: its removal fails ("retrying
    /// in a minute") and signals nothing, but the connection loses the camera at
    /// the grant's end, as the status does. (Before: connections followed the
    /// signals only, and kept the camera.)
    @Test(.enabled(if: StoreFaultTests.canMountTmpfs && FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlite3"),
                   "needs mount(2) (root) and sqlite3"))
    func aTimedGrantEndingOnAFullDiskEndsTheConnectionsReachToo() throws {
        // A grant that ends in 6 s (as an agent's timed answer would store it).
        let ends = (Int64(Date().timeIntervalSince1970) + 6) * 1_000_000
        try withGrantOnASmallDisk(prepare: { state in
            let edit = try run("/usr/bin/sqlite3", [state + "/decisions.sqlite",
                                                    "UPDATE user_decisions SET expires_at=\(ends)"])
            #expect(edit.status == 0, "\(edit.stderr)")
        }) { state in
            let app = try openApp()
            #expect(try app.firstAnswer() == "synced")
            #expect(app.registry.nodeID("cam-one") != nil)
            let filler = try StoreFaultTests.fill(state)
            defer { unlink(filler) }
            _ = try daemon.waitForLog("cannot remove an expired decision", timeout: 15)
            #expect(try daemon.ctl("get", "--user", String(Self.user1), appID, "camera").stdout == "not-determined\n")
            try app.waitUntil("the camera gone once the timed grant ended", timeout: 2) { $0.nodeID("cam-one") == nil }
        }
    }
}
