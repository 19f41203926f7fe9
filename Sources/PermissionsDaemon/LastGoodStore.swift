import PermissionsModel
import PermissionsConfig

/// Where ConfigApplier keeps the last configuration applied, for a start whose
/// files cannot be used: LastGoodConfiguration (a file in the state directory) in
/// the daemon, memory in unit tests. Sendable: it is written off the serving queue.
protocol LastGoodStore: Sendable {
    /// Where the copy is, for the log.
    var path: String { get }
    /// The copy's entries; nil if there is none.
    func load() -> Result<[ConfigEntry], ConfigFiles.ParseError>?
    func save(_ entries: [ConfigEntry])
    /// Whether the copy holds `entries` already, as `save` would write them.
    func holds(_ entries: [ConfigEntry]) -> Bool
}

extension LastGoodConfiguration: LastGoodStore {}
