'''A polkitd stand-in for python3-dbusmock that holds one user's checks.

CheckAuthorization answers at once for every caller whose uid is not held
(allowed if the action is in the allowed list), and never, until ReleaseHeld,
for a held uid: a user whose own authentication agent never finishes. The uid
is the subject's, as the bus reports it for the subject's unique name.

Run: /usr/bin/python3 -m dbusmock --system -t Tests/testenv/polkitd-holding.py

Mock interface (org.freedesktop.DBus.Mock on the authority's path):
  SetAllowed(as)    the actions allowed from now on (default: none)
  HoldUser(u)       hold every later check of this uid
  HeldCount() -> u  the checks held now
  ReleaseHeld()     answer the held checks (refused), and hold no more
'''

import dbus

from dbusmock import MOCK_IFACE

BUS_NAME = 'org.freedesktop.PolicyKit1'
MAIN_OBJ = '/org/freedesktop/PolicyKit1/Authority'
MAIN_IFACE = 'org.freedesktop.PolicyKit1.Authority'
SYSTEM_BUS = True


def load(mock, _parameters):
    mock.AddProperties(MAIN_IFACE, dbus.Dictionary({
        'BackendName': 'local',
        'BackendVersion': '0.8.15',
        'BackendFeatures': dbus.UInt32(1, variant_level=1),
    }, signature='sv'))
    mock.allowed = []
    mock.held_uids = set()
    mock.held = []


def subject_uid(mock, subject):
    '''The uid of a ("system-bus-name", {"name": ...}) subject, from the bus.'''
    kind, details = subject
    if kind != 'system-bus-name':
        raise dbus.exceptions.DBusException('subject kind %s is not supported here' % kind,
                                            name='org.freedesktop.PolicyKit1.Error.NotSupported')
    return mock.connection.call_blocking('org.freedesktop.DBus', '/org/freedesktop/DBus',
                                         'org.freedesktop.DBus', 'GetConnectionUnixUser', 's',
                                         (details['name'],))


@dbus.service.method(MAIN_IFACE, in_signature='(sa{sv})sa{ss}us', out_signature='(bba{ss})',
                     async_callbacks=('ok_cb', 'err_cb'))
def CheckAuthorization(self, subject, action_id, _details, _flags, _cancellation_id, ok_cb, err_cb):
    try:
        uid = subject_uid(self, subject)
    except dbus.exceptions.DBusException as e:
        err_cb(e)
        return
    if uid in self.held_uids:
        self.held.append(ok_cb)
        return
    ok_cb((action_id in self.allowed, False, dbus.Dictionary({}, signature='ss')))


@dbus.service.method(MAIN_IFACE, in_signature='(sa{sv})ss')
def RegisterAuthenticationAgent(_self, _subject, _locale, _object_path):
    pass


@dbus.service.method(MOCK_IFACE, in_signature='as', out_signature='')
def SetAllowed(self, actions):
    self.allowed = [str(a) for a in actions]


@dbus.service.method(MOCK_IFACE, in_signature='u', out_signature='')
def HoldUser(self, uid):
    self.held_uids.add(int(uid))


@dbus.service.method(MOCK_IFACE, in_signature='', out_signature='u')
def HeldCount(self):
    return dbus.UInt32(len(self.held))


@dbus.service.method(MOCK_IFACE, in_signature='', out_signature='')
def ReleaseHeld(self):
    self.held_uids = set()
    held, self.held = self.held, []
    for ok_cb in held:
        ok_cb((False, False, dbus.Dictionary({}, signature='ss')))
