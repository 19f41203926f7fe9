import Foundation
import Testing
import PermissionsTestSupport

/// The service on a machine in the shape of a real one (RealMachineHarness.swift):
/// dbus's own system bus policy with the installed policy file, the installed
/// daemon activated from the installed activation file, the real polkitd with the
/// installed actions and doc/admin.md's rules file, and clients as real non-root
/// users. Each rule of dbus/org.example.Permissions.conf has a test here; so has
/// every kind of message the daemon sends to a client (the agent's Ask and
/// Cancel, a subscription's unicast StatusChanged, a request handle's unicast
/// Response) and to polkit. What this does
/// not cover is in doc/testing.md.
@Suite("On a real machine", .serialized, .sharedInstall)
struct RealMachineTests {
    private let tree: InstalledTree
    private let user = RealMachine.coveredUser
    private let other = RealMachine.otherUser

    init() throws {
        tree = try SharedInstall.tree()
    }

    /// A user's agent gets that user's prompt, through the daemon's call of the
    /// agent interface (the policy file's rule for root), and its answer comes back
    /// and is stored for that user only.
    @Test func aUsersAgentGetsTheirPromptAndTheAnswerIsStored() throws {
        let machine = try RealMachine(tree)
        let agent = try machine.agent(as: user)
        let request = try machine.request("location", as: user)
        let prompt = try agent.lines.next { $0.hasPrefix("Prompt ") }
        #expect(prompt.hasSuffix(": /usr/bin/busctl asks for location"), "\(prompt)")
        // Its RegisterAgent started the daemon: the name's new owner it then hears
        // of is the instance it registered with, not one to register with again
        // (which said "already registered"). The daemon answered that before its Ask.
        #expect(agent.lines.all.filter { $0.hasPrefix("Agent registered") || $0.hasPrefix("Cannot register") }
                == ["Agent registered at /org/example/PermissionsAgent; waiting for prompts"], "\(agent.lines.all)")
        agent.answer("a")
        let (status, reply) = try request.wait()
        #expect(status == 0 && reply == "s \"authorized\"\n", "\(request.errorOutput)\n\(machine.bus.log)")

        // Stored: the app reads it, and so does its user's permissionsctl list.
        #expect(try machine.call("GetStatus", "s", "location", as: user).stdout == "s \"authorized\"\n")
        let list = try machine.ctl("list", as: user)
        #expect(list.stdout.split(separator: "\n").contains {
            $0.hasPrefix("/usr/bin/busctl ") && $0.contains(" location ") && $0.contains(" authorized ")
        }, "\(list.stdout) \(list.stderr)")
        // For that user only.
        #expect(try machine.call("GetStatus", "s", "location", as: other).stdout == "s \"not-determined\"\n")
        #expect(try machine.ctl("list", as: other).stdout.contains("/usr/bin/busctl") == false)
    }

    /// When nobody waits for a prompt any more, the daemon's Cancel reaches the
    /// agent (the agent interface's other method).
    @Test func anAgentIsToldWhenNobodyWaitsAnyMore() throws {
        let machine = try RealMachine(tree)
        let agent = try machine.agent(as: user)
        let request = try machine.request("notifications", as: user)
        let prompt = try agent.lines.next { $0.hasPrefix("Prompt ") }
        let id = prompt.dropFirst("Prompt ".count).prefix { $0 != ":" }
        request.kill()
        _ = try agent.lines.next { $0 == "Prompt \(id) cancelled" }
        #expect(try machine.call("GetStatus", "s", "notifications", as: user).stdout == "s \"not-determined\"\n")
    }

    /// The rules file of doc/admin.md lets a member of its group change their own
    /// decisions (SetDecision, through the real polkit) and hear of it on their
    /// subscription (a unicast signal); a user outside the group may neither
    /// change their decisions nor register an agent.
    @Test func theRulesFileLetsItsGroupChangeTheirOwnDecisionsAndNobodyElse() throws {
        let group = try RealMachine.groupName(of: user)
        #expect(try RealMachine.isMember(user, of: group))
        try #require(try !RealMachine.isMember(other, of: group), "uid \(other) is in \(group) on this machine")
        let machine = try RealMachine(tree)
        let monitor = try machine.monitor(as: user)
        let grant = try machine.ctl("grant", "org.example.App", "location", as: user)
        #expect(grant.status == 0, "\(grant.stderr)\n\(machine.polkit.log)")
        _ = try monitor.lines.next { $0.hasPrefix("StatusChanged app=org.example.App permission=location status=authorized") }
        #expect(try machine.call("GetStatusForApp", "ss", "org.example.App", "location", as: user).stdout
                == "s \"authorized\"\n")

        let refused = try machine.ctl("grant", "org.example.App", "location", as: other)
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("polkit refused org.example.permissions.manage-own"), "\(refused.stderr)")
        // (Its standard input is empty: registered, it would exit 0 at once.)
        let agent = try machine.ctl("agent", as: other)
        #expect(agent.status != 0)
        #expect(agent.stderr.contains("polkit refused org.example.permissions.agent"), "\(agent.stderr)")
        #expect(try machine.call("GetStatusForApp", "ss", "org.example.App", "location", as: other).stdout
                == "s \"not-determined\"\n")
    }

    /// Without the rules file, polkit finds no session for a user (no logind) and
    /// applies allow_any: manage-own needs an administrator, agent is refused. So
    /// the rule is what lets the covered user do either; root needs no rule.
    @Test func withoutTheRulesFileUsersWithoutASessionAreRefused() throws {
        let machine = try RealMachine(tree, polkitRules: [:])
        let grant = try machine.ctl("grant", "org.example.App", "location", as: user)
        #expect(grant.status != 0)
        #expect(grant.stderr.contains("polkit refused org.example.permissions.manage-own"), "\(grant.stderr)")
        let agent = try machine.ctl("agent", as: user)
        #expect(agent.status != 0)
        #expect(agent.stderr.contains("polkit refused org.example.permissions.agent"), "\(agent.stderr)")
        let asRoot = try machine.ctl("grant", "--user", String(user), "org.example.App", "location")
        #expect(asRoot.status == 0, "\(asRoot.stderr)")
        #expect(try machine.call("GetStatusForApp", "ss", "org.example.App", "location", as: user).stdout
                == "s \"authorized\"\n")
    }

    /// Only the daemon may call an agent: another user calling a user's agent
    /// (to put up a prompt of their making) is refused by the bus, and the agent
    /// sees nothing of it.
    @Test func anotherUserCannotCallAUsersAgent() throws {
        let machine = try RealMachine(tree)
        let agent = try machine.agent(as: user)
        let name = try machine.uniqueName(ofUser: user, process: "permissionsctl")
        for (member, arguments) in [("Ask", ["ssssa{sv}", "1", "org.example.Bank", "location", "spoofed", "0"]),
                                    ("Cancel", ["s", "1"])] {
            let spoof = try machine.busctl(["--timeout=5", "call", name, "/org/example/PermissionsAgent",
                                            "org.example.Permissions.Agent", member] + arguments, as: other)
            #expect(spoof.status != 0 && spoof.stderr.contains("Access denied"), "\(member): \(spoof.stdout) \(spoof.stderr)")
        }
        // The first prompt the agent shows is the daemon's.
        let request = try machine.request("location", as: user)
        let prompt = try agent.lines.next { $0.hasPrefix("Prompt ") }
        #expect(prompt.hasSuffix(": /usr/bin/busctl asks for location"), "\(prompt)")
        agent.answer("d")
        #expect(try request.wait().1 == "s \"denied\"\n")
        #expect(!agent.lines.all.contains { $0.contains("org.example.Bank") || $0.contains("cancelled") })
    }

    /// A request handle is its caller's alone, under dbus's own system policy: the
    /// policy file lets every user call the RequestHandle interface, and the daemon
    /// refuses another user's Close (NotAuthorized), which changes nothing. The
    /// Response is unicast to the caller: a connection of the other user that
    /// listens for every Response gets none of it. It does get its own, which the
    /// daemon sent after the first (one connection's messages keep their order),
    /// so nothing of the first can still be on its way when the test looks.
    @Test func anotherUserCannotCloseAHandleNorHearItsResponse() throws {
        let machine = try RealMachine(tree)
        let agent = try machine.agent(as: user)  // its RegisterAgent starts the daemon
        let client = packageRoot + "/Tests/testenv/request-handle-client.py"
        let owner = try machine.start(["/usr/bin/python3", "-u", client, machine.bus.address, "5000"], as: user)
        let ownerName = String(try owner.lines.next { $0.hasPrefix("name ") }.dropFirst(5))
        let watcher = try machine.start(["/usr/bin/python3", "-u", client, machine.bus.address, "5000"], as: other)
        _ = try watcher.lines.next { $0.hasPrefix("name ") }

        let path = "/org/example/Permissions/request/" + ownerName.dropFirst().replacingOccurrences(of: ".", with: "_")
            + "/real1"
        owner.answer("start real1 location")
        let started = try owner.lines.next { $0.hasPrefix("handle ") || $0.hasPrefix("error ") }
        #expect(started.hasPrefix("handle \(path) "), "\(started)\n\(machine.bus.log)")
        _ = try agent.lines.next { $0.hasPrefix("Prompt ") }

        watcher.answer("close \(path)")
        let refused = try watcher.lines.next { $0.hasPrefix("closed ") || $0.hasPrefix("error ") }
        #expect(refused.hasPrefix("error org.example.Permissions.Error.NotAuthorized "), "\(refused)")
        #expect(!agent.lines.all.contains { $0.hasSuffix("cancelled") }, "\(agent.lines.all)")

        agent.answer("o")
        #expect(try owner.lines.next { $0.hasPrefix("response ") } == "response \(path) 0 location=authorized -")

        // The barrier: the watcher's own request (no agent of its uid: the no-agent
        // answer, at once), whose Response the daemon sends after the owner's.
        watcher.answer("start mine location")
        let own = try watcher.lines.next { $0.hasPrefix("response ") || $0.hasPrefix("error ") }
        #expect(own.hasPrefix("response /org/example/Permissions/request/") && own.contains("/mine 0 "), "\(own)")
        #expect(watcher.lines.all.filter { $0.hasPrefix("response ") || $0.hasPrefix("foreign-response") } == [own],
                "\(watcher.lines.all)")
    }

    /// Only the daemon's user (root) may own the service's name: a user asking for
    /// it is refused, before the daemon runs and while it does. The daemon is the
    /// installed one, activated by the first call, as root.
    @Test func onlyTheDaemonsUserMayOwnTheName() throws {
        let machine = try RealMachine(tree)
        let before = try machine.busDriver("RequestName", "su", "org.example.Permissions", "4", as: user)
        #expect(before.status != 0 && before.stderr.contains("Access denied"), "\(before.stdout) \(before.stderr)")

        #expect(try machine.call("GetStatus", "s", "location", as: user).stdout == "s \"not-determined\"\n")
        #expect(machine.bus.log.contains("Activating service name='org.example.Permissions'"), "\(machine.bus.log)")
        let owner = try machine.serviceOwner()
        #expect(owner.uid == 0)
        #expect(try machine.executable(of: owner.pid) == tree.daemon)

        let during = try machine.busDriver("RequestName", "su", "org.example.Permissions", "4", as: user)
        #expect(during.status != 0 && during.stderr.contains("Access denied"), "\(during.stdout) \(during.stderr)")
    }

    /// The tier sees what the permissive test buses hide: with the policy file as
    /// it was (calls to the service only), the bus refuses the daemon's Ask, the
    /// agent never shows the prompt, and the request reads not-determined.
    @Test func aPolicyFileWithoutTheAgentRuleLosesEveryPrompt() throws {
        let machine = try RealMachine(tree, busPolicy: RealMachine.policyWithoutAgentRule)
        let agent = try machine.agent(as: user)
        let request = try machine.request("location", as: user)
        #expect(try request.wait().1 == "s \"not-determined\"\n", "\(request.errorOutput)")
        let log = machine.bus.log
        #expect(log.contains("Rejected send message") && log.contains(#"interface="org.example.Permissions.Agent" member="Ask""#),
                "\(log)")
        #expect(!agent.lines.all.contains { $0.hasPrefix("Prompt ") })
    }

    /// doctor tells it: the daemon checks each agent when it registers, logs the
    /// refusal once with the remedy, and GetDiagnostics reports it to that user.
    @Test func doctorReportsAnAgentTheBusWillNotLetTheDaemonCall() throws {
        let machine = try RealMachine(tree, busPolicy: RealMachine.policyWithoutAgentRule)
        let agent = try machine.agent(as: user)
        defer { withExtendedLifetime(agent) {} }  // running until the end
        // The check runs after RegisterAgent's reply: its outcome, in the log, first.
        let deadline = Date().addingTimeInterval(15)
        while !machine.bus.log.contains("cannot be reached") {
            try #require(Date() < deadline, "no unreachable agent logged: \(machine.bus.log)")
            usleep(20_000)  // the bus log is the daemon's stderr; waited for with a deadline
        }
        let logged = machine.bus.log.split(separator: "\n").filter { $0.contains("cannot be reached") }
        #expect(logged.count == 1, "\(logged)")
        #expect(logged.first?.contains("the bus refused the daemon's call (org.freedesktop.DBus.Error.AccessDenied: ") == true
                && logged.first?.contains("install this version's org.example.Permissions.conf") == true, "\(logged)")
        let doctor = try machine.ctl("doctor", as: user)
        #expect(doctor.status == 1, "\(doctor.stdout)")
        #expect(doctor.stdout.contains("\n  - the agent of uid \(user) cannot be reached: the bus refused the daemon's call "
                                       + "(org.freedesktop.DBus.Error.AccessDenied: "), "\(doctor.stdout)")
        // Another user, without an agent, has no such problem.
        #expect(!(try machine.ctl("doctor", as: other).stdout.contains("cannot be reached")))
    }

    /// The machine with the units' capabilities, user 1's PipeWire with a camera and
    /// a microphone, user 2 logged in without one, and the installed connector.
    func machineWithUserPipeWire() throws -> (RealMachine, UserPipeWire, RunningProgram, otherDirectory: String) {
        let machine = try RealMachine(tree, privateRun: true, unitCapabilities: true)
        let directory = try machine.makeUserRuntimeDirectory(user)
        let otherDirectory = try machine.makeUserRuntimeDirectory(other)  // logged in, no PipeWire
        let pipewire = UserPipeWire(uid: user, runtimeDirectory: directory, inside: { machine.bus.inside($0) })
        try pipewire.start()
        try pipewire.addCamera("real-machine-cam")
        try pipewire.addMicrophone("real-machine-mic")
        let connector = try machine.startConnectorAsSystemdWould()
        return (machine, pipewire, connector, otherDirectory)
    }

    /// Each user's own PipeWire, reached as on a machine with the units: the
    /// installed daemon, D-Bus activated with its defaults (/run/user, the connector
    /// at /run/permissionsd-connector.socket) and the capabilities its installed
    /// unit leaves it, which cannot connect to a user's socket; and the installed
    /// connector, started from its installed units as systemd would (its socket
    /// passed, a user of its own, CAP_DAC_OVERRIDE alone, no new privileges). The
    /// machine's /run is its own. User 1 reads their camera through the connector;
    /// user 2, logged in without PipeWire, reads unsupported. User 1's camera going is
    /// one change for user 1's monitor and none for user 2's; user 2's PipeWire,
    /// started later with a microphone, is followed, for user 2 alone.
    @Test func aUsersPipeWireIsReachedThroughTheInstalledConnector() throws {
        let (machine, pipewire, connector, otherDirectory) = try machineWithUserPipeWire()

        let deadline = Date().addingTimeInterval(15)
        while try machine.call("GetStatus", "s", "camera", as: user).stdout != "s \"not-determined\"\n" {
            try #require(Date() < deadline, "user \(user)'s camera never read not-determined:\n\(machine.bus.log)")
        }
        #expect(try machine.call("GetStatus", "s", "camera", as: other).stdout == "s \"unsupported\"\n")
        let log = machine.bus.log
        #expect(log.contains("following the registry of user \(user)'s PipeWire: 1 camera(s), 1 microphone(s)"), "\(log)")
        #expect(!log.contains("cannot reach user"), "\(log)")

        // The connector ran as its unit says, and refused no one.
        let running = try #require(RealMachine.processes(running: tree.root + "/usr/libexec/permissionsd-connector").first,
                                   "\(connector.errors!.all)")
        let status = try String(contentsOfFile: "/proc/\(running)/status", encoding: .utf8)
        #expect(status.contains("\nUid:\t\(RealMachine.connectorUser)\t"), "\(status)")
        #expect(status.contains("\nCapEff:\t0000000000000002\n") && status.contains("\nCapBnd:\t0000000000000002\n")
                && status.contains("\nNoNewPrivs:\t1\n"), "\(status)")
        #expect(!connector.errors!.all.contains { $0.contains("refused") }, "\(connector.errors!.all)")
        // The daemon had its unit's capabilities, and no more.
        let daemon = try #require(RealMachine.daemons(of: tree).first)
        let daemonStatus = try String(contentsOfFile: "/proc/\(daemon)/status", encoding: .utf8)
        #expect(daemonStatus.contains("\nCapBnd:\t0000000000080004\n"), "\(daemonStatus)")

        // Changes go to their own user alone.
        let monitor1 = try machine.monitor(as: user)
        let monitor2 = try machine.monitor(as: other)
        try pipewire.removeNode("real-machine-cam")
        _ = try monitor1.lines.next { $0.hasPrefix("StatusChanged app=* permission=camera status=unsupported") }
        let second = UserPipeWire(uid: other, runtimeDirectory: otherDirectory, inside: { machine.bus.inside($0) })
        try second.start()
        try second.addMicrophone("real-machine-mic-two")
        // User 2's first change comes after user 1's camera went: had that reached
        // them, it would be before this.
        let first = try monitor2.lines.next { $0.hasPrefix("StatusChanged") }
        #expect(first.hasPrefix("StatusChanged app=* permission=microphone status=not-determined"), "\(first)")
        #expect(monitor1.statusChanges.count == 1, "\(monitor1.statusChanges)")
        #expect(try machine.call("GetStatus", "s", "microphone", as: other).stdout == "s \"not-determined\"\n")
        withExtendedLifetime((pipewire, second)) {}
    }

    /// OpenPipeWireRemote on the machine as installed: the daemon under its unit's
    /// capabilities gets user 1's socket from the connector, and pwremote as user 1
    /// sees the camera and not the microphone once granted, and loses it within a
    /// second of a deny; user 2's monitor-free view is untouched (unsupported).
    @Test func anEnforcedConnectionThroughTheInstalledUnits() throws {
        let (machine, pipewire, connector, _) = try machineWithUserPipeWire()
        let app = try PWRemoteTool.path()
        let deadline = Date().addingTimeInterval(15)
        while try machine.call("GetStatus", "s", "camera", as: user).stdout != "s \"not-determined\"\n" {
            try #require(Date() < deadline, "user \(user)'s camera never read not-determined:\n\(machine.bus.log)")
        }
        let refused = PipeWireApp(program: try machine.start([app, "camera"], as: user))
        let answer = try refused.firstAnswer()
        #expect(answer.hasPrefix("error org.example.Permissions.Error.NotAuthorized "), "\(answer)")

        #expect(try machine.ctl("grant", "--user", String(user), app, "camera").status == 0)
        let granted = PipeWireApp(program: try machine.start([app, "camera"], as: user))
        #expect(try granted.firstAnswer() == "synced", "\(machine.bus.log)")
        #expect(granted.registry.nodeNames == ["real-machine-cam"], "\(granted.registry.objects)")
        #expect(try machine.ctl("remotes", as: user).stdout.contains(app))
        // Another user neither sees nor lists it.
        #expect(!(try machine.ctl("remotes", as: other).stdout.contains(app)))

        #expect(try machine.ctl("deny", "--user", String(user), app, "camera").status == 0)
        try granted.waitUntil("the camera gone after the deny", timeout: 1) { $0.nodeID("real-machine-cam") == nil }
        withExtendedLifetime((pipewire, connector)) {}
    }
}
