internal import CDBus

/// A D-Bus error: a name such as `org.example.Permissions.Error.UnknownPermission`
/// and a human-readable message. Thrown by calls and sent as error replies.
public struct BusError: Error, Sendable, Equatable, CustomStringConvertible {
    public var name: String
    public var message: String

    public init(_ name: String, _ message: String) {
        self.name = name
        self.message = message
    }

    public var description: String { "\(name): \(message)" }

    // Standard names from the D-Bus specification.
    public static let failed = "org.freedesktop.DBus.Error.Failed"
    public static let invalidArgs = "org.freedesktop.DBus.Error.InvalidArgs"
    public static let unknownMethod = "org.freedesktop.DBus.Error.UnknownMethod"
    public static let unknownObject = "org.freedesktop.DBus.Error.UnknownObject"
    public static let unknownInterface = "org.freedesktop.DBus.Error.UnknownInterface"
    public static let unknownProperty = "org.freedesktop.DBus.Error.UnknownProperty"
    public static let propertyReadOnly = "org.freedesktop.DBus.Error.PropertyReadOnly"
    public static let noReply = "org.freedesktop.DBus.Error.NoReply"
    public static let disconnected = "org.freedesktop.DBus.Error.Disconnected"
    public static let nameHasNoOwner = "org.freedesktop.DBus.Error.NameHasNoOwner"
    public static let badAddress = "org.freedesktop.DBus.Error.BadAddress"
    public static let noMemory = "org.freedesktop.DBus.Error.NoMemory"
}

/// Owns a C `DBusError` for the length of one libdbus call and turns it into a
/// `BusError`. libdbus requires init before use and free after.
final class CError {
    var raw = DBusError()

    init() { dbus_error_init(&raw) }
    deinit { dbus_error_free(&raw) }

    var isSet: Bool { dbus_error_is_set(&raw) != 0 }

    var busError: BusError {
        let name = raw.name.map { String(cString: $0) } ?? BusError.failed
        let message = raw.message.map { String(cString: $0) } ?? ""
        return BusError(name, message)
    }
}
