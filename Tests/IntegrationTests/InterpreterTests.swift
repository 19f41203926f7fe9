import Foundation
import Testing
import PermissionsTestSupport

/// Scripts of a real interpreter (Debian's /usr/bin/python3, a link to python3.11,
/// with dbus-python) are identified by their path, kind "script": an admin allow=
/// naming the script does not authorize it, a deny= restricts it, and `-c` code is
/// the interpreter's own.
@Suite struct InterpreterTests {
    let bus: TestBus
    let daemon: DaemonUnderTest
    /// The scripts' directory, links resolved (as app ids are).
    let directory: String
    let script: String
    /// A script that follows its stream; allow= names it too.
    let listener: String

    /// What a caller reads about itself: GetDetails of contacts (allow= names the
    /// script) and GetStatus of photos (deny= names it).
    static let reader = """
        import dbus, sys
        bus = dbus.bus.BusConnection(sys.argv[1])
        # No introspection: nothing but the calls themselves.
        o = bus.get_object("org.example.Permissions", "/org/example/Permissions", introspect=False)
        p = dbus.Interface(o, "org.example.Permissions")
        d = p.GetDetails("contacts")
        print(d["app-id"], d["identity-kind"], d.get("interpreter", "-"), d["status"], d["policy"],
              d.get("policy-ignored", "-"))
        print(p.GetStatus("photos"))

        """

    init() throws {
        bus = try TestBus()
        daemon = try DaemonUnderTest(bus: bus, start: false)
        directory = URL(fileURLWithPath: daemon.root).resolvingSymlinksInPath().path + "/bin"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        script = directory + "/tool.py"
        listener = directory + "/listen.py"
        try Self.reader.write(toFile: script, atomically: true, encoding: .utf8)
        try daemon.writeConfig("""
            [permissions]
            declare=contacts;photos
            [contacts]
            allow=\(script);\(listener)
            [photos]
            deny=\(script)
            """)
        try daemon.start()
    }

    private var python: String { URL(fileURLWithPath: "/usr/bin/python3").resolvingSymlinksInPath().path }

    @Test func aScriptIsItsPathAndAllowDoesNotCountForIt() throws {
        #expect(python.hasPrefix("/usr/bin/python3."))
        // Relative to the current directory, through the link /usr/bin/python3.
        let r = try run("/usr/bin/python3", ["tool.py", bus.address], directory: directory)
        #expect(r.stdout == "\(script) script \(python) not-determined none allow\nrestricted\n", "\(r.stderr)")
        // What the administrator's allow= is for: an executable's id (or an app's).
        #expect(try daemon.ctl("get", script, "contacts").stdout == "authorized\n")
    }

    @Test func inlineCodeIsTheInterpreters() throws {
        let r = try run("/usr/bin/python3", ["-c", Self.reader, bus.address], directory: directory)
        #expect(r.stdout == "\(python) executable - not-determined none -\nnot-determined\n", "\(r.stderr)")
    }

    @Test func theUsersOwnDecisionCountsAndReachesTheScriptsStream() throws {
        // A script subscribed to its app stream; under allow= an executable of the
        // path would read "authorized" before and after the grant, the script does not.
        try """
            import dbus, dbus.mainloop.glib, sys
            from gi.repository import GLib
            dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
            bus = dbus.bus.BusConnection(sys.argv[1])
            def changed(app, permission, status, serial):
                print("StatusChanged", app, permission, status, flush=True)
            bus.add_signal_receiver(changed, "StatusChanged", "org.example.Permissions",
                                    path="/org/example/Permissions/Subscription")
            o = bus.get_object("org.example.Permissions", "/org/example/Permissions", introspect=False)
            p = dbus.Interface(o, "org.example.Permissions")
            p.Subscribe(dbus.Dictionary({"scope": "app"}, signature="sv"))
            print("subscribed", p.GetStatus("contacts"), flush=True)
            GLib.MainLoop().run()
            """.write(toFile: listener, atomically: true, encoding: .utf8)
        let program = try RunningProgram("/usr/bin/python3", [listener, bus.address])
        _ = try program.lines.next(timeout: 15) { $0 == "subscribed not-determined" }
        let grant = try daemon.ctl("grant", listener, "contacts")
        #expect(grant.status == 0, "\(grant.stderr)")
        _ = try program.lines.next(timeout: 15) { $0 == "StatusChanged \(listener) contacts authorized" }
    }

    @Test func withoutInterpretersTheScriptHasTheInterpretersID() throws {
        let monitor = try Monitor(daemon)
        try daemon.writeConfig("""
            [identity]
            interpreters=
            [permissions]
            declare=contacts;photos
            [contacts]
            allow=\(script)
            [photos]
            deny=\(script)
            """)
        try monitor.waitFor { $0.hasPrefix("PropertiesChanged") && $0.contains("ConfigGeneration=2") }
        let r = try run("/usr/bin/python3", [script, bus.address])
        #expect(r.stdout == "\(python) executable - not-determined none -\nnot-determined\n", "\(r.stderr)")
    }
}
