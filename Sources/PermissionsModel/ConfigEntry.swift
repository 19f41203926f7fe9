/// One key of the configuration, with the place it came from ("FILE:LINE"). The
/// daemon reads these from the files; plugins receive the same type (PluginKit's
/// `PluginConfigEntry`) through the C ABI.
public struct ConfigEntry: Sendable, Equatable {
    public var section: String
    public var key: String
    public var value: String
    public var origin: String

    public init(section: String, key: String, value: String, origin: String) {
        self.section = section
        self.key = key
        self.value = value
        self.origin = origin
    }
}
