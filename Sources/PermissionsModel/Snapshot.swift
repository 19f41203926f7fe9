/// What a plugin published about one permission: a Swift copy of
/// `struct permissions_snapshot`, taken during the `publish` call.
public struct Snapshot: Sendable, Equatable {
    public struct KeyValue: Sendable, Equatable {
        public var key: String
        public var value: String
        public init(_ key: String, _ value: String) {
            self.key = key
            self.value = value
        }
    }

    public var permission: String
    public var service: ServiceState
    public var policies: [String: Policy]
    public var details: [KeyValue]
    public var devices: [[KeyValue]]

    public init(permission: String, service: ServiceState, policies: [String: Policy] = [:],
                details: [KeyValue] = [], devices: [[KeyValue]] = []) {
        self.permission = permission
        self.service = service
        self.policies = policies
        self.details = details
        self.devices = devices
    }

    /// What the host assumes before a plugin's first publication.
    public static func unpublished(_ permission: String) -> Snapshot {
        Snapshot(permission: permission, service: .unsupported)
    }

    public func policy(for app: String) -> Policy { policies[app] ?? .none }

    /// The status of an app with no decision and no entry of its own; the status
    /// that `StatusChanged("", …)` carries.
    public var serviceLevelStatus: Status {
        effectiveStatus(service: service, policy: .none, decision: nil)
    }
}
