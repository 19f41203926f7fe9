#include "permissions-data.h"

/* #embed (C23) reads the file at compile time; clang records it as a dependency, so
 * an edit of the XML rebuilds this file. */
static const char interface_xml[] = {
#embed "../../dbus/org.example.Permissions.xml"
    , 0
};

const char *permissions_interface_xml(void) { return interface_xml; }
