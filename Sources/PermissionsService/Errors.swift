package import DBusKit
internal import PermissionsModel
internal import SystemPrimitives

/// The service's named errors (org.example.Permissions.Error.*). Messages quote the
/// offending value, escaped.
package enum PermissionsError {
    package static let prefix = BusNames.errorPrefix

    package static func unknownPermission(_ name: String) -> BusError {
        BusError(prefix + ErrorName.unknownPermission, "unknown permission \"\(name.escapedForMessage)\"")
    }

    package static func invalidArgument(_ message: String) -> BusError {
        BusError(prefix + ErrorName.invalidArgument, message)
    }

    package static func invalidPermissionName(_ name: String) -> BusError {
        invalidArgument("invalid permission name \"\(name.escapedForMessage)\": expected [a-z][a-z0-9-]{0,63}")
    }

    package static func invalidAppID(_ id: String) -> BusError {
        invalidArgument("invalid app id \"\(id.escapedForMessage)\"")
    }

    package static func notAuthorized(_ what: String) -> BusError {
        BusError(prefix + ErrorName.notAuthorized, what)
    }

    package static func unknownCaller(_ message: String) -> BusError {
        BusError(prefix + ErrorName.unknownCaller, message)
    }

    package static func storageFailed(_ message: String) -> BusError {
        BusError(prefix + ErrorName.storageFailed, message)
    }

    /// The answer to a call still waiting (for its caller's identity, polkit or a
    /// prompt) when the daemon stops.
    package static func cancelled(_ message: String) -> BusError {
        BusError(prefix + ErrorName.cancelled, message)
    }

    /// A call refused because its caller (its connection, or its user) holds as
    /// much of the daemon as it may: pending calls, the daemon's calls to polkit
    /// or to agents made for it. The message says which limit, and quotes it.
    package static func limitExceeded(_ message: String) -> BusError {
        BusError(prefix + ErrorName.limitExceeded, message)
    }

    /// Asked of a permission that has no such thing: OpenPipeWireRemote for one
    /// whose plugin does not enforce it.
    package static func notSupported(_ message: String) -> BusError {
        BusError(prefix + ErrorName.notSupported, message)
    }

    /// The backend cannot do it now: the user's PipeWire is not running, or the
    /// plugin could not open a connection.
    package static func unavailable(_ message: String) -> BusError {
        BusError(prefix + ErrorName.unavailable, message)
    }
}
