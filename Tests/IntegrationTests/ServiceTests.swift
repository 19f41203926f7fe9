import Foundation
import FoundationXML
import Testing
import PermissionsTestSupport

/// The daemon answers real clients (busctl, gdbus) on a private bus.
@Suite struct ServiceTests {
    let bus: TestBus
    let daemon: DaemonUnderTest

    init() throws {
        bus = try TestBus()
        daemon = try DaemonUnderTest(bus: bus, config: """
            [location]
            enabled=true
            max-accuracy=city
            """)
    }

    @Test func busctlGetStatus() throws {
        let r = try daemon.call("GetStatus", "s", "location")
        #expect(r.status == 0)
        #expect(r.stdout == "s \"not-determined\"\n")
    }

    @Test func gdbusGetAll() throws {
        let r = try daemon.gdbusCall("GetAll")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "({'location': 'not-determined', 'notifications': 'not-determined'},)\n")
    }

    @Test func introspectionIsTheInterfaceFile() throws {
        let r = try daemon.busctl(["introspect", "--xml-interface", "org.example.Permissions",
                                   "/org/example/Permissions"])
        #expect(r.status == 0)
        let file = try String(contentsOfFile: packageRoot + "/dbus/org.example.Permissions.xml", encoding: .utf8)
        let start = file.range(of: "<interface ")!.lowerBound
        let end = file.range(of: "</interface>")!.upperBound
        #expect(r.stdout.contains(String(file[start..<end])))
        #expect(r.stdout.contains("<interface name=\"org.freedesktop.DBus.Properties\">"))
        // Well-formed XML, which strict parsers (python-dbus uses expat) insist on.
        let full = try daemon.busctl(["introspect", "--xml-interface", "org.example.Permissions", "/"])
        for xml in [r.stdout, full.stdout] {
            let parser = XMLParser(data: Data(xml.utf8))
            #expect(parser.parse(), "\(parser.parserError.map { "\($0)" } ?? "")")
        }

        // gdbus parses it too, with every method of the contract.
        let g = try run("/usr/bin/gdbus", ["introspect", "--address", bus.address, "--dest", "org.example.Permissions",
                                           "--object-path", "/org/example/Permissions"])
        #expect(g.status == 0)
        for method in ["GetStatus(", "GetAll(", "GetDetails(", "GetStatusForApp(", "SetDecision(",
                       "ResetDecisions(", "ListDecisions(", "StatusChanged("] {
            #expect(g.stdout.contains(method), "\(method) missing from gdbus introspect")
        }
    }

    @Test func introspectionOfParentPathsLeadsToTheObject() throws {
        let r = try daemon.busctl(["tree", "--list", "org.example.Permissions"])
        #expect(r.status == 0)
        #expect(r.stdout.split(separator: "\n").contains("/org/example/Permissions"))
    }

    @Test func properties() throws {
        let permissions = try daemon.busctl(["get-property", "org.example.Permissions", "/org/example/Permissions",
                                             "org.example.Permissions", "Permissions"])
        #expect(permissions.stdout == "as 2 \"location\" \"notifications\"\n")
        let version = try daemon.busctl(["get-property", "org.example.Permissions", "/org/example/Permissions",
                                         "org.example.Permissions", "version"])
        #expect(version.stdout == "u 6\n")
        let plugins = try daemon.busctl(["get-property", "org.example.Permissions", "/org/example/Permissions",
                                         "org.example.Permissions", "Plugins"])
        #expect(plugins.stdout == "a(sssas) 2 \"location\" \"1.0\" \"loaded\" 1 \"location\" "
                + "\"notifications\" \"1.0\" \"loaded\" 1 \"notifications\"\n")
        let set = try daemon.busctl(["set-property", "org.example.Permissions", "/org/example/Permissions",
                                     "org.example.Permissions", "version", "u", "2"])
        #expect(set.status != 0)
        #expect(set.stderr.contains("read-only"))
    }

    @Test func detailsOfTheCaller() throws {
        let r = try daemon.ctl("status", "location")
        #expect(r.status == 0, "\(r.stderr)")
        let lines = Set(r.stdout.split(separator: "\n").map(String.init))
        #expect(lines.contains("app-id: \(binDir)/permissionsctl"))
        #expect(lines.contains("identity-kind: executable"))
        #expect(lines.contains("status: not-determined"))
        #expect(lines.contains("service-state: available"))
        #expect(lines.contains("plugin: location"))
        #expect(lines.contains("plugin-details: max-accuracy=city"))
    }

    @Test func peerMethodsAnswer() throws {
        let ping = try daemon.busctl(["call", "org.example.Permissions", "/org/example/Permissions",
                                      "org.freedesktop.DBus.Peer", "Ping"])
        #expect(ping.status == 0, "\(ping.stderr)")
        #expect(ping.stdout == "")
        // At any path, as libdbus answers it: Peer is about the peer, not an object.
        let id = try daemon.busctl(["call", "org.example.Permissions", "/nowhere",
                                    "org.freedesktop.DBus.Peer", "GetMachineId"])
        let machineID = try (try? String(contentsOfFile: "/var/lib/dbus/machine-id", encoding: .utf8))
            ?? String(contentsOfFile: "/etc/machine-id", encoding: .utf8)
        #expect(id.stdout == "s \"\(machineID.trimmingCharacters(in: .whitespacesAndNewlines))\"\n", "\(id.stderr)")
    }

    /// Every method of the standard interfaces checks its arguments' signature, as
    /// the service's own methods do: `busctl call … Introspect s foo` is refused with
    /// InvalidArgs quoting the signature, not answered with the XML.
    @Test(arguments: [
        ("org.freedesktop.DBus.Introspectable", "Introspect", ["s", "foo"], "''", "'s'"),
        ("org.freedesktop.DBus.Peer", "Ping", ["s", "foo"], "''", "'s'"),
        ("org.freedesktop.DBus.Peer", "GetMachineId", ["u", "1"], "''", "'u'"),
        ("org.freedesktop.DBus.Properties", "Get", ["s", "org.example.Permissions"], "'ss'", "'s'"),
        ("org.freedesktop.DBus.Properties", "GetAll", [], "'s'", "''"),
        ("org.freedesktop.DBus.Properties", "Set", ["ss", "org.example.Permissions", "version"], "'ssv'", "'ss'"),
    ])
    func standardMethodsCheckTheirSignature(interface: String, member: String, arguments: [String],
                                            expected: String, got: String) throws {
        let r = try daemon.busctl(["call", "org.example.Permissions", "/org/example/Permissions", interface, member]
                                  + arguments)
        #expect(r.status != 0)
        #expect(r.stdout == "")
        #expect(r.stderr == "Call failed: \(member) takes arguments of type \(expected), not \(got)\n")
        // The error's name, which busctl does not print.
        let g = try run("/usr/bin/python3", ["-c", """
            import dbus, sys
            bus = dbus.bus.BusConnection(sys.argv[1])
            signature, values = sys.argv[4], sys.argv[5:]
            values = [int(v) if t == "u" else v for t, v in zip(signature, values)]
            try:
                bus.call_blocking("org.example.Permissions", "/org/example/Permissions", sys.argv[2], sys.argv[3],
                                  signature, values)
            except dbus.exceptions.DBusException as e:
                print(e.get_dbus_name())
            """, bus.address, interface, member] + (arguments.isEmpty ? [""] : arguments))
        #expect(g.stdout == "org.freedesktop.DBus.Error.InvalidArgs\n", "\(g.stderr)")
    }
}
