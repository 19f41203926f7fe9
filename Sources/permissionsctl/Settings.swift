import Dispatch
import Glibc
import PermissionsClient
import PermissionsModel
import SystemPrimitives

/// `permissionsctl settings [APP [PERMISSION]]`: opens the privacy settings
/// (`permissions-settings`) on an app's page, or on the overview, as an app's
/// `PermissionsClient.openSettings()` does. The page is on the session bus
/// whichever bus the service is on, so no connection to the service is made.
func openSettingsPage(app: String, permission: String) -> Never {
    if !app.isEmpty, !Validate.isAppID(app) { fail("invalid app id \"\(app.escapedForMessage)\"", code: 2) }
    if !permission.isEmpty, !Validate.isPermissionName(permission) {
        fail("invalid permission name \"\(permission.escapedForMessage)\"", code: 2)
    }
    let outcome = Locked<PermissionsClientError?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        do throws(PermissionsClientError) {
            try await PermissionsClient.openSettings(app: app, permission: permission)
        } catch {
            outcome.withLock { $0 = error }
        }
        done.signal()
    }
    done.wait()
    if let error = outcome.withLock({ $0 }) {
        fail("cannot open the settings (\(PermissionsClient.settingsBusName) on the session bus): \(error.message)")
    }
    exit(0)
}
