internal import DBusKit
internal import PermissionsSupport

// What one incoming call may cost the daemon before its arguments are read. Part
// of PermissionsService.
//
// libdbus's own limit on what it holds of messages read and not yet handled
// (dbus_connection_set_max_received_size, 63 MiB) is left as it is: the I/O
// thread reads at most 4 KiB at a time and dispatches what that completed before
// it reads again, so the queue it limits never holds more than the message being
// read. That message libdbus holds twice while it loads it (the read buffer and
// the message), which is what a flood of 24 MB calls costs at its peak, whatever
// the limit (measured from 256 KiB to 63 MiB: doc/performance.md, "A flood of
// large calls").
extension PermissionsService {
    /// Far above any real call (a Request's options are a reason of at most 1024
    /// bytes and an accuracy word; RequestMany names a few permissions), far below
    /// what the bus lets through (32 MiB). Over one, the call is InvalidArgument,
    /// quoting the limit, before any value is built from its arguments, and before
    /// its caller is identified.
    static let argumentLimits = ArgumentLimits(maxBytes: 64 * 1024, maxElements: 1024, maxStringBytes: 16 * 1024,
                                               maxValues: 4096, error: { PermissionsError.invalidArgument($0) })
}
