/// What the page shows, read from the service in one go (`SnapshotReader`) and
/// replaced whole by the next reading: nothing here is changed in place, so a
/// reading never mixes with an older one.

/// One permission of the service, with the state of its device or service.
struct PermissionState: Equatable {
    let name: String
    /// GetDetails "service-state": "available", "disabled" or "unsupported".
    let serviceState: String
    /// plugin-details "disabled-by" for a disabled one: "configuration" (the
    /// administrator) or "device" (e.g. every Bluetooth adapter off); nil when the
    /// service does not say.
    let disabledBy: String?
    /// The devices' descriptions (or names).
    let devices: [String]
}

/// One app's standing for one permission, for the user running the page.
struct Entry: Equatable {
    let app: String
    let permission: String
    /// The effective status (a status word).
    let status: String
    /// "authorized", "denied" or "none".
    let decision: String
    /// "always", "session", "unassigned", or nil without a decision.
    let scope: String?
    /// When a timed decision ends, in microseconds since the epoch.
    let expiresAt: Int64?
    /// The administrator's entry: "none", "restricted" (deny=) or "allow" (allow=).
    let policy: String

    /// An administrator decides: the user's choice has no effect.
    var isLocked: Bool { policy == "restricted" || policy == "allow" }

    /// Worth a row in the overview: a decision of the user's, or an administrator's lock.
    var isShown: Bool { decision != "none" || isLocked }

    struct Key: Hashable {
        let app: String
        let permission: String
    }
    var key: Key { Key(app: app, permission: permission) }
}

struct Snapshot: Equatable {
    /// Every permission, in the order shown.
    var permissions: [PermissionState] = []
    /// The entries read, shown or not, in app order.
    var entries: [Entry] = []

    func entries(of permission: String) -> [Entry] { entries.filter { $0.permission == permission && $0.isShown } }
    func entries(ofApp app: String) -> [Entry] { entries.filter { $0.app == app } }
    func state(of permission: String) -> PermissionState? { permissions.first { $0.name == permission } }
}
