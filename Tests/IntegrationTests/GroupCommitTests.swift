import DBusKit
import Foundation
import Testing
import PermissionsTestSupport

/// Commits off the serving queue (DecisionCommitter): while a commit is held, reads
/// are answered at once and the write is not; writes made meanwhile share the next
/// commit; nothing is acknowledged before its commit, and the file holds what was
/// acknowledged.
///
/// A commit is held with the daemon's test gate (debug builds): with
/// PERMISSIONS_DEBUG_COMMIT_GATE naming a Unix socket this test listens on, each
/// commit connects to it (which is how the test knows a commit is waiting) and
/// waits until the test writes a byte.
@Suite(.serialized) struct GroupCommitTests {
    @Test(.hangGuard) func readsAreAnsweredWhileACommitIsHeldAndWritesMadeMeanwhileShareOne() throws {
        let (daemon, gate) = try CommitGate.daemon()
        defer { daemon.stop() }
        let bus = daemon.bus
        let client = try Requester(bus: bus)

        // The first write's commit is held at the gate.
        let first = try client.setLocation("org.example.A", "denied")
        try gate.waitForCommit()
        // Reads are answered meanwhile, on another connection and on the writer's own,
        // with what is committed: nothing yet.
        #expect(try daemon.call("GetStatusForApp", "ss", "org.example.A", "location").stdout
                    == "s \"not-determined\"\n")
        #expect(try client.call("GetStatusForApp", [.string("org.example.A"), .string("location")])
                    == [.string("not-determined")])
        #expect(!client.isAnswered(first), "SetDecision was answered before its commit")

        // Two more writes while the first commit is held; a call after them on the same
        // connection is handled after them (in order), so both are in the line.
        let second = try client.setLocation("org.example.B", "authorized")
        let third = try client.setLocation("org.example.C", "denied")
        #expect(try client.call("GetStatusForApp", [.string("org.example.B"), .string("location")])
                    == [.string("not-determined")])

        // Release the first commit: only its write is answered, and the next commit,
        // holding both others, waits at the gate.
        try gate.release()
        #expect(try client.wait(first) == .success([]))
        #expect(try client.call("GetStatusForApp", [.string("org.example.A"), .string("location")])
                    == [.string("denied")])
        try gate.waitForCommit()
        #expect(!client.isAnswered(second) && !client.isAnswered(third), "a write was answered before its commit")
        // One release for both: they share one commit.
        try gate.release()
        #expect(try client.wait(second) == .success([]))
        #expect(try client.wait(third) == .success([]))

        // Three writes, two commits; the file holds all three (read after a restart,
        // without the gate).
        daemon.stop()
        daemon.environment = [:]
        try daemon.start()
        let reader = try BusClient(bus: bus, label: "reader")
        defer { reader.close() }
        #expect(try reader.storedDecisions() == ["org.example.A location": "denied",
                                                  "org.example.B location": "authorized",
                                                  "org.example.C location": "denied"])
    }
}

/// A stop (SIGTERM) while a commit runs: the commit's writes get their real outcome,
/// the writes behind it are not made and are answered Cancelled, and a commit that
/// does not end (a hung disk, here a gate never opened) does not hold the stop.
@Suite(.serialized) struct StopDuringCommitTests {
    /// A daemon whose first commit is held at the gate, with a second write in the line.
    private func daemonWithAHeldCommit() throws -> (DaemonUnderTest, Requester, CommitGate, Int, Int) {
        let (daemon, gate) = try CommitGate.daemon()
        let client = try Requester(bus: daemon.bus)
        let held = try client.setLocation("org.example.Held", "denied")
        try gate.waitForCommit()
        let behind = try client.setLocation("org.example.Behind", "authorized")
        // Handled after the write before it on the same connection: that write is in the line.
        #expect(try client.call("GetStatusForApp", [.string("org.example.Behind"), .string("location")])
                    == [.string("not-determined")])
        return (daemon, client, gate, held, behind)
    }

    private func storedAfterRestart(_ daemon: DaemonUnderTest) throws -> [String: String] {
        daemon.environment = [:]
        try daemon.start()
        defer { daemon.stop() }
        let reader = try BusClient(bus: daemon.bus, label: "reader")
        defer { reader.close() }
        return try reader.storedDecisions()
    }

    @Test(.hangGuard) func theCommitInProgressIsAnsweredAndWhatWaitsIsCancelled() throws {
        let (daemon, client, gate, held, behind) = try daemonWithAHeldCommit()
        guard let pid = daemon.pid else { throw HarnessError(description: "the daemon is not running") }
        kill(pid, SIGTERM)
        try daemon.waitForLog("stopping: waiting for the commit of 1 write(s)")  // debug builds say it
        try gate.release()
        #expect(try client.wait(held) == .success([]), "a write stored at the stop must be answered as stored")
        let cancelled = try client.wait(behind)
        #expect(cancelled.error?.name == "org.example.Permissions.Error.Cancelled", "\(cancelled)")
        #expect(daemon.waitForExit(timeout: 20) == .init(reason: .exit, status: 0))
        #expect(try storedAfterRestart(daemon) == ["org.example.Held location": "denied"])
    }

    /// RequestMany's first answer is being stored when the stop comes: the answer is
    /// stored, and no prompt is started for the next permission (the agent is not
    /// asked it, then told to cancel it); the call is answered Cancelled.
    @Test(.hangGuard) func aRequestManyAsksNothingMoreOnceTheStopBegins() throws {
        let (daemon, gate) = try CommitGate.daemon(config: "[location]\nenabled=true\n[notifications]\nenabled=true\n")
        let agent = try TestAgent(bus: daemon.bus)
        let requester = try Requester(bus: daemon.bus)
        let many = try requester.send("RequestMany", [.strings(["location", "notifications"]), .vardict([])])
        agent.answer(try agent.waitForPrompt(), "allow-always")
        try gate.waitForCommit()  // the answer's
        guard let pid = daemon.pid else { throw HarnessError(description: "the daemon is not running") }
        kill(pid, SIGTERM)
        try daemon.waitForLog("stopping: waiting for the commit of 1 write(s)")  // debug builds say it
        try gate.release()
        let outcome = try requester.wait(many)
        #expect(outcome.error?.name == "org.example.Permissions.Error.Cancelled", "\(outcome)")
        #expect(daemon.waitForExit(timeout: 20) == .init(reason: .exit, status: 0))
        #expect(agent.received.map(\.permission) == ["location"])
        #expect(try storedAfterRestart(daemon) == [ShortGrantTests.app + " location": "authorized"])
    }

    @Test(.hangGuard) func aCommitThatDoesNotEndDoesNotHoldTheStop() throws {
        let (daemon, client, gate, held, behind) = try daemonWithAHeldCommit()
        // The gate is never opened: the commit waits as on a hung disk.
        guard let pid = daemon.pid else { throw HarnessError(description: "the daemon is not running") }
        kill(pid, SIGTERM)
        let unknown = try client.wait(held)
        #expect(unknown.error?.name == "org.example.Permissions.Error.StorageFailed", "\(unknown)")
        #expect(unknown.error?.message.contains("within 5 s: it may or may not be stored") == true, "\(unknown)")
        let cancelled = try client.wait(behind)
        #expect(cancelled.error?.name == "org.example.Permissions.Error.Cancelled", "\(cancelled)")
        #expect(daemon.waitForExit(timeout: 20) == .init(reason: .exit, status: 0))
        gate.abandon()
        // The held commit never began (the gate comes before it): nothing is stored.
        #expect(try storedAfterRestart(daemon) == [:])
    }
}

/// An agent's allow-always whose end passes before it is in force: while the answer
/// waits for an earlier write's commit, or during its own. It answers the request
/// it was given for ("authorized"), and no signal tells a change nobody could see
/// (the expiry's removal told "not-determined" without an "authorized" before it).
@Suite(.serialized) struct ShortGrantTests {
    static let app = ProcessInfo.processInfo.arguments[0]
    /// A second from now, in microseconds since the epoch (an answer's expires-at):
    /// still ahead when the daemon reads the answer, even on a loaded machine.
    static func soon() -> Int64 { Int64(Date().timeIntervalSince1970 * 1_000_000) + 1_000_000 }
    /// Waits for the wall clock to pass `end`: the expiry is about time itself.
    static func waitPast(_ end: Int64) {
        while Int64(Date().timeIntervalSince1970 * 1_000_000) <= end { usleep(20_000) }
    }

    /// A gated daemon, a monitor, and a Request (number `request` of `requester`)
    /// that an agent answered allow-always until `end`, a second from then; the
    /// answer's commit waits at the gate.
    private struct Granted {
        let daemon: DaemonUnderTest, gate: CommitGate, monitor: Monitor
        let requester: Requester, request: Int, end: Int64

        init() throws {
            (daemon, gate) = try CommitGate.daemon()
            monitor = try Monitor(daemon)
            let agent = try TestAgent(bus: daemon.bus)
            requester = try Requester(bus: daemon.bus)
            request = try requester.send("Request", [.string("location"), .vardict([])])
            let prompt = try agent.waitForPrompt()
            end = ShortGrantTests.soon()
            agent.answer(prompt, "allow-always", expiresAt: end)
            try gate.waitForCommit()
        }
    }

    @Test(.hangGuard) func anEndThatPassesDuringTheCommitTellsNoChange() throws {
        let granted = try Granted()
        defer { granted.daemon.stop() }
        Self.waitPast(granted.end)
        try granted.gate.release()
        #expect(try granted.requester.wait(granted.request).get() == [.string("authorized")])
        try granted.gate.waitForCommit()  // the expired row's removal
        try granted.gate.release()
        try expectOnlyTheFence(granted.daemon, granted.gate, granted.monitor)
    }

    @Test(.hangGuard) func anEndThatPassesBehindAnotherCommitStoresNothing() throws {
        let (daemon, gate) = try CommitGate.daemon()
        defer { daemon.stop() }
        let client = try Requester(bus: daemon.bus)
        let monitor = try Monitor(daemon)
        let agent = try TestAgent(bus: daemon.bus)
        let requester = try Requester(bus: daemon.bus)
        let other = try client.setLocation("org.example.Other", "denied")
        try gate.waitForCommit()
        let request = try requester.send("Request", [.string("location"), .vardict([])])
        let prompt = try agent.waitForPrompt()
        let end = Self.soon()
        agent.answer(prompt, "allow-always", expiresAt: end)
        // Handled after the answer on the agent's connection: the answer waits behind the commit.
        _ = try agent.call("GetStatus", [.string("location")])
        Self.waitPast(end)
        try gate.release()
        #expect(try client.wait(other) == .success([]))
        #expect(try requester.wait(request).get() == [.string("authorized")])
        try monitor.waitFor { $0 == statusLine(app: "org.example.Other", "location", "denied") }
        // The next commit is the fence's: the answer made none.
        try expectOnlyTheFence(daemon, gate, monitor, after: [statusLine(app: "org.example.Other", "location", "denied")])
    }

    /// A grant in force (clients told "authorized") whose end passes while a write of
    /// the same key waits for its commit: the write's "before" is what clients were
    /// told, not the row already hidden from reads. A reset tells "not-determined"
    /// (it told nothing, and the removal found no row, so the last word stayed
    /// "authorized"); a SetDecision of the same value tells nothing (it told
    /// "authorized" twice).
    @Test(.hangGuard, arguments: [
        ("ResetDecisions", [DBusValue.strings(["location"])], [DBusValue.uint32(1)], "not-determined"),
        ("SetDecision", [DBusValue.string("location"), .string("authorized")], [], nil),
    ])
    func aWriteWhileAGrantEndsStartsFromWhatClientsWereTold(member: String, arguments: [DBusValue],
                                                            reply: [DBusValue], told: String?) throws {
        let grant = try Granted()
        let (daemon, gate, monitor, requester) = (grant.daemon, grant.gate, grant.monitor, grant.requester)
        defer { daemon.stop() }
        try gate.release()
        #expect(try requester.wait(grant.request).get() == [.string("authorized")])
        let granted = statusLine(app: Self.app, "location", "authorized")
        try monitor.waitFor { $0 == granted }
        // The write, made while the grant is in force, committed after its end.
        let write = try requester.send(member, [.string(Self.app)] + arguments)
        try gate.waitForCommit()
        Self.waitPast(grant.end)
        try gate.openForGood()
        #expect(try requester.wait(write).get() == reply)
        let client = try BusClient(bus: daemon.bus, label: "fence")
        defer { client.close() }
        _ = try client.call("SetDecision", [.string("org.example.Fence"), .string("location"), .string("denied")]).get()
        let fence = statusLine(app: "org.example.Fence", "location", "denied")
        try monitor.waitFor { $0 == fence }
        #expect(monitor.statusChanges == [granted] + (told.map { [statusLine(app: Self.app, "location", $0)] } ?? [])
                    + [fence])
    }

    /// A write of another app through the gate; then the monitor has heard `after`
    /// and the fence, nothing of the requester's app; nothing of it is stored.
    private func expectOnlyTheFence(_ daemon: DaemonUnderTest, _ gate: CommitGate, _ monitor: Monitor,
                                    after: [String] = []) throws {
        let client = try Requester(bus: daemon.bus)
        let reader = try BusClient(bus: daemon.bus, label: "reader")
        defer { reader.close() }
        let fence = try client.setLocation("org.example.Fence", "denied")
        try gate.waitForCommit()
        try gate.release()
        #expect(try client.wait(fence) == .success([]))
        let fenceLine = statusLine(app: "org.example.Fence", "location", "denied")
        try monitor.waitFor { $0 == fenceLine }
        #expect(monitor.statusChanges == after + [fenceLine])
        #expect(try reader.storedDecisions().keys.filter { $0.hasPrefix(Self.app + " ") }.isEmpty)
    }
}

/// The store's commit gate (PERMISSIONS_DEBUG_COMMIT_GATE): each commit connects to
/// the test's socket and waits for a byte.
private typealias CommitGate = TestGateSocket

private extension TestGateSocket {
    /// A daemon whose every commit waits at a gate of its own.
    static func daemon(config: String = "[location]\nenabled=true\n") throws -> (DaemonUnderTest, CommitGate) {
        try daemon(config: config, variable: "PERMISSIONS_DEBUG_COMMIT_GATE")
    }

    /// Returns once a commit waits at the gate, or fails the test after 20 s.
    func waitForCommit() throws { try waitForArrival("a commit") }
}

private extension Requester {
    /// SetDecision(app, "location", word), sent without waiting; its number.
    func setLocation(_ app: String, _ word: String) throws -> Int {
        try send("SetDecision", [.string(app), .string("location"), .string(word)])
    }
}
