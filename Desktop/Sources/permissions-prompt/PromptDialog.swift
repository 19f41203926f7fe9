internal import CAdw
internal import CAdwShims
internal import DesktopSupport
internal import SystemPrimitives

/// The dialog of one prompt: an AdwMessageDialog whose heading names the app and
/// the permission, whose extra child shows the app (icon and name from its desktop
/// file, else its id), the permission with its icon, the accuracy asked for
/// location, and the app's reason as its own words: quoted, in a card of its own,
/// escaped, never markup. "Don't allow" is the default response; Escape or
/// closing the window is the close response, a dismissal.
enum PromptDialog {
    /// `position` of `count`: where the prompt is in the run of prompts the agent
    /// has been given one after another ("2 of 3"; nothing when alone).
    static func make(for prompt: PromptAgent.Prompt, position: Int, of count: Int) -> UnsafeMutablePointer<GtkWidget> {
        let words = PermissionWords(prompt.permission)
        let app = AppLookup(app: prompt.app, kind: prompt.kind)
        let appName = (app.name ?? prompt.app).escapedForDisplay
        let heading = words.heading.filling(appName, prompt.permission.escapedForDisplay)
        let dialog = adw_message_dialog_new(nil, heading, tr("Your answer applies to this app alone."))!
        let message: UnsafeMutablePointer<AdwMessageDialog> = cast(dialog)
        adw_message_dialog_set_heading_use_markup(message, 0)
        adw_message_dialog_set_body_use_markup(message, 0)
        gtk_window_set_title(cast(dialog), tr("Permission request"))
        gtk_window_set_modal(cast(dialog), 1)

        var rows = [appRow(app, id: prompt.app), iconRow(words.icon, text: words.name)]
        if prompt.permission == "location", let accuracy = prompt.accuracy {
            rows.append(plainLabel(tr("Accuracy asked: %s").filling(accuracyWords(accuracy))))
        }
        if !prompt.reason.isEmpty { rows.append(reasonCard(prompt.reason)) }
        if count > 1 { rows.append(counter(position, of: count)) }
        adw_message_dialog_set_extra_child(message, box(GTK_ORIENTATION_VERTICAL, spacing: 12, rows))

        for choice in Choice.allCases { adw_message_dialog_add_response(message, choice.rawValue, choice.label) }
        adw_message_dialog_set_default_response(message, Choice.deny.rawValue)
        adw_message_dialog_set_close_response(message, dismissResponse)
        return dialog
    }

    /// Puts the focus on "Don't allow", the default response, now and whenever the
    /// dialog changes its layout. libadwaita 1.2 lays the buttons out twice (in a
    /// row, and in a column for a narrow dialog, "Always allow" first) and shows the
    /// one that fits once the dialog has its size; GTK then focuses the first button
    /// of the one shown, so that Return would grant for ever.
    static func keepFocusOnDontAllow(_ dialog: UnsafeMutablePointer<GtkWidget>) {
        guard let squeezer = descendants(of: dialog).first(where: { isA($0, adw_squeezer_get_type()) }) else { return }
        focusDontAllow(in: squeezer)
        permissions_connect_notify(UnsafeMutableRawPointer(squeezer), "visible-child", { squeezer, _, _ in
            PromptDialog.focusDontAllow(in: cast(OpaquePointer(squeezer!)))
        }, nil)
    }

    private static func focusDontAllow(in squeezer: UnsafeMutablePointer<GtkWidget>) {
        guard let layout = adw_squeezer_get_visible_child(cast(squeezer)) else { return }
        let deny = Choice.deny.label
        let button = descendants(of: layout).first { widget in
            isA(widget, gtk_button_get_type()) && gtk_button_get_label(cast(widget)).map { String(cString: $0) } == deny
        }
        if let button { gtk_widget_grab_focus(button) }
    }

    private static func isA(_ widget: UnsafeMutablePointer<GtkWidget>, _ type: GType) -> Bool {
        g_type_check_instance_is_a(cast(widget), type) != 0
    }

    /// `widget` and every widget under it, depth first.
    private static func descendants(of widget: UnsafeMutablePointer<GtkWidget>) -> [UnsafeMutablePointer<GtkWidget>] {
        var all = [widget]
        var child = gtk_widget_get_first_child(widget)
        while let current = child {
            all += descendants(of: current)
            child = gtk_widget_get_next_sibling(current)
        }
        return all
    }

    /// "2 of 3", with the accessible name "Request 2 of 3". The numbers go into
    /// the translated template; a translation may reorder them.
    private static func counter(_ position: Int, of count: Int) -> UnsafeMutablePointer<GtkWidget> {
        let label = plainLabel(tr("%s of %s").filling(String(position), String(count)), cssClasses: ["dim-label"])
        permissions_set_accessible_label(label, tr("Request %s of %s").filling(String(position), String(count)))
        return label
    }

    /// Makes the realized `dialog` transient for the app's window, `parent` as in
    /// Ask's "parent-window": "x11:XID" (hexadecimal) through WM_TRANSIENT_FOR,
    /// "wayland:HANDLE" through xdg-foreign. False when the dialog's display is
    /// not of that kind (an X11 window named on Wayland) or the value is no window.
    static func setTransientFor(_ dialog: UnsafeMutablePointer<GtkWidget>, _ parent: String) -> Bool {
        if parent.hasPrefix("x11:"), let xid = UInt(parent.dropFirst(4), radix: 16) {
            return permissions_set_transient_for_x11(dialog, xid) != 0
        }
        if parent.hasPrefix("wayland:") {
            return permissions_set_transient_for_wayland(dialog, String(parent.dropFirst(8))) != 0
        }
        return false
    }

    /// The app's icon and name, with its id under the name when a desktop file gave one.
    private static func appRow(_ app: AppLookup, id: String) -> UnsafeMutablePointer<GtkWidget> {
        let image: UnsafeMutablePointer<GtkWidget>
        if let icon = app.icon {
            image = gtk_image_new_from_gicon(icon)
            objectUnref(icon)
        } else {
            image = gtk_image_new_from_icon_name("application-x-executable-symbolic")
        }
        gtk_image_set_pixel_size(cast(image), 32)
        permissions_set_accessible_label(image, tr("App icon"))
        var lines = [plainLabel((app.name ?? id).escapedForDisplay, cssClasses: ["heading"])]
        if app.name != nil { lines.append(plainLabel(id.escapedForDisplay, cssClasses: ["dim-label", "caption"])) }
        return box(GTK_ORIENTATION_HORIZONTAL, spacing: 12, [image, box(GTK_ORIENTATION_VERTICAL, spacing: 2, lines)])
    }

    private static func iconRow(_ icon: String, text: String) -> UnsafeMutablePointer<GtkWidget> {
        let image = gtk_image_new_from_icon_name(icon)!
        gtk_image_set_pixel_size(cast(image), 32)
        permissions_set_accessible_label(image, text)
        return box(GTK_ORIENTATION_HORIZONTAL, spacing: 12, [image, plainLabel(text, cssClasses: ["heading"])])
    }

    /// The reason, set apart from the system's words: a card with a caption that
    /// says whose words they are, the text quoted and escaped.
    private static func reasonCard(_ reason: String) -> UnsafeMutablePointer<GtkWidget> {
        let caption = plainLabel(tr("The app gives this reason, in its own words:"), cssClasses: ["dim-label", "caption"])
        let text = plainLabel(reason.escapedForDisplayQuoted)
        gtk_label_set_max_width_chars(cast(text), 50)
        permissions_set_accessible_description(text, tr("The app’s own words"))
        // A long reason (up to 1024 bytes) scrolls within the card: the choices stay on screen.
        let scrolled = gtk_scrolled_window_new()!
        gtk_scrolled_window_set_policy(cast(scrolled), GTK_POLICY_NEVER, GTK_POLICY_AUTOMATIC)
        gtk_scrolled_window_set_max_content_height(cast(scrolled), 160)
        gtk_scrolled_window_set_propagate_natural_height(cast(scrolled), 1)
        // The natural height of a wrapped label is measured at its narrowest: without a
        // floor a long reason would show two lines.
        if reason.utf8.count > 200 { gtk_scrolled_window_set_min_content_height(cast(scrolled), 140) }
        gtk_scrolled_window_set_child(cast(scrolled), text)
        let card = box(GTK_ORIENTATION_VERTICAL, spacing: 6, [caption, scrolled])
        gtk_widget_add_css_class(card, "card")
        for side in [gtk_widget_set_margin_start, gtk_widget_set_margin_end] {
            side(caption, 12)
            side(text, 12)
        }
        gtk_widget_set_margin_top(caption, 12)
        gtk_widget_set_margin_bottom(text, 12)
        return card
    }
}
