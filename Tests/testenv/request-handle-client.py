'''A client of StartRequest that a test drives line by line, on one connection.

usage: /usr/bin/python3 request-handle-client.py ADDRESS [TIMEOUT_MS]

Commands on stdin, one a line:
  start TOKEN PERMISSION... [key=value...]
      subscribes to the Response of the handle it will have (TOKEN "-": no
      handle_token, no subscription beforehand), then calls StartRequest with a
      call timeout of TIMEOUT_MS (default 1000) and the options given (strings);
      prints "handle PATH MS" (MS: how long the call took) or "error NAME MESSAGE"
  close PATH       calls Close on PATH; prints "closed PATH" or "error NAME MESSAGE"
  quit             leaves the bus and exits
Prints "name UNIQUE" first, "response PATH CODE STATUSES ERROR" for each Response
addressed to it (STATUSES "perm=status,..." sorted, ERROR the error name or "-"),
and "service-left" when org.example.Permissions loses its owner. Lines come in
the order the bus delivered the messages.
'''

import sys
import time

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

SERVICE = 'org.example.Permissions'
HANDLE_INTERFACE = 'org.example.Permissions.RequestHandle'


def say(*words):
    print(*words, flush=True)


def handle_path(unique, token):
    sender = unique.lstrip(':').replace('.', '_').replace('-', '_')
    return '/org/example/Permissions/request/%s/%s' % (sender, token)


def main():
    address = sys.argv[1]
    timeout = int(sys.argv[2]) / 1000.0 if len(sys.argv) > 2 else 1.0
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    loop = GLib.MainLoop()
    bus = dbus.bus.BusConnection(address)
    unique = bus.get_unique_name()
    owner = bus.get_name_owner(SERVICE)

    def response(code, results, path=None, destination=None, sender=None):
        # Unicast only: a Response addressed to another connection is not ours.
        if destination != unique or sender != owner:
            say('foreign-response', path, destination, sender)
            return
        statuses = ','.join('%s=%s' % kv for kv in sorted(results.get('statuses', {}).items()))
        say('response', path, int(code), statuses or '-', results.get('error', '-'))

    bus.add_signal_receiver(response, signal_name='Response', dbus_interface=HANDLE_INTERFACE,
                            path_keyword='path', destination_keyword='destination', sender_keyword='sender')

    def owner_changed(name, old, new):
        if name == SERVICE and old and not new:
            say('service-left')

    bus.add_signal_receiver(owner_changed, signal_name='NameOwnerChanged', dbus_interface='org.freedesktop.DBus',
                            bus_name='org.freedesktop.DBus')
    service = dbus.Interface(bus.get_object(SERVICE, '/org/example/Permissions', introspect=False), SERVICE)

    def command(line):
        words = line.split()
        if not words:
            return
        if words[0] == 'quit':
            loop.quit()
        elif words[0] == 'start':
            token, rest = words[1], words[2:]
            permissions = [w for w in rest if '=' not in w]
            options = dbus.Dictionary({k: dbus.String(v) for k, v in (w.split('=', 1) for w in rest if '=' in w)},
                                      signature='sv')
            if token != '-':
                options['handle_token'] = dbus.String(token)
            began = time.monotonic()
            try:
                path = service.StartRequest(dbus.Array(permissions, signature='s'), options, timeout=timeout)
                say('handle', path, int((time.monotonic() - began) * 1000))
            except dbus.DBusException as e:
                say('error', e.get_dbus_name(), e.get_dbus_message())
        elif words[0] == 'close':
            try:
                bus.call_blocking(SERVICE, words[1], HANDLE_INTERFACE, 'Close', '', [], timeout=timeout)
                say('closed', words[1])
            except dbus.DBusException as e:
                say('error', e.get_dbus_name(), e.get_dbus_message())

    def readable(source, condition):
        line = sys.stdin.readline()
        if not line:
            loop.quit()
            return False
        command(line)
        return True

    GLib.io_add_watch(sys.stdin, GLib.IO_IN | GLib.IO_HUP, readable)
    say('name', unique)
    loop.run()


if __name__ == '__main__':
    main()
