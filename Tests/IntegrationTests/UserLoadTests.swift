import DBusKit
import Foundation
import Testing
import PermissionsTestSupport
import SystemPrimitives

/// A user's decisions are read from the store when first needed and let go when
/// the user is not here (the interface's "Decisions are read from memory"): a
/// user not loaded is answered from their stored rows, never as "no decision"; a
/// load that fails is StorageFailed for that user alone; and a load held up does
/// not hold another user's answers. The test process is the daemon's own uid,
/// an admin on this private bus, so it names other users with the *ForUser
/// methods; those users have no connection, so nothing keeps them here.
@Suite(.serialized) struct UserLoadTests {
    static let absent: UInt32 = 4242
    static let other: UInt32 = 4343
    static let app = "org.example.Absent"
    static let config = "[location]\nenabled=true\n"

    private func status(_ client: BusClient, _ uid: UInt32) -> Result<[DBusValue], BusError> {
        client.call("GetStatusForUser", [.uint32(uid), .string(Self.app), .string("location")])
    }

    private func deny(_ client: BusClient, _ uid: UInt32) throws {
        _ = try client.call("SetDecisionForUser", [.uint32(uid), .string(Self.app), .string("location"),
                                                   .string("denied")]).get()
    }

    @discardableResult
    private func sqlite3(_ daemon: DaemonUnderTest, _ sql: String) throws -> String {
        let r = try run("/usr/bin/sqlite3", [daemon.stateDirectory + "/decisions.sqlite", sql])
        guard r.status == 0 else { throw HarnessError(description: "sqlite3: \(r.stderr)") }
        return r.stdout
    }

    /// Restarts the daemon with the rows `condition` picks made unreadable: a decision
    /// word this version does not know, as a newer version's file would have.
    private func makeUnreadable(_ daemon: DaemonUnderTest, where condition: String) throws {
        daemon.stop()
        try sqlite3(daemon, "PRAGMA ignore_check_constraints=ON; UPDATE user_decisions SET decision = 'ask' "
                    + "WHERE \(condition)")
        try daemon.start()
    }

    static let hasSQLite3 = FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlite3")

    /// A stored deny of a user let go reads "denied": the call waits for the load.
    /// And after a restart, whose start-up loads nobody, the same.
    @Test(.hangGuard) func aStoredDenyOfAUserNotLoadedReadsDenied() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config, start: false)
        daemon.extraArguments = ["--decisions-idle", "0"]
        try daemon.start()
        let client = try BusClient(bus: bus)
        defer { client.close() }
        try deny(client, Self.absent)
        _ = try daemon.waitForLog("let go of the decisions of uid \(Self.absent)")
        #expect(status(client, Self.absent) == .success([.string("denied")]))
        _ = try daemon.waitForLog("loaded the decisions of uid \(Self.absent)", count: 2)

        daemon.stop()
        try daemon.start()  // a new log
        #expect(try client.call("GetStatus", [.string("location")]).get() == [.string("not-determined")])
        _ = try daemon.waitForLog("loaded the decisions of uid \(getuid())")
        #expect(daemon.logLines(containing: "loaded the decisions of uid \(Self.absent)").isEmpty,
                "start-up loads no user")
        #expect(status(client, Self.absent) == .success([.string("denied")]))
        _ = try daemon.waitForLog("loaded the decisions of uid \(Self.absent)")
    }

    /// A real fault in one user's rows: a decision word this version does not know
    /// (a newer version's file, a hand edit), which the store refuses rather than
    /// guess (it might mean "deny"). That user's calls answer StorageFailed, each
    /// time (a load is tried again for each, logged once while the reason stays);
    /// another user's and the caller's own are answered as before, and the file is
    /// left as it was.
    @Test(.hangGuard, .enabled(if: hasSQLite3))
    func aFailedLoadIsStorageFailedForThatUserAlone() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config)
        let client = try BusClient(bus: bus)
        defer { client.close() }
        try deny(client, Self.absent)
        try deny(client, Self.other)
        try makeUnreadable(daemon, where: "uid = \(Self.absent)")

        for _ in 0..<2 {
            let failed = status(client, Self.absent)
            guard case .failure(let error) = failed else {
                Issue.record("uid \(Self.absent)'s unreadable row answered \(failed)")
                return
            }
            #expect(error.name == "org.example.Permissions.Error.StorageFailed", "\(error)")
            #expect(error.message.contains("unknown decision \"ask\""), "\(error)")
        }
        #expect(status(client, Self.other) == .success([.string("denied")]))
        #expect(try client.call("GetStatus", [.string("location")]).get() == [.string("not-determined")])
        #expect(daemon.isRunning)
        daemon.stop()
        #expect(try sqlite3(daemon, "SELECT decision FROM user_decisions WHERE uid = \(Self.absent)") == "ask\n")
        // Two loads failed the same way: one log line, not one a call.
        #expect(daemon.logLines(containing: "cannot load the decisions of uid \(Self.absent)").count == 1,
                "\(daemon.logLines(containing: "cannot load"))")
    }

    /// The way out of a user's unreadable rows without stopping the daemon: a reset
    /// of the app the fault is in (the StorageFailed message names it) removes its
    /// rows from the file, though they cannot be read, and counts them; the user's
    /// next call loads what is left. A reset that removes nothing leaves the user
    /// unreadable; nothing else of theirs is touched.
    @Test(.hangGuard, .enabled(if: hasSQLite3))
    func aResetRemovesRowsThatCannotBeRead() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config)
        let client = try BusClient(bus: bus)
        defer { client.close() }
        try deny(client, Self.absent)
        _ = try client.call("SetDecisionForUser", [.uint32(Self.absent), .string("org.example.Kept"),
                                                   .string("location"), .string("denied")]).get()
        try makeUnreadable(daemon, where: "uid = \(Self.absent) AND app_id = '\(Self.app)'")
        func reset(_ app: String) -> Result<[DBusValue], BusError> {
            client.call("ResetDecisionsForUser", [.uint32(Self.absent), .string(app), .strings([])])
        }
        func expectUnreadable(_ what: String) {
            let answer = status(client, Self.absent)
            guard case .failure(let error) = answer else {
                Issue.record("\(what): uid \(Self.absent) answered \(answer)")
                return
            }
            #expect(error.name == "org.example.Permissions.Error.StorageFailed", "\(what): \(error)")
            #expect(error.message.contains("unknown decision \"ask\" for \"\(Self.app)\""), "\(what): \(error)")
        }

        expectUnreadable("before any reset")
        // Another uid, no admin, may not reach them: refused before any load, and nothing goes.
        let stranger = try daemon.busctl(["call", "org.example.Permissions", "/org/example/Permissions",
                                          "org.example.Permissions", "ResetDecisionsForUser", "usas",
                                          "\(Self.absent)", Self.app, "0"], asNobody: true)
        #expect(stranger.status != 0)
        #expect(stranger.stderr.contains(" is not allowed: uid 65534 is not the service's user"), "\(stranger.stderr)")
        expectUnreadable("after another uid's reset")
        #expect(reset("org.example.Other") == .success([.uint32(0)]))
        expectUnreadable("after a reset of an app without rows")
        // As admin.md says to: permissionsctl, naming the app the error names.
        let ctl = try run(binDir + "/permissionsctl", ["--address", bus.address, "reset", "--user", "\(Self.absent)",
                                                       Self.app])
        #expect(ctl.status == 0, "\(ctl.stderr)")
        #expect(ctl.stdout == "removed 1 decision(s)\n")
        #expect(status(client, Self.absent) == .success([.string("not-determined")]))
        #expect(client.call("GetStatusForUser", [.uint32(Self.absent), .string("org.example.Kept"), .string("location")])
                    == .success([.string("denied")]))
        _ = try daemon.waitForLog("resetting those of \(Self.app) in the file alone")
        daemon.stop()
        #expect(try sqlite3(daemon, "SELECT app_id, decision FROM user_decisions WHERE uid = \(Self.absent)")
                    == "org.example.Kept|denied\n")
    }

    /// The same for one's own unreadable rows: the caller's own load, which every
    /// call waits for, fails, and a reset goes on all the same (found by a
    /// reviewer: the caller's load answered StorageFailed before the reset ran).
    @Test(.hangGuard, .enabled(if: hasSQLite3))
    func aUserResetsTheirOwnUnreadableRows() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config)
        let client = try BusClient(bus: bus)
        defer { client.close() }
        for app in ["org.example.Bad", "org.example.Worse"] {
            _ = try client.call("SetDecision", [.string(app), .string("location"), .string("denied")]).get()
        }
        try makeUnreadable(daemon, where: "uid = \(getuid())")
        #expect(client.call("ResetDecisions", [.string("org.example.Bad"), .strings([])]) == .success([.uint32(1)]))
        #expect(client.call("ResetDecisionsForUser", [.uint32(getuid()), .string("org.example.Worse"), .strings([])])
                    == .success([.uint32(1)]))
        // Nothing unreadable is left: the caller's calls are answered again.
        #expect(try client.call("GetStatus", [.string("location")]).get() == [.string("not-determined")])
    }

    /// A decision whose end passed while its user was not loaded (the expiry timer
    /// sees only rows in memory, so such a row stays in the file until the user's
    /// next load) is listed nowhere: not by ListAllDecisions, which reads the file,
    /// not by ListDecisionsForUser in the same turn as the load that found it, nor
    /// by the caller's own first ListDecisions (which loads the caller). It never
    /// applied (GetStatusForUser); a row whose end is still to come is listed.
    @Test(.hangGuard, .enabled(if: hasSQLite3))
    func aDecisionWhoseEndHasPassedIsListedNowhere() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config)
        let client = try BusClient(bus: bus)
        defer { client.close() }
        try deny(client, Self.absent)
        daemon.stop()
        let now = Int64(Date().timeIntervalSince1970 * 1_000_000)
        func row(_ uid: UInt32, _ app: String, _ end: Int64) -> String {
            "(\(uid), '\(app)', 'location', 'authorized', \(now - 60_000_000), 'test', \(end))"
        }
        try sqlite3(daemon, "INSERT INTO user_decisions (uid, app_id, permission, decision, set_at, set_by, expires_at) "
                    + "VALUES " + [row(Self.absent, "org.example.Ended", now - 30_000_000),
                                   row(Self.absent, "org.example.Later", now + 3_600_000_000),
                                   row(getuid(), "org.example.Ended", now - 30_000_000)].joined(separator: ", "))
        try daemon.start()

        func apps(_ reply: Result<[DBusValue], BusError>, owner: Bool = false) throws -> [String] {
            let rows = try reply.get().first?.arrayElements ?? []
            return rows.map { row in
                guard case .structure(let fields) = row else { return "?" }
                return fields[owner ? 1 : 0].stringValue ?? "?"
            }
        }
        #expect(try apps(client.call("ListDecisions", [.string("")])) == [], "the caller's own ended row")
        #expect(try apps(client.call("ListAllDecisions", [.string("")]), owner: true)
                == ["org.example.Absent", "org.example.Later"])
        #expect(try apps(client.call("ListAllDecisions", [.string("org.example.Ended")]), owner: true) == [])
        #expect(try apps(client.call("ListDecisionsForUser", [.uint32(Self.absent), .string("")]))
                == ["org.example.Absent", "org.example.Later"])
        #expect(try client.call("GetStatusForUser", [.uint32(Self.absent), .string("org.example.Ended"),
                                                     .string("location")]).get() == [.string("not-determined")])
    }

    /// A load held (a slow disk, here the daemon's load gate, debug builds) holds
    /// that user's call alone: while it waits, the caller's own reads and a write of
    /// its own (a commit on the same writer queue the loads use) are answered; the
    /// held call is answered after them, with the stored deny. Ordering from events
    /// (the gate's connection, the replies), not from time.
    @Test(.hangGuard) func aHeldLoadDoesNotDelayAnotherUser() throws {
        let (daemon, gate) = try TestGateSocket.daemon(config: Self.config, variable: "PERMISSIONS_DEBUG_LOAD_GATE") {
            $0.extraArguments = ["--decisions-idle", "0"]
        }
        defer { gate.openForGoodIgnoringErrors() }
        let requester = try Requester(bus: daemon.bus)
        defer { requester.disconnect() }
        // Seeding: the caller's own load, then the named user's, each let through.
        let seeded = try requester.send("SetDecisionForUser", [.uint32(Self.absent), .string(Self.app),
                                                               .string("location"), .string("denied")])
        try gate.waitForArrival("the caller's own load")
        try gate.release()
        try gate.waitForArrival("uid \(Self.absent)'s load for the write")
        try gate.release()
        #expect(try requester.wait(seeded) == .success([]))
        _ = try daemon.waitForLog("let go of the decisions of uid \(Self.absent)")

        let held = try requester.send("GetStatusForUser", [.uint32(Self.absent), .string(Self.app), .string("location")])
        try gate.waitForArrival("uid \(Self.absent)'s load, held")
        #expect(try requester.call("GetStatus", [.string("location")]) == [.string("not-determined")])
        #expect(try requester.call("SetDecision", [.string("org.example.Mine"), .string("location"),
                                                   .string("authorized")]) == [])
        #expect(try requester.call("GetStatusForApp", [.string("org.example.Mine"), .string("location")])
                == [.string("authorized")])
        #expect(!requester.isAnswered(held), "the held load's call was answered before its load")
        try gate.release()
        #expect(try requester.wait(held) == .success([.string("denied")]))
    }
}

private extension TestGateSocket {
    func openForGoodIgnoringErrors() { try? openForGood() }
}

private extension Requester {
    func disconnect() { queue.sync { connection.close() } }
}
