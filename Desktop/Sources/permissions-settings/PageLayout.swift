internal import CAdw
internal import DesktopSupport

/// `content` as a page: margins, held to a readable width (AdwClamp), and
/// scrolled vertically.
func scrollingPage(_ content: UnsafeMutablePointer<GtkWidget>) -> UnsafeMutablePointer<GtkWidget> {
    gtk_widget_set_margin_top(content, 24)
    gtk_widget_set_margin_bottom(content, 24)
    gtk_widget_set_margin_start(content, 12)
    gtk_widget_set_margin_end(content, 12)
    let clamp = adw_clamp_new()!
    adw_clamp_set_child(cast(clamp), content)
    let scrolled = gtk_scrolled_window_new()!
    gtk_scrolled_window_set_policy(cast(scrolled), GTK_POLICY_NEVER, GTK_POLICY_AUTOMATIC)
    gtk_scrolled_window_set_child(cast(scrolled), clamp)
    return scrolled
}
