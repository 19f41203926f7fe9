public import CPermissionsPlugin
public import PermissionsModel
public import SystemPrimitives
internal import Glibc

// Helpers for writing a permissions plugin in Swift. They build the C structs of
// permissions-plugin.h from Swift values; nothing Swift crosses the ABI. Linked
// statically into each plugin library.

/// Builds the static descriptor a plugin's entry point returns. Call it once, from
/// a global `let` (Swift initialises globals exactly once, thread-safely). The
/// strings are copied and live as long as the library. It also looks up this
/// library's libdispatch symbols (`resolveDispatchSymbols`): in the plugin's turn
/// to open, not at its first queue, which another plugin's dlopen could make wait.
public func makeDescriptor(
    name: String, version: String, description: String, permissions: [String],
    initialize: @convention(c) (UnsafePointer<permissions_host>?, UnsafeMutablePointer<UnsafeMutableRawPointer?>?) -> Int32,
    configure: (@convention(c) (UnsafeMutableRawPointer?, UnsafePointer<permissions_config>?) -> Int32)?,
    finish: (@convention(c) (UnsafeMutableRawPointer?) -> Void)?,
    validate: (@convention(c) (UnsafeMutableRawPointer?, UnsafePointer<permissions_config>?) -> Int32)? = nil,
    enforcement: Enforcement? = nil
) -> UnsafePointer<permissions_plugin> {
    resolveDispatchSymbols()
    let d = UnsafeMutablePointer<permissions_plugin>.allocate(capacity: 1)
    d.initialize(to: permissions_plugin(
        abi_version: PERMISSIONS_PLUGIN_ABI_VERSION,
        struct_size: UInt32(MemoryLayout<permissions_plugin>.size),
        name: UnsafePointer(strdup(name)), version: UnsafePointer(strdup(version)),
        description: UnsafePointer(strdup(description)), permissions: cStringList(permissions),
        init: initialize, configure: configure, fini: finish, validate: validate,
        enforced: enforcement.map { cStringList($0.permissions) },
        open_remote: enforcement?.open, remote_status: enforcement?.status))
    return UnsafePointer(d)
}

/// A NULL-terminated list of copies of `strings`, never freed (a descriptor's).
private func cStringList(_ strings: [String]) -> UnsafePointer<UnsafePointer<CChar>?> {
    let list = UnsafeMutablePointer<UnsafePointer<CChar>?>.allocate(capacity: strings.count + 1)
    for (i, p) in strings.enumerated() { list[i] = UnsafePointer(strdup(p)) }
    list[strings.count] = nil
    return UnsafePointer(list)
}

/// ABI 1.3's enforcement entries of a descriptor: the permissions a plugin
/// enforces, and its open_remote and remote_status.
public struct Enforcement {
    public var permissions: [String]
    public var open: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<permissions_remote>?) -> Int32
    public var status: @convention(c) (UnsafeMutableRawPointer?, UInt64, UnsafePointer<CChar>?) -> Void

    public init(permissions: [String],
                open: @escaping @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<permissions_remote>?) -> Int32,
                status: @escaping @convention(c) (UnsafeMutableRawPointer?, UInt64, UnsafePointer<CChar>?) -> Void) {
        self.permissions = permissions
        self.open = open
        self.status = status
    }
}

/// What the host asks of `open_remote`, copied out of its struct.
public struct RemoteRequest: Sendable {
    public var id: UInt64
    public var uid: UInt32
    public var pid: UInt32
    public var appID: String
    public var permission: String

    /// Reads the host's struct by its declared size; nil when it lacks a field.
    public init?(_ remote: UnsafePointer<permissions_remote>?) {
        guard let remote else { return nil }
        let r = HostStruct<permissions_remote>(remote)
        guard let id = r.field(\.id, as: UInt64.self), let uid = r.field(\.uid, as: UInt32.self),
              let pid = r.field(\.pid, as: UInt32.self),
              let app = r.field(\.app_id, as: UnsafePointer<CChar>?.self) ?? nil,
              let permission = r.field(\.permission, as: UnsafePointer<CChar>?.self) ?? nil else { return nil }
        (self.id, self.uid, self.pid) = (id, uid, pid)
        appID = String(cString: app)
        self.permission = String(cString: permission)
    }
}

/// The host functions a plugin was given, for use from any thread.
///
/// `@unchecked Sendable`: it holds only the host's pointer, and the ABI says the
/// host's functions may be called from any thread until fini returns.
public struct HostHandle: @unchecked Sendable {
    let host: UnsafePointer<permissions_host>

    public init(_ host: UnsafePointer<permissions_host>) { self.host = host }

    public enum Priority: Int32 { case error = 3, warning = 4, info = 6, debug = 7 }

    public func log(_ priority: Priority, _ message: String) {
        host.pointee.log?(host.pointee.host_data, priority.rawValue, message)
    }

    /// The host's `user_runtime_root` (ABI 1.2): where each user's runtime
    /// directory is on a daemon serving many users; nil on one serving one user,
    /// or from a host older than the field.
    public var userRuntimeRoot: String? {
        let size = MemoryLayout<permissions_host>.offset(of: \permissions_host.user_runtime_root)!
            + MemoryLayout<UnsafePointer<CChar>?>.size
        guard host.pointee.struct_size >= size, let root = host.pointee.user_runtime_root else { return nil }
        return String(cString: root)
    }

    /// Whether the host takes users' own snapshots (ABI 1.2's publish_for_user).
    public var publishesForUsers: Bool {
        let size = MemoryLayout<permissions_host>.offset(of: \permissions_host.publish_for_user)!
            + MemoryLayout<UnsafeRawPointer?>.size
        return host.pointee.struct_size >= size && host.pointee.publish_for_user != nil
    }

    /// Publishes user `uid`'s own snapshot; -ENOSYS from a host without
    /// publish_for_user (see `publishesForUsers`).
    @discardableResult
    public func publish(_ snapshot: PluginSnapshot, forUser uid: UInt32) -> Int32 {
        guard publishesForUsers, let publish = host.pointee.publish_for_user else { return -ENOSYS }
        return snapshot.withCStruct { publish(host.pointee.host_data, uid, $0) }
    }

    /// Tells the host that remote `id` has ended (ABI 1.3's remote_closed); nothing
    /// on an older host, which opens no remotes.
    public func remoteClosed(_ id: UInt64) {
        typealias Closed = @convention(c) (UnsafeMutableRawPointer?, UInt64) -> Void
        let h = HostStruct<permissions_host>(host)
        guard let closed = h.field(\.remote_closed, as: Closed?.self) ?? nil else { return }
        closed(h.field(\.host_data, as: UnsafeMutableRawPointer?.self) ?? nil, id)
    }

    private typealias ConnectUserSocket = @convention(c) (UnsafeMutableRawPointer?, UInt32, UnsafePointer<CChar>?) -> Int32

    /// The host's connect_user_socket (ABI 1.3), when its struct has one set.
    private var connectUserSocketFunction: ConnectUserSocket? {
        HostStruct<permissions_host>(host).field(\.connect_user_socket, as: ConnectUserSocket?.self) ?? nil
    }

    /// Whether the host connects users' own sockets (ABI 1.3's connect_user_socket):
    /// a daemon serving many users does; one serving one user, or an older host,
    /// does not.
    public var connectsUserSockets: Bool { connectUserSocketFunction != nil }

    /// A connection to user `uid`'s own socket ROOT/UID/`name`, verified to be that
    /// user's (see connect_user_socket in permissions-plugin.h): a connected stream
    /// socket, non-blocking and close-on-exec, the caller's to close; ENOSYS from a
    /// host that does not connect them (`connectsUserSockets`). Blocks for up to
    /// about a second: call it from the plugin's own thread.
    public func connectUserSocket(uid: UInt32, name: String) -> Result<Int32, Errno> {
        guard let connect = connectUserSocketFunction else { return .failure(Errno(rawValue: ENOSYS)) }
        let rc = connect(HostStruct<permissions_host>(host).field(\.host_data, as: UnsafeMutableRawPointer?.self) ?? nil,
                         uid, name)
        return rc >= 0 ? .success(rc) : .failure(Errno(rawValue: -rc))
    }

    /// Publishes a snapshot; returns the host's answer (0 or -errno).
    @discardableResult
    public func publish(_ snapshot: PluginSnapshot) -> Int32 {
        guard let publish = host.pointee.publish else { return -ENOSYS }
        return snapshot.withCStruct { publish(host.pointee.host_data, $0) }
    }
}

/// Described in words of its own: a Swift enum without a `description` is put
/// into a string by reflection (Mirror), which cost a plugin's log line of two
/// of them over a million instructions at start-up.
public enum PluginServiceState: Int32, Sendable, CustomStringConvertible {
    case available = 0, disabled = 1, unsupported = 2

    public var description: String {
        switch self {
        case .available: "available"
        case .disabled: "disabled"
        case .unsupported: "unsupported"
        }
    }
}

/// In words of its own, like PluginServiceState.
public enum PluginPolicy: Int32, Sendable, CustomStringConvertible {
    case none = 0, restricted = 1, allow = 2

    public var description: String {
        switch self {
        case .none: "none"
        case .restricted: "restricted"
        case .allow: "allow"
        }
    }
}

/// A Swift view of `struct permissions_snapshot`.
public struct PluginSnapshot: Sendable, Equatable {
    public var permission: String
    public var service: PluginServiceState
    public var policies: [(app: String, policy: PluginPolicy)]
    public var details: [(key: String, value: String)]
    public var devices: [[(key: String, value: String)]]

    public init(permission: String, service: PluginServiceState,
                policies: [(app: String, policy: PluginPolicy)] = [],
                details: [(key: String, value: String)] = [], devices: [[(key: String, value: String)]] = []) {
        self.permission = permission
        self.service = service
        self.policies = policies
        self.details = details
        self.devices = devices
    }

    public static func == (a: PluginSnapshot, b: PluginSnapshot) -> Bool {
        a.permission == b.permission && a.service == b.service
            && a.policies.map(\.app) == b.policies.map(\.app) && a.policies.map(\.policy) == b.policies.map(\.policy)
            && a.details.map(\.key) == b.details.map(\.key) && a.details.map(\.value) == b.details.map(\.value)
            && a.devices.map { $0.map { $0.key + "\0" + $0.value } } == b.devices.map { $0.map { $0.key + "\0" + $0.value } }
    }

    /// Lends the C struct for the length of `body`.
    func withCStruct<R>(_ body: (UnsafePointer<permissions_snapshot>) -> R) -> R {
        var strings: [UnsafeMutablePointer<CChar>] = []
        func c(_ s: String) -> UnsafePointer<CChar> {
            let p = strdup(s)!
            strings.append(p)
            return UnsafePointer(p)
        }
        defer { strings.forEach { free($0) } }
        let policyArray = policies.map { permissions_app_policy(app_id: c($0.app), policy: $0.policy.rawValue) }
        let detailArray = details.map { permissions_kv(key: c($0.key), value: c($0.value)) }
        let deviceProps = devices.map { $0.map { permissions_kv(key: c($0.key), value: c($0.value)) } }
        let permissionName = c(permission)
        return policyArray.withUnsafeBufferPointer { policyBuffer in
            detailArray.withUnsafeBufferPointer { detailBuffer in
                withDeviceArray(deviceProps) { deviceBuffer in
                    var s = permissions_snapshot(
                        abi_version: PERMISSIONS_PLUGIN_ABI_VERSION,
                        struct_size: UInt32(MemoryLayout<permissions_snapshot>.size),
                        permission: permissionName, service_state: service.rawValue,
                        n_policies: UInt32(policyBuffer.count), policies: policyBuffer.baseAddress,
                        n_details: UInt32(detailBuffer.count), details: detailBuffer.baseAddress,
                        n_devices: UInt32(deviceBuffer.count), devices: deviceBuffer.baseAddress,
                        policy_size: UInt32(MemoryLayout<permissions_app_policy>.stride),
                        kv_size: UInt32(MemoryLayout<permissions_kv>.stride),
                        device_size: UInt32(MemoryLayout<permissions_device>.stride))
                    return body(&s)
                }
            }
        }
    }
}

/// Builds the `permissions_device` array, keeping every property array alive.
private func withDeviceArray<R>(_ devices: [[permissions_kv]],
                                _ body: (UnsafeBufferPointer<permissions_device>) -> R) -> R {
    let buffers = devices.map { props -> UnsafeMutableBufferPointer<permissions_kv> in
        let b = UnsafeMutableBufferPointer<permissions_kv>.allocate(capacity: max(props.count, 1))
        _ = b.initialize(from: props)
        return b
    }
    defer { buffers.forEach { $0.deallocate() } }
    let array = zip(devices, buffers).map { props, buffer in
        permissions_device(n_properties: UInt32(props.count), properties: UnsafePointer(buffer.baseAddress))
    }
    return array.withUnsafeBufferPointer(body)
}

/// One configuration key as the host passed it: the daemon's own `ConfigEntry`
/// (PermissionsModel), so that plugins and the daemon read configuration alike.
public typealias PluginConfigEntry = ConfigEntry

/// The enabled=/allow=/deny= shape (PermissionsModel), shared with the daemon's
/// config-declared permissions.
public typealias SwitchConfig = PermissionsModel.SwitchConfig

/// geoclue's accuracy words (PermissionsModel), which the daemon also checks a
/// request's "accuracy" option against.
public typealias LocationAccuracy = PermissionsModel.LocationAccuracy

/// Reports one problem of a configuration to the host, in a `validate` call: a line
/// "FILE:LINE: reason". Does nothing when the host's struct has no reporter (an
/// older host, or a `configure` call).
public func reportProblem(_ config: UnsafePointer<permissions_config>?, _ message: String) {
    guard let config else { return }
    let c = HostStruct<permissions_config>(config)
    typealias Reporter = @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?) -> Void
    guard let problem = c.field(\.problem, as: Reporter?.self) ?? nil else { return }
    problem(c.field(\.problem_data, as: UnsafeMutableRawPointer?.self) ?? nil, message)
}

/// A struct the host wrote, read field by field through the size it declared: the
/// host's header may be older (shorter struct) or newer than the plugin's, so the
/// struct is never copied whole (the header's VERSIONING rules).
struct HostStruct<T> {
    let base: UnsafeRawPointer

    init(_ pointer: UnsafePointer<T>) { base = UnsafeRawPointer(pointer) }

    var size: Int { Int(base.loadUnaligned(fromByteOffset: 4, as: UInt32.self)) }

    /// The field, or nil when the host's struct ends before it.
    func field<V: BitwiseCopyable>(_ key: PartialKeyPath<T>, as: V.Type) -> V? {
        guard let offset = MemoryLayout<T>.offset(of: key), offset + MemoryLayout<V>.size <= size else { return nil }
        return base.loadUnaligned(fromByteOffset: offset, as: V.self)
    }
}

/// Copies the configuration the host lends to `configure`.
public func configEntries(_ config: UnsafePointer<permissions_config>?) -> [PluginConfigEntry] {
    guard let config else { return [] }
    let c = HostStruct<permissions_config>(config)
    guard let count = c.field(\.n_entries, as: UInt32.self),
          let entries = c.field(\.entries, as: UnsafePointer<permissions_config_entry>?.self) ?? nil else { return [] }
    return (0..<Int(count)).compactMap { i in
        let e = entries[i]
        guard let s = e.section, let k = e.key, let v = e.value else { return nil }
        return PluginConfigEntry(section: String(cString: s), key: String(cString: k), value: String(cString: v),
                                 origin: e.origin.map { String(cString: $0) } ?? "?")
    }
}
