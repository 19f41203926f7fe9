/* Files from dbus/ compiled into the daemon, so that what Introspect returns is the
 * documented interface file itself and the two cannot drift apart. */
#ifndef PERMISSIONS_DATA_H
#define PERMISSIONS_DATA_H

/* dbus/org.example.Permissions.xml, NUL-terminated. */
const char *permissions_interface_xml(void);

#endif
