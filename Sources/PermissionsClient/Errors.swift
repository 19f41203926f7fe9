import DBusKit
// For `LocalizedError` alone, so that `localizedDescription` is the message;
// FoundationEssentials is the part of Foundation that has it (no ICU, no
// Foundation in the library).
public import FoundationEssentials
import PermissionsModel

/// What a call of `PermissionsClient` throws: the service's named error (or the
/// bus's), sorted into a `Code`, with the D-Bus name and message as sent. It is
/// a `LocalizedError`: `localizedDescription` (with Foundation) is `message`, the
/// words that say what went wrong and quote the bad value.
///
/// A cancelled task's `request` throws `CancellationError`, not this.
public struct PermissionsClientError: Error, Sendable, Equatable, CustomStringConvertible, LocalizedError {
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
        /// `org.example.Permissions.Error.LimitExceeded`: this app's user (or this
        /// connection) has as many calls waiting in the service as it may; the
        /// message quotes the limit. The bus's own `LimitsExceeded` (too many calls
        /// waiting for replies on one connection) is this too. Try again later.
        case limitExceeded
        /// No service on the bus (`org.freedesktop.DBus.Error.ServiceUnknown`,
        /// `NameHasNoOwner`), or no bus at all.
        case unavailable
        /// `org.example.Permissions.Error.NotSupported`: the permission has no
        /// such thing (`openPipeWireRemote` for one no plugin enforces).
        case notSupported
        /// `org.example.Permissions.Error.Unavailable`: the service is there, but
        /// what is behind the permission cannot do it now (this user's PipeWire is
        /// not running).
        case backendUnavailable
        /// The service stopped or left the bus while a `request` waited
        /// (`org.example.Permissions.Error.Cancelled`, or its owner left). The
        /// request is not retried: a retry could prompt twice.
        case serviceRestarted
        /// The connection to the bus was lost (the bus daemon stopped, or closed
        /// it): `updates` streams end with it, and every call of this client
        /// throws it. Make a new client.
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

    /// The message; for an error that came without one, what its code means.
    public var errorDescription: String? { message.isEmpty ? meaning : message }

    /// What each code means, in words.
    private var meaning: String {
        switch code {
        case .unknownPermission: "The permissions service has no such permission."
        case .invalidArgument: "The permissions service refused an argument."
        case .notAuthorized: "This app may not do this."
        case .unknownCaller: "The permissions service could not identify this app."
        case .storageFailed: "The permissions service could not store the answer."
        case .limitExceeded: "Too many calls of this app's user are waiting in the permissions service."
        case .unavailable: "The permissions service is not available."
        case .notSupported: "The permissions service does not offer this for that permission."
        case .backendUnavailable: "What the permission is about cannot be reached now."
        case .serviceRestarted: "The permissions service stopped while the request waited."
        case .disconnected: "The connection to the bus was lost."
        case .other: "The permissions service answered with the error \(name)."
        }
    }

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
        case BusNames.errorPrefix + ErrorName.limitExceeded, "org.freedesktop.DBus.Error.LimitsExceeded": .limitExceeded
        case BusNames.errorPrefix + ErrorName.cancelled: .serviceRestarted
        case BusNames.errorPrefix + ErrorName.notSupported: .notSupported
        case BusNames.errorPrefix + ErrorName.unavailable: .backendUnavailable
        case "org.freedesktop.DBus.Error.ServiceUnknown", BusError.nameHasNoOwner, "org.freedesktop.DBus.Error.NotSupported",
             "org.freedesktop.DBus.Error.FileNotFound", "org.freedesktop.DBus.Error.NoServer",
             "org.freedesktop.DBus.Error.BadAddress":
            .unavailable
        case BusError.disconnected: .disconnected
        default: .other
        }
    }
}
