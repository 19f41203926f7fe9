/// A permission's name, as the service knows it: one of the built-in names below,
/// or any name a plugin or the administrator's configuration adds
/// (`Permission("contacts")`, or the string literal `"contacts"`).
public struct Permission: RawRepresentable, Hashable, Sendable, Comparable, ExpressibleByStringLiteral,
    CustomStringConvertible
{
    /// The name on the bus, such as `camera` or `local-network`.
    public let rawValue: String

    /// A permission by its name on the bus. Any string is accepted here; the
    /// service answers `PermissionsClientError.Code.unknownPermission` for a name it
    /// does not serve.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// A permission by its name on the bus (`Permission("contacts")`).
    public init(_ name: String) { rawValue = name }
    /// A permission from a string literal (`"contacts"`).
    public init(stringLiteral name: String) { rawValue = name }

    /// The name on the bus.
    public var description: String { rawValue }
    /// Orders by name, as `GetAll`'s answer is sorted.
    public static func < (a: Permission, b: Permission) -> Bool { a.rawValue < b.rawValue }

    /// `camera`: video capture devices (the PipeWire backend).
    public static let camera = Permission("camera")
    /// `microphone`: audio capture devices (the PipeWire backend).
    public static let microphone = Permission("microphone")
    /// `location`: the machine's location (configuration-driven).
    public static let location = Permission("location")
    /// `notifications`: showing notifications (configuration-driven).
    public static let notifications = Permission("notifications")
    /// `bluetooth`: Bluetooth devices (the BlueZ backend).
    public static let bluetooth = Permission("bluetooth")
    /// `local-network`: devices on the local network (the rtnetlink backend).
    public static let localNetwork = Permission("local-network")
}

/// One status word of the service (doc/apps.md, "What an app sees"), plus the words a
/// newer service may add, kept as they came.
public enum PermissionStatus: Hashable, Sendable, CustomStringConvertible {
    /// `unsupported`: nothing to use (no device, or no plugin for it).
    case unsupported
    /// `disabled`: switched off for every app.
    case disabled
    /// `restricted`: an administrator forbids it for this app.
    case restricted
    /// `authorized`: an administrator forces it on, or the user said yes.
    case authorized
    /// `denied`: the user said no.
    case denied
    /// `not-determined`: nobody has decided yet; a `request` may prompt.
    case notDetermined
    /// A word this library does not know (from a newer service), as sent.
    case unknown(String)

    /// The status of a word from the bus.
    public init(word: String) {
        switch word {
        case "unsupported": self = .unsupported
        case "disabled": self = .disabled
        case "restricted": self = .restricted
        case "authorized": self = .authorized
        case "denied": self = .denied
        case "not-determined": self = .notDetermined
        default: self = .unknown(word)
        }
    }

    /// The word on the bus.
    public var word: String {
        switch self {
        case .unsupported: "unsupported"
        case .disabled: "disabled"
        case .restricted: "restricted"
        case .authorized: "authorized"
        case .denied: "denied"
        case .notDetermined: "not-determined"
        case .unknown(let word): word
        }
    }

    /// The word on the bus.
    public var description: String { word }

    /// Whether the app may use the permission now.
    public var isAuthorized: Bool { self == .authorized }
}

/// One permission's status, as `updates()` and `request(_:reason:)` for several
/// permissions yield it.
public struct PermissionUpdate: Hashable, Sendable, CustomStringConvertible {
    /// The permission.
    public var permission: Permission
    /// Its status for this app.
    public var status: PermissionStatus

    /// An update of `permission` to `status`.
    public init(_ permission: Permission, _ status: PermissionStatus) {
        self.permission = permission
        self.status = status
    }

    /// `permission=status`.
    public var description: String { "\(permission)=\(status)" }
}
