import DBusKit
import Foundation
import Testing
import PermissionsTestSupport
import SystemPrimitives

/// permissionsctl as a user meets it (issue 17): usage without a bus, one bus
/// option, reset of names nobody knows, the monitor across a restart, --json and
/// doctor. Each runs the built binary and checks its exact output and exit status.
@Suite struct PermissionsctlTests {
    let bus: TestBus
    let daemon: DaemonUnderTest

    init() throws {
        bus = try TestBus()
        daemon = try DaemonUnderTest(bus: bus, start: false)
        try FileManager.default.createDirectory(atPath: daemon.configDirectory + "/permissions.conf.d",
                                                withIntermediateDirectories: true)
        try daemon.start()
    }

    static let ctl = binDir + "/permissionsctl"
    static let noBus = ["PATH": "/usr/bin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent",
                        "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent"]

    // MARK: 4. Usage before any connection

    @Test func helpIsAnsweredWithoutABus() throws {
        let usage = try run(Self.ctl, ["--help"], environment: Self.noBus)
        #expect(usage.status == 0 && usage.stderr == "")
        #expect(usage.stdout.hasPrefix("Usage: permissionsctl [--system | --session | --address ADDRESS] COMMAND"))
        let commands = ["status", "get", "list", "grant", "deny", "reset", "assign", "request", "monitor", "agent",
                        "plugins", "doctor"]
        let asks = [["help"], ["-h"], ["--session", "help"]] + commands.map { [$0, "--help"] }
            + [["agent", "-h"], ["grant", "--user", "1", "--help"], ["request", "--help"]]
        for arguments in asks {
            let r = try run(Self.ctl, arguments, environment: Self.noBus)
            #expect(r.status == 0, "\(arguments): \(r.stderr)")
            #expect(r.stdout == usage.stdout, "\(arguments)")
            #expect(r.stderr == "", "\(arguments)")
        }
        // Every command is in the usage it answers.
        for command in commands { #expect(usage.stdout.contains("\n  \(command) "), "\(command)") }
        // An unknown command is wrong usage, also told without a bus.
        let unknown = try run(Self.ctl, ["frobnicate"], environment: Self.noBus)
        #expect(unknown.status == 2)
        #expect(unknown.stderr == "permissionsctl: unknown command \"frobnicate\"\nTry 'permissionsctl --help'.\n")
    }

    // MARK: 5. One bus

    @Test func conflictingBusOptionsAreRefused() throws {
        let address = bus.address
        for arguments in [["--session", "--system", "plugins"], ["--address", address, "--session", "plugins"],
                          ["--system", "--address", address, "plugins"], ["--address", address, "--system", "doctor"]] {
            let r = try run(Self.ctl, arguments)
            #expect(r.status == 2, "\(arguments): \(r.stdout)")
            #expect(r.stdout == "", "\(arguments)")
            #expect(r.stderr == "permissionsctl: choose one of --system, --session, --address\n"
                    + "Try 'permissionsctl --help'.\n", "\(arguments)")
        }
        // The same option twice is one bus.
        #expect(try run(Self.ctl, ["--address", address, "--address", address, "plugins"]).status == 0)
        for arguments in [["--session", "--system"], ["--address", address, "--session"], ["--system", "--address", address]] {
            let r = try run(binDir + "/permissionsd", arguments + ["--config-dir", daemon.configDirectory])
            #expect(r.status == 2, "\(arguments)")
            #expect(r.stderr == "permissionsd: choose one of --system, --session, --address\n"
                    + "Try 'permissionsd --help'.\n", "\(arguments)")
        }
    }

    // MARK: 6. reset of a name neither provided nor stored

    @Test func resetRefusesNamesNeitherProvidedNorStored() throws {
        #expect(try daemon.ctl("grant", "org.example.App", "location").status == 0)
        #expect(try daemon.ctl("deny", "org.example.App", "notifications").status == 0)
        let listed = try daemon.ctl("list", "org.example.App").stdout

        let one = try daemon.ctl("reset", "org.example.App", "nosuch")
        #expect(one.status == 1)
        #expect(one.stdout == "")
        #expect(one.stderr == "permissionsctl: reset: \"nosuch\": no such permission, and nothing stored under "
                + "that name for org.example.App; nothing removed\n")
        // Nothing removed, even beside a name that would have been.
        let two = try daemon.ctl("reset", "org.example.App", "location", "nosuch", "other")
        #expect(two.status == 1)
        #expect(two.stderr == "permissionsctl: reset: \"nosuch\", \"other\": no such permission, and nothing stored "
                + "under those names for org.example.App; nothing removed\n")
        #expect(try daemon.ctl("list", "org.example.App").stdout == listed)
        // A permission provided but not stored for the app: nothing to remove, no error.
        #expect(try daemon.ctl("reset", "org.example.Other", "location").stdout == "removed 0 decision(s)\n")

        // Stored, but no plugin provides it any more: it still resets.
        daemon.stop()
        daemon.pluginDirectories = [pluginDirectory("only-location", with: ["location"])]
        try daemon.start()
        #expect(try run("/usr/bin/busctl", ["--address=\(bus.address)", "get-property", "org.example.Permissions",
                                            "/org/example/Permissions", "org.example.Permissions", "Permissions"]).stdout
                == "as 1 \"location\"\n")
        let stale = try daemon.ctl("reset", "org.example.App", "notifications")
        #expect(stale.status == 0, "\(stale.stderr)")
        #expect(stale.stdout == "removed 1 decision(s)\n")
        #expect(try daemon.ctl("reset", "org.example.App", "notifications").status == 1)
    }

    // MARK: grant and deny under an administrator's rule

    /// The decision is stored and the exit status is 0, but an admin rule decides
    /// the status: said on stderr. A decision that is in force says nothing.
    @Test func grantAndDenySayWhenTheAdministratorDecides() throws {
        let monitor = try Monitor(daemon)
        try daemon.writeConfig("""
            [location]
            deny=org.example.Locked
            [notifications]
            allow=org.example.Forced;/usr/bin/forced
            """)
        let announced: Set = [statusLine(app: "org.example.Locked", "location", "restricted"),
                              statusLine(app: "org.example.Forced", "notifications", "authorized"),
                              statusLine(app: "/usr/bin/forced", "notifications", "authorized")]
        var seen = Set<String>()
        while seen.count < announced.count { seen.insert(try monitor.waitFor { announced.contains($0) }) }

        for arguments in [["grant", "org.example.Locked", "location"],
                          ["grant", "--user", "\(getuid())", "org.example.Locked", "location"]] {
            let locked = try run(Self.ctl, ["--address", bus.address] + arguments)
            #expect(locked.status == 0, "\(arguments)")
            #expect(locked.stdout == "", "\(arguments)")
            #expect(locked.stderr == "permissionsctl: note: org.example.Locked is restricted for location by the "
                    + "administrator (deny= in permissions.conf): the grant is stored, and applies only once that "
                    + "entry goes\n", "\(arguments)")
        }
        let forced = try daemon.ctl("deny", "org.example.Forced", "notifications")
        #expect(forced.status == 0)
        #expect(forced.stderr == "permissionsctl: note: org.example.Forced is forced on for notifications by the "
                + "administrator (allow= in permissions.conf): the deny is stored, and applies only once that entry "
                + "goes\n")
        let path = try daemon.ctl("deny", "/usr/bin/forced", "notifications")
        #expect(path.status == 0)
        #expect(path.stderr == "permissionsctl: note: /usr/bin/forced is forced on for notifications by the "
                + "administrator (allow= in permissions.conf): the deny is stored, and applies only once that entry "
                + "goes (if /usr/bin/forced runs as a script, allow= does not count for it, and the deny applies)\n")
        // Stored all the same.
        #expect(try daemon.ctl("list", "org.example.Locked").stdout.contains("authorized"))
        #expect(try daemon.ctl("list", "org.example.Forced").stdout.contains("denied"))
        // In force: nothing to say.
        let free = try daemon.ctl("grant", "org.example.Free", "location")
        #expect(free.status == 0 && free.stdout == "" && free.stderr == "")
    }

    // MARK: 8. The monitor sees the service leave and return

    @Test func monitorReportsTheServiceLeavingAndReturning() throws {
        let subscribed = try Monitor(daemon)
        let broadcast = try Monitor(daemon, broadcast: true)
        daemon.stop()
        try subscribed.waitFor { $0 == "org.example.Permissions left the bus" }
        try broadcast.waitFor { $0 == "org.example.Permissions left the bus" }
        try daemon.start()
        let owner = try nameOwner()
        try subscribed.waitFor { $0.hasPrefix("Subscribed to org.example.Permissions at \(owner) (serial ") }
        try broadcast.waitFor { $0 == "org.example.Permissions returned at \(owner)" }
        // Still following after the return.
        #expect(try daemon.ctl("grant", "org.example.After", "location").status == 0)
        try subscribed.waitFor { $0 == statusLine(app: "org.example.After", "location", "authorized") }
    }

    func nameOwner() throws -> String {
        let r = try run("/usr/bin/busctl", ["--address=\(bus.address)", "call", "org.freedesktop.DBus",
                                            "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner", "s",
                                            "org.example.Permissions"])
        return String(r.stdout.dropFirst(3).dropLast(2))  // s ":1.N"\n
    }

    // MARK: 10. --json

    static func object(_ text: String) throws -> Any {
        try JSONSerialization.jsonObject(with: Data(text.utf8))
    }

    /// The rows of a text table, without its header, split at runs of two spaces.
    static func rows(_ table: String) -> [[String]] {
        table.split(separator: "\n").dropFirst().map { line in
            line.components(separatedBy: "  ").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
    }

    @Test func jsonOfStatusListAndPlugins() throws {
        #expect(try daemon.ctl("grant", "org.example.App", "location").status == 0)

        let status = try daemon.ctl("status", "--json")
        #expect(status.status == 0 && status.stdout.hasSuffix("}\n") && status.stdout.split(separator: "\n").count == 1)
        let table = Dictionary(uniqueKeysWithValues: Self.rows(try daemon.ctl("status").stdout).map { ($0[0], $0[1]) })
        #expect(try Self.object(status.stdout) as? [String: String] == table)
        #expect(table.keys.sorted() == ["location", "notifications"])

        let details = try #require(try Self.object(try daemon.ctl("status", "--json", "location").stdout) as? [String: Any])
        let text = try daemon.ctl("status", "location").stdout
        #expect(("\n" + text).contains("\napp-id: \(details["app-id"] as? String ?? "?")\n"))
        #expect(details["uid"] as? Int == Int(getuid()))
        #expect(details["status"] as? String == table["location"])
        #expect(details["devices"] as? [Any] != nil && details["plugin-details"] as? [String: Any] != nil)

        let listText = Self.rows(try daemon.ctl("list").stdout)
        #expect(listText.count == 1)
        let list = try daemon.ctl("list", "--json")
        #expect(try Self.object(list.stdout) as? [[String: String]] == [[
            "app": "org.example.App", "permission": "location", "decision": "authorized",
            "set-at": listText[0][3], "set-by": listText[0][4]]])
        let all = try #require(try Self.object(try daemon.ctl("list", "--all", "--json").stdout) as? [[String: Any]])
        #expect(all.count == 1 && all[0]["user"] as? Int == Int(getuid()) && all[0]["app"] as? String == "org.example.App")
        #expect(try daemon.ctl("list", "--json", "org.example.None").stdout == "[]\n")

        let plugins = try #require(try Self.object(try daemon.ctl("plugins", "--json").stdout) as? [[String: Any]])
        let pluginText = Self.rows(try daemon.ctl("plugins").stdout)
        #expect(plugins.map { $0["name"] as? String ?? "" } == pluginText.map { $0[0] })
        #expect(plugins.map { $0["version"] as? String ?? "" } == pluginText.map { $0[1] })
        #expect(plugins.map { $0["state"] as? String ?? "" } == ["loaded", "loaded"])
        #expect(plugins.map { $0["permissions"] as? [String] ?? [] } == [["location"], ["notifications"]])
        // --json where it means nothing is wrong usage.
        #expect(try daemon.ctl("grant", "--json", "org.example.App", "location").status == 2)
    }

    @Test func monitorJsonIsOneObjectPerLine() throws {
        let monitor = try RunningProgram(Self.ctl, ["--address", bus.address, "monitor", "--json"])
        let first = try monitor.lines.next { $0.hasPrefix("{\"event\":\"monitoring\"") }
        #expect((try? Self.object(first)) as? [String: Any] != nil)
        let serial = UInt64(first.split(separator: ":").last?.dropLast() ?? "")
        #expect(first == "{\"event\":\"monitoring\",\"mode\":\"subscribed\",\"running\":true,\"serial\":\(serial ?? 0)}")
        #expect(try daemon.ctl("grant", "org.example.App", "location").status == 0)
        let changed = try monitor.lines.next { $0.contains("status-changed") }
        #expect(changed == "{\"event\":\"status-changed\",\"app\":\"org.example.App\",\"permission\":\"location\","
                + "\"status\":\"authorized\",\"serial\":\((serial ?? 0) + 1)}")
        daemon.stop()
        #expect(try monitor.lines.next { $0.contains("service-") } == "{\"event\":\"service-left\"}")
        try daemon.start()
        let owner = try nameOwner()
        let returned = try monitor.lines.next { $0.contains("service-") }
        #expect(returned.hasPrefix("{\"event\":\"service-returned\",\"owner\":\"\(owner)\",\"serial\":"))
        try daemon.writeConfig("[notifications]\nenabled=false\n")
        let properties = try monitor.lines.next { $0.contains("properties-changed") && $0.contains("ConfigGeneration") }
        let parsed = try #require(try Self.object(properties) as? [String: Any])
        #expect((parsed["properties"] as? [String: Any])?["ConfigGeneration"] as? Int == 2)
        // Every line is one JSON object.
        for line in monitor.lines.all { #expect((try? Self.object(line)) as? [String: Any] != nil, "\(line)") }
    }

    // MARK: 10 and 3. doctor

    /// What doctor prints of a healthy service, but for the agent lines.
    func healthyReport() throws -> [String] {
        let details = try daemon.ctl("status", "location").stdout.split(separator: "\n")
        let app = details.first { $0.hasPrefix("app-id: ") }.map { String($0.dropFirst(8)) } ?? "?"
        let kind = details.first { $0.hasPrefix("identity-kind: ") }.map { String($0.dropFirst(15)) } ?? "?"
        return ["service: org.example.Permissions at \(try nameOwner())",
                "version: permissionsd 0.1.0, interface version 6",
                "plugins:"] + Self.rows(try daemon.ctl("plugins").stdout).map { "  \($0[0]) \($0[1]): loaded (\($0[3]))" }
            + ["config: ok (generation 1)", "store: ok", "caller: app \(app) (\(kind)), uid \(getuid())"]
    }

    @Test func doctorOfAHealthyService() throws {
        let expected = try healthyReport()
        let alone = try daemon.ctl("doctor")
        #expect(alone.status == 0, "\(alone.stdout)")
        #expect(alone.stdout == (expected + ["agent: none for uid \(getuid())",
                                             "  note: requests take each permission's no-agent answer without asking",
                                             "no problems found"]).joined(separator: "\n") + "\n")
        let agent = try RunningProgram(Self.ctl, ["--address", bus.address, "agent"])
        _ = try agent.lines.next { $0.hasPrefix("Agent registered") }
        let withAgent = try daemon.ctl("doctor")
        #expect(withAgent.status == 0)
        #expect(withAgent.stdout == (expected + ["agent: registered for uid \(getuid())", "no problems found"])
                    .joined(separator: "\n") + "\n")
    }

    @Test func doctorListsTheProblems() throws {
        // A drop-in refused at reload: the last good configuration is kept (issue 17 item 3).
        let monitor = try Monitor(daemon)
        try "[location]\nenabled=maybe\n".write(toFile: daemon.configDirectory + "/permissions.conf.d/10-bad.conf",
                                                 atomically: true, encoding: .utf8)
        try monitor.waitFor { $0.hasPrefix("PropertiesChanged") && $0.contains("ConfigStatus=kept: ") }
        let kept = "kept: \(daemon.configDirectory)/permissions.conf.d/10-bad.conf:2: [location] enabled=maybe: "
            + "expected true or false"
        let r = try daemon.ctl("doctor")
        #expect(r.status == 1)
        let lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.contains("config: \(kept) (generation 1)"), "\(r.stdout)")
        #expect(r.stdout.hasSuffix("\nproblems:\n  - config: \(kept)\n"), "\(r.stdout)")

        // No service on the bus at all.
        daemon.stop()
        let gone = try daemon.ctl("doctor")
        #expect(gone.status == 1)
        #expect(gone.stdout == "service: org.example.Permissions is not on the bus\nproblems:\n"
                + "  - the service is not on the bus, and D-Bus activation cannot start it\n")
        // No bus.
        let noBus = try run(Self.ctl, ["doctor"], environment: Self.noBus)
        #expect(noBus.status == 1)
        #expect(noBus.stdout == "bus: cannot connect: Failed to connect to socket /nonexistent: No such file or directory\n"
                + "problems:\n  - no bus to find the service on\n")
    }
}

/// `permissionsctl request` through StartRequest and the handle's Response, with
/// the one TestAgent as the user: answered, dismissed, and Ctrl-C (Close).
@Suite struct PermissionsctlRequestTests {
    let bus: TestBus
    let daemon: DaemonUnderTest
    let agent: TestAgent

    init() throws {
        bus = try TestBus()
        daemon = try DaemonUnderTest(bus: bus, config: "[location]\nenabled=true\n[notifications]\nenabled=true\n")
        agent = try TestAgent(bus: bus)
    }

    func request(_ arguments: String...) throws -> BackgroundCommand {
        try BackgroundCommand(PermissionsctlTests.ctl, ["--address", bus.address, "request"] + arguments)
    }

    /// The reason and the parent window reach the prompt; the answer is printed
    /// as a word, and the command exits 0 with nothing on stderr.
    @Test func answeredPrintsTheStatusAndExitsZero() throws {
        let command = try request("--parent-window", "x11:1f", "--reason", "to test", "location")
        let prompt = try agent.waitForPrompt()
        #expect(prompt.permission == "location" && prompt.reason == "to test")
        #expect(prompt.details["parent-window"]?.stringValue == "x11:1f")
        agent.answer(prompt, "allow-always")
        let (status, output) = try command.wait()
        #expect(status == 0 && output == "authorized\n", "\(status) \(output) \(command.errorOutput)")
        #expect(command.errorOutput == "")
        #expect(try daemon.ctl("request", "location").stdout == "authorized\n")
    }

    /// Two permissions, the first prompt dismissed and the second answered: the
    /// Response is 1 (the largest code), both statuses are printed as `status`
    /// prints them, and the command exits 1 with one line on stderr.
    @Test func dismissedExitsOneWithALineOnStderr() throws {
        let command = try request("location", "notifications")
        agent.answer(try agent.waitForPrompt(), "dismiss")
        let second = try agent.waitForPrompt(2)
        #expect(second.permission == "notifications")
        agent.answer(second, "allow-once")
        let (status, output) = try command.wait()
        #expect(status == 1)
        #expect(output == "PERMISSION     STATUS\nlocation       not-determined\nnotifications  authorized\n", "\(output)")
        #expect(command.errorOutput == "permissionsctl: request: the prompt was dismissed; nothing was stored\n")
    }

    /// Ctrl-C sends Close: the agent is told to close the prompt, nothing is
    /// stored, and the command exits 130.
    @Test func interruptClosesTheRequest() throws {
        let command = try request("location")
        let prompt = try agent.waitForPrompt()
        kill(command.process.processIdentifier, SIGINT)
        try agent.waitForCancel(prompt.id)
        let (status, output) = try command.wait()
        #expect(status == 130 && output == "", "\(status) \(output)")
        #expect(command.errorOutput == "permissionsctl: request: interrupted; the request was closed and nothing "
                + "was stored\n")
        #expect(try daemon.ctl("get", binDir + "/permissionsctl", "location").stdout
                == "not-determined\n")
    }
}
