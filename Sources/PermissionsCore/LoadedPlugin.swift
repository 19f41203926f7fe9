internal import CPermissionsPlugin
internal import Glibc

/// One plugin library in use: its descriptor, its private state, and the
/// `permissions_host` struct handed to it.
///
/// `@unchecked Sendable`: a plugin calls `log`/`publish` from any thread with
/// `host_data` pointing here, and those calls read only `let` properties (`name`,
/// `declared`, `deliver`). Everything mutable (`state`, `info`) is touched only on
/// the service queue, by the host.
public final class LoadedPlugin: @unchecked Sendable {
    let handle: UnsafeMutableRawPointer
    let descriptor: UnsafePointer<permissions_plugin>
    public internal(set) var info: PluginInfo
    let name: String
    let declared: Set<String>
    let deliver: @Sendable (Snapshot) -> Void
    private var state: UnsafeMutableRawPointer?
    private var host: UnsafeMutablePointer<permissions_host>?
    private var stopped = false

    init(handle: UnsafeMutableRawPointer, descriptor: UnsafePointer<permissions_plugin>, info: PluginInfo,
         deliver: @escaping @Sendable (Snapshot) -> Void) {
        self.handle = handle
        self.descriptor = descriptor
        self.info = info
        self.name = info.name
        self.declared = Set(info.permissions)
        self.deliver = deliver
    }

    /// Calls init with a fresh host struct. The struct holds an unretained pointer to
    /// this object, which the host keeps alive (it never unloads a plugin it started).
    func start() -> Int32 {
        let host = UnsafeMutablePointer<permissions_host>.allocate(capacity: 1)
        host.initialize(to: permissions_host(
            abi_version: PERMISSIONS_PLUGIN_ABI_VERSION,
            struct_size: UInt32(MemoryLayout<permissions_host>.size),
            host_data: Unmanaged.passUnretained(self).toOpaque(),
            log: hostLog,
            publish: hostPublish))
        self.host = host
        var newState: UnsafeMutableRawPointer? = nil
        let rc = descriptor.pointee.`init`!(host, &newState)
        state = newState
        return rc
    }

    func configure(_ config: [ConfigEntry]) {
        guard let configure = descriptor.pointee.configure else { return }
        let relevant = config.filter { $0.section == name || declared.contains($0.section) }
        // Keep the C strings alive for the length of the call.
        let strings: [[UnsafeMutablePointer<CChar>]] = relevant.map { entry in
            [entry.section, entry.key, entry.value, entry.origin].map { (text: String) in strdup(text)! }
        }
        defer { strings.joined().forEach { free($0) } }
        let entries = strings.map { s in
            permissions_config_entry(section: UnsafePointer(s[0]), key: UnsafePointer(s[1]),
                                     value: UnsafePointer(s[2]), origin: UnsafePointer(s[3]))
        }
        let rc = entries.withUnsafeBufferPointer { buffer in
            var c = permissions_config(abi_version: PERMISSIONS_PLUGIN_ABI_VERSION,
                                       struct_size: UInt32(MemoryLayout<permissions_config>.size),
                                       n_entries: UInt32(buffer.count), entries: buffer.baseAddress)
            return configure(state, &c)
        }
        if rc != 0 {
            logWarning("plugin \(name): rejected the new configuration (\(errnoName(-rc))); it keeps the last good one")
        }
    }

    func stop() {
        guard !stopped else { return }
        stopped = true
        descriptor.pointee.fini?(state)
    }

    /// Checks and copies a publication; nil (and a log line) if it breaks the ABI.
    func accept(_ s: UnsafePointer<permissions_snapshot>) -> Snapshot? {
        let snapshot = s.pointee
        guard snapshot.abi_version == PERMISSIONS_PLUGIN_ABI_VERSION,
              Int(snapshot.struct_size) >= MemoryLayout<permissions_snapshot>.size
        else {
            logWarning("plugin \(name): publish with an unknown snapshot version or size; ignored")
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
        let details = Self.pairs(snapshot.details, snapshot.n_details)
        var devices: [[Snapshot.KeyValue]] = []
        for i in 0..<Int(snapshot.n_devices) {
            guard let device = snapshot.devices?[i] else { continue }
            devices.append(Self.pairs(device.properties, device.n_properties))
        }
        return Snapshot(permission: permission, service: service, policies: policies,
                        details: details, devices: devices)
    }

    private static func pairs(_ kv: UnsafePointer<permissions_kv>?, _ count: UInt32) -> [Snapshot.KeyValue] {
        guard let kv else { return [] }
        return (0..<Int(count)).compactMap { i in
            guard let k = kv[i].key, let v = kv[i].value else { return nil }
            return Snapshot.KeyValue(String(cString: k), String(cString: v))
        }
    }
}

// The host functions of `struct permissions_host`. Plain functions so that they
// carry no actor isolation: plugins call them from their own threads.

private func plugin(_ data: UnsafeMutableRawPointer?) -> LoadedPlugin? {
    data.map { Unmanaged<LoadedPlugin>.fromOpaque($0).takeUnretainedValue() }
}

func hostLog(_ data: UnsafeMutableRawPointer?, _ priority: Int32, _ message: UnsafePointer<CChar>?) {
    guard let p = plugin(data), let message else { return }
    let level = Log.Priority(rawValue: min(max(priority, 3), 7)) ?? .info
    Log.shared.log(level, "plugin \(p.name): \(String(cString: message).escapedForMessage)")
}

func hostPublish(_ data: UnsafeMutableRawPointer?, _ snapshot: UnsafePointer<permissions_snapshot>?) -> Int32 {
    guard let p = plugin(data), let snapshot else { return -EINVAL }
    guard let copy = p.accept(snapshot) else { return -EINVAL }
    p.deliver(copy)
    return 0
}
