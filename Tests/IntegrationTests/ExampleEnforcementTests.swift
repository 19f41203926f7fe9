import Foundation
import Testing
import PermissionsTestSupport

/// The C example (Plugins/Example) shows ABI 1.3's enforcement: built from the
/// source tree with its Makefile, it names "example-lan" in `enforced`, and an app
/// that calls OpenPipeWireRemote("example-lan") gets a socket on which the plugin
/// writes each status the host tells it (remote_status), until the app closes it
/// (remote_closed).
@Suite struct ExampleEnforcementTests {
    /// An app in Python (dbus-python): opens the remote and prints what comes on it.
    static let app = """
        import dbus, os
        bus = dbus.bus.BusConnection(os.environ["ADDRESS"])
        service = bus.get_object("org.example.Permissions", "/org/example/Permissions")
        try:
            fd = service.OpenPipeWireRemote("example-lan", dbus.Dictionary({}, signature="sv"),
                                            dbus_interface="org.example.Permissions")
        except dbus.DBusException as e:
            print("error", e.get_dbus_name(), flush=True)
            raise SystemExit(2)
        remote = os.fdopen(fd.take(), "r")
        print("opened", flush=True)
        for line in remote:
            print("status", line.strip(), flush=True)
        print("closed", flush=True)
        """

    @Test func anAppHearsEachStatusOnItsRemoteAndClosingItEndsIt() throws {
        let directory = try makeTemporaryDirectory("example-enforcement")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for file in ["Makefile", "example-lan.c"] {
            try FileManager.default.copyItem(atPath: packageRoot + "/Plugins/Example/" + file,
                                             toPath: directory + "/" + file)
        }
        let made = try run("/usr/bin/make", ["-C", directory], environment: ["PKG_CONFIG_PATH": packageRoot + "/Plugins/sdk",
                                                                            "PATH": "/usr/bin:/bin"])
        try #require(made.status == 0, "make: \(made.stderr)")
        let plugins = try makeTemporaryDirectory("example-plugins")
        defer { try? FileManager.default.removeItem(atPath: plugins) }
        try FileManager.default.copyItem(atPath: directory + "/libpermissions-example-lan.so",
                                         toPath: plugins + "/libpermissions-example-lan.so")
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [corePluginDirectory, plugins])
        try Self.app.write(toFile: directory + "/app.py", atomically: true, encoding: .utf8)
        // Its app id: the script's canonical path.
        let resolved = try #require(realpath(directory + "/app.py", nil))
        let script = String(cString: resolved)
        free(resolved)

        func start() throws -> RunningProgram {
            var environment = ProcessInfo.processInfo.environment
            environment["ADDRESS"] = bus.address
            return try RunningProgram("/usr/bin/python3", [script], environment: environment)
        }
        let refused = try start()
        _ = try refused.lines.next { $0 == "error org.example.Permissions.Error.NotAuthorized" }

        // The daemon takes the script for its path (kind "script").
        #expect(try daemon.ctl("grant", script, "example-lan").status == 0)
        let app = try start()
        _ = try app.lines.next { $0 == "opened" }
        _ = try app.lines.next { $0 == "status authorized" }
        #expect(try daemon.ctl("deny", script, "example-lan").status == 0)
        _ = try app.lines.next { $0 == "status denied" }
        try daemon.writeConfig("[example-lan]\nenabled=false\n")
        _ = try app.lines.next { $0 == "status disabled" }
        #expect(try daemon.ctl("remotes").stdout.contains(script))
        // The plugin's fini (the daemon stopping) closes its end.
        daemon.stop()
        _ = try app.lines.next { $0 == "closed" }
    }
}
