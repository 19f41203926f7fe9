package import PermissionsModel
internal import PermissionsSupport
/// A copy of the last configuration the daemon applied, in the state directory
/// (`last-good.conf`, keyfile syntax, mode 0600). It is read only at start-up, when
/// the configuration itself cannot be read: an unreadable file must not mean "no
/// restrictions" until someone fixes it.
package struct LastGoodConfiguration: Sendable {
    package let path: String

    package init(stateDirectory: String) {
        path = stateDirectory + "/last-good.conf"
    }

    static let comment = """
        The last configuration permissionsd applied, merged from its files. It starts
        from this copy when its configuration cannot be read; it is rewritten on
        every change and read at no other time, so do not edit it.
        """

    /// Whether the copy holds `entries` already, byte for byte as `save` writes them.
    package func holds(_ entries: [ConfigEntry]) -> Bool {
        Files.read(path) == ConfigFiles.render(entries, comment: Self.comment)
    }

    /// Writes `entries` (all of them: the daemon's keys too) unless the copy already
    /// holds them; atomically, so that a crash leaves the old copy or the new one.
    package func save(_ entries: [ConfigEntry]) {
        let bytes = ConfigFiles.render(entries, comment: Self.comment)
        if Files.read(path) == bytes { return }
        if case .failure(let error) = Files.writeAtomically(path, bytes, mode: 0o600) {
            logError("cannot save the last good configuration to \(path): \(error)")
        }
    }

    /// The copy's entries (their origins point into the copy); nil if there is none.
    package func load() -> Result<[ConfigEntry], ConfigFiles.ParseError>? {
        guard Files.exists(path) else { return nil }
        do {
            return .success(try ConfigFiles.parse(path))
        } catch {
            return .failure(error)
        }
    }
}
