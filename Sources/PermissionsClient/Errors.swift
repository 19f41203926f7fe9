import DBusKit
import PermissionsModel

/// What a call of `PermissionsClient` throws: the service's named error (or the
/// bus's), sorted into a `Code`, with the D-Bus name and message as sent.
public struct PermissionsClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, whatever the exact D-Bus error name.
    public enum Code: Sendable, Equatable {
        /// `org.example.Permissions.Error.UnknownPermission`: no such permission.
        case unknownPermission
        /// `org.example.Permissions.Error.InvalidArgument`: a malformed argument.
        case invalidArgument
        /// `org.example.Permissions.Error.NotAuthorized`: the caller may not do this.
        case notAuthorized
        /// `org.example.Permissions.Error.UnknownCaller`: the service could not
        /// identify the calling app.
        case unknownCaller
        /// `org.example.Permissions.Error.StorageFailed`: an answer could not be stored.
        case storageFailed
        /// No service on the bus (`org.freedesktop.DBus.Error.ServiceUnknown`,
        /// `NameHasNoOwner`), or no bus at all.
        case unavailable
        /// The service stopped or left the bus while a `request` waited
        /// (`org.example.Permissions.Error.Cancelled`, or its owner left). The
        /// request is not retried: a retry could prompt twice.
        case serviceRestarted
        /// The Swift task was cancelled; for a request, the prompt was cancelled too.
        case cancelled
        /// The bus closed this client's connection.
        case disconnected
        /// Anything else (a timeout, an error of a newer service); see `name`.
        case other
    }

    /// The sorted cause.
    public let code: Code
    /// The D-Bus error name, such as `org.example.Permissions.Error.NotAuthorized`.
    public let name: String
    /// The message, which quotes the bad value.
    public let message: String

    /// An error with the code of its name.
    public init(name: String, message: String) {
        self.name = name
        self.message = message
        code = Self.code(of: name)
    }

    init(_ code: Code, name: String, message: String) {
        self.code = code
        self.name = name
        self.message = message
    }

    init(_ error: BusError) { self.init(name: error.name, message: error.message) }

    /// `name: message`.
    public var description: String { "\(name): \(message)" }

    static let cancelledByTask = PermissionsClientError(
        .cancelled, name: BusNames.errorPrefix + ErrorName.cancelled, message: "the task was cancelled")

    static func serviceLeft(_ owner: String) -> PermissionsClientError {
        PermissionsClientError(.serviceRestarted, name: BusNames.errorPrefix + ErrorName.cancelled,
                               message: "\(BusNames.busName) (\(owner)) left the bus while the request waited")
    }

    private static func code(of name: String) -> Code {
        switch name {
        case BusNames.errorPrefix + ErrorName.unknownPermission: .unknownPermission
        case BusNames.errorPrefix + ErrorName.invalidArgument: .invalidArgument
        case BusNames.errorPrefix + ErrorName.notAuthorized: .notAuthorized
        case BusNames.errorPrefix + ErrorName.unknownCaller: .unknownCaller
        case BusNames.errorPrefix + ErrorName.storageFailed: .storageFailed
        case BusNames.errorPrefix + ErrorName.cancelled: .serviceRestarted
        case "org.freedesktop.DBus.Error.ServiceUnknown", BusError.nameHasNoOwner, "org.freedesktop.DBus.Error.NotSupported",
             "org.freedesktop.DBus.Error.FileNotFound", "org.freedesktop.DBus.Error.NoServer",
             "org.freedesktop.DBus.Error.BadAddress":
            .unavailable
        case BusError.disconnected: .disconnected
        default: .other
        }
    }
}
