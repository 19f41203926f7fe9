#!/usr/bin/python3
"""Stand-ins for an agent and for an app on a test bus, through GDBus (python3-gi).

  bus-app.py agent ADDRESS ANSWER [EXPIRES_AT]
      register an org.example.Permissions.Agent that answers ANSWER to every Ask,
      with "expires-at" (x, microseconds since the epoch) in its results when
      given; print "registered", then "asked APP PERMISSION" for each Ask
  bus-app.py request ADDRESS PERMISSION
      print "app-id APP" (GetDiagnostics: what the service takes this process
      for), Request PERMISSION and print the status, then stay connected (a
      session grant lasts as long as the connection) until killed

Each line is flushed as it is printed, for the test to wait on.
"""
import sys

from gi.repository import Gio, GLib

SERVICE = ("org.example.Permissions", "/org/example/Permissions", "org.example.Permissions")
AGENT_PATH = "/org/example/TestAgent"
AGENT_XML = """<node><interface name="org.example.Permissions.Agent">
  <method name="Ask"><arg type="s" direction="in"/><arg type="s" direction="in"/><arg type="s" direction="in"/>
    <arg type="s" direction="in"/><arg type="a{sv}" direction="in"/>
    <arg type="s" direction="out"/><arg type="a{sv}" direction="out"/></method>
  <method name="Cancel"><arg type="s" direction="in"/></method>
</interface></node>"""


def say(line):
    print(line, flush=True)


def connect(address):
    flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
    return Gio.DBusConnection.new_for_address_sync(address, flags, None, None)


def call(bus, method, args, reply):
    return bus.call_sync(*SERVICE, method, args, GLib.VariantType(reply), Gio.DBusCallFlags.NONE, GLib.MAXINT,
                         None).unpack()


def agent(bus, answer, expires_at):
    results = {"expires-at": GLib.Variant("x", int(expires_at))} if expires_at else {}

    def on_call(connection, sender, path, interface, method, parameters, invocation):
        if method == "Ask":
            _, app, permission, _, _ = parameters.unpack()
            say(f"asked {app} {permission}")
            invocation.return_value(GLib.Variant("(sa{sv})", (answer, results)))
        else:
            invocation.return_value(None)

    info = Gio.DBusNodeInfo.new_for_xml(AGENT_XML).interfaces[0]
    bus.register_object(AGENT_PATH, info, on_call, None, None)
    call(bus, "RegisterAgent", GLib.Variant("(o)", (AGENT_PATH,)), "()")
    say("registered")
    GLib.MainLoop().run()


def request(bus, permission):
    (diagnostics,) = call(bus, "GetDiagnostics", None, "(a{sv})")
    say(f"app-id {diagnostics['app-id']}")
    (status,) = call(bus, "Request", GLib.Variant("(sa{sv})", (permission, {})), "(s)")
    say(status)
    GLib.MainLoop().run()


def main(argv):
    bus = connect(argv[2])
    if argv[1] == "agent":
        agent(bus, argv[3], argv[4] if len(argv) > 4 else None)
    elif argv[1] == "request":
        request(bus, argv[3])
    else:
        sys.exit(f"bus-app.py: unknown command {argv[1]}")


if __name__ == "__main__":
    main(sys.argv)
