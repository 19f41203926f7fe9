import DBusKit
import Foundation
import Testing
import PermissionsTestSupport

/// A StartRequest client on a connection of its own (Tests/testenv/request-handle-client.py),
/// driven line by line: it stays on the bus until the test lets it go, as an app does.
final class HandleClient {
    let program: RunningProgram
    /// Its unique name.
    let name: String

    init(bus: TestBus, callTimeoutMilliseconds: Int = 1000, asUser uid: UInt32? = nil) throws {
        program = try RunningProgram("/usr/bin/python3", [
            "-u", packageRoot + "/Tests/testenv/request-handle-client.py", bus.address, String(callTimeoutMilliseconds),
        ], asUser: uid)
        name = String(try program.lines.next { $0.hasPrefix("name ") }.dropFirst(5))
    }

    /// The handle path of `token`, as the client computes it before the call.
    func path(_ token: String) -> String {
        "/org/example/Permissions/request/" + name.dropFirst().replacingOccurrences(of: ".", with: "_") + "/" + token
    }

    /// StartRequest; the client's line: "handle PATH MS" or "error NAME MESSAGE".
    func start(_ token: String, _ rest: String) throws -> String {
        program.answer("start \(token) \(rest)")
        return try program.lines.next { $0.hasPrefix("handle ") || $0.hasPrefix("error ") }
    }

    func close(_ path: String) throws -> String {
        program.answer("close \(path)")
        return try program.lines.next { $0.hasPrefix("closed ") || $0.hasPrefix("error ") }
    }

    /// The next Response line for `path`.
    func response(_ path: String, timeout: TimeInterval = 15) throws -> String {
        try program.lines.next(timeout: timeout) { $0.hasPrefix("response \(path) ") }
    }

    /// Every Response line so far.
    var responses: [String] { program.lines.all.filter { $0.hasPrefix("response ") } }
}

/// StartRequest and org.example.Permissions.RequestHandle: the handle at once, the
/// answer as a unicast Response, Close, limits, and the stop.
@Suite struct RequestHandleTests {
    static let config = "[location]\nenabled=true\n[notifications]\nenabled=true\n"

    /// A client whose calls give up after 1 s asks; the agent answers only after
    /// that second has passed (a scenario delay: the prompt outlives the client's
    /// call timeout). The call returned within the second with the handle, and the
    /// answer came as the handle's Response; no call of the client waited meanwhile.
    @Test func aPromptLongerThanTheCallTimeoutIsAnsweredThroughResponse() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config)
        let agent = try TestAgent(bus: bus)
        let client = try HandleClient(bus: bus, callTimeoutMilliseconds: 1000)
        let path = client.path("weather1")
        let reply = try client.start("weather1", "location reason=to_show_the_weather")
        #expect(reply.hasPrefix("handle \(path) "), "\(reply)")
        let prompt = try agent.waitForPrompt()
        #expect(prompt.reason == "to_show_the_weather")
        let answerAt = Date().addingTimeInterval(1.5)
        Thread.sleep(until: answerAt)
        agent.answer(prompt, "allow-once")
        #expect(try client.response(path) == "response \(path) 0 location=authorized -")
        // Its only call was StartRequest, answered; no error (a timeout) was printed.
        #expect(!client.program.lines.all.contains { $0.hasPrefix("error ") }, "\(client.program.lines.all)")
        #expect(try daemon.call("GetAll").status == 0)
    }

    /// `busctl --timeout=1 call … StartRequest` returns the handle at once, before
    /// the prompt is answered; busctl then leaves the bus, which closes the request:
    /// the agent is told Cancel, and nothing is stored. A monitor (dbus-monitor,
    /// which sees unicast messages) sees exactly one Response for a request that
    /// needed no prompt, addressed to the caller alone.
    @Test func busctlGetsTheHandleAtOnceAndAMonitorSeesOneResponse() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config + "[notifications]\nno-agent=denied\n")
        let monitor = try RunningProgram("/usr/bin/dbus-monitor", [
            "--address", bus.address, "type='signal',interface='org.example.Permissions.RequestHandle'",
        ])
        // The monitor is ready once it sees a Response: asked for until it does.
        var ready = false
        for attempt in 1...20 where !ready {
            _ = try daemon.busctl(["call", "org.example.Permissions", "/org/example/Permissions",
                                   "org.example.Permissions", "StartRequest", "asa{sv}", "1", "notifications",
                                   "1", "handle_token", "s", "ready\(attempt)"])
            ready = (try? monitor.lines.next(timeout: 1) { $0.contains("/ready\(attempt);") }) != nil
        }
        #expect(ready)

        // No agent: the no-agent answer, at once, as a Response after the reply.
        let first = try daemon.busctl(["--timeout=1", "call", "org.example.Permissions", "/org/example/Permissions",
                                       "org.example.Permissions", "StartRequest", "asa{sv}", "1", "notifications",
                                       "1", "handle_token", "s", "first"])
        #expect(first.status == 0, "\(first.stderr)")
        let firstPath = try #require(first.stdout.split(separator: "\"").dropFirst().first.map(String.init))
        #expect(firstPath.hasPrefix("/org/example/Permissions/request/") && firstPath.hasSuffix("/first"))
        let second = try daemon.busctl(["--timeout=1", "call", "org.example.Permissions", "/org/example/Permissions",
                                        "org.example.Permissions", "StartRequest", "asa{sv}", "1", "notifications",
                                        "1", "handle_token", "s", "second"])
        #expect(second.status == 0, "\(second.stderr)")
        _ = try monitor.lines.next { $0.contains("/second;") }
        let firstSignals = monitor.lines.all.filter { $0.contains("path=\(firstPath);") }
        #expect(firstSignals.count == 1, "\(monitor.lines.all)")
        let sender = firstPath.split(separator: "/")[4]
        #expect(firstSignals.first?.contains("destination=:\(sender.replacingOccurrences(of: "_", with: "."))") == true,
                "\(firstSignals)")

        // With an agent: busctl's 1 s timeout is no limit on the prompt, and its leaving closes it.
        let agent = try TestAgent(bus: bus)
        let started = Date()
        let withPrompt = try daemon.busctl(["--timeout=1", "call", "org.example.Permissions", "/org/example/Permissions",
                                            "org.example.Permissions", "StartRequest", "asa{sv}", "1", "location", "0"])
        #expect(withPrompt.status == 0, "\(withPrompt.stderr)")
        #expect(withPrompt.stdout.hasPrefix("o \"/org/example/Permissions/request/"), "\(withPrompt.stdout)")
        #expect(Date().timeIntervalSince(started) < 1)
        let prompt = try agent.waitForPrompt()
        try agent.waitForCancel(prompt.id)
        #expect(try daemon.call("ListDecisions", "s", "").stdout == "a(sssxs) 0\n")
    }

    /// Close from the caller cancels the prompt (nobody else waits) and no Response
    /// follows; Close from another connection is refused NotAuthorized and changes
    /// nothing; a token in use is refused; the handle can be introspected while open.
    @Test func closeIsTheCallersAloneAndCancelsThePrompt() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config)
        let agent = try TestAgent(bus: bus)
        let caller = try HandleClient(bus: bus)
        let other = try HandleClient(bus: bus)
        let path = caller.path("cam")
        #expect(try caller.start("cam", "location").hasPrefix("handle \(path) "))
        let prompt = try agent.waitForPrompt()

        let introspection = try daemon.busctl(["introspect", "org.example.Permissions", path])
        #expect(introspection.stdout.contains("org.example.Permissions.RequestHandle"), "\(introspection.stdout)")
        #expect(introspection.stdout.contains(".Close"), "\(introspection.stdout)")
        #expect(introspection.stdout.contains(".Response"), "\(introspection.stdout)")

        let again = try caller.start("cam", "notifications")
        #expect(again == "error org.example.Permissions.Error.InvalidArgument handle_token \"cam\" is in use by "
                + "\(caller.name): \(path) is still open", "\(again)")
        let refused = try other.close(path)
        #expect(refused.hasPrefix("error org.example.Permissions.Error.NotAuthorized Close: \(path) is the request "
                                  + "of another connection"), "\(refused)")
        #expect(agent.cancelled.isEmpty)

        #expect(try caller.close(path) == "closed \(path)")
        try agent.waitForCancel(prompt.id)
        let gone = try caller.close(path)
        #expect(gone.hasPrefix("error org.freedesktop.DBus.Error.UnknownObject"), "\(gone)")
        // The next request is answered; the closed one never was.
        let next = caller.path("next")
        #expect(try caller.start("next", "location").hasPrefix("handle \(next) "))
        agent.answer(try agent.waitForPrompt(2), "allow-once")
        #expect(try caller.response(next) == "response \(next) 0 location=authorized -")
        #expect(caller.responses.count == 1, "\(caller.responses)")
        #expect(try daemon.call("ListDecisions", "s", "").stdout == "a(sssxs) 0\n")
    }

    /// Two requests share one prompt; one closes: the prompt stays (no Cancel), and
    /// the other gets the answer. Its caller leaving then cancels a new prompt.
    @Test func closingOneOfTwoRequestsKeepsTheSharedPrompt() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config)
        let agent = try TestAgent(bus: bus)
        let first = try HandleClient(bus: bus)
        let second = try HandleClient(bus: bus)
        #expect(try first.start("a", "location").hasPrefix("handle "))
        let prompt = try agent.waitForPrompt()
        #expect(try second.start("b", "location").hasPrefix("handle "))
        #expect(try first.close(first.path("a")) == "closed \(first.path("a"))")
        agent.answer(prompt, "allow-once")
        #expect(try second.response(second.path("b")) == "response \(second.path("b")) 0 location=authorized -")
        #expect(agent.cancelled.isEmpty)
        #expect(agent.received.count == 1)
        #expect(first.responses.isEmpty)

        #expect(try second.start("c", "location").hasPrefix("handle "))
        let another = try agent.waitForPrompt(2)
        second.program.answer("quit")
        try agent.waitForCancel(another.id)
        #expect(try daemon.call("ListDecisions", "s", "").stdout == "a(sssxs) 0\n")
    }

    /// Subscribed before the call: the Response of a request that needs no prompt
    /// (no agent: the no-agent answer; a decided status) arrives, after the reply,
    /// with every permission's status; without a token the service chooses one.
    @Test func aResponseComesEvenWithoutAPrompt() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config + "[location]\nno-agent=denied\n")
        let client = try HandleClient(bus: bus)
        let path = client.path("quick")
        #expect(try client.start("quick", "location notifications location").hasPrefix("handle \(path) "))
        #expect(try client.response(path) == "response \(path) 0 location=denied,notifications=not-determined -")
        let chosen = try client.start("-", "notifications")
        #expect(chosen.hasPrefix("handle /org/example/Permissions/request/"), "\(chosen)")
        let chosenPath = String(chosen.split(separator: " ")[1])
        #expect(try client.response(chosenPath) == "response \(chosenPath) 0 notifications=not-determined -")
        #expect(client.responses.count == 2)
        #expect(daemon.isRunning)
    }

    /// Bad input gets a named error quoting it, and nothing is made (gdbus prints
    /// the error's name, busctl only its message).
    @Test(arguments: [
        ("['location']", "{'handle_token': <'bad-token'>}", "InvalidArgument",
         "invalid handle_token \"bad-token\": expected letters, digits and \"_\" only"),
        ("['location']", "{'handle_token': <'\(String(repeating: "x", count: 65))'>}", "InvalidArgument",
         "invalid handle_token \"\(String(repeating: "x", count: 65))\": it is 65 bytes; the limit is 64"),
        ("['location']", "{'handle_token': <uint32 5>}", "InvalidArgument",
         "option \"handle_token\" must be a string (s), not \"u\""),
        ("['nosuch']", "@a{sv} {}", "UnknownPermission", "unknown permission \"nosuch\""),
        ("@as []", "@a{sv} {}", "InvalidArgument", "no permission given"),
        ("['location']", "{'reason': <uint32 5>}", "InvalidArgument",
         "option \"reason\" must be a string (s), not \"u\""),
        ("['location']", "{'parent_window': <'x11:zz'>}", "InvalidArgument",
         "invalid parent_window \"x11:zz\": an X11 window is \"x11:\" and 1 to 8 hexadecimal digits"),
        ("['location']", "{'parent_window': <'mir:1'>}", "InvalidArgument",
         "invalid parent_window \"mir:1\": expected \"x11:XID\" (hexadecimal) or \"wayland:HANDLE\""),
    ])
    func badInputIsRefusedWithANamedError(permissions: String, options: String, error: String, message: String) throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config)
        let monitor = try RunningProgram("/usr/bin/dbus-monitor", [
            "--address", bus.address, "type='signal',interface='org.example.Permissions.RequestHandle'",
        ])
        let r = try run("/usr/bin/gdbus", ["call", "--address", bus.address, "--dest", "org.example.Permissions",
                                           "--object-path", "/org/example/Permissions",
                                           "--method", "org.example.Permissions.StartRequest", permissions, options])
        #expect(r.status != 0)
        #expect(r.stderr.contains("GDBus.Error:org.example.Permissions.Error.\(error): \(message)\n"), "\(r.stderr)")
        // Nothing was made: no object under request/, and no Response.
        let tree = try daemon.busctl(["tree", "--list", "org.example.Permissions"])
        #expect(!tree.stdout.contains("/request"), "\(tree.stdout)")
        #expect(!monitor.lines.all.contains { $0.contains("member=Response") })
        #expect(daemon.isRunning)
    }

    /// parent_window reaches the agent as "parent-window", in Request too.
    @Test func parentWindowIsPassedToTheAgent() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config)
        let agent = try TestAgent(bus: bus)
        let request = try BackgroundCommand("/usr/bin/busctl", [
            "--address=\(bus.address)", "--timeout=60", "call", "org.example.Permissions", "/org/example/Permissions",
            "org.example.Permissions", "Request", "sa{sv}", "location", "1", "parent_window", "s", "x11:3a00007",
        ])
        let prompt = try agent.waitForPrompt()
        #expect(prompt.details["parent-window"] == .variant(.string("x11:3a00007")))
        agent.answer(prompt, "allow-once")
        #expect(try request.wait().1 == "s \"authorized\"\n")
        let client = try HandleClient(bus: bus)
        #expect(try client.start("w", "notifications parent_window=wayland:abc-123_XY").hasPrefix("handle "))
        let second = try agent.waitForPrompt(2)
        #expect(second.details["parent-window"] == .variant(.string("wayland:abc-123_XY")))
        agent.answer(second, "dismiss")
        #expect(try client.response(client.path("w")) == "response \(client.path("w")) 1 notifications=not-determined -")
        #expect(daemon.isRunning)
    }

    /// An agent that does not answer within agent-timeout (1 s here) ends the
    /// request otherwise: Response 2, the status unchanged, nothing stored.
    @Test func anAgentTimeoutEndsTheRequestWithResponseTwo() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config + "[service]\nagent-timeout=1\n")
        let agent = try TestAgent(bus: bus)  // never answers
        let client = try HandleClient(bus: bus)
        let path = client.path("slow")
        #expect(try client.start("slow", "location").hasPrefix("handle \(path) "))
        let prompt = try agent.waitForPrompt()
        let response = try client.response(path)
        #expect(response.hasPrefix("response \(path) 2 location=not-determined"), "\(response)")
        try agent.waitForCancel(prompt.id)
        #expect(try daemon.call("ListDecisions", "s", "").stdout == "a(sssxs) 0\n")
        #expect(client.responses.count == 1)
    }

    /// SIGTERM with open handles: each gets Response 2 with Cancelled, before the
    /// service's name goes (the client sees them before NameOwnerChanged).
    @Test func sigtermAnswersEveryOpenHandleBeforeTheNameGoes() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config)
        let agent = try TestAgent(bus: bus)  // never answers
        let client = try HandleClient(bus: bus)
        #expect(try client.start("one", "location").hasPrefix("handle "))
        #expect(try client.start("two", "notifications location").hasPrefix("handle "))
        _ = try agent.waitForPrompt()
        let ending = daemon.terminate(timeout: 10)
        #expect(ending == .init(reason: .exit, status: 0), "\(ending?.description ?? "still running after 10 s")")
        _ = try client.program.lines.next { $0 == "service-left" }
        let lines = client.program.lines.all.filter { $0.hasPrefix("response ") || $0 == "service-left" }
        let cancelled = "org.example.Permissions.Error.Cancelled"
        #expect(lines == [
            "response \(client.path("one")) 2 location=not-determined \(cancelled)",
            "response \(client.path("two")) 2 location=not-determined,notifications=not-determined \(cancelled)",
            "service-left",
        ], "\(lines)")
    }
}

/// Open handles per connection and per user ([service] requests-per-connection,
/// requests-per-user) on a stand-in system bus with real uids 1 and 2.
@Suite(.serialized) struct RequestHandleLimitTests {
    @Test func handlesPastTheLimitAreRefusedAndOtherUsersAreNot() throws {
        let bus = try TestBus(type: "system")
        let polkit = try PolkitTestMock(bus: bus)
        try polkit.setAllowed(["org.example.permissions.agent"])
        let daemon = try PolkitTestDaemon(bus: bus, config: "[location]\nenabled=true\n[notifications]\nenabled=true\n"
                                          + "[service]\nrequests-per-connection=2\nrequests-per-user=3\n")
        // uid 1's agent never answers: its requests stay open.
        let agent = try RunningProgram(binDir + "/permissionsctl", ["--address", bus.address, "agent"], asUser: 1)
        _ = try agent.lines.next { $0.hasPrefix("Agent registered at ") }
        let one = try HandleClient(bus: bus, asUser: 1)
        let two = try HandleClient(bus: bus, asUser: 1)
        #expect(try one.start("a", "location").hasPrefix("handle "))
        #expect(try one.start("b", "notifications").hasPrefix("handle "))
        #expect(try one.start("c", "location") == "error org.example.Permissions.Error.LimitExceeded StartRequest: "
                + "\(one.name) has 2 requests open; the limit is 2 per connection ([service] requests-per-connection)")
        #expect(try two.start("d", "location").hasPrefix("handle "))
        #expect(try two.start("e", "location") == "error org.example.Permissions.Error.LimitExceeded StartRequest: "
                + "uid 1 has 3 requests open; the limit is 3 per user ([service] requests-per-user)")
        // Another user: not limited by uid 1's requests (no agent of uid 2: answered at once).
        let other = try HandleClient(bus: bus, asUser: 2)
        #expect(try other.start("x", "location").hasPrefix("handle \(other.path("x")) "))
        #expect(try other.response(other.path("x")) == "response \(other.path("x")) 0 location=not-determined -")
        // A closed one makes room.
        #expect(try one.close(one.path("a")) == "closed \(one.path("a"))")
        #expect(try one.start("c", "location").hasPrefix("handle "))
        #expect(daemon.isRunning)
    }
}
