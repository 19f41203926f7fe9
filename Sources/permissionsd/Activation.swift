internal import DBusKit
internal import Glibc

/// The bus of a D-Bus activation without systemd: dbus-daemon runs the activation
/// file's `Exec=` with `DBUS_STARTER_ADDRESS` (the bus that wants the name) and
/// `DBUS_STARTER_BUS_TYPE` (`system` or `session`; unset for a bus of neither type)
/// in its environment. (Activation through systemd runs the unit instead, whose
/// command line names the bus.) Used only when no bus option was given.
///
/// A starter bus of type system or session keeps that type's meaning (who is an
/// admin, where decisions live, whose mount namespace is the host's); only its
/// address comes from the starter: the variable libdbus reads for that bus is set
/// to it, before any thread exists, as libdbus's own DBUS_BUS_STARTER would do.
enum Activation {
    static func starterBus() -> Bus? {
        guard let address = environment("DBUS_STARTER_ADDRESS"), !address.isEmpty else { return nil }
        switch environment("DBUS_STARTER_BUS_TYPE") {
        case "system":
            setenv("DBUS_SYSTEM_BUS_ADDRESS", address, 1)
            return .system
        case "session":
            setenv("DBUS_SESSION_BUS_ADDRESS", address, 1)
            return .session
        default:
            return .address(address)
        }
    }

    private static func environment(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }
}
