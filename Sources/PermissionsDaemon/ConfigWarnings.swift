package import PermissionsModel
import PermissionsIdentity

/// What a valid configuration says that cannot happen: an app id in allow= or
/// deny= (the app-id keys of every permission section) that no caller can have,
/// or that does less than it seems to (`AppIDReach`). Warnings, not errors: the
/// configuration applies as written. `--check-config` prints them and still exits
/// 0; the daemon logs them each time it applies a configuration.
package enum ConfigWarnings {
    package static func of(_ entries: [ConfigEntry], interpreters: [String]?) -> [String] {
        let interpreters = Interpreters(interpreters ?? Interpreters.defaultEntries)
        var warnings: [String] = []
        for entry in entries where ["allow", "deny"].contains(entry.key) && !Validate.reservedSections.contains(entry.section) {
            // A list as SwitchConfig reads it; an invalid id is an error told elsewhere.
            let ids = entry.value.split(separator: ";").map { $0.trimmed }.filter { Validate.isAppID($0) }
            for id in ids {
                guard let why = AppIDReach.problem(id, key: entry.key, interpreters: interpreters) else { continue }
                warnings.append("\(entry.origin): warning: [\(entry.section)] \(entry.key)=\(id) \(why)")
            }
        }
        return warnings
    }
}
