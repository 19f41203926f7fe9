internal import CAdw
internal import DesktopSupport
internal import SystemPrimitives

/// One app's page: every permission of the service for that app, each with the
/// state of its device or service, the decision and its choices.
final class AppPage {
    let widget: UnsafeMutablePointer<GtkWidget>
    private let heading: UnsafeMutablePointer<GtkWidget>
    /// The app's id under its name, when a desktop file gave a name.
    private let subheading: UnsafeMutablePointer<GtkWidget>
    private let iconSlot: UnsafeMutablePointer<GtkWidget>
    private let names: AppNames
    private let group: UnsafeMutablePointer<GtkWidget>
    private var rows: [(Entry.Key, ChoiceRow)] = []
    private(set) var app: String?
    var onChoice: ((ChoiceRow, Choice) -> Void)?

    init(names: AppNames) {
        self.names = names
        heading = plainLabel("", cssClasses: ["title-1"])
        subheading = plainLabel("", cssClasses: ["dim-label"])
        iconSlot = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 0)
        group = adw_preferences_group_new()
        adw_preferences_group_set_title(cast(group), tr("Permissions"))
        let title = box(GTK_ORIENTATION_HORIZONTAL, spacing: 12,
                        [iconSlot, box(GTK_ORIENTATION_VERTICAL, spacing: 2, [heading, subheading])])
        let content = box(GTK_ORIENTATION_VERTICAL, spacing: 24, [title, group])
        widget = scrollingPage(content)
    }

    /// Shows `app`'s permissions from `snapshot` (rows for those not read yet come
    /// with the next snapshot, which reads every pair of the open page).
    func show(app: String, _ snapshot: Snapshot) {
        let entries = snapshot.permissions.compactMap { state in
            snapshot.entries.first { $0.app == app && $0.permission == state.name }
        }
        if app != self.app || entries.map(\.key) != rows.map(\.0) {
            self.app = app
            gtk_label_set_text(cast(heading), names.title(app))
            gtk_label_set_text(cast(subheading), names.hasName(app) ? app.escapedForDisplay : "")
            gtk_widget_set_visible(subheading, names.hasName(app) ? 1 : 0)
            while let old = gtk_widget_get_first_child(iconSlot) { gtk_box_remove(cast(iconSlot), old) }
            gtk_box_append(cast(iconSlot), names.icon(app, size: 48))
            for (_, row) in rows { adw_preferences_group_remove(cast(group), row.row) }
            rows = entries.map { entry in
                let title = PermissionName(entry.permission).title
                let row = ChoiceRow(entry, title: title, permissionTitle: title)
                row.onChoice = { [weak self] in self?.onChoice?($0, $1) }
                adw_preferences_group_add(cast(group), row.row)
                return (entry.key, row)
            }
        }
        for (key, row) in rows {
            guard let entry = entries.first(where: { $0.key == key }) else { continue }
            row.show(entry)
            // The device's state, where it is not simply on.
            if let state = snapshot.state(of: key.permission), state.serviceState != "available" {
                adw_action_row_set_subtitle(cast(row.row), stateWords(state) + " · " + entryWords(entry))
            }
        }
    }

    /// Moves the keyboard focus to `permission`'s row; false while it has none.
    func focus(_ permission: String) -> Bool {
        guard let row = rows.first(where: { $0.0.permission == permission }) else { return false }
        return gtk_widget_grab_focus(row.1.row) != 0
    }
}
