internal import CAdw
internal import DesktopSupport
internal import Glibc

/// The GtkApplication (AdwApplication) `org.example.Permissions.Settings`: one
/// instance on the session bus, D-Bus activatable (`--gapplication-service`,
/// which GApplication reads itself), with the action `show-app` of type (ss),
/// app id and permission or "", that opens one app's page; what
/// `permissionsctl settings APP` calls through org.freedesktop.Application.
/// The permissions service may be on another bus than the session bus: the
/// bus options choose it (`BusChoice`).
final class SettingsApplication {
    static let id = "org.example.Permissions.Settings"

    private let application: UnsafeMutablePointer<AdwApplication>
    private let choice: BusChoice
    private var link: ServiceLink?
    private var window: SettingsWindow?
    /// Set when the service's bus cannot be reached: the exit status is then 1.
    private var failed = false

    init(choice: BusChoice) {
        self.choice = choice
        application = adw_application_new(Self.id, G_APPLICATION_DEFAULT_FLAGS)
        let app: UnsafeMutablePointer<GApplication> = cast(application)
        connect(app, "startup") { [unowned self] in self.startUp() }
        connect(app, "activate") { [unowned self] in self.mainWindow()?.present() }
        let parameterType = g_variant_type_new("(ss)")!
        let showApp = g_simple_action_new("show-app", parameterType)!
        g_variant_type_free(parameterType)
        connectActivate(showApp) { [unowned self] parameter in
            let fields = parameter?.children ?? []
            guard fields.count == 2, let app = fields[0].string, let permission = fields[1].string else { return }
            say("show-app \(app) \(permission)")
            guard let window = self.mainWindow() else { return }
            window.openApp(app, permission: permission)
            window.present()
        }
        g_action_map_add_action(OpaquePointer(application), showApp)
    }

    /// Connects to the service's bus once, in the primary instance (a second
    /// start only hands its activation to the first).
    private func startUp() {
        switch choice.connect() {
        case .success(let connection):
            let link = ServiceLink(connection: connection)
            self.link = link
            link.start()
        case .failure(let error):
            say("cannot connect to the bus of the permissions service: \(error)")
            failed = true
            g_application_quit(cast(application))
        }
    }

    private func mainWindow() -> SettingsWindow? {
        if let window { return window }
        guard let link else { return nil }
        let made = SettingsWindow(application: cast(application), link: link)
        window = made
        return made
    }

    /// Runs GApplication with `arguments` (the program's name first; the bus
    /// options already taken out) until it quits; its exit status.
    func run(_ arguments: [String]) -> Int32 {
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let status = g_application_run(cast(application), Int32(arguments.count), &argv)
        return failed ? 1 : status
    }
}
