#include <dbus/dbus.h>

/* An array's size on the wire, in bytes, read from its header: O(1), where
 * counting its elements walks them. `iter` must be inside the array (from
 * dbus_message_iter_recurse), as libdbus asserts in its debug builds. libdbus deprecates the call because callers
 * took the byte count for an element count; a limit on a message's size wants
 * exactly the bytes (DBusKit's ArgumentLimits). */
static inline int cdbus_message_iter_array_bytes(DBusMessageIter *iter) {
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
    return dbus_message_iter_get_array_len(iter);
#pragma clang diagnostic pop
}
