import Foundation
import Glibc
import PermissionsClient
import PermissionsTestSupport
import Testing

/// Which bus the library and permissionsctl talk to: the system bus unless
/// PERMISSIONS_BUS names another, and an explicit choice over the variable.
@Suite struct BusChoiceTests {
    static let ctl = binDir + "/permissionsctl"

    /// The test runner's environment with PERMISSIONS_BUS set to `value` (or unset).
    static func environment(_ value: String?, _ more: [String: String] = [:]) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment.merging(more) { $1 }
        environment["PERMISSIONS_BUS"] = value
        return environment
    }

    /// permissionsctl's and the library's message for a value that names no bus.
    static func refusal(_ value: String, _ reason: String) -> String {
        "PERMISSIONS_BUS=\"\(value)\": expected system, session or a D-Bus address such as "
            + "unix:path=/run/dbus/system_bus_socket (\(reason))"
    }

    @Test func theVariableNamesABus() throws {
        #expect(try PermissionsClient.Bus(parsing: "system") == .system)
        #expect(try PermissionsClient.Bus(parsing: "session") == .session)
        #expect(try PermissionsClient.Bus(parsing: "unix:path=/tmp/bus") == .address("unix:path=/tmp/bus"))
        #expect(try PermissionsClient.Bus(parsing: "unix:abstract=x,guid=0123;tcp:host=localhost,port=1")
                == .address("unix:abstract=x,guid=0123;tcp:host=localhost,port=1"))
        for (value, reason) in [("System", "Address does not contain a colon"),
                                ("sesion", "Address does not contain a colon"),
                                ("", "Empty address ''"), (";", "Address does not contain a colon"),
                                ("unix:path", "'=' character not found or has no value following it")] {
            do {
                let bus = try PermissionsClient.Bus(parsing: value)
                Issue.record("\"\(value)\" was taken for \(bus)")
            } catch {
                #expect(error.code == .unavailable)
                #expect(error.name == "org.freedesktop.DBus.Error.BadAddress")
                #expect(error.message == Self.refusal(value, reason))
                #expect(error.localizedDescription == error.message)
            }
        }
    }

    /// Without PERMISSIONS_BUS (the test environment unsets it), the library's
    /// default is the system bus: here the stand-in system bus of with-test-env.sh.
    @Test func theLibrarysDefaultIsTheSystemBus() throws {
        #expect(getenv("PERMISSIONS_BUS") == nil, "run inside Tests/testenv/with-test-env.sh")
        #expect(try PermissionsClient.Bus.fromEnvironment() == .system)
        let client = try PermissionsClient()
        let pid = try run("/usr/bin/busctl", ["--system", "call", "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                              "org.freedesktop.DBus", "GetConnectionUnixProcessID", "s", client.uniqueName])
        #expect(pid.stdout == "u \(getpid())\n", "\(pid.stderr)")
    }

    /// permissionsctl without a bus option takes PERMISSIONS_BUS: its admin calls,
    /// and `status`, which goes through the library's PermissionsClient().
    @Test func permissionsctlAndTheLibraryTakeTheVariable() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus)
        let nowhere = ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent"]
        let expected = try run(Self.ctl, ["--address", bus.address, "status"]).stdout
        #expect(expected.contains("location "), "\(expected)")
        let cases: [(String, [String: String])] = [
            (bus.address, nowhere),
            ("session", nowhere.merging(["DBUS_SESSION_BUS_ADDRESS": bus.address]) { $1 }),
            ("system", nowhere.merging(["DBUS_SYSTEM_BUS_ADDRESS": bus.address]) { $1 }),
        ]
        for (value, buses) in cases {
            for command in [["status"], ["plugins"]] {
                let r = try run(Self.ctl, command, environment: Self.environment(value, buses))
                #expect(r.status == 0, "PERMISSIONS_BUS=\(value) \(command): \(r.stderr)")
                if command == ["status"] { #expect(r.stdout == expected, "PERMISSIONS_BUS=\(value)") }
            }
        }
        // Unset (or empty): the system bus.
        for value in [nil, ""] as [String?] {
            let r = try run(Self.ctl, ["status"], environment: Self.environment(value, nowhere.merging(
                ["DBUS_SYSTEM_BUS_ADDRESS": bus.address]) { $1 }))
            #expect(r.status == 0 && r.stdout == expected, "PERMISSIONS_BUS=\(value ?? "(unset)"): \(r.stderr)")
        }
        daemon.stop()
    }

    /// --system, --session and --address win over the variable, even one that names no bus.
    @Test func anOptionWinsOverTheVariable() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus)
        let buses = ["DBUS_SYSTEM_BUS_ADDRESS": bus.address, "DBUS_SESSION_BUS_ADDRESS": bus.address]
        for value in ["unix:path=/nonexistent", "bogus"] {
            for option in [["--address", bus.address], ["--session"], ["--system"]] {
                for command in [["status"], ["plugins"]] {
                    let r = try run(Self.ctl, option + command, environment: Self.environment(value, buses))
                    #expect(r.status == 0, "PERMISSIONS_BUS=\(value) \(option + command): \(r.stderr)")
                }
            }
        }
        // The variable alone, naming nowhere: the bus it names, not a fallback.
        let r = try run(Self.ctl, ["plugins"], environment: Self.environment("unix:path=/nonexistent", buses))
        #expect(r.status == 1)
        #expect(r.stderr.hasPrefix("permissionsctl: cannot connect to the bus: "), "\(r.stderr)")
        daemon.stop()
    }

    @Test func aBadValueIsRefusedInOneLine() throws {
        for (value, reason) in [("bogus", "Address does not contain a colon"), ("SESSION", "Address does not contain a colon")] {
            for command in [["status"], ["plugins"], ["doctor"], ["agent"]] {
                let r = try run(Self.ctl, command, environment: Self.environment(value))
                #expect(r.status == 2, "\(value) \(command)")
                #expect(r.stdout == "", "\(value) \(command)")
                #expect(r.stderr == "permissionsctl: " + Self.refusal(value, reason) + "\n", "\(value) \(command)")
            }
        }
        // Usage is answered before any bus, whatever the variable says.
        #expect(try run(Self.ctl, ["--help"], environment: Self.environment("bogus")).status == 0)
    }
}
