internal import CAdw
internal import CAdwShims
internal import DesktopSupport
internal import SystemPrimitives

/// The names and icons of the apps the page lists, from their desktop files
/// (AppLookup), looked up once per app id: the page is rebuilt on every change
/// it is told of, and finding an executable's desktop file reads every installed
/// one. An app installed while the page is open shows its id until the page is
/// opened again.
final class AppNames {
    private var known: [String: AppLookup] = [:]

    private func lookup(_ app: String) -> AppLookup {
        if let found = known[app] { return found }
        let found = AppLookup(app: app)
        known[app] = found
        return found
    }

    /// What a person calls `app`: its desktop file's name, else the id, escaped
    /// for display (a path may hold any character).
    func title(_ app: String) -> String { (lookup(app).name ?? app).escapedForDisplay }

    /// Whether the app has a name of its own (then its id is shown beside it).
    func hasName(_ app: String) -> Bool { lookup(app).name != nil }

    /// A new image of the app's icon, or of a generic app's.
    func icon(_ app: String, size: Int32) -> UnsafeMutablePointer<GtkWidget> {
        let image: UnsafeMutablePointer<GtkWidget> = if let icon = lookup(app).icon {
            gtk_image_new_from_gicon(icon)
        } else {
            gtk_image_new_from_icon_name("application-x-executable-symbolic")
        }
        gtk_image_set_pixel_size(cast(image), size)
        permissions_set_accessible_label(image, tr("App icon"))
        return image
    }
}
