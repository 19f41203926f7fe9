internal import PermissionsModel
internal import CPermissionsPlugin
internal import PermissionsSupport
internal import SystemPrimitives

/// Checks a `struct permissions_snapshot` against the ABI and copies it into a
/// Swift `Snapshot`, during the plugin's publish call.
///
/// The snapshot and its arrays are read field by field, through the size and
/// strides the plugin declared (`PluginStruct`), so that a plugin built against an
/// older or a newer ABI 1 header is read correctly. It reads plugin memory, which
/// may be slow to read (swapped out, or a plugin's own page-fault handler): the
/// caller holds no lock meanwhile.
enum SnapshotReader {
    static func read(_ pointer: UnsafePointer<permissions_snapshot>, declared: Set<String>,
                     plugin name: String) -> Snapshot? {
        let raw = UnsafeRawPointer(pointer)
        let version = raw.loadUnaligned(as: UInt32.self)
        let size = raw.loadUnaligned(fromByteOffset: 4, as: UInt32.self)
        guard version == PERMISSIONS_PLUGIN_ABI_VERSION, Int(size) >= V1Size.snapshot else {
            logWarning("plugin \(name): publish with snapshot version \(version), size \(size) "
                       + "(ABI 1's is at least \(V1Size.snapshot) bytes); ignored")
            return nil
        }
        let snapshot = PluginStruct<permissions_snapshot>(base: raw, size: Int(size))
        let permission = snapshot[v1: \.permission].map { String(cString: $0) } ?? ""
        guard declared.contains(permission) else {
            logWarning("plugin \(name): publish for undeclared permission \"\(permission.escapedForMessage)\"; ignored")
            return nil
        }
        let serviceState = snapshot[v1: \.service_state]
        let service: ServiceState
        switch serviceState {
        case Int32(PERMISSIONS_SERVICE_AVAILABLE.rawValue): service = .available
        case Int32(PERMISSIONS_SERVICE_DISABLED.rawValue): service = .disabled
        case Int32(PERMISSIONS_SERVICE_UNSUPPORTED.rawValue): service = .unsupported
        default:
            logWarning("plugin \(name): service state \(serviceState) for \(permission) is not in the ABI; ignored")
            return nil
        }
        let counts = (policies: snapshot[v1: \.n_policies], details: snapshot[v1: \.n_details],
                      devices: snapshot[v1: \.n_devices])
        guard counts.policies <= 65536, counts.details <= 1024, counts.devices <= 1024 else {
            logWarning("plugin \(name): snapshot for \(permission) with absurd counts; ignored")
            return nil
        }
        func stride(_ field: KeyPath<permissions_snapshot, UInt32>, _ fieldName: String, v1: Int) -> Int? {
            let declared = Int(snapshot[field] ?? 0)
            let stride = declared == 0 ? v1 : declared
            guard stride >= v1, stride % MemoryLayout<UnsafeRawPointer>.alignment == 0 else {
                logWarning("plugin \(name): snapshot for \(permission) with \(fieldName) \(stride): ABI 1's element "
                           + "is \(v1) bytes, and a stride is at least that, in multiples of a pointer's alignment; ignored")
                return nil
            }
            return stride
        }
        guard let policyStride = stride(\.policy_size, "policy_size", v1: V1Size.appPolicy),
              let kvStride = stride(\.kv_size, "kv_size", v1: V1Size.kv),
              let deviceStride = stride(\.device_size, "device_size", v1: V1Size.device)
        else { return nil }

        var policies: [String: Policy] = [:]
        let policyArray = PluginStruct<permissions_app_policy>.array(
            snapshot[v1: \.policies].map(UnsafeRawPointer.init), count: counts.policies, stride: policyStride)
        for entry in policyArray {
            guard let appPointer = entry[v1: \.app_id] else { continue }
            let app = String(cString: appPointer)
            let policy: Policy
            switch entry[v1: \.policy] {
            case Int32(PERMISSIONS_POLICY_NONE.rawValue): policy = .none
            case Int32(PERMISSIONS_POLICY_RESTRICTED.rawValue): policy = .restricted
            case Int32(PERMISSIONS_POLICY_ALLOW.rawValue): policy = .allow
            case let other:
                logWarning("plugin \(name): policy \(other) for \(permission) is not in the ABI; ignored")
                return nil
            }
            guard isValidPolicyAppID(app, from: "plugin \(name)") else { continue }
            if policy != .none { policies[app] = policy }
        }
        let deviceArray = PluginStruct<permissions_device>.array(
            snapshot[v1: \.devices].map(UnsafeRawPointer.init), count: counts.devices, stride: deviceStride)
        let devices = deviceArray.compactMap { device -> [Snapshot.KeyValue]? in
            let count = device[v1: \.n_properties]
            guard count <= 64 else { return nil }
            return pairs(device[v1: \.properties].map(UnsafeRawPointer.init), count, stride: kvStride)
        }
        let details = pairs(snapshot[v1: \.details].map(UnsafeRawPointer.init), counts.details, stride: kvStride)
        return Snapshot(permission: permission, service: service, policies: policies, details: details,
                        devices: devices)
    }

    private static func pairs(_ base: UnsafeRawPointer?, _ count: UInt32, stride: Int) -> [Snapshot.KeyValue] {
        PluginStruct<permissions_kv>.array(base, count: count, stride: stride).compactMap { kv in
            guard let key = kv[v1: \.key], let value = kv[v1: \.value] else { return nil }
            return Snapshot.KeyValue(String(cString: key), String(cString: value))
        }
    }
}
