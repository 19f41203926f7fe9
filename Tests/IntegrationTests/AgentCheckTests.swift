import Foundation
import Testing
import PermissionsTestSupport

/// The agent check (AgentReachability.swift) for a user other than root, whose
/// agents come and go during their checks.
@Suite(.serialized)
struct AgentCheckTests {
    private let bus: PolkitTestSystemBus
    private let polkit: PolkitTestMock
    private let daemon: PolkitTestDaemon
    private static let user: UInt32 = 1

    init() throws {
        bus = try TestBus(type: "system")
        polkit = try PolkitTestMock(bus: bus)
        try polkit.setAllowed(["org.example.permissions.agent"])
        daemon = try PolkitTestDaemon(bus: bus)
    }

    /// An agent of uid 1 that unregisters while its reachability check is under
    /// way (and answers the check afterwards): the check's end must free uid 1's
    /// "check under way" slot. It removed uid 0's instead (`agent?.uid ?? 0`, the
    /// agent being gone), so no later agent of uid 1 was ever checked, and doctor
    /// never reported one the daemon cannot call.
    @Test func aCheckWhoseAgentLeftDoesNotStopLaterChecksOfItsUser() throws {
        let script = """
            import dbus, dbus.service, dbus.mainloop.glib, time
            from gi.repository import GLib
            dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
            bus = dbus.SystemBus()
            svc = dbus.Interface(bus.get_object("org.example.Permissions", "/org/example/Permissions"),
                                 "org.example.Permissions")
            loop = GLib.MainLoop()
            deadline = time.monotonic() + 10
            def poll():
                found = str(svc.GetDiagnostics()["agent-unreachable"])
                if found or time.monotonic() > deadline:
                    print("UNREACHABLE=" + found, flush=True); loop.quit(); return False
                return True
            def second():
                # Nothing is exported there: its check fails at once (UnknownMethod).
                svc.RegisterAgent(dbus.ObjectPath("/not/exported"))
                GLib.timeout_add(50, poll)
            class Agent(dbus.service.Object):
                @dbus.service.method("org.example.Permissions.Agent", in_signature="s", out_signature="",
                                     async_callbacks=("ok", "err"))
                def Cancel(self, prompt, ok, err):
                    # The check: leave first, answer after (same connection: in that order).
                    def left():
                        ok(); GLib.idle_add(second)
                    svc.UnregisterAgent(dbus.ObjectPath("/first"), reply_handler=left, error_handler=print)
            Agent(bus, "/first")
            svc.RegisterAgent(dbus.ObjectPath("/first"))
            loop.run()
            """
        let r = try run("/usr/bin/python3", ["-c", script], asUser: Self.user, environment: bus.environment)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.hasPrefix("UNREACHABLE=it does not implement org.example.Permissions.Agent at /not/exported"),
                "\(r.stdout)\n\((try? String(contentsOfFile: daemon.logFile, encoding: .utf8)) ?? "")")
    }
}
