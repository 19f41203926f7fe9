internal import CAdw
internal import DesktopSupport

/// A row for one app and one permission: its title (the app in the overview,
/// the permission on an app's page), what the decision is and how long it lasts,
/// and the three choices as linked toggle buttons, each with an accessible name
/// that names the permission and the app. Under an administrator's lock the
/// choices are insensitive, show what the administrator enforces, and a lock
/// icon says why.
final class ChoiceRow {
    let row: UnsafeMutablePointer<GtkWidget>
    private(set) var entry: Entry
    private var buttons: [(Choice, UnsafeMutablePointer<GtkWidget>)] = []
    private let lock: UnsafeMutablePointer<GtkWidget>
    /// Set while the buttons are changed from here, so that their "toggled" is no click.
    private var updating = false
    /// A choice clicked: the row and what was chosen.
    var onChoice: ((ChoiceRow, Choice) -> Void)?

    /// `title`: what the row is about; `open`: an arrow button to the app's page.
    init(_ entry: Entry, title: String, permissionTitle: String, open: (() -> Void)? = nil) {
        self.entry = entry
        row = adw_action_row_new()
        adw_preferences_row_set_title(cast(row), title)
        adw_preferences_row_set_use_markup(cast(row), 0)
        lock = gtk_image_new_from_icon_name("changes-prevent-symbolic")
        adw_action_row_add_suffix(cast(row), lock)
        let group = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 0)!
        gtk_widget_add_css_class(group, "linked")
        gtk_widget_set_valign(group, GTK_ALIGN_CENTER)
        for choice in Choice.allCases {
            let button = gtk_toggle_button_new_with_label(choice.label)!
            setAccessibleLabel(button, choice.accessibleTemplate.filling(permissionTitle, entry.app))
            if let first = buttons.first { gtk_toggle_button_set_group(cast(button), cast(first.1)) }
            connect(button, "toggled") { [weak self] in self?.toggled(choice, button) }
            gtk_box_append(cast(group), button)
            buttons.append((choice, button))
        }
        adw_action_row_add_suffix(cast(row), group)
        if let open {
            let arrow = gtk_button_new_from_icon_name("go-next-symbolic")!
            gtk_widget_add_css_class(arrow, "flat")
            gtk_widget_set_valign(arrow, GTK_ALIGN_CENTER)
            setAccessibleLabel(arrow, tr("All permissions of %s").filling(entry.app))
            gtk_widget_set_tooltip_text(arrow, tr("All permissions of this app"))
            connect(arrow, "clicked", open)
            adw_action_row_add_suffix(cast(row), arrow)
        }
        show(entry)
    }

    /// Shows `entry` (a new reading, or the stored value after a refused change).
    func show(_ entry: Entry) {
        self.entry = entry
        adw_action_row_set_subtitle(cast(row), entryWords(entry))
        let selected = Self.choiceInForce(entry)
        updating = true
        for (choice, button) in buttons {
            gtk_toggle_button_set_active(cast(button), choice == selected ? 1 : 0)
            gtk_widget_set_sensitive(button, entry.isLocked ? 0 : 1)
        }
        updating = false
        gtk_widget_set_visible(lock, entry.isLocked ? 1 : 0)
        let reason = entryWords(entry)
        setAccessibleLabel(lock, reason)
        gtk_widget_set_tooltip_text(lock, reason)
    }

    /// The choice a row shows pressed: what is in force. Under an administrator's
    /// lock that is the administrator's effect (Don't allow under a deny=, Allow
    /// under an allow=), not the user's stored choice, which has no effect while
    /// the lock lasts and would read as if it did. This is what GNOME Settings does
    /// for a locked setting (the locked value, insensitive, with a lock icon) and
    /// what iOS and macOS do for a setting a management profile enforces (the
    /// enforced value, dimmed, with "managed by your organisation"); the user's
    /// own choice shows again when the lock goes.
    static func choiceInForce(_ entry: Entry) -> Choice {
        switch entry.policy {
        case "restricted": .deny
        case "allow": .allow
        default: Choice(decision: entry.decision)
        }
    }

    private func toggled(_ choice: Choice, _ button: UnsafeMutablePointer<GtkWidget>) {
        guard !updating, gtk_toggle_button_get_active(cast(button)) != 0,
              choice != Self.choiceInForce(entry) else { return }
        onChoice?(self, choice)
    }
}
