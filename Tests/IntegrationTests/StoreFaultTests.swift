import DBusKit
import Foundation
import Testing
import PermissionsTestSupport

/// The decision store under faults, with the real daemon: whatever happens to the
/// files beside the store while it runs, the daemon keeps running and keeps every
/// answer; a write the disk refuses (an administrator's or a user's answer) answers
/// StorageFailed and changes nothing; a store moved aside at start-up is a visible
/// degraded state, lasting while the file moved aside is there, in which no request
/// is granted without a user's answer.
@Suite struct StoreFaultTests {
    let bus: TestBus

    init() throws { bus = try TestBus() }

    // MARK: Helpers

    /// Writes random bytes over the start of `path` (creating it), in place: the
    /// daemon's open file sees them.
    static func scribble(_ path: String, count: Int = 65536) throws {
        let fd = open(path, O_WRONLY | O_CREAT, 0o600)
        guard fd >= 0 else { throw HarnessError(description: "cannot open \(path)") }
        defer { close(fd) }
        let bytes = (0..<count).map { _ in UInt8.random(in: 0...255) }
        guard write(fd, bytes, count) == count else { throw HarnessError(description: "cannot write \(path)") }
    }

    /// `: > path`
    static func truncate(_ path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw HarnessError(description: "cannot truncate \(path)") }
        close(fd)
    }

    func statusForApp(_ daemon: DaemonUnderTest, _ app: String, _ permission: String) throws -> String {
        try daemon.call("GetStatusForApp", "ss", app, permission).stdout
    }

    func decisions(_ daemon: DaemonUnderTest) throws -> String {
        let r = try daemon.call("ListDecisions", "s", "")
        #expect(r.status == 0, "\(r.stderr)")
        return r.stdout
    }

    func storeStatus(_ daemon: DaemonUnderTest) throws -> String {
        try daemon.busctl(["get-property", "org.example.Permissions", "/org/example/Permissions",
                           "org.example.Permissions", "StoreStatus"]).stdout
    }

    // MARK: Files changed under the running daemon

    /// The issue's repro: a stored deny, then the WAL and the -shm overwritten with
    /// random bytes while the daemon runs.
    @Test func scribbledWalAndShmChangeNoAnswer() throws {
        let daemon = try DaemonUnderTest(bus: bus)
        #expect(try daemon.ctl("deny", "org.example.Denied", "location").status == 0)
        #expect(try daemon.ctl("grant", "org.example.Granted", "notifications").status == 0)
        let before = try decisions(daemon)
        #expect(before.hasPrefix("a(sssxs) 2 "), "\(before)")

        try Self.scribble(daemon.stateDirectory + "/decisions.sqlite-wal")
        try Self.scribble(daemon.stateDirectory + "/decisions.sqlite-shm")

        #expect(try statusForApp(daemon, "org.example.Denied", "location") == "s \"denied\"\n")
        #expect(try statusForApp(daemon, "org.example.Granted", "notifications") == "s \"authorized\"\n")
        #expect(try decisions(daemon) == before)
        // A write after that: stored, or StorageFailed; never a crash.
        let write = try daemon.gdbusCall("SetDecision", "org.example.Later", "location", "denied")
        #expect(write.status == 0 || write.stderr.contains("org.example.Permissions.Error.StorageFailed"),
                "\(write.stderr)")
        #expect(daemon.isRunning, "\(daemon.log)")
        #expect(try statusForApp(daemon, "org.example.Denied", "location") == "s \"denied\"\n")
        #expect(try statusForApp(daemon, "org.example.Later", "location")
                == (write.status == 0 ? "s \"denied\"\n" : "s \"not-determined\"\n"))
    }

    /// Truncating (`: >`), deleting or scribbling over the WAL or the -shm never kills
    /// the daemon (a truncated -shm that SQLite had mapped was a SIGBUS) and never
    /// changes an answer. No -shm is ever made, and one left by an older version goes.
    @Test func outsideChangesToTheWalAndShmNeverKillTheDaemon() throws {
        let daemon = try DaemonUnderTest(bus: bus, start: false)
        let state = daemon.stateDirectory
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try Self.scribble(state + "/decisions.sqlite-shm")
        try daemon.start()
        #expect(!FileManager.default.fileExists(atPath: state + "/decisions.sqlite-shm"))
        #expect(try daemon.ctl("deny", "org.example.Denied", "location").status == 0)
        #expect(!FileManager.default.fileExists(atPath: state + "/decisions.sqlite-shm"))

        let faults: [(String, (String) throws -> Void)] = [
            ("truncate", Self.truncate), ("delete", { _ = unlink($0) }), ("scribble", { try Self.scribble($0) }),
        ]
        var written = 0
        for file in ["decisions.sqlite-shm", "decisions.sqlite-wal"] {
            for (name, fault) in faults {
                let what = "\(name) \(file)"
                let before = try decisions(daemon)
                try fault(state + "/" + file)
                #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"not-determined\"\n", "\(what)")
                #expect(try statusForApp(daemon, "org.example.Denied", "location") == "s \"denied\"\n", "\(what)")
                #expect(try decisions(daemon) == before, "\(what)")
                let app = "org.example.After\(written)"
                let write = try daemon.gdbusCall("SetDecision", app, "location", "denied")
                #expect(write.status == 0 || write.stderr.contains("org.example.Permissions.Error.StorageFailed"),
                        "\(what): \(write.stderr)")
                if write.status == 0 {
                    written += 1
                    #expect(try decisions(daemon).contains("\"\(app)\" \"location\" \"denied\""), "\(what)")
                } else {
                    #expect(try decisions(daemon) == before, "\(what)")
                }
                #expect(daemon.isRunning, "\(what): \(daemon.log)")
            }
        }
        #expect(try statusForApp(daemon, "org.example.Denied", "location") == "s \"denied\"\n")
    }

    // MARK: A disk that refuses writes

    /// Whether this machine lets the test mount a small tmpfs (root, CAP_SYS_ADMIN).
    static let canMountTmpfs: Bool = {
        guard let dir = try? makeTemporaryDirectory("tmpfs-probe") else { return false }
        defer { rmdir(dir) }
        guard mount("tmpfs", dir, "tmpfs", 0, "size=64k") == 0 else { return false }
        umount2(dir, Int32(MNT_DETACH))
        return true
    }()

    /// Fills the file system holding `directory` with one file; returns its path.
    static func fill(_ directory: String) throws -> String {
        let path = directory + "/filler"
        let fd = open(path, O_WRONLY | O_CREAT, 0o600)
        guard fd >= 0 else { throw HarnessError(description: "cannot create \(path)") }
        defer { close(fd) }
        let chunk = [UInt8](repeating: 0x5a, count: 4096)
        while write(fd, chunk, chunk.count) > 0 {}
        while write(fd, chunk, 1) > 0 {}
        guard errno == ENOSPC else { throw HarnessError(description: "filling \(directory): errno \(errno)") }
        return path
    }

    /// A started daemon whose state directory is a 1 MiB tmpfs of its own (to fill,
    /// or to remount read-only); `body` runs with it and the state directory, and
    /// the daemon is stopped and the tmpfs unmounted after.
    private func withStateOnSmallTmpfs(size: String = "1m", _ body: (DaemonUnderTest, _ state: String) throws -> Void) throws {
        let daemon = try DaemonUnderTest(bus: bus, start: false)
        let state = daemon.stateDirectory
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try #require(mount("tmpfs", state, "tmpfs", 0, "size=\(size),mode=0700") == 0)
        defer {
            daemon.stop()
            umount2(state, Int32(MNT_DETACH))
        }
        try daemon.start()
        try body(daemon, state)
    }

    /// Restarts the daemon and fills the state directory's file system; returns the
    /// filler's path. The start checkpoints the WAL into the file and empties it after
    /// storing its serial epoch (a start whose epoch cannot be stored is refused), so
    /// that nothing is left that a checkpoint could free: a write that finds the disk
    /// full checkpoints the WAL and tries again (DecisionStore.write), which succeeds
    /// while the WAL holds earlier writes. The name may be owned before that
    /// checkpoint is over, so the disk is filled once the WAL is empty.
    private func restartOnAFullDisk(_ daemon: DaemonUnderTest, _ state: String) throws -> String {
        daemon.stop()
        try daemon.start()
        try daemon.waitForEmptiedWAL()
        return try Self.fill(state)
    }

    /// The state directory on a full file system: writes answer StorageFailed, change
    /// no answer (a session grant included) and send no signal; once there is room
    /// again, writes work.
    @Test(.enabled(if: canMountTmpfs, "needs mount(2) for a small tmpfs (root)"))
    func fullDiskAnswersStorageFailedAndChangesNothing() throws {
        try withStateOnSmallTmpfs { daemon, state in
            #expect(try daemon.ctl("deny", "org.example.Full", "location").status == 0)
            #expect(try daemon.ctl("grant", "org.example.Full", "notifications").status == 0)
            let filler = try restartOnAFullDisk(daemon, state)
            // A session grant, held by the agent's own connection (it requests, and answers).
            let agent = try TestAgent(bus: bus)
            agent.autoAnswer = "allow-session"
            #expect(try agent.call("Request", [.string("location"), .vardict([])]).first?.stringValue == "authorized")
            let details = try agent.call("GetDetails", [.string("location")]).first?.stringKeyedEntries ?? []
            guard case .variant(.string(let session))? = details.first(where: { $0.0 == "app-id" })?.1 else {
                throw HarnessError(description: "no app-id in \(details)")
            }
            let before = try decisions(daemon)
            let monitor = try Monitor(daemon)

            let refused: [[String]] = [
                ["SetDecision", "org.example.Full", "location", "authorized"],
                ["SetDecision", "org.example.New", "location", "denied"],
                ["ResetDecisions", "org.example.Full", "@as []"],
                ["ResetDecisions", "org.example.Full", "['location', 'notifications']"],
                ["SetDecision", session, "location", "denied"],
            ]
            for call in refused {
                let r = try run("/usr/bin/gdbus", ["call", "--address", bus.address, "--dest", "org.example.Permissions",
                                                   "--object-path", "/org/example/Permissions",
                                                   "--method", "org.example.Permissions." + call[0]] + call.dropFirst())
                #expect(r.status != 0, "\(call) succeeded on a full disk")
                #expect(r.stderr.contains("org.example.Permissions.Error.StorageFailed"), "\(call): \(r.stderr)")
            }
            #expect(daemon.isRunning)
            #expect(try statusForApp(daemon, "org.example.Full", "location") == "s \"denied\"\n")
            #expect(try statusForApp(daemon, "org.example.Full", "notifications") == "s \"authorized\"\n")
            #expect(try statusForApp(daemon, "org.example.New", "location") == "s \"not-determined\"\n")
            #expect(try statusForApp(daemon, session, "location") == "s \"authorized\"\n")
            #expect(try decisions(daemon) == before)

            // Room again: writes work, and the first signal since the monitor started is theirs.
            #expect(unlink(filler) == 0)
            #expect(try daemon.ctl("grant", "org.example.Full", "location").status == 0)
            try monitor.waitFor { $0 == statusLine(app: "org.example.Full", "location", "authorized") }
            #expect(monitor.statusChanges == [statusLine(app: "org.example.Full", "location", "authorized")])
            // And it was stored: it survives a restart.
            daemon.stop()
            try daemon.start()
            #expect(try statusForApp(daemon, "org.example.Full", "location") == "s \"authorized\"\n")
            #expect(try statusForApp(daemon, "org.example.Full", "notifications") == "s \"authorized\"\n")
        }
    }

    /// A user's deny or allow-always that the full disk cannot store: every requester
    /// waiting on the prompt (two Requests and a RequestMany, on two connections)
    /// gets StorageFailed naming the answer, the permission and SQLite's error;
    /// RequestMany asks nothing more; nothing is stored, no answer changes and no
    /// signal is sent.
    @Test(.enabled(if: canMountTmpfs, "needs mount(2) for a small tmpfs (root)"))
    func answerThatCannotBeStoredFailsEveryWaiter() throws {
        try withStateOnSmallTmpfs { daemon, state in
            #expect(try daemon.ctl("deny", "org.example.Full", "location").status == 0)
            let filler = try restartOnAFullDisk(daemon, state)
            let before = try decisions(daemon)
            let agent = try TestAgent(bus: bus)  // answers only when told
            let first = try Requester(bus: bus)
            let second = try Requester(bus: bus)
            let notDetermined: [DBusValue] = [.string("not-determined")]
            let monitor = try Monitor(daemon)

            for (round, answer) in ["deny", "allow-always"].enumerated() {
                let request = try first.send("Request", [.string("location"), .vardict([])])
                let prompt = try agent.waitForPrompt(round + 1)
                #expect(prompt.permission == "location")
                let joining = try second.send("Request", [.string("location"), .vardict([])])
                let many = try second.send("RequestMany", [.strings(["location", "notifications"]), .vardict([])])
                // A connection's calls are taken in order: its GetStatus is answered once
                // its requests have joined the open prompt.
                #expect(try first.call("GetStatus", [.string("location")]) == notDetermined)
                #expect(try second.call("GetStatus", [.string("location")]) == notDetermined)
                agent.answer(prompt, answer)

                for (requester, number) in [(first, request), (second, joining), (second, many)] {
                    let outcome = try requester.wait(number)
                    guard case .failure(let error) = outcome else {
                        Issue.record("\(answer): call #\(number) answered \(outcome)")
                        continue
                    }
                    #expect(error.name == "org.example.Permissions.Error.StorageFailed", "\(answer): \(error)")
                    #expect(error.message.contains("\"\(answer)\""), "\(error)")
                    #expect(error.message.contains("\"location\""), "\(error)")
                    #expect(error.message.contains("database or disk is full"), "\(error)")
                }
                // Any Ask the failure started went to the agent before the answer to a
                // call the agent makes after it: RequestMany asked nothing more.
                _ = try agent.call("GetStatus", [.string("notifications")])
                #expect(agent.received.map(\.permission) == Array(repeating: "location", count: round + 1), "\(answer)")
                #expect(try first.call("GetStatus", [.string("location")]) == notDetermined, "\(answer)")
                #expect(try decisions(daemon) == before, "\(answer)")
            }
            #expect(daemon.isRunning)
            #expect(daemon.log.contains("cannot store the answer deny for "), "\(daemon.log)")

            // Room again: the first signal since the monitor started is the fence's.
            #expect(unlink(filler) == 0)
            #expect(try daemon.ctl("grant", "org.example.Fence", "notifications").status == 0)
            try monitor.waitFor { $0 == statusLine(app: "org.example.Fence", "notifications", "authorized") }
            #expect(monitor.statusChanges == [statusLine(app: "org.example.Fence", "notifications", "authorized")])
            // And the user's next answer is stored.
            let request = try first.send("Request", [.string("location"), .vardict([])])
            agent.answer(try agent.waitForPrompt(3), "deny")
            #expect(try first.wait(request).get() == [.string("denied")])
        }
    }

    /// A state directory with less room than the WAL grew to before SQLite
    /// checkpointed it (1 000 pages, about 4 MiB): the WAL filled the disk and every
    /// write failed from then on, although the store itself is a few KiB; and once
    /// the store had grown since the last checkpoint, checkpointing on the failure
    /// could not help (the main file had no room to grow). Now the WAL is
    /// checkpointed at 1 MiB and kept to that size; a write that finds the disk full
    /// checkpoints it and tries again. Writes that make the store grow, then
    /// toggles of one row, on a 1 MiB and a 4 MiB file system.
    @Test(.enabled(if: canMountTmpfs, "needs mount(2) for a small tmpfs (root)"), arguments: ["1m", "4m"])
    func aSmallDiskKeepsTakingWritesAsTheWALIsCheckpointed(size: String) throws {
        try withStateOnSmallTmpfs(size: size) { daemon, state in
            let client = try BusClient(bus: bus)
            defer { client.close() }
            var failures: [String] = []
            for round in 0..<1_500 {
                // 300 apps with a row each (the store grows), then one row toggled.
                let app = round < 300 ? "org.example.Small\(round)" : "org.example.Small"
                let decision = round % 2 == 0 ? "authorized" : "denied"
                let result = client.call("SetDecision", [.string(app), .string("location"), .string(decision)])
                if case .failure(let error) = result { failures.append("write \(round): \(error)") }
            }
            #expect(failures.count == 0, "\(size): writes failed, the first: \(failures.prefix(1))")
            #expect(try statusForApp(daemon, "org.example.Small", "location") == "s \"denied\"\n")
            daemon.stop()
            try daemon.start()
            #expect(try statusForApp(daemon, "org.example.Small", "location") == "s \"denied\"\n")
            #expect(try statusForApp(daemon, "org.example.Small299", "location") == "s \"denied\"\n")
        }
    }

    /// The state directory on a file system mounted read-only: SQLite says only
    /// "disk I/O error" or "readonly database"; the daemon's error names the state
    /// directory and the read-only file system, and the store is left as it is.
    @Test(.enabled(if: canMountTmpfs, "needs mount(2) for a small tmpfs (root)"))
    func readOnlyStateDirectoryIsNamedInTheError() throws {
        try withStateOnSmallTmpfs { daemon, state in
            #expect(try daemon.ctl("deny", "org.example.RO", "location").status == 0)
            daemon.stop()
            try #require(mount("none", state, nil, UInt(MS_REMOUNT | MS_RDONLY), nil) == 0)

            try daemon.start(waitForName: false)
            let ending = daemon.waitForExit(timeout: 20)
            #expect(ending == .init(reason: .exit, status: 1), "\(ending?.description ?? "still running")")
            #expect(daemon.log.contains("the state directory \(state) is on a read-only file system (EROFS)"),
                    "\(daemon.log)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: state).filter { $0.contains(".corrupt-") }.isEmpty)
        }
    }

    // MARK: A damaged store at start-up

    /// A store moved aside at start-up (with its WAL) makes the daemon degraded, and
    /// it stays so across restarts, the new store readable, while the file or its
    /// WAL is in the state directory; removing them, then a restart, ends it.
    @Test func damagedStoreAtStartIsDegradedUntilTheFileMovedAsideIsRemoved() throws {
        let daemon = try DaemonUnderTest(bus: bus, config: "[location]\nno-agent=authorized\n", start: false)
        let state = daemon.stateDirectory
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 151 &+ 7) })
            .write(to: URL(fileURLWithPath: state + "/decisions.sqlite"))
        try Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 3) })
            .write(to: URL(fileURLWithPath: state + "/decisions.sqlite-wal"))
        try daemon.start()

        let status = try storeStatus(daemon)
        #expect(status.hasPrefix("s \"degraded: "), "\(status)")
        #expect(status.contains(state + "/decisions.sqlite.corrupt-"), "\(status)")
        #expect(daemon.log.contains("DEGRADED"), "\(daemon.log)")
        // no-agent=authorized does not grant while degraded...
        #expect(try daemon.call("Request", "sa{sv}", "location", "0").stdout == "s \"not-determined\"\n")
        #expect(try daemon.call("RequestMany", "asa{sv}", "1", "location", "0").stdout
                == "a{ss} 1 \"location\" \"not-determined\"\n")
        // ...but a user's answer does.
        do {
            let agent = try TestAgent(bus: bus)
            agent.autoAnswer = "allow-once"
            #expect(try daemon.call("Request", "sa{sv}", "location", "0").stdout == "s \"authorized\"\n")
            #expect(agent.received.count == 1)
            agent.disconnect()
        }
        #expect(try decisions(daemon) == "a(sssxs) 0\n")
        let aside = try FileManager.default.contentsOfDirectory(atPath: state)
            .filter { $0.hasPrefix("decisions.sqlite.corrupt-") }.sorted()
        try #require(aside.count == 2 && aside[1] == aside[0] + "-wal", "\(aside)")

        // A restart does not end it, although the store is readable now: the denies
        // of the one moved aside are still out of force.
        daemon.stop()
        try daemon.start()
        let again = try storeStatus(daemon)
        #expect(again.hasPrefix("s \"degraded: \(state)/\(aside[0]) holds a decision store moved aside"), "\(again)")
        #expect(again.contains("(and 1 other file like it)"), "\(again)")
        #expect(try daemon.call("Request", "sa{sv}", "location", "0").stdout == "s \"not-determined\"\n")

        // Its WAL alone still holds decisions: still degraded, naming it.
        #expect(unlink(state + "/" + aside[0]) == 0)
        daemon.stop()
        try daemon.start()
        let walOnly = try storeStatus(daemon)
        #expect(walOnly.hasPrefix("s \"degraded: \(state)/\(aside[1]) holds"), "\(walOnly)")
        #expect(try daemon.call("Request", "sa{sv}", "location", "0").stdout == "s \"not-determined\"\n")

        // Removed: the next start is ok, and the setting applies again.
        #expect(unlink(state + "/" + aside[1]) == 0)
        daemon.stop()
        try daemon.start()
        #expect(try storeStatus(daemon) == "s \"ok\"\n")
        #expect(try daemon.call("Request", "sa{sv}", "location", "0").stdout == "s \"authorized\"\n")
    }

    /// `: > decisions.sqlite` between runs: damage, not a first start. SQLite would
    /// open the empty file as a new database; the deny stored in it must not
    /// silently read "not-determined".
    @Test func storeTruncatedToZeroBytesIsDegraded() throws {
        let daemon = try DaemonUnderTest(bus: bus, config: "[location]\nno-agent=authorized\n")
        let state = daemon.stateDirectory
        #expect(try daemon.ctl("deny", "org.example.Cut", "location").status == 0)
        daemon.stop()
        try Self.truncate(state + "/decisions.sqlite")
        try daemon.start()

        let status = try storeStatus(daemon)
        #expect(status.hasPrefix("s \"degraded: "), "\(status)")
        #expect(status.contains("0 bytes long, shorter than a SQLite header"), "\(status)")
        #expect(daemon.log.contains("DEGRADED"), "\(daemon.log)")
        let aside = try FileManager.default.contentsOfDirectory(atPath: state)
            .filter { $0.hasPrefix("decisions.sqlite.corrupt-") && !$0.hasSuffix("-wal") }
        #expect(aside.count == 1, "\(aside)")
        // Degraded: no-agent=authorized grants nothing.
        #expect(try daemon.call("Request", "sa{sv}", "location", "0").stdout == "s \"not-determined\"\n")
    }

    // MARK: The serial epoch

    func changeSerial(_ daemon: DaemonUnderTest) throws -> UInt64? {
        let r = try daemon.busctl(["get-property", "org.example.Permissions", "/org/example/Permissions",
                                   "org.example.Permissions", "ChangeSerial"])
        return UInt64(r.stdout.dropFirst(2).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    func sqlite3(_ state: String, _ sql: String) throws -> String {
        let r = try run("/usr/bin/sqlite3", [state + "/decisions.sqlite", sql])
        guard r.status == 0 else { throw HarnessError(description: "sqlite3 \(sql): \(r.stderr)") }
        return r.stdout
    }

    /// A stored epoch with no next one in 32 bits, written with sqlite3 between runs:
    /// the daemon refuses to start (exit 1, not a trap) with the named error quoting
    /// it and the recovery, and leaves the store as it is; the recovery the error
    /// names starts it again, with every decision and with serials in a new epoch.
    @Test(arguments: [Int64.max, 4_294_967_295, -1])
    func outOfRangeSerialEpochRefusesTheStart(epoch: Int64) throws {
        let daemon = try DaemonUnderTest(bus: bus)
        let state = daemon.stateDirectory
        #expect(try daemon.ctl("deny", "org.example.Epoch", "location").status == 0)
        daemon.stop()
        _ = try sqlite3(state, "UPDATE meta SET value = \(epoch) WHERE key = 'serial-epoch'")
        let before = try sqlite3(state, "SELECT * FROM user_decisions")

        try daemon.start(waitForName: false)
        let ending = daemon.waitForExit(timeout: 20)
        #expect(ending == .init(reason: .exit, status: 1), "\(ending?.description ?? "still running")")
        let path = state + "/decisions.sqlite"
        let named = "serial epoch out of range: \(path) holds the serial epoch \(epoch) (meta key serial-epoch)"
        #expect(daemon.logLines(containing: named).count == 1, "\(daemon.log)")
        let recovery = "DELETE FROM meta WHERE key = 'serial-epoch'"
        #expect(daemon.log.contains("sqlite3 \(path) \"\(recovery)\""), "\(daemon.log)")
        #expect(!daemon.log.contains("arithmetic overflow"), "\(daemon.log)")
        #expect(try sqlite3(state, "SELECT value FROM meta WHERE key = 'serial-epoch'") == "\(epoch)\n")
        #expect(try sqlite3(state, "SELECT * FROM user_decisions") == before)

        _ = try sqlite3(state, recovery)
        let started = UInt64(Date().timeIntervalSince1970)
        try daemon.start()
        #expect(try statusForApp(daemon, "org.example.Epoch", "location") == "s \"denied\"\n")
        let serial = try #require(try changeSerial(daemon))
        #expect(serial >> 32 >= started && serial & 0xFFFF_FFFF == 0, "\(serial)")
    }

    /// 4294967294, the last epoch a start can move on from: the start takes
    /// 4294967295 and its serials keep every high bit (the epoch shifted into a
    /// 64-bit serial lost them: ChangeSerial began again at 0); the start after is refused.
    @Test func theLastSerialEpochServesWithItsHighBitsAndThenRefuses() throws {
        let daemon = try DaemonUnderTest(bus: bus)
        let state = daemon.stateDirectory
        daemon.stop()
        _ = try sqlite3(state, "UPDATE meta SET value = 4294967294 WHERE key = 'serial-epoch'")
        try daemon.start()
        #expect(try changeSerial(daemon) == 0xFFFF_FFFF_0000_0000)
        let stream = try Monitor(daemon)
        let broadcast = try Monitor(daemon, broadcast: true)
        #expect(stream.subscribedSerial == 0xFFFF_FFFF_0000_0000)
        #expect(try daemon.ctl("deny", "org.example.Last", "location").status == 0)
        try stream.waitFor { $0 == statusLine(app: "org.example.Last", "location", "denied") }
        #expect(stream.serials == [0xFFFF_FFFF_0000_0001])
        try daemon.writeConfig("[location]\nenabled=false\n")
        try broadcast.waitFor { $0 == statusLine(app: "", "location", "disabled") }
        #expect(broadcast.serials == [0xFFFF_FFFF_0000_0001])
        #expect(try changeSerial(daemon) == 0xFFFF_FFFF_0000_0001)
        daemon.stop()

        try daemon.start(waitForName: false)
        let ending = daemon.waitForExit(timeout: 20)
        #expect(ending == .init(reason: .exit, status: 1), "\(ending?.description ?? "still running")")
        #expect(daemon.log.contains("serial epoch out of range: \(state)/decisions.sqlite holds the serial epoch "
                                    + "4294967295"), "\(daemon.log)")
    }

    /// A start whose new epoch the disk has no room for is refused, naming the
    /// epoch and SQLite's error, rather than serving with the wall clock's seconds
    /// (which repeat serials once the clock goes back); with room again it starts.
    @Test(.enabled(if: canMountTmpfs, "needs mount(2) for a small tmpfs (root)"))
    func aSerialEpochThatCannotBeStoredRefusesTheStart() throws {
        try withStateOnSmallTmpfs { daemon, state in
            #expect(try daemon.ctl("deny", "org.example.Full", "location").status == 0)
            daemon.stop()
            let epoch = try sqlite3(state, "SELECT value FROM meta WHERE key = 'serial-epoch'")
            let filler = try Self.fill(state)
            try daemon.start(waitForName: false)
            let ending = daemon.waitForExit(timeout: 20)
            #expect(ending == .init(reason: .exit, status: 1), "\(ending?.description ?? "still running")")
            let lines = daemon.logLines(containing: "serial epoch not stored: cannot store this start's serial epoch ")
            #expect(lines.count == 1 && lines[0].contains("database or disk is full"), "\(daemon.log)")
            #expect(unlink(filler) == 0)
            #expect(try sqlite3(state, "SELECT value FROM meta WHERE key = 'serial-epoch'") == epoch)

            try daemon.start()
            #expect(try statusForApp(daemon, "org.example.Full", "location") == "s \"denied\"\n")
            let serial = try #require(try changeSerial(daemon))
            #expect(serial >> 32 > UInt64(epoch.trimmingCharacters(in: .whitespacesAndNewlines))!, "\(serial) \(epoch)")
        }
    }

    @Test func healthyStoreIsOK() throws {
        let daemon = try DaemonUnderTest(bus: bus)
        #expect(try storeStatus(daemon) == "s \"ok\"\n")
        let all = try daemon.busctl(["introspect", "org.example.Permissions", "/org/example/Permissions",
                                     "org.example.Permissions"]).stdout
        #expect(all.contains(".StoreStatus"), "\(all)")
    }

    /// The store is opened beside the bus's handshake (Daemon.start): a store that
    /// cannot be opened ends the start with its own message at once, even while the
    /// bus never answers (a breaker helper's case: the daemon waited for the bus for
    /// ever, saying nothing). The bus here is a socket that accepts and is silent.
    @Test func anUnopenableStoreIsSaidWhileTheBusNeverAnswers() throws {
        let dir = try makeTemporaryDirectory("store-hung-bus")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // /tmp: a socket path must fit sun_path's 108 bytes.
        var template = Array("/tmp/hung-bus.XXXXXX".utf8CString)
        guard let socketDirectory = mkdtemp(&template) else { throw HarnessError(description: "mkdtemp failed") }
        let socketPath = String(cString: socketDirectory) + "/bus"
        defer { unlink(socketPath); rmdir(String(cString: socketDirectory)) }
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: socketPath.utf8) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(listener >= 0 && bound == 0 && listen(listener, 16) == 0)
        // A directory where the store's file would be: SQLite cannot open it.
        try FileManager.default.createDirectory(atPath: dir + "/state/decisions.sqlite", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: dir + "/config", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: dir + "/plugins", withIntermediateDirectories: true)
        // timeout(1) ends a daemon that hangs (status 124), so that the test fails
        // rather than waits.
        let result = try run("/usr/bin/timeout", ["20", binDir + "/permissionsd", "--address", "unix:path=" + socketPath,
                                                  "--config-dir", dir + "/config", "--state-dir", dir + "/state",
                                                  "--plugin-dir", dir + "/plugins"])
        #expect(result.status == 1, "status \(result.status): \(result.stderr)")
        #expect(result.stderr.contains("cannot open the decision store"), "\(result.stderr)")
    }
}
