public import PermissionsModel
// The plugin-side half of SwitchConfig (the parsing half is in PermissionsModel,
// shared with the daemon): logging through the host, and the snapshot it gives.

extension SwitchConfig {
    /// `parse` with warnings logged through the plugin's host.
    public static func parse(_ entries: [PluginConfigEntry], section: String, log host: HostHandle,
                             extraKey: (String, String) throws(Invalid) -> String? = { _, _ in nil })
        throws(Invalid) -> SwitchConfig
    {
        try parse(entries, section: section, warn: { host.log(.warning, $0) }, extraKey: extraKey)
    }

    /// The snapshot this configuration gives. enabled=false adds the detail
    /// "disabled-by" = "configuration", so that a settings page can say the admin
    /// turned it off (the daemon shows it with a "disabled" service state only).
    public func snapshot(permission: String, details: [(key: String, value: String)] = []) -> PluginSnapshot {
        PluginSnapshot(permission: permission, service: enabled ? .available : .disabled,
                       policies: allow.map { ($0, .allow) } + deny.map { ($0, .restricted) },
                       details: details + disabledBy)
    }
}
