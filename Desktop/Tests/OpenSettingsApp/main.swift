import Foundation
import PermissionsClient

// A stand-in app for the tests of "Open settings" (OpenSettingsTests): what an
// app does to send its user to its page of the privacy settings,
// `PermissionsClient.openSettings()`, with the service on the session bus. It
// prints the app id the service takes it for (the page it means to open), then
// "opened"; or the error (its code, name and message) on standard error, exit 1.
do throws(PermissionsClientError) {
    let client = try PermissionsClient(bus: .session)
    print("app-id \(try await client.identity().appID)")
    try await client.openSettings()
    print("opened")
} catch {
    FileHandle.standardError.write(Data("open-settings-app: \(error.code): \(error.description)\n".utf8))
    exit(1)
}
