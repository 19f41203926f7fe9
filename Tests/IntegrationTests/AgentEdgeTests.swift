import DBusKit
import Foundation
import Testing
import PermissionsTestSupport

/// Agents at their edges: one that does not answer in time is told to close its
/// prompt before it is asked anything else; an `expires-at` outside its range is a
/// dismissal that the log names with its value.
@Suite struct AgentEdgeTests {
    let bus: TestBus
    let daemon: DaemonUnderTest

    init() throws {
        bus = try TestBus()
        daemon = try DaemonUnderTest(bus: bus, config: "[service]\nagent-timeout=1\n[location]\nenabled=true\n"
                                                        + "[notifications]\nenabled=true\n")
    }

    func stored() throws -> String { try daemon.call("ListDecisions", "s", "").stdout }

    /// Two requests for one agent; it never answers the first: after agent-timeout
    /// (1 s) that request gets the unchanged status, the agent gets Cancel for the
    /// prompt, and only then the Ask of the second. Its late answer is dropped.
    @Test func anAgentThatTimedOutGetsCancelBeforeItsNextAsk() throws {
        let agent = try TestAgent(bus: bus)  // answers only when told
        let requester = try Requester(bus: bus)
        let first = try requester.send("Request", [.string("location"), .vardict([])])
        let prompt = try agent.waitForPrompt(1)
        let second = try requester.send("Request", [.string("notifications"), .vardict([])])

        #expect(try requester.wait(first).get() == [.string("not-determined")])
        try agent.waitForCancel(prompt.id)
        let next = try agent.waitForPrompt(2)
        // The daemon sent Cancel before this Ask, on the same connection: it came first.
        #expect(agent.cancelled == [prompt.id])
        #expect(next.permission == "notifications")
        agent.answer(next, "allow-once")
        #expect(try requester.wait(second).get() == [.string("authorized")])

        // The answer to the timed-out prompt, sent anyway, stores nothing.
        agent.answer(prompt, "allow-always")
        _ = try agent.call("GetStatus", [.string("location")])  // after the late reply, on its connection
        #expect(try stored() == "a(sssxs) 0\n")
        #expect(agent.cancelled == [prompt.id])  // an answered prompt is not cancelled
        #expect(daemon.log.contains("prompt \(prompt.id): no answer from agent "), "\(daemon.log)")
    }

    enum Expiry: String, CaseIterable {
        case unixEpoch, secondAgo, threeCenturies, int64Max

        func value(now: Int64) -> Int64 {
            switch self {
            case .unixEpoch: 0
            case .secondAgo: now - 1_000_000
            case .threeCenturies: now + 300 * 366 * 24 * 3600 * 1_000_000
            case .int64Max: Int64.max
            }
        }
    }

    /// An `allow-always` whose `expires-at` is in the past or centuries ahead:
    /// answered as a dismissal (the unchanged status), nothing stored, and the log
    /// says so with the value and the range.
    @Test(arguments: Expiry.allCases)
    func anExpiresAtOutsideItsRangeIsADismissalLoggedWithItsValue(expiry: Expiry) throws {
        let agent = try TestAgent(bus: bus)
        let requester = try Requester(bus: bus)
        let request = try requester.send("Request", [.string("location"), .vardict([])])
        let prompt = try agent.waitForPrompt()
        let at = expiry.value(now: Int64(Date().timeIntervalSince1970 * 1_000_000))
        agent.answer(prompt, "allow-always", expiresAt: at)
        #expect(try requester.wait(request).get() == [.string("not-determined")])
        #expect(try stored() == "a(sssxs) 0\n")
        let lines = daemon.logLines(containing: "prompt \(prompt.id): agent ")
        #expect(lines.count == 1, "\(daemon.log)")
        #expect(lines.first?.contains("gave \"expires-at\" \(at), outside the accepted range: after now (") == true,
                "\(lines)")
        #expect(lines.first?.contains("at most a hundred years ahead") == true, "\(lines)")
        #expect(lines.first?.hasSuffix("treated as dismissed, nothing stored") == true, "\(lines)")
    }

    /// Inside the range, fifty years ahead: stored with that end.
    @Test func anExpiresAtInsideItsRangeIsStored() throws {
        let agent = try TestAgent(bus: bus)
        let requester = try Requester(bus: bus)
        let request = try requester.send("Request", [.string("location"), .vardict([])])
        let prompt = try agent.waitForPrompt()
        let at = Int64(Date().timeIntervalSince1970 * 1_000_000) + 50 * 365 * 24 * 3600 * 1_000_000
        agent.answer(prompt, "allow-always", expiresAt: at)
        #expect(try requester.wait(request).get() == [.string("authorized")])
        #expect(try stored().contains("\"location\" \"authorized\""))
    }
}

/// Agents one user may have registered at once: [service] agents-per-user.
@Suite struct AgentLimitTests {
    /// With agents-per-user=3, a user's fourth agent, on any of its connections, is
    /// refused LimitExceeded quoting the limit; once one of the three goes (its
    /// connection unregisters it, or leaves the bus), the next is taken.
    @Test func aUsersAgentsPastTheLimitAreRefused() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: "[service]\nagents-per-user=3\n")
        let script = """
            import dbus
            def service(bus):
                return dbus.Interface(bus.get_object("org.example.Permissions", "/org/example/Permissions"),
                                      "org.example.Permissions")
            first, second = dbus.bus.BusConnection("\(bus.address)"), dbus.bus.BusConnection("\(bus.address)")
            service(first).RegisterAgent(dbus.ObjectPath("/a/1"))
            service(first).RegisterAgent(dbus.ObjectPath("/a/2"))
            service(second).RegisterAgent(dbus.ObjectPath("/a/3"))
            for connection, path in ((second, "/a/4"), (first, "/a/5")):
                try:
                    service(connection).RegisterAgent(dbus.ObjectPath(path))
                    print("registered", path)
                except dbus.DBusException as e:
                    print("refused", path, e.get_dbus_name(), e.get_dbus_message())
            service(first).UnregisterAgent(dbus.ObjectPath("/a/1"))
            service(second).RegisterAgent(dbus.ObjectPath("/a/4"))
            print("registered /a/4")
            second.close()
            third = dbus.bus.BusConnection("\(bus.address)")
            service(third).RegisterAgent(dbus.ObjectPath("/a/6"))
            print("registered /a/6")
            """
        let r = try run("/usr/bin/python3", ["-c", script])
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        let refusal = "org.example.Permissions.Error.LimitExceeded uid 0 has 3 agents registered, the limit "
            + "(3 per user, [service] agents-per-user);"
        #expect(lines.count == 4, "\(lines)")
        #expect(lines.first == "refused /a/4 " + refusal + " /a/4 was not registered", "\(lines)")
        #expect(lines.dropFirst().first == "refused /a/5 " + refusal + " /a/5 was not registered", "\(lines)")
        #expect(Array(lines.suffix(2)) == ["registered /a/4", "registered /a/6"], "\(lines)")
        #expect(daemon.isRunning)
    }
}
