import DBusKit
import Foundation
import Testing
import PermissionsTestSupport

/// Request through a real agent: prompts, answers, what is stored and what is not.
/// The requester is busctl (app id /usr/bin/busctl) unless said otherwise.
@Suite struct RequestTests {
    let bus: TestBus
    let daemon: DaemonUnderTest
    let monitor: Monitor
    static let app = "/usr/bin/busctl"

    init() throws {
        bus = try TestBus()
        daemon = try DaemonUnderTest(bus: bus, config: "[location]\nenabled=true\n[notifications]\nenabled=true\n")
        monitor = try Monitor(daemon)
    }

    /// Request from this test process on a connection of its own, which stays open
    /// (the caller closes it to leave the bus); returns it and the reply's arguments.
    func requestFromThisProcess(_ permission: String) throws -> (Connection, [DBusValue]) {
        let requester = try Connection.open(.address(bus.address))
        let message = try Message.methodCall(destination: "org.example.Permissions", path: "/org/example/Permissions",
                                             interface: "org.example.Permissions", member: "Request")
        try message.append(.string(permission), .vardict([]))
        return (requester, try requester.callBlocking(message).arguments())
    }

    func stored() throws -> String { try daemon.call("ListDecisions", "s", "").stdout }
    func status(_ permission: String, app: String = RequestTests.app) throws -> String {
        try daemon.call("GetStatusForApp", "ss", app, permission).stdout
    }

    @Test func allowOnceAnswersAuthorizedAndStoresNothing() throws {
        let agent = try TestAgent(bus: bus)
        let request = try daemon.requestInBackground("location", reason: "to show the weather")
        let prompt = try agent.waitForPrompt()
        #expect(prompt.app == Self.app)
        #expect(prompt.permission == "location")
        #expect(prompt.reason == "to show the weather")
        #expect(prompt.details["identity-kind"] == .variant(.string("executable")))
        agent.answer(prompt, "allow-once")
        let (rc, out) = try request.wait()
        #expect(rc == 0)
        #expect(out == "s \"authorized\"\n")
        #expect(try stored() == "a(sssxs) 0\n")
        #expect(try status("location") == "s \"not-determined\"\n")
    }

    @Test func allowAlwaysIsStoredAndNotAskedAgain() throws {
        let agent = try TestAgent(bus: bus)
        let request = try daemon.requestInBackground("location")
        agent.answer(try agent.waitForPrompt(), "allow-always")
        #expect(try request.wait().1 == "s \"authorized\"\n")
        try monitor.waitFor { $0 == statusLine(app: Self.app, "location", "authorized") }
        #expect(try stored().contains("\"/usr/bin/busctl\" \"location\" \"authorized\""))
        // Decided: the next request answers at once, without a prompt.
        #expect(try daemon.call("Request", "sa{sv}", "location", "0").stdout == "s \"authorized\"\n")
        #expect(agent.received.count == 1)
        let details = try daemon.ctl("get", Self.app, "location")
        #expect(details.stdout == "authorized\n")
    }

    @Test func denyIsStoredAndStaysDenied() throws {
        let agent = try TestAgent(bus: bus)
        let request = try daemon.requestInBackground("notifications")
        agent.answer(try agent.waitForPrompt(), "deny")
        #expect(try request.wait().1 == "s \"denied\"\n")
        #expect(try daemon.call("Request", "sa{sv}", "notifications", "0").stdout == "s \"denied\"\n")
        #expect(agent.received.count == 1)
        // An admin reset makes it askable again.
        #expect(try daemon.ctl("reset", Self.app, "notifications").status == 0)
        let again = try daemon.requestInBackground("notifications")
        agent.answer(try agent.waitForPrompt(2), "allow-once")
        #expect(try again.wait().1 == "s \"authorized\"\n")
    }

    @Test func dismissStoresNothingAndAsksAgainNextTime() throws {
        let agent = try TestAgent(bus: bus)
        let first = try daemon.requestInBackground("location")
        agent.answer(try agent.waitForPrompt(), "dismiss")
        #expect(try first.wait().1 == "s \"not-determined\"\n")
        let second = try daemon.requestInBackground("location")
        agent.answer(try agent.waitForPrompt(2), "nonsense-answer")  // counts as a dismissal
        #expect(try second.wait().1 == "s \"not-determined\"\n")
        #expect(try stored() == "a(sssxs) 0\n")
    }

    @Test func withoutAgentTheConfiguredDefaultAppliesAndNothingIsStored() throws {
        #expect(try daemon.call("Request", "sa{sv}", "location", "0").stdout == "s \"not-determined\"\n")
        try daemon.writeConfig("[location]\nenabled=true\nno-agent=denied\n[notifications]\nenabled=true\n")
        // The fence: a config change we can see, made after the one we cannot.
        try daemon.writeConfig("[location]\nenabled=true\nno-agent=denied\n[notifications]\nenabled=false\n")
        try monitor.waitFor { $0 == statusLine(app: "", "notifications", "disabled") }
        #expect(try daemon.call("Request", "sa{sv}", "location", "0").stdout == "s \"denied\"\n")
        #expect(try stored() == "a(sssxs) 0\n")
        #expect(try status("location") == "s \"not-determined\"\n")
    }

    @Test func slowAgentDoesNotBlockOtherCallers() throws {
        let agent = try TestAgent(bus: bus)
        let request = try daemon.requestInBackground("location")
        let prompt = try agent.waitForPrompt()
        // While the prompt is open, everyone else is served.
        for _ in 0..<5 {
            #expect(try daemon.call("GetStatus", "s", "notifications").stdout == "s \"not-determined\"\n")
            #expect(try daemon.ctl("grant", "org.example.Other", "notifications").status == 0)
        }
        #expect(request.isRunning)
        agent.answer(prompt, "allow-always")
        #expect(try request.wait().1 == "s \"authorized\"\n")
    }

    @Test func twentyConcurrentRequestsShareOnePrompt() throws {
        let agent = try TestAgent(bus: bus)
        let requests = try (0..<20).map { _ in try daemon.requestInBackground("location") }
        let prompt = try agent.waitForPrompt()
        // Every request has reached the daemon once each busctl is connected and
        // waiting; the prompt is still open, so none is answered yet.
        #expect(requests.allSatisfy { $0.isRunning })
        agent.answer(prompt, "allow-always")
        for request in requests { #expect(try request.wait().1 == "s \"authorized\"\n") }
        #expect(agent.received.count == 1)
        try monitor.waitFor { $0 == statusLine(app: Self.app, "location", "authorized") }
        #expect(monitor.statusChanges.filter { $0.contains("app=\(Self.app)") }.count == 1)
    }

    @Test func requesterLeavingCancelsThePromptAndStoresNothing() throws {
        let agent = try TestAgent(bus: bus)
        let request = try daemon.requestInBackground("location")
        let prompt = try agent.waitForPrompt()
        request.kill()
        try agent.waitForCancel(prompt.id)
        agent.answer(prompt, "allow-always")  // too late: dropped
        // The fence: a change after the late answer, whose signal comes after any it caused.
        #expect(try daemon.ctl("grant", "org.example.Fence", "notifications").status == 0)
        try monitor.waitFor { $0 == statusLine(app: "org.example.Fence", "notifications", "authorized") }
        #expect(monitor.statusChanges == [statusLine(app: "org.example.Fence", "notifications", "authorized")])
        #expect(try status("location") == "s \"not-determined\"\n")
        #expect(!(try stored().contains("\"location\"")))
    }

    @Test func agentCrashStoresNothing() throws {
        let agent = try TestAgent(bus: bus)
        let request = try daemon.requestInBackground("location")
        _ = try agent.waitForPrompt()
        agent.disconnect()
        #expect(try request.wait().1 == "s \"not-determined\"\n")
        #expect(try stored() == "a(sssxs) 0\n")
        // It was unregistered: without an agent, the default answer comes at once.
        #expect(try daemon.call("Request", "sa{sv}", "location", "0").stdout == "s \"not-determined\"\n")
    }

    @Test func sessionGrantEndsWhenTheRequesterLeaves() throws {
        let agent = try TestAgent(bus: bus)
        agent.autoAnswer = "allow-session"
        // The requester is this test process, on a connection of its own.
        let (requester, answer) = try requestFromThisProcess("location")
        #expect(answer == [.string("authorized")])
        let app = agent.received[0].app
        try monitor.waitFor { $0 == statusLine(app: app, "location", "authorized") }
        #expect(try status("location", app: app) == "s \"authorized\"\n")
        #expect(try stored() == "a(sssxs) 0\n")
        requester.close()
        try monitor.waitFor { $0 == statusLine(app: app, "location", "not-determined") }
        #expect(try status("location", app: app) == "s \"not-determined\"\n")
    }

    @Test func forgedNameOwnerChangedEndsNothing() throws {
        let agent = try TestAgent(bus: bus)
        agent.autoAnswer = "allow-session"
        let (requester, answer) = try requestFromThisProcess("location")
        #expect(answer == [.string("authorized")])
        let app = agent.received[0].app
        // Any peer can emit a signal that looks like the bus driver's: it must not
        // end the grant (nor unregister the agent).
        let forged = try daemon.busctl(["emit", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameOwnerChanged",
                                        "sss", requester.uniqueName, requester.uniqueName, ""])
        #expect(forged.status == 0, "\(forged.stderr)")
        #expect(try daemon.ctl("grant", "org.example.Fence", "notifications").status == 0)
        try monitor.waitFor { $0 == statusLine(app: "org.example.Fence", "notifications", "authorized") }
        #expect(try status("location", app: app) == "s \"authorized\"\n")
        requester.close()
        try monitor.waitFor { $0 == statusLine(app: app, "location", "not-determined") }
    }

    /// A file descriptor hidden in the options (a{sv} may carry one) is refused at
    /// once, not held open while a prompt waits. python-dbus passes fds; busctl
    /// does not on a plain address.
    @Test func fileDescriptorsAreRefused() throws {
        let script = """
            import dbus, os, sys
            bus = dbus.bus.BusConnection(sys.argv[1])
            p = bus.get_object("org.example.Permissions", "/org/example/Permissions")
            try:
                p.Request("location", {"fd": dbus.types.UnixFd(os.open("/dev/null", os.O_RDONLY))},
                          dbus_interface="org.example.Permissions")
            except dbus.exceptions.DBusException as e:
                print(e.get_dbus_name(), e.get_dbus_message())
            """
        let r = try run("/usr/bin/python3", ["-c", script, bus.address])
        #expect(r.stdout == "org.freedesktop.DBus.Error.InvalidArgs file descriptors are not accepted\n", "\(r.stderr)")
    }

    @Test func expiryEmitsStatusChanged() throws {
        let agent = try TestAgent(bus: bus)
        let request = try daemon.requestInBackground("location")
        let expires = Int64(Date().timeIntervalSince1970 * 1_000_000) + 1_500_000
        agent.answer(try agent.waitForPrompt(), "allow-always", expiresAt: expires)
        #expect(try request.wait().1 == "s \"authorized\"\n")
        let details = try daemon.call("ListDecisions", "s", Self.app)
        #expect(details.stdout.contains("\"authorized\""))
        try monitor.waitFor { $0 == statusLine(app: Self.app, "location", "authorized") }
        try monitor.waitFor { $0 == statusLine(app: Self.app, "location", "not-determined") }
        #expect(Int64(Date().timeIntervalSince1970 * 1_000_000) >= expires)
        #expect(try stored() == "a(sssxs) 0\n")
    }

    @Test func requestManyAsksOneAfterAnother() throws {
        let agent = try TestAgent(bus: bus)
        try daemon.writeConfig("[location]\nenabled=true\n[notifications]\nenabled=true\ndeny=/usr/bin/busctl\n")
        try monitor.waitFor { $0 == statusLine(app: Self.app, "notifications", "restricted") }
        let many = try BackgroundCommand("/usr/bin/busctl", [
            "--address=\(bus.address)", "--timeout=60", "call", "org.example.Permissions", "/org/example/Permissions",
            "org.example.Permissions", "RequestMany", "asa{sv}", "2", "location", "notifications", "0"])
        agent.answer(try agent.waitForPrompt(), "deny")
        let (rc, out) = try many.wait()
        #expect(rc == 0)
        #expect(out == "a{ss} 2 \"location\" \"denied\" \"notifications\" \"restricted\"\n")
        #expect(agent.received.count == 1)  // restricted never prompts
    }

    @Test func badRequestsGetNamedErrors() throws {
        for (arguments, message) in [
            (["Request", "sa{sv}", "location", "1", "reason", "i", "4"], "option \"reason\" must be a string"),
            (["Request", "sa{sv}", "teleport", "0"], "unknown permission \"teleport\""),
            (["RequestMany", "asa{sv}", "2", "location", "Bad", "0"], "invalid permission name \"Bad\""),
            (["Request", "s", "location"], "not 's'"),
            (["UnregisterAgent", "o", "/nope"], "no agent /nope"),
        ] {
            let r = try daemon.busctl(["call", "org.example.Permissions", "/org/example/Permissions",
                                       "org.example.Permissions"] + arguments)
            #expect(r.status != 0, "\(arguments)")
            #expect(r.stderr.contains(message), "\(arguments): \(r.stderr)")
        }
        let nobody = try daemon.busctl(["call", "org.example.Permissions", "/org/example/Permissions",
                                        "org.example.Permissions", "RegisterAgent", "o", "/y"], asNobody: true)
        #expect(nobody.stderr.contains("RegisterAgent is not allowed"))
        let agent = try TestAgent(bus: bus)
        #expect(throws: BusError.self) { try agent.call("RegisterAgent", [.objectPath(agent.path)]) }
    }

    /// A subscriber's stream counts its user's changes from the serial Subscribe
    /// returned; ChangeSerial (the broadcast sequence) does not count them.
    @Test func changeSerialGrowsByOneAndAcrossRestarts() throws {
        let changeSerial = { try self.daemon.busctl(["get-property", "org.example.Permissions", "/org/example/Permissions",
                                                     "org.example.Permissions", "ChangeSerial"]).stdout }
        let broadcastBefore = try changeSerial()
        for app in ["org.example.A", "org.example.B", "org.example.C"] {
            #expect(try daemon.ctl("grant", app, "location").status == 0)
            try monitor.waitFor { $0 == statusLine(app: app, "location", "authorized") }
        }
        let serials = monitor.serials
        #expect(serials.count == 3)
        #expect(serials[0] == monitor.subscribedSerial + 1)
        #expect(serials[1] == serials[0] + 1 && serials[2] == serials[1] + 1)
        #expect(try changeSerial() == broadcastBefore)
        daemon.stop()
        try daemon.start()
        let after = try Monitor(daemon)
        #expect(try daemon.ctl("grant", "org.example.D", "location").status == 0)
        try after.waitFor { $0 == statusLine(app: "org.example.D", "location", "authorized") }
        #expect(after.serials[0] > serials[2])
    }

    /// Ask's "queued" (u) detail: how many more prompts wait for the agent after
    /// this one. Three requests for different permissions, made while the agent
    /// holds a fourth prompt (so that all three are in its queue, which the log
    /// shows, before the first of them is asked): their Asks carry 2, 1 and 0.
    @Test func eachAskSaysHowManyMoreWaitForTheAgent() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: "[permissions]\ndeclare=camera;microphone;scanner;printer\n",
                                         pluginDirectories: [try makeTemporaryDirectory("no-plugins")])
        let agent = try TestAgent(bus: bus)
        let requester = try Requester(bus: bus)
        let holder = try requester.send("Request", [.string("printer"), .vardict([])])
        let held = try agent.waitForPrompt(1)
        #expect(held.details["queued"] == .variant(.uint32(0)))
        var requests: [String: Int] = [:]
        for permission in ["camera", "microphone", "scanner"] {
            requests[permission] = try requester.send("Request", [.string(permission), .vardict([])])
        }
        try daemon.waitForLog("in its queue", count: 3)
        agent.answer(held, "allow-once")
        #expect(try requester.wait(holder).get() == [.string("authorized")])
        for (index, expected) in [UInt32(2), 1, 0].enumerated() {
            let prompt = try agent.waitForPrompt(index + 2)
            #expect(prompt.details["queued"] == .variant(.uint32(expected)), "\(prompt.permission): \(prompt.details)")
            agent.answer(prompt, "allow-once")
            let number = requests.removeValue(forKey: prompt.permission)
            let request = try #require(number, "\(prompt.permission) asked twice")
            #expect(try requester.wait(request).get() == [.string("authorized")])
        }
        #expect(requests.isEmpty)
    }
}
