import DBusKit
import PermissionsModel

/// What the service takes an app for (`GetDiagnostics`): the app id its
/// statuses and decisions are kept under, how the service found it, the user
/// whose decisions and agent count, and whether that user has an agent to
/// prompt. For a diagnosis ("why am I never asked?"), and to show the user
/// which app id an administrator's `allow=`/`deny=` must name.
public struct AppIdentity: Sendable, Hashable, CustomStringConvertible {
    /// How the service found the app id (`identity-kind`).
    public enum Kind: Sendable, Hashable, CustomStringConvertible {
        /// A flatpak: its application id, from the sandbox's /.flatpak-info.
        case flatpak
        /// A snap (`snap.NAME`), from its AppArmor label.
        case snap
        /// A systemd app scope or service (such as `app-org.gnome.Maps-….scope`).
        case systemdUnit
        /// The path of its executable, for a process on the host.
        case executable
        /// A process in a mount namespace of its own that is no known sandbox.
        /// Its app id is `unverified:PATH`: no decision can be stored for it, and
        /// no administrator's list names it.
        case unverified
        /// A word this library does not know (from a newer service), as sent.
        case unknown(String)

        /// The kind of a word from the bus.
        public init(word: String) {
            switch word {
            case "flatpak": self = .flatpak
            case "snap": self = .snap
            case "systemd-unit": self = .systemdUnit
            case "executable": self = .executable
            case "unverified": self = .unverified
            default: self = .unknown(word)
            }
        }

        /// The word on the bus.
        public var word: String {
            switch self {
            case .flatpak: "flatpak"
            case .snap: "snap"
            case .systemdUnit: "systemd-unit"
            case .executable: "executable"
            case .unverified: "unverified"
            case .unknown(let word): word
            }
        }

        public var description: String { word }
    }

    /// The app id, such as `org.gnome.Maps` or `/usr/bin/foo` (`app-id`).
    public var appID: String
    /// How it was found (`identity-kind`).
    public var kind: Kind
    /// The app's user: whose decisions and agent count (`uid`).
    public var uid: UInt32
    /// Whether an agent of that user is registered (`has-agent`). Without one,
    /// a request gets each permission's no-agent answer without asking.
    public var hasAgent: Bool
    /// The service's package version (`version`), if it said.
    public var serviceVersion: String?

    public init(appID: String, kind: Kind, uid: UInt32, hasAgent: Bool, serviceVersion: String? = nil) {
        self.appID = appID
        self.kind = kind
        self.uid = uid
        self.hasAgent = hasAgent
        self.serviceVersion = serviceVersion
    }

    /// `app-id (kind), uid N, agent: yes|no`.
    public var description: String {
        "\(appID) (\(kind)), uid \(uid), agent: \(hasAgent ? "yes" : "no")"
    }

    /// From `GetDiagnostics`' answer. Keys this library does not know are
    /// skipped: a newer service may tell more.
    init(diagnostics: [(String, DBusValue)]) throws(PermissionsClientError) {
        var values: [String: DBusValue] = [:]
        for (key, value) in diagnostics { values[key] = value }
        func required<T>(_ key: String, _ type: String, _ read: (DBusValue) -> T?) throws(PermissionsClientError) -> T {
            guard let value = values[key].flatMap(read) else {
                throw PermissionsClientError(.other, name: BusError.failed,
                                             message: "GetDiagnostics answered without \"\(key)\" (\(type))")
            }
            return value
        }
        appID = try required("app-id", "s", \.stringValue)
        kind = Kind(word: try required("identity-kind", "s", \.stringValue))
        uid = try required("uid", "u", \.uint32Value)
        hasAgent = try required("has-agent", "b", \.boolValue)
        serviceVersion = values["version"]?.stringValue
    }
}

extension PermissionsClient {
    /// What the service takes this app for (`GetDiagnostics`): its app id and
    /// how it was found, its uid, and whether an agent of its user is there.
    /// Never prompts, changes nothing.
    /// - Throws: `.unknownCaller` when the service cannot identify the app,
    ///   `.unavailable`, ….
    public func identity() async throws(PermissionsClientError) -> AppIdentity {
        let reply = try await call("GetDiagnostics", [])
        return try AppIdentity(diagnostics: reply.first?.stringKeyedEntries ?? [])
    }
}
