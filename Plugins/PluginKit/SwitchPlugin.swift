public import PermissionsModel
public import CPermissionsPlugin
internal import Glibc

/// A whole plugin for one config-driven permission (location, notifications): it
/// publishes at init, and again on every accepted configuration; `validate` makes
/// configure's checks without applying them.
///
/// `@unchecked Sendable`: the host calls init, configure, validate and fini on its
/// one dispatch thread, and only those touch `config`.
public final class SwitchPlugin: @unchecked Sendable {
    public let permission: String
    let host: HostHandle
    let extraKey: (String, String) throws(SwitchConfig.Invalid) -> String?
    let details: (SwitchConfig) -> [(key: String, value: String)]
    public private(set) var config = SwitchConfig()

    public init(permission: String, host: HostHandle,
                extraKey: @escaping (String, String) throws(SwitchConfig.Invalid) -> String? = { _, _ in nil },
                details: @escaping (SwitchConfig) -> [(key: String, value: String)] = { _ in [] }) {
        self.permission = permission
        self.host = host
        self.extraKey = extraKey
        self.details = details
        publish()
    }

    func publish() {
        host.publish(config.snapshot(permission: permission, details: details(config)))
    }

    /// Applies a configuration, or keeps the last good one and returns -EINVAL.
    public func configure(_ entries: [PluginConfigEntry]) -> Int32 {
        do {
            let new = try SwitchConfig.parse(entries, section: permission, warn: { self.host.log(.warning, $0) },
                                            extraKey: extraKey)
            if new != config {
                config = new
                publish()
            }
            return 0
        } catch {
            host.log(.error, "\(error.description); keeping the last good configuration")
            return -EINVAL
        }
    }

    /// The problems `configure` would reject `entries` for (the first one: parsing
    /// stops there), without applying anything or logging.
    public func validate(_ entries: [PluginConfigEntry]) -> [String] {
        do {
            _ = try SwitchConfig.parse(entries, section: permission, warn: { _ in }, extraKey: extraKey)
            return []
        } catch {
            return [error.description]
        }
    }

    // The C side: init/configure/validate/fini bodies shared by every switch plugin.

    /// A switch plugin's descriptor. Only `initialize` is the plugin's own (it calls
    /// `start` with the plugin to make); configure, validate and fini are these.
    public static func descriptor(
        name: String, version: String, description: String, permission: String,
        initialize: @convention(c) (UnsafePointer<permissions_host>?, UnsafeMutablePointer<UnsafeMutableRawPointer?>?) -> Int32
    ) -> UnsafePointer<permissions_plugin> {
        makeDescriptor(name: name, version: version, description: description, permissions: [permission],
                       initialize: initialize, configure: { SwitchPlugin.configure($0, $1) },
                       finish: { SwitchPlugin.stop($0) }, validate: { SwitchPlugin.validate($0, $1) })
    }

    public static func start(_ host: UnsafePointer<permissions_host>?, _ state: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
                             make: (HostHandle) -> SwitchPlugin) -> Int32 {
        guard let host, let state else { return -EINVAL }
        let plugin = make(HostHandle(host))
        state.pointee = Unmanaged.passRetained(plugin).toOpaque()
        return 0
    }

    public static func configure(_ state: UnsafeMutableRawPointer?, _ config: UnsafePointer<permissions_config>?) -> Int32 {
        guard let state else { return -EINVAL }
        return Unmanaged<SwitchPlugin>.fromOpaque(state).takeUnretainedValue().configure(configEntries(config))
    }

    public static func validate(_ state: UnsafeMutableRawPointer?,
                                _ config: UnsafePointer<permissions_config>?) -> Int32 {
        guard let state else { return -EINVAL }
        let problems = Unmanaged<SwitchPlugin>.fromOpaque(state).takeUnretainedValue().validate(configEntries(config))
        for problem in problems { reportProblem(config, problem) }
        return problems.isEmpty ? 0 : -EINVAL
    }

    public static func stop(_ state: UnsafeMutableRawPointer?) {
        guard let state else { return }
        Unmanaged<SwitchPlugin>.fromOpaque(state).release()
    }
}
