internal import CPermissionsPlugin

/// Checks a `struct permissions_snapshot` against the ABI and copies it into a
/// Swift `Snapshot`, during the plugin's publish call.
enum SnapshotReader {
    static func read(_ s: UnsafePointer<permissions_snapshot>, declared: Set<String>, plugin name: String) -> Snapshot? {
        let snapshot = s.pointee
        guard snapshot.abi_version == PERMISSIONS_PLUGIN_ABI_VERSION,
              Int(snapshot.struct_size) >= MemoryLayout<permissions_snapshot>.size
        else {
            logWarning("plugin \(name): publish with snapshot version \(snapshot.abi_version), size \(snapshot.struct_size); ignored")
            return nil
        }
        let permission = snapshot.permission.map { String(cString: $0) } ?? ""
        guard declared.contains(permission) else {
            logWarning("plugin \(name): publish for undeclared permission \"\(permission.escapedForMessage)\"; ignored")
            return nil
        }
        let service: ServiceState
        switch snapshot.service_state {
        case Int32(PERMISSIONS_SERVICE_AVAILABLE.rawValue): service = .available
        case Int32(PERMISSIONS_SERVICE_DISABLED.rawValue): service = .disabled
        case Int32(PERMISSIONS_SERVICE_UNSUPPORTED.rawValue): service = .unsupported
        default:
            logWarning("plugin \(name): service state \(snapshot.service_state) for \(permission) is not in the ABI; ignored")
            return nil
        }
        guard snapshot.n_policies <= 65536, snapshot.n_details <= 1024, snapshot.n_devices <= 1024 else {
            logWarning("plugin \(name): snapshot for \(permission) with absurd counts; ignored")
            return nil
        }
        var policies: [String: Policy] = [:]
        for i in 0..<Int(snapshot.n_policies) {
            guard let entry = snapshot.policies?[i], let appPtr = entry.app_id else { continue }
            let app = String(cString: appPtr)
            let policy: Policy
            switch entry.policy {
            case Int32(PERMISSIONS_POLICY_NONE.rawValue): policy = .none
            case Int32(PERMISSIONS_POLICY_RESTRICTED.rawValue): policy = .restricted
            case Int32(PERMISSIONS_POLICY_ALLOW.rawValue): policy = .allow
            default:
                logWarning("plugin \(name): policy \(entry.policy) for \(permission) is not in the ABI; ignored")
                return nil
            }
            guard Validate.isAppID(app) else {
                logWarning("plugin \(name): invalid app id \"\(app.escapedForMessage)\" in a policy; entry ignored")
                continue
            }
            if policy != .none { policies[app] = policy }
        }
        var devices: [[Snapshot.KeyValue]] = []
        for i in 0..<Int(snapshot.n_devices) {
            guard let device = snapshot.devices?[i], device.n_properties <= 64 else { continue }
            devices.append(pairs(device.properties, device.n_properties))
        }
        return Snapshot(permission: permission, service: service, policies: policies,
                        details: pairs(snapshot.details, snapshot.n_details), devices: devices)
    }

    private static func pairs(_ kv: UnsafePointer<permissions_kv>?, _ count: UInt32) -> [Snapshot.KeyValue] {
        guard let kv else { return [] }
        return (0..<Int(count)).compactMap { i in
            guard let k = kv[i].key, let v = kv[i].value else { return nil }
            return Snapshot.KeyValue(String(cString: k), String(cString: v))
        }
    }
}
