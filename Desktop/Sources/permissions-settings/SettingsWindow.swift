internal import CAdw
internal import DesktopSupport

/// The window: a header bar (a back button on an app's page), and a stack of
/// three pages: the overview, one app's page, and "Reconnecting…" while the
/// service is away. Changes the person makes go to the service through the link;
/// a refusal is said in a toast and the row shows the stored value again.
final class SettingsWindow {
    let window: UnsafeMutablePointer<GtkWidget>
    private let link: ServiceLink
    private let stack: OpaquePointer
    private let toasts: UnsafeMutablePointer<GtkWidget>
    private let back: UnsafeMutablePointer<GtkWidget>
    private let waiting: UnsafeMutablePointer<GtkWidget>
    private let overview: OverviewPage
    private let appPage: AppPage
    private var snapshot = Snapshot()
    private var connected = false
    /// The page to show once connected: "overview" or "app".
    private var page = "overview"
    /// The permission whose row show-app asked to focus, until the app's page has it.
    private var focusPending: String?

    init(application: UnsafeMutablePointer<GtkApplication>, link: ServiceLink) {
        self.link = link
        // The apps' names and icons, looked up once for both pages.
        let names = AppNames()
        overview = OverviewPage(names: names)
        appPage = AppPage(names: names)
        window = adw_application_window_new(application)
        gtk_window_set_title(cast(window), tr("Privacy"))
        gtk_window_set_default_size(cast(window), 720, 760)
        let header = adw_header_bar_new()!
        back = gtk_button_new_from_icon_name("go-previous-symbolic")
        setAccessibleLabel(back, tr("Back"))
        gtk_widget_set_tooltip_text(back, tr("Back"))
        adw_header_bar_pack_start(cast(header), back)
        adw_header_bar_set_title_widget(cast(header), adw_window_title_new(tr("Privacy"), nil))
        waiting = adw_status_page_new()
        adw_status_page_set_icon_name(cast(waiting), "network-offline-symbolic")
        stack = cast(gtk_stack_new()!)
        gtk_stack_set_transition_type(stack, GTK_STACK_TRANSITION_TYPE_NONE)
        gtk_stack_add_named(stack, overview.widget, "overview")
        gtk_stack_add_named(stack, appPage.widget, "app")
        gtk_stack_add_named(stack, waiting, "waiting")
        toasts = adw_toast_overlay_new()
        adw_toast_overlay_set_child(cast(toasts), cast(stack))
        gtk_widget_set_vexpand(toasts, 1)
        adw_application_window_set_content(cast(window), box(GTK_ORIENTATION_VERTICAL, spacing: 0, [header, toasts]))
        overview.captureKeys(from: window)
        overview.onOpenApp = { [weak self] app in self?.openApp(app, permission: "") }
        overview.onChoice = { [weak self] in self?.chose($1, in: $0) }
        appPage.onChoice = { [weak self] in self?.chose($1, in: $0) }
        connect(back, "clicked") { [weak self] in self?.showOverview() }
        addBackShortcut()
        link.onState = { [weak self] in self?.linkState($0) }
        link.onSnapshot = { [weak self] in self?.show($0) }
        linkState(.waiting(wasConnected: false))
    }

    func present() { gtk_window_present(cast(window)) }

    /// Alt+Left and Escape go back from an app's page, as in GNOME Settings (the
    /// search field takes Escape first while it has the focus).
    private func addBackShortcut() {
        let controller = gtk_shortcut_controller_new()!
        let action = gtk_callback_action_new({ _, _, data in
            let window = Unmanaged<SettingsWindow>.fromOpaque(data!).takeUnretainedValue()
            guard window.page == "app" else { return 0 }
            window.showOverview()
            return 1
        }, Unmanaged.passUnretained(self).toOpaque(), nil)
        gtk_shortcut_controller_add_shortcut(controller,
                                             gtk_shortcut_new(gtk_shortcut_trigger_parse_string("<Alt>Left|Escape"), action))
        gtk_widget_add_controller(window, controller)
    }

    /// Opens `app`'s page (the show-app action), its `permission`'s row focused;
    /// the overview for the empty app id (`permissionsctl settings` with no app).
    func openApp(_ app: String, permission: String) {
        guard !app.isEmpty else { return showOverview() }
        page = "app"
        link.pageApp = app
        appPage.show(app: app, snapshot)
        update()
        focusPending = permission.isEmpty || appPage.focus(permission) ? nil : permission
    }

    private func showOverview() {
        page = "overview"
        focusPending = nil
        link.pageApp = nil
        update()
    }

    private func update() {
        gtk_widget_set_visible(back, connected && page == "app" ? 1 : 0)
        let shown = connected ? page : "waiting"
        // The pages not shown are hidden too, not only behind the visible one: a
        // screen reader (AT-SPI) would otherwise still find their controls.
        let pages = [("overview", overview.widget), ("app", appPage.widget), ("waiting", waiting)]
        for (name, widget) in pages where name == shown { gtk_widget_set_visible(widget, 1) }
        gtk_stack_set_visible_child_name(stack, shown)
        for (name, widget) in pages where name != shown { gtk_widget_set_visible(widget, 0) }
    }

    private func linkState(_ state: ServiceLink.State) {
        switch state {
        case .connected: connected = true
        case .waiting(let wasConnected):
            connected = false
            adw_status_page_set_title(cast(waiting), wasConnected ? tr("Reconnecting…") : tr("Connecting…"))
            adw_status_page_set_description(cast(waiting), wasConnected
                ? tr("The permissions service stopped. Your settings show again as soon as it is back.")
                : tr("Waiting for the permissions service."))
        }
        update()
    }

    private func show(_ snapshot: Snapshot) {
        self.snapshot = snapshot
        overview.show(snapshot)
        if let app = link.pageApp { appPage.show(app: app, snapshot) }
        if let permission = focusPending, appPage.focus(permission) { focusPending = nil }
    }

    private func chose(_ choice: Choice, in row: ChoiceRow) {
        let key = row.entry.key
        link.store(choice, for: key) { [weak self, weak row] error in
            guard let self else { return }
            if let error {
                say("cannot store \(choice) for \(key.app) \(key.permission): \(error)")
                row.map { $0.show($0.entry) }
                adw_toast_overlay_add_toast(cast(self.toasts), adw_toast_new(refusalWords(error)))
            }
            // Also when nothing changed for the stream (a lock hides it): the row
            // shows what is stored.
            self.link.reload()
        }
    }
}

/// Why a change was not made, in plain words.
func refusalWords(_ error: GLibError) -> String {
    switch error.remoteName {
    case "org.example.Permissions.Error.NotAuthorized", "org.freedesktop.DBus.Error.AccessDenied":
        tr("You are not allowed to change this permission.")
    default:
        tr("The change could not be saved. Try again later.")
    }
}
