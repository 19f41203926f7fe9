internal import CAdw
internal import Glibc

/// An app as a person knows it: the name and icon of its desktop file when one is
/// found for its identity, else nothing (the prompt and the settings page then
/// show the id, a path for an executable or a script).
public struct AppLookup {
    public let name: String?
    /// A GIcon (owned: released with `g_object_unref` by whoever takes it).
    public let icon: OpaquePointer?

    /// For an app known by its id alone (the settings page: the service's lists
    /// give no identity kind): a path is an executable's, `snap.NAME` a snap's,
    /// any other id a flatpak's or a systemd unit's (the same lookup, `ID.desktop`).
    public init(app: String) {
        let kind = app.hasPrefix("/") ? "executable" : app.hasPrefix("snap.") ? "snap" : "flatpak"
        self.init(app: app, kind: kind)
    }

    /// - flatpak, systemd-unit: the desktop file named by the id (`ID.desktop`);
    /// - snap (`snap.NAME`): `NAME_NAME.desktop`, snapd's name for a snap's own app;
    /// - executable, script: the desktop file whose `TryExec` or `Exec` names the
    ///   path (a bare command name looked up in PATH).
    public init(app: String, kind: String) {
        var info: OpaquePointer?
        switch kind {
        case "flatpak", "systemd-unit":
            info = g_desktop_app_info_new(app + ".desktop")
        case "snap" where app.hasPrefix("snap."):
            let name = app.dropFirst("snap.".count)
            info = g_desktop_app_info_new("\(name)_\(name).desktop")
        case "executable", "script":
            info = Self.desktopFile(running: app)
        default:
            info = nil
        }
        guard let info else {
            name = nil
            icon = nil
            return
        }
        defer { objectUnref(info) }
        name = g_app_info_get_display_name(info).map { String(cString: $0) }
        icon = g_app_info_get_icon(info).map { objectRef($0); return $0 }
    }

    /// The first installed desktop file whose TryExec or Exec names `path`.
    private static func desktopFile(running path: String) -> OpaquePointer? {
        guard let all = g_app_info_get_all() else { return nil }
        defer { g_list_free_full(all, g_object_unref) }
        var found: OpaquePointer?
        var node: UnsafeMutablePointer<GList>? = all
        while let current = node, found == nil {
            let info = OpaquePointer(current.pointee.data!)
            let tryExec = g_desktop_app_info_get_string(info, "TryExec").map { value in
                defer { g_free(value) }
                return String(cString: value)
            }
            let exec = g_app_info_get_executable(info).map { String(cString: $0) }
            if [tryExec, exec].contains(where: { $0.map { resolved($0) == path } ?? false }) {
                found = info
                objectRef(info)
            }
            node = current.pointee.next
        }
        return found
    }

    /// A command as the process it starts would be known: a name looked up in PATH,
    /// symbolic links resolved (the service reads executables from /proc).
    private static func resolved(_ command: String) -> String? {
        guard let found = g_find_program_in_path(command) else { return nil }
        defer { g_free(found) }
        guard let real = realpath(found, nil) else { return String(cString: found) }
        defer { free(real) }
        return String(cString: real)
    }
}
