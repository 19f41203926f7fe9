import DBusKit
import PermissionsModel
internal import SystemPrimitives

// "Open settings": sending the user to the privacy page, as iOS apps do with
// openSettingsURLString. The page is the settings application
// (`permissions-settings`), a GApplication on the user's session bus, started by
// D-Bus activation; it is asked through org.freedesktop.Application, the
// interface every GApplication exports, so that any D-Bus client can do the same
// (`gdbus call --session … ActivateAction show-app …`).
extension PermissionsClient {
    /// The settings application's bus name on the session bus (its GApplication
    /// id). A flatpak app needs `--talk-name=org.example.Permissions.Settings`.
    public static let settingsBusName = "org.example.Permissions.Settings"
    /// Its object path, as GApplication derives it from the id.
    public static let settingsObjectPath = "/org/example/Permissions/Settings"

    /// Opens the privacy settings on this app's page (scrolled to `permission`,
    /// if given): the app id is the one the service takes this app for
    /// (`identity()`), so the page is the one its decisions are under.
    /// - Throws: what `identity()` throws; `.unavailable` when the session bus
    ///   cannot be reached or the settings application cannot be started
    ///   (`org.freedesktop.DBus.Error.ServiceUnknown`: it is not installed).
    public func openSettings(_ permission: Permission? = nil) async throws(PermissionsClientError) {
        let app = try await identity().appID
        try await Self.openSettings(app: app, permission: permission?.rawValue ?? "")
    }

    /// Opens the privacy settings on `app`'s page (`""`: the overview), scrolled
    /// to `permission` (`""`: none), through the session bus: the action
    /// `show-app` (ss) of org.freedesktop.Application. For `permissionsctl
    /// settings`, which names the app.
    public static func openSettings(app: String, permission: String = "",
                                    on bus: Bus = .session) async throws(PermissionsClientError) {
        let queue = Queue(label: "permissions-client.settings")
        let connection: Connection
        do {
            connection = try Connection.open(bus.dbusKit, queue: queue)
        } catch {
            throw PermissionsClientError(.unavailable, name: error.name,
                                         message: "cannot connect to the session bus: \(error.message)")
        }
        let message: Message
        do {
            message = try Message.methodCall(destination: settingsBusName, path: settingsObjectPath,
                                             interface: "org.freedesktop.Application", member: "ActivateAction")
            try message.append([.string("show-app"),
                                .array(elementSignature: "v", [.variant(.structure([.string(app), .string(permission)]))]),
                                .vardict([])])
        } catch {
            connection.async { connection.close() }
            throw PermissionsClientError(error)
        }
        let result: Result<Message, BusError> = await withCheckedContinuation { done in
            connection.async {
                // Activation starts the program first: GLib's own callers wait 25 s.
                connection.call(message) { reply in
                    connection.close()
                    done.resume(returning: reply)
                }
            }
        }
        if case .failure(let error) = result { throw PermissionsClientError(error) }
    }
}
