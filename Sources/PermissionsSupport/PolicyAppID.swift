import PermissionsModel
import SystemPrimitives

/// Checks the app id of a policy entry, the same way whoever gave it (a plugin's
/// snapshot, a declared permission's section): a bad one is logged, naming
/// `source`, and the entry ignored.
package func isValidPolicyAppID(_ app: String, from source: String) -> Bool {
    guard Validate.isAppID(app) else {
        logWarning("\(source): invalid app id \"\(app.escapedForMessage)\" in a policy; entry ignored")
        return false
    }
    return true
}
