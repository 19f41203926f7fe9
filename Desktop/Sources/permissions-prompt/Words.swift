internal import DesktopSupport
internal import SystemPrimitives

/// What a prompt says about a permission: its heading (with the app's name for
/// `%s`), its name in words, and its icon.
struct PermissionWords {
    let heading: String
    let name: String
    let icon: String

    init(_ permission: String) {
        let named = PermissionName(permission)
        (name, icon) = (named.title, named.icon)
        switch permission {
        case "camera": heading = tr("Allow %s to use your camera?")
        case "microphone": heading = tr("Allow %s to use your microphone?")
        case "bluetooth": heading = tr("Allow %s to use Bluetooth devices?")
        case "local-network": heading = tr("Allow %s to find and reach devices on your local network?")
        case "location": heading = tr("Allow %s to know your location?")
        case "notifications": heading = tr("Allow %s to show notifications?")
        default: heading = tr("Allow %s to use “%s”?")
        }
    }
}

/// A location request's accuracy (geoclue's words, as the service passes them) in words.
func accuracyWords(_ level: String) -> String {
    switch level {
    case "country": tr("Your country")
    case "city": tr("Your city")
    case "neighborhood": tr("Your neighborhood")
    case "street": tr("Your street")
    case "exact": tr("Your exact location")
    default: level.escapedForDisplayQuoted
    }
}

extension String {
    /// Untrusted text for a label: escaped (control and bidirectional characters
    /// as `\u{…}`), in quotation marks.
    var escapedForDisplayQuoted: String { "“" + escapedForDisplay + "”" }
}

/// The dialog's responses, in the order shown, and the answer each gives the
/// service (dbus/org.example.Permissions.Agent.xml). Closing the dialog (Escape,
/// the window closed) is `dismissResponse`: stored nowhere.
enum Choice: String, CaseIterable {
    case deny
    case once
    case session
    case always

    var answer: String {
        switch self {
        case .once: "allow-once"
        case .session: "allow-session"
        case .always: "allow-always"
        case .deny: "deny"
        }
    }

    var label: String {
        switch self {
        case .once: tr("Allow once")
        case .session: tr("Allow while the app runs")
        case .always: tr("Always allow")
        case .deny: tr("Don’t allow")
        }
    }

    /// The answer of a response id; the close response and any other id dismiss.
    static func answer(forResponse id: String) -> String { Choice(rawValue: id)?.answer ?? "dismiss" }
}

let dismissResponse = "dismiss"
