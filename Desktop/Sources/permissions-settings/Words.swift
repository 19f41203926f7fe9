internal import CAdw
internal import DesktopSupport

/// The three answers a row offers, in the order shown. "Ask next time" forgets
/// the decision (ResetDecisions), so that the app's next request asks again.
enum Choice: CaseIterable {
    case allow
    case deny
    case ask

    /// The choice a decision shows as ("authorized", "denied", "none").
    init(decision: String) {
        switch decision {
        case "authorized": self = .allow
        case "denied": self = .deny
        default: self = .ask
        }
    }

    var label: String {
        switch self {
        case .allow: tr("Allow")
        case .deny: tr("Don’t allow")
        case .ask: tr("Ask next time")
        }
    }

    /// The accessible name: the choice, the permission and the app (`%s` twice).
    var accessibleTemplate: String {
        switch self {
        case .allow: tr("Allow: %s for %s")
        case .deny: tr("Don’t allow: %s for %s")
        case .ask: tr("Ask next time: %s for %s")
        }
    }
}

/// The state of a permission's device or service, in words ("No camera found").
func stateWords(_ state: PermissionState) -> String {
    switch state.serviceState {
    case "unsupported":
        switch state.name {
        case "camera": return tr("No camera found")
        case "microphone": return tr("No microphone found")
        case "bluetooth": return tr("No Bluetooth adapter found")
        case "location": return tr("Location services are not available")
        default: return tr("Not available on this computer")
        }
    case "disabled":
        // The service says who turned it off; without that (an older service) a
        // radio is off by its switch, anything else by the configuration.
        let byDevice = state.disabledBy == "device" || (state.disabledBy == nil && state.name == "bluetooth")
        guard byDevice else { return tr("Turned off by your administrator") }
        switch state.name {
        case "bluetooth": return tr("Bluetooth is off")
        case "location": return tr("Location services are off")
        default: return tr("Turned off")
        }
    default:
        guard !state.devices.isEmpty else { return tr("On") }
        return tr("On: %s").filling(state.devices.joined(separator: ", "))
    }
}

/// What a row says under its title: how long the decision lasts, or who locks it.
func entryWords(_ entry: Entry) -> String {
    switch entry.policy {
    case "restricted": return tr("Turned off for this app by your administrator")
    case "allow": return tr("Allowed for this app by your administrator")
    default: break
    }
    var words: String
    switch entry.scope {
    case "session": words = tr("While the app runs")
    case "always", "unassigned": words = tr("Always")
    default: return tr("Not decided: the app asks next time")
    }
    if let expiresAt = entry.expiresAt {
        words = tr("Until %s").filling(localTime(microseconds: expiresAt))
    }
    return words
}

/// A time in the user's locale and time zone.
func localTime(microseconds: Int64) -> String {
    guard let time = g_date_time_new_from_unix_local(Int(microseconds / 1_000_000)) else { return String(microseconds) }
    defer { g_date_time_unref(time) }
    guard let text = g_date_time_format(time, "%x %X") else { return String(microseconds) }
    defer { g_free(text) }
    return String(cString: text)
}
