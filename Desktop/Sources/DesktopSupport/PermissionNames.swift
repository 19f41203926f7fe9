/// A permission's name in words and its icon, as both desktop programs show it.
/// A permission a plugin or the administrator added has no words of ours: its
/// name is all there is.
public struct PermissionName {
    public let title: String
    public let icon: String

    public init(_ permission: String) {
        switch permission {
        case "camera": (title, icon) = (tr("Camera"), "camera-web-symbolic")
        case "microphone": (title, icon) = (tr("Microphone"), "audio-input-microphone-symbolic")
        case "bluetooth": (title, icon) = (tr("Bluetooth devices"), "bluetooth-active-symbolic")
        case "local-network": (title, icon) = (tr("Devices on your local network"), "network-workgroup-symbolic")
        case "location": (title, icon) = (tr("Location"), "find-location-symbolic")
        case "notifications": (title, icon) = (tr("Notifications"), "preferences-system-notifications-symbolic")
        default: (title, icon) = (permission, "dialog-question-symbolic")
        }
    }

    /// The permissions every desktop shows first, in this order; others follow by name.
    public static let knownOrder = ["camera", "microphone", "location", "bluetooth", "local-network", "notifications"]

    /// `permissions` in the order the settings show them.
    public static func sorted(_ permissions: [String]) -> [String] {
        permissions.sorted { a, b in
            let (ia, ib) = (knownOrder.firstIndex(of: a) ?? Int.max, knownOrder.firstIndex(of: b) ?? Int.max)
            return ia != ib ? ia < ib : a < b
        }
    }
}
