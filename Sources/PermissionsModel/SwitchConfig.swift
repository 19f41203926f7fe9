/// The configuration shape that the location and notifications plugins, and the
/// permissions the administrator declares ([permissions] declare=), share:
///
///     [<permission>]
///     enabled=true|false        off gives "disabled" for every app (default true)
///     allow=<app id>;<app id>   forced allow: "authorized"
///     deny=<app id>;<app id>    locked deny: "restricted"
///
/// plus keys of the plugin's own, checked by `extraKey`.
public struct SwitchConfig: Equatable, Sendable {
    public var enabled = true
    public var allow: [String] = []
    public var deny: [String] = []
    /// The plugin's own keys, as parsed by `extraKey`.
    public var extra: [String: String] = [:]

    public init() {}

    /// The snapshot detail that says why a permission is "disabled":
    /// "configuration" (the admin's enabled=false, or the daemon's fail-safe) or
    /// "device" (the hardware is there but off, such as every Bluetooth adapter).
    public static let disabledByKey = "disabled-by"

    /// The "disabled-by" detail this configuration gives: none while enabled.
    public var disabledBy: [(key: String, value: String)] {
        enabled ? [] : [(Self.disabledByKey, "configuration")]
    }

    public struct Invalid: Error, CustomStringConvertible {
        public let description: String
        public init(description: String) { self.description = description }
    }

    /// Parses the `[section]` entries. `extraKey(key, value)` returns the normalised
    /// value of a plugin-specific key, throws `Invalid` for a bad value, or returns
    /// nil for a key it does not know. Unknown keys are logged and ignored (as
    /// systemd does); bad values reject the whole configuration.
    public static func parse(_ entries: [ConfigEntry], section: String, warn: (String) -> Void,
                             extraKey: (String, String) throws(Invalid) -> String? = { _, _ in nil })
        throws(Invalid) -> SwitchConfig
    {
        var config = SwitchConfig()
        for entry in entries where entry.section == section {
            func bad(_ why: String) -> Invalid {
                Invalid(description: "\(entry.origin): [\(section)] \(entry.key)=\(entry.value): \(why)")
            }
            switch entry.key {
            case "enabled":
                switch entry.value.lowercased() {
                case "true", "yes", "1", "on": config.enabled = true
                case "false", "no", "0", "off": config.enabled = false
                default: throw bad("expected true or false")
                }
            case "allow", "deny":
                let ids = entry.value.split(separator: ";").map { $0.trimmed }.filter { !$0.isEmpty }
                if let badID = ids.first(where: { !Validate.isAppID($0) }) { throw bad("invalid app id \"\(badID)\"") }
                if entry.key == "allow" { config.allow = ids } else { config.deny = ids }
            default:
                do {
                    if let value = try extraKey(entry.key, entry.value) {
                        config.extra[entry.key] = value
                    } else {
                        warn("\(entry.origin): unknown key \"\(entry.key)\" in [\(section)], ignored")
                    }
                } catch {
                    throw bad(error.description)
                }
            }
        }
        if let both = config.allow.first(where: config.deny.contains) {
            throw Invalid(description: "[\(section)]: app \"\(both)\" is in both allow and deny")
        }
        return config
    }
}

extension StringProtocol {
    /// Without the spaces and tabs at either end: how keyfile keys, values and list
    /// elements are read.
    package var trimmed: String {
        // By index, not through reversed collections: a configuration of thousands
        // of files trims tens of thousands of values and keys.
        var start = startIndex
        var end = endIndex
        while start < end, self[start] == " " || self[start] == "\t" { start = index(after: start) }
        while end > start {
            let last = index(before: end)
            guard self[last] == " " || self[last] == "\t" else { break }
            end = last
        }
        return String(self[start..<end])
    }
}
