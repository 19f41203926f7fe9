internal import CAdw
internal import DesktopSupport
internal import SystemPrimitives

/// The privacy page: a search field, then one group per permission, titled with
/// the permission and the state of its device or service in words, holding a row
/// for every app with a decision (or an administrator's lock). A new snapshot
/// updates the rows in place while the same rows are shown (so that keyboard
/// focus stays where it is), and rebuilds the list when rows come or go.
final class OverviewPage {
    let widget: UnsafeMutablePointer<GtkWidget>
    private let list: UnsafeMutablePointer<GtkWidget>
    private let search: UnsafeMutablePointer<GtkWidget>
    private var groups: [(String, UnsafeMutablePointer<GtkWidget>, UnsafeMutablePointer<GtkWidget>)] = []
    private var rows: [Entry.Key: ChoiceRow] = [:]
    private var layout: [String: [Entry.Key]] = [:]
    private var filter = ""
    private let names: AppNames
    /// A row's choice clicked, and a row's arrow (the app's page).
    var onChoice: ((ChoiceRow, Choice) -> Void)?
    var onOpenApp: ((String) -> Void)?

    init(names: AppNames) {
        self.names = names
        search = gtk_search_entry_new()
        setPlaceholderText(search, tr("Search apps"))
        setAccessibleLabel(search, tr("Search apps"))
        list = gtk_box_new(GTK_ORIENTATION_VERTICAL, 24)
        let content = box(GTK_ORIENTATION_VERTICAL, spacing: 24, [search, list])
        widget = scrollingPage(content)
        connect(search, "search-changed") { [weak self] in self?.searchChanged() }
    }

    /// Typing anywhere in `window` goes to the search field.
    func captureKeys(from window: UnsafeMutablePointer<GtkWidget>) {
        gtk_search_entry_set_key_capture_widget(cast(search), window)
    }

    func show(_ snapshot: Snapshot) {
        let wanted = Dictionary(uniqueKeysWithValues: snapshot.permissions.map { state in
            (state.name, snapshot.entries(of: state.name).map(\.key))
        })
        if wanted != layout || groups.map(\.0) != snapshot.permissions.map(\.name) { rebuild(snapshot) }
        for (name, group, _) in groups {
            if let state = snapshot.state(of: name) {
                adw_preferences_group_set_description(cast(group), stateWords(state))
            }
        }
        for entry in snapshot.entries where entry.isShown { rows[entry.key]?.show(entry) }
        applyFilter()
    }

    private func rebuild(_ snapshot: Snapshot) {
        for (_, group, _) in groups { gtk_box_remove(cast(list), group) }
        groups.removeAll()
        rows.removeAll()
        layout.removeAll()
        for state in snapshot.permissions {
            let title = PermissionName(state.name).title
            let group = adw_preferences_group_new()!
            adw_preferences_group_set_title(cast(group), title)
            let placeholder = plainLabel(tr("No app has a decision for this permission."), cssClasses: ["dim-label"])
            adw_preferences_group_add(cast(group), placeholder)
            let entries = snapshot.entries(of: state.name)
            for entry in entries {
                let row = ChoiceRow(entry, title: names.title(entry.app), permissionTitle: title) { [weak self] in
                    self?.onOpenApp?(entry.app)
                }
                adw_action_row_add_prefix(cast(row.row), names.icon(entry.app, size: 32))
                // The id too where a name stands for it: two apps may share a name.
                if names.hasName(entry.app) { gtk_widget_set_tooltip_text(row.row, entry.app.escapedForDisplay) }
                row.onChoice = { [weak self] in self?.onChoice?($0, $1) }
                adw_preferences_group_add(cast(group), row.row)
                rows[entry.key] = row
            }
            layout[state.name] = entries.map(\.key)
            gtk_box_append(cast(list), group)
            groups.append((state.name, group, placeholder))
        }
    }

    private func searchChanged() {
        filter = String(cString: gtk_editable_get_text(cast(search))).lowercased()
        applyFilter()
    }

    /// Shows the rows whose app id or name holds the search text (all when it is empty).
    private func applyFilter() {
        for (name, _, placeholder) in groups {
            var shown = 0
            for key in layout[name] ?? [] {
                let matches = filter.isEmpty || key.app.lowercased().contains(filter)
                    || names.title(key.app).lowercased().contains(filter)
                if let row = rows[key] { gtk_widget_set_visible(row.row, matches ? 1 : 0) }
                if matches { shown += 1 }
            }
            gtk_label_set_text(cast(placeholder), filter.isEmpty ? tr("No app has a decision for this permission.")
                                                                 : tr("No app matches the search."))
            gtk_widget_set_visible(placeholder, shown == 0 ? 1 : 0)
        }
    }
}
