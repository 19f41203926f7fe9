import Foundation
import Testing
import PermissionsTestSupport

// Many users, one daemon (issue 13): permissionsd with --system on a stand-in
// system bus, and real clients (busctl, gdbus, permissionsctl) running as two
// real non-root users, uids 1 and 2 (daemon and bin in the image), through
// setpriv. polkit (dbusmock) allows each user to manage their own decisions and
// answer prompts, not to manage other users'.

@Suite("Many users, one daemon", .serialized)
struct MultiUserTests {
    private let bus: PolkitTestSystemBus
    private let polkit: PolkitTestMock
    private let daemon: PolkitTestDaemon

    private static let user1: UInt32 = 1
    private static let user2: UInt32 = 2

    init() throws {
        bus = try TestBus(type: "system")
        polkit = try PolkitTestMock(bus: bus)
        try polkit.setAllowed(["org.example.permissions.manage-own", "org.example.permissions.agent"])
        daemon = try PolkitTestDaemon(bus: bus, config: "[location]\nno-agent=denied\n")
    }

    private func status(_ permission: String, as uid: UInt32, via program: String = "busctl") throws -> String {
        let r = program == "busctl" ? try daemon.call("GetStatus", "s", permission, asUser: uid)
                                    : try daemon.gdbusCall("GetStatus", permission, asUser: uid)
        #expect(r.status == 0, "GetStatus as uid \(uid): \(r.stderr)")
        return r.stdout
    }

    private func monitor(as uid: UInt32, _ options: String...) throws -> RunningProgram {
        let monitor = try RunningProgram(binDir + "/permissionsctl", ["--address", bus.address, "monitor"] + options, asUser: uid)
        _ = try monitor.lines.next { $0.hasPrefix("Monitoring") }
        return monitor
    }

    @Test func oneUsersGrantIsSeenByTheirAppOnly() throws {
        #expect(try daemon.ctl("grant", "/usr/bin/busctl", "location", asUser: Self.user1).status == 0)
        #expect(try status("location", as: Self.user1) == "s \"authorized\"\n")
        #expect(try status("location", as: Self.user2) == "s \"not-determined\"\n")
        // Root's own view (its own decisions) has no grant either.
        #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"not-determined\"\n")
        let details = try daemon.ctl("status", "location", asUser: Self.user2)
        #expect(details.stdout.contains("decision: none"), "\(details.stdout)")
        #expect(details.stdout.contains("uid: 2"), "\(details.stdout)")
    }

    /// User 1's change reaches user 1's subscriber once, and neither user 2's
    /// subscriber nor a plain broadcast listener. A later change of user 2's own is
    /// the fence: signals from the daemon arrive in order, so once user 2's monitor
    /// has it, user 1's change would have come before it.
    @Test func aUsersChangeIsSignalledToThatUserOnly() throws {
        let monitor1 = try monitor(as: Self.user1)
        let monitor2 = try monitor(as: Self.user2)
        let broadcast2 = try monitor(as: Self.user2, "--broadcast")
        #expect(try daemon.ctl("grant", "org.example.One", "location", asUser: Self.user1).status == 0)
        _ = try monitor1.lines.next { $0.hasPrefix("StatusChanged app=org.example.One ") }
        #expect(try daemon.ctl("deny", "org.example.Two", "location", asUser: Self.user2).status == 0)
        _ = try monitor2.lines.next { $0.hasPrefix("StatusChanged app=org.example.Two ") }
        // An everyone-level change (an admin lock in the configuration) is the broadcast fence.
        try "[location]\nno-agent=denied\ndeny=org.example.Fence\n"
            .write(toFile: daemon.root + "/config/permissions.conf", atomically: true, encoding: .utf8)
        _ = try broadcast2.lines.next { $0.hasPrefix("StatusChanged app=org.example.Fence ") }
        _ = try monitor1.lines.next { $0.hasPrefix("StatusChanged app=org.example.Fence ") }
        _ = try monitor2.lines.next { $0.hasPrefix("StatusChanged app=org.example.Fence ") }

        #expect(monitor1.statusChanges.map(Self.withoutSerial) == [
            "StatusChanged app=org.example.One permission=location status=authorized",
            "StatusChanged app=org.example.Fence permission=location status=restricted"])
        #expect(monitor2.statusChanges.map(Self.withoutSerial) == [
            "StatusChanged app=org.example.Two permission=location status=denied",
            "StatusChanged app=org.example.Fence permission=location status=restricted"])
        #expect(broadcast2.statusChanges.map(Self.withoutSerial) == [
            "StatusChanged app=org.example.Fence permission=location status=restricted"])
        // Each stream counts its own: no gap in user 2's for user 1's change.
        for monitor in [monitor1, monitor2] {
            let subscribed = Self.subscribedSerial(monitor.lines.all[0])
            #expect(monitor.statusChanges.map(Self.serial) == [subscribed + 1, subscribed + 2])
        }
    }

    @Test func eachUsersAgentGetsOneSharedPromptForTwentyConcurrentRequests() throws {
        let agent1 = try RunningProgram(binDir + "/permissionsctl", ["--address", bus.address, "agent"], asUser: Self.user1)
        let agent2 = try RunningProgram(binDir + "/permissionsctl", ["--address", bus.address, "agent"], asUser: Self.user2)
        for agent in [agent1, agent2] { _ = try agent.lines.next { $0.hasPrefix("Agent registered at ") } }
        var requests: [(UInt32, BackgroundCommand)] = []
        for uid in [Self.user1, Self.user2] {
            for _ in 0..<20 {
                requests.append((uid, try BackgroundCommand("/usr/bin/setpriv", [
                    "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/busctl", "--address=\(bus.address)",
                    "--timeout=60", "call", "org.example.Permissions", "/org/example/Permissions",
                    "org.example.Permissions", "Request", "sa{sv}", "location", "0"])))
            }
        }
        // Each user's agent is asked about its own user's request; user 1 allows always,
        // user 2 denies, so no later request of either prompts again.
        _ = try agent1.lines.next { $0.hasPrefix("Prompt ") }
        agent1.answer("a")
        _ = try agent2.lines.next { $0.hasPrefix("Prompt ") }
        agent2.answer("d")
        for (uid, request) in requests {
            #expect(try request.wait().1 == (uid == Self.user1 ? "s \"authorized\"\n" : "s \"denied\"\n"),
                    "uid \(uid): \(request.errorOutput)")
        }
        #expect(agent1.lines.all.filter { $0.hasPrefix("Prompt ") && $0.hasSuffix(" asks for location") }.count == 1)
        #expect(agent2.lines.all.filter { $0.hasPrefix("Prompt ") && $0.hasSuffix(" asks for location") }.count == 1)
        #expect(try status("location", as: Self.user1) == "s \"authorized\"\n")
        #expect(try status("location", as: Self.user2) == "s \"denied\"\n")
    }

    @Test func adminsNameTheUserAndOthersMayNot() throws {
        // Root, an admin, for user 1 (by name) and user 2 (by uid).
        #expect(try daemon.ctl("grant", "--user", "daemon", "/usr/bin/gdbus", "location").status == 0)
        #expect(try daemon.ctl("deny", "/usr/bin/gdbus", "location", "--user", "2").status == 0)
        #expect(try status("location", as: Self.user1, via: "gdbus") == "('authorized',)\n")
        #expect(try status("location", as: Self.user2, via: "gdbus") == "('denied',)\n")
        #expect(try daemon.ctl("get", "--user", "1", "/usr/bin/gdbus", "location").stdout == "authorized\n")

        // User 2 may not name user 1, for a change or a read; nothing changes.
        for arguments in [["grant", "--user", "1", "org.example.X", "location"],
                          ["reset", "--user", "daemon", "/usr/bin/gdbus"],
                          ["list", "--user", "1"], ["get", "--user", "1", "/usr/bin/gdbus", "location"],
                          ["list", "--all"]] {
            let r = try run(binDir + "/permissionsctl", ["--address", bus.address] + arguments, asUser: Self.user2)
            #expect(r.status == 1, "\(arguments): \(r.stdout)")
            #expect(r.stderr.hasSuffix("(org.example.Permissions.Error.NotAuthorized)\n"), "\(arguments): \(r.stderr)")
        }
        #expect(try status("location", as: Self.user1, via: "gdbus") == "('authorized',)\n")

        // A user's list is their own rows only; root's --all shows both users'.
        let own = try daemon.ctl("list", asUser: Self.user2)
        #expect(own.stdout.contains("/usr/bin/gdbus  location    denied"), "\(own.stdout)")
        #expect(!own.stdout.contains("authorized"), "\(own.stdout)")
        let all = try daemon.ctl("list", "--all")
        #expect(all.stdout.split(separator: "\n").dropFirst().map { $0.prefix(5).trimmingCharacters(in: .whitespaces) }
                == ["1", "2"], "\(all.stdout)")
        // And a user resets their own.
        #expect(try daemon.ctl("reset", "/usr/bin/gdbus", asUser: Self.user2).stdout == "removed 1 decision(s)\n")
        #expect(try status("location", as: Self.user2, via: "gdbus") == "('not-determined',)\n")
        #expect(try status("location", as: Self.user1, via: "gdbus") == "('authorized',)\n")
    }

    private static func withoutSerial(_ line: String) -> String {
        line.range(of: " serial=").map { String(line[..<$0.lowerBound]) } ?? line
    }

    private static func serial(_ line: String) -> UInt64 {
        line.range(of: " serial=").flatMap { UInt64(line[$0.upperBound...]) } ?? 0
    }

    private static func subscribedSerial(_ line: String) -> UInt64 {
        line.range(of: "(serial ").flatMap { UInt64(line[$0.upperBound...].prefix { $0.isNumber }) } ?? 0
    }
}

/// A store written by the daemon before decisions had users (the schema of commit
/// d97d104, Tests/fixtures/store/before-users.sql), under a daemon on the system bus: its deny holds for every user, its
/// grant for nobody, both listed as unassigned, until an admin assigns or resets them.
@Suite("A store from before users", .serialized)
struct StoreMigrationTests {
    private let bus: PolkitTestSystemBus
    private let polkit: PolkitTestMock
    private let daemon: PolkitTestDaemon

    init() throws {
        bus = try TestBus(type: "system")
        polkit = try PolkitTestMock(bus: bus)
        daemon = try PolkitTestDaemon(bus: bus, config: "[location]\nno-agent=denied\n") { state in
            let fixture = packageRoot + "/Tests/fixtures/store/before-users.sql"
            let r = try run("/usr/bin/sqlite3", [state + "/decisions.sqlite", ".read '\(fixture)'"])
            guard r.status == 0 else { throw HarnessError(description: "sqlite3: \(r.stderr)") }
        }
    }

    @Test func oldDeniesHoldForEveryoneAndOldGrantsForNobodyUntilAssigned() throws {
        for uid: UInt32 in [1, 2] {
            #expect(try daemon.call("GetStatus", "s", "location", asUser: uid).stdout == "s \"denied\"\n")
            #expect(try daemon.gdbusCall("GetStatus", "location", asUser: uid).stdout == "('not-determined',)\n")
        }
        let all = try daemon.ctl("list", "--all")
        let rows = all.stdout.split(separator: "\n").dropFirst()
        #expect(rows.count == 3, "\(all.stdout)")
        #expect(rows.allSatisfy { $0.hasPrefix("unassigned") }, "\(all.stdout)")
        // Nobody's own list shows them.
        #expect(try daemon.call("ListDecisions", "s", "", asUser: 1).stdout == "a(sssxs) 0\n")

        #expect(try daemon.ctl("assign", "/usr/bin/gdbus", "daemon").stdout == "assigned 2 decision(s)\n")
        #expect(try daemon.gdbusCall("GetStatus", "location", asUser: 1).stdout == "('authorized',)\n")
        #expect(try daemon.gdbusCall("GetStatus", "location", asUser: 2).stdout == "('not-determined',)\n")
        #expect(try daemon.ctl("reset", "--unassigned", "/usr/bin/busctl").stdout == "removed 1 decision(s)\n")
        for uid: UInt32 in [1, 2] {
            #expect(try daemon.call("GetStatus", "s", "location", asUser: uid).stdout == "s \"not-determined\"\n")
        }
        #expect(try daemon.ctl("list", "--all").stdout.split(separator: "\n").dropFirst().map { $0.prefix(2) }
                == ["1 ", "1 "])
    }
}
