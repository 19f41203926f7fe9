// The vocabulary of the service (doc/apps.md): status words, the parts they are
// computed from, and the precedence that combines them.

/// The effective status of one permission for one app, as sent on the bus.
public enum Status: String, Sendable, CaseIterable {
    case authorized
    case denied
    case notDetermined = "not-determined"
    case restricted
    case disabled
    case unsupported
}

/// State of the device or service behind a permission, the same for every app.
public enum ServiceState: String, Sendable {
    case available, disabled, unsupported
}

/// An administrator's entry for one app (from a plugin's configuration).
public enum Policy: String, Sendable {
    case none, restricted, allow
}

/// A stored user decision.
public enum Decision: String, Sendable {
    case authorized, denied
}

/// unsupported > disabled > restricted > admin allow > user decision > not-determined.
public func effectiveStatus(service: ServiceState, policy: Policy, decision: Decision?) -> Status {
    switch (service, policy, decision) {
    case (.unsupported, _, _): .unsupported
    case (.disabled, _, _): .disabled
    case (_, .restricted, _): .restricted
    case (_, .allow, _): .authorized
    case (_, .none, .authorized?): .authorized
    case (_, .none, .denied?): .denied
    case (_, .none, nil): .notDetermined
    }
}

/// Checks of the names callers hand us. Each failure is an `InvalidArgument` error
/// that quotes the value (escaped).
public enum Validate {
    /// Configuration sections the daemon keeps for itself: never permission names.
    public static let reservedSections: Set<String> = ["service", "permissions", "identity"]

    /// `[a-z][a-z0-9-]{0,63}`. Reads the string's UTF-8 in place: GetStatus checks
    /// every call's argument with it, so it allocates nothing.
    public static func isPermissionName(_ name: String) -> Bool {
        let bytes = name.utf8
        guard let first = bytes.first, bytes.count <= 64, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first)
        else { return false }
        return bytes.allSatisfy { b in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b)
                || b == UInt8(ascii: "-")
        }
    }

    /// An app id: 1 to 255 bytes of printable ASCII, either an absolute executable
    /// path with no empty, "." or ".." element, or a reverse-DNS style name of
    /// letters, digits, ".", "_" and "-" that does not start with "." or "-".
    public static func isAppID(_ id: String) -> Bool {
        let bytes = Array(id.utf8)
        guard !bytes.isEmpty, bytes.count <= 255, bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) else { return false }
        if id.hasPrefix("/") {
            let parts = id.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
            return !parts.contains { $0.isEmpty || $0 == "." || $0 == ".." }
        }
        guard bytes[0] != UInt8(ascii: "."), bytes[0] != UInt8(ascii: "-"),
              !zip(bytes, bytes.dropFirst()).contains(where: { $0 == UInt8(ascii: ".") && $1 == UInt8(ascii: ".") })
        else { return false }
        return bytes.allSatisfy { b in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b)
                || b == UInt8(ascii: ".") || b == UInt8(ascii: "_") || b == UInt8(ascii: "-")
        }
    }
}
