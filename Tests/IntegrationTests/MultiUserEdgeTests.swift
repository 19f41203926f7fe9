import Foundation
import Testing
import DBusKit
import PermissionsTestSupport

// Odd orderings and odd input for the multi-user service (issue 13), found by
// trying to break it: permissionsd with --system on a stand-in system bus, polkit
// from dbusmock, clients as real uids through setpriv.

@Suite("Many users, one daemon: odd orderings and input", .serialized)
struct MultiUserEdgeTests {
    private let bus: PolkitTestSystemBus
    private let polkit: PolkitTestMock
    private let daemon: PolkitTestDaemon

    init() throws {
        bus = try TestBus(type: "system")
        polkit = try PolkitTestMock(bus: bus)
        try polkit.setAllowed(["org.example.permissions.manage-own", "org.example.permissions.agent"])
        daemon = try PolkitTestDaemon(bus: bus, config: "[location]\nno-agent=denied\n")
    }

    /// A connection that registers an agent and leaves while polkit decides (a real
    /// polkit may be asking its user for a password) must not leave an agent behind:
    /// its user's prompts would go to nobody, and their no-agent answer never apply.
    @Test func anAgentWhoseConnectionLeftWhilePolkitDecidedIsNotRegistered() throws {
        let monitor = try BackgroundLines("/usr/bin/dbus-monitor", ["--address", bus.address,
            "type='method_call',interface='org.freedesktop.PolicyKit1.Authority',member='CheckAuthorization'"])
        // dbus-monitor is a monitor once it has lost its own name.
        _ = try monitor.lines.next { $0.contains("member=NameLost") }
        polkit.pause()
        defer { polkit.resume() }
        let agent = try BackgroundLines("/usr/bin/setpriv", ["--reuid=1", "--regid=1", "--clear-groups",
            "/usr/bin/busctl", "--address=\(bus.address)", "call", "org.example.Permissions", "/org/example/Permissions",
            "org.example.Permissions", "RegisterAgent", "o", "/org/example/Gone"])
        // The daemon has identified the caller and asks polkit about it (subject: its unique name).
        _ = try monitor.lines.next { $0.contains("member=CheckAuthorization") }
        let subject = try monitor.lines.next { $0.contains("variant") && $0.contains("string \":") }
        let name = String(subject.split(separator: "\"")[1])
        agent.kill()
        try bus.waitForNameToGo(name)
        // The daemon was told of the leave before polkit's answer, which comes now.
        polkit.resume()
        // polkit answers in order: once user 2's own change (manage-own) is done,
        // the agent's authorization has been answered too.
        #expect(try daemon.ctl("grant", "org.example.Fence", "location", asUser: 2).status == 0)

        let request = try daemon.call("Request", "sa{sv}", "location", "0", asUser: 1)
        #expect(request.stdout == "s \"denied\"\n", "\(request.stderr); log:\n\(daemon.log)")
        #expect(!daemon.log.contains("/org/example/Gone of uid 1 registered"), "\(daemon.log)")
    }

    /// Each scope has serials of its own (an app's stream is behind its user's), so a
    /// subscription that changed scope would see its serials go backwards: Subscribe
    /// again keeps the scope it has, or is refused, quoting it.
    @Test func aSubscriptionKeepsItsScope() throws {
        let client = try BusClient(bus: bus, label: "subscriber")
        defer { client.close() }
        let first = try client.call("Subscribe", [.vardict([("scope", .string("user"))])]).get()
        #expect(try daemon.ctl("grant", "org.example.Counted", "location").status == 0)
        // The same scope again: the same stream, its serial one change further.
        let again = try client.call("Subscribe", [.vardict([])]).get()
        #expect(again.first?.uint64Value == first.first!.uint64Value! + 1)
        let moved = client.call("Subscribe", [.vardict([("scope", .string("app"))])])
        guard case .failure(let error) = moved else {
            Issue.record("Subscribe with another scope was accepted: \(moved)")
            return
        }
        #expect(error.name == "org.example.Permissions.Error.InvalidArgument")
        #expect(error.message.contains("scope \"user\""), "\(error.message)")
        // A new subscription may choose.
        _ = try client.call("Unsubscribe").get()
        _ = try client.call("Subscribe", [.vardict([("scope", .string("app"))])]).get()
    }

    /// An option of the wrong type is refused naming the type given.
    @Test func anOptionOfTheWrongTypeIsQuoted() throws {
        let r = try daemon.gdbusCall("Subscribe", "{'scope': <int32 3>}")
        #expect(r.stderr.contains("org.example.Permissions.Error.InvalidArgument"), "\(r.stderr)")
        #expect(r.stderr.contains("option \"scope\" must be a string (s), not \"i\""), "\(r.stderr)")
        let request = try daemon.gdbusCall("Request", "location", "{'reason': <['a']>}")
        #expect(request.stderr.contains("option \"reason\" must be a string (s), not \"as\""), "\(request.stderr)")
    }

    /// `--user NAME` takes any user name, digits and all; a bare number is a uid;
    /// two different --user are refused, as is (uid_t)-1. The name comes from a
    /// passwd file of this test, bind-mounted over /etc/passwd in a mount namespace
    /// of permissionsctl's own (root may manage from any).
    @Test func userNamesWithDigitsAreNamesAndTwoUsersAreRefused() throws {
        let passwd = try makeTemporaryDirectory("passwd") + "/passwd"
        try (String(contentsOfFile: "/etc/passwd", encoding: .utf8) + "alice2:x:1:1::/nonexistent:/bin/false\n")
            .write(toFile: passwd, atomically: true, encoding: .utf8)
        let ctl = binDir + "/permissionsctl"
        let named = try run("/usr/bin/unshare", ["--mount", "--propagation", "private", "/bin/sh", "-c",
            "mount --bind \"$0\" /etc/passwd && exec \"$@\"", passwd,
            ctl, "--address", bus.address, "grant", "--user", "alice2", "org.example.Digits", "location"])
        #expect(named.status == 0, "\(named.stderr)")
        #expect(try daemon.call("GetStatusForApp", "ss", "org.example.Digits", "location", asUser: 1).stdout
                == "s \"authorized\"\n")

        for (arguments, message) in [
            (["deny", "--user", "1", "--user", "2", "org.example.Digits", "location"],
             "--user given more than once: \"1\", \"2\""),
            (["deny", "--user", "4294967295", "org.example.Digits", "location"], "invalid uid \"4294967295\""),
            (["deny", "--user", "99999999999", "org.example.Digits", "location"], "invalid uid \"99999999999\""),
            (["deny", "--user", "nosuchuser2", "org.example.Digits", "location"], "unknown user \"nosuchuser2\""),
        ] {
            let r = try run(binDir + "/permissionsctl", ["--address", bus.address] + arguments)
            #expect(r.status == 2, "\(arguments): \(r.stderr)")
            #expect(r.stderr.contains(message), "\(arguments): \(r.stderr)")
        }
        #expect(try daemon.call("GetStatusForApp", "ss", "org.example.Digits", "location", asUser: 1).stdout
                == "s \"authorized\"\n")
        #expect(try daemon.call("GetStatusForApp", "ss", "org.example.Digits", "location", asUser: 2).stdout
                == "s \"not-determined\"\n")
    }

    /// `--user` on a command that takes no options is a usage error naming it, never
    /// an argument (a permission name "--user", a user "org.example.X").
    @Test func optionsOfCommandsWithoutOptionsAreRefused() throws {
        for arguments in [["status", "--user", "2"], ["request", "--user", "2", "location"],
                          ["assign", "--user", "2", "org.example.Old"], ["plugins", "--all"]] {
            let r = try run(binDir + "/permissionsctl", ["--address", bus.address] + arguments, asUser: 1)
            #expect(r.status == 2, "\(arguments): \(r.stderr)")
            #expect(r.stderr.hasPrefix("permissionsctl: \(arguments[0]) takes no --"), "\(arguments): \(r.stderr)")
        }
        // --reason is request's own, before the permissions.
        let r = try run(binDir + "/permissionsctl", ["--address", bus.address, "request", "--reason", "-why-",
                                                     "location"], asUser: 1)
        #expect(r.stdout == "denied\n", "\(r.stderr)")
    }
}

/// A program whose standard output lines are collected; killed when done with.
private final class BackgroundLines {
    let process = Process()
    let lines: LineCollector

    init(_ executable: String, _ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let out = Pipe()
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        lines = LineCollector(out.fileHandleForReading)
    }

    func kill() {
        guard process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit { kill() }
}
