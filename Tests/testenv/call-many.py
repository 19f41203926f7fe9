'''Sends many calls to org.example.Permissions at once, none waiting for another.

usage: /usr/bin/python3 call-many.py ADDRESS CONNECTIONS CALLS METHOD [STRING...]

Opens CONNECTIONS connections to the bus at ADDRESS and sends, on each, CALLS
calls of org.example.Permissions.METHOD with the given string arguments, without
waiting for replies (a stock system bus lets one connection wait for 128 at
most). Prints "sent N" once every call is sent, then one line per answer, as it
comes: "return" or "error NAME: MESSAGE"; "done" once all are answered. The
calls wait up to 10 minutes for their answers.
'''

import sys

import dbus
import dbus.mainloop.glib
from gi.repository import GLib


def main():
    address, connections, calls, method = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    arguments = sys.argv[5:]
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    loop = GLib.MainLoop()
    left = [connections * calls]

    def answered(line):
        print(line, flush=True)
        left[0] -= 1
        if left[0] == 0:
            print('done', flush=True)
            loop.quit()

    buses = []
    for _ in range(connections):
        bus = dbus.bus.BusConnection(address)
        buses.append(bus)
        for _ in range(calls):
            bus.call_async('org.example.Permissions', '/org/example/Permissions', 'org.example.Permissions',
                           method, 's' * len(arguments), arguments,
                           reply_handler=lambda *_: answered('return'),
                           error_handler=lambda e: answered('error %s: %s' % (e.get_dbus_name(), e.get_dbus_message())),
                           timeout=600)
    print('sent %d' % (connections * calls), flush=True)
    loop.run()


main()
