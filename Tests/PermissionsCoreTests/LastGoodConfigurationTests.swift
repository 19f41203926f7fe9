import Testing
@testable import PermissionsModel
@testable import PermissionsConfig

/// The last good copy says whether it holds a configuration already, as its save
/// would write it: what lets start-up's switch skip the saving queue.
struct LastGoodConfigurationTests {
    @Test func holdsWhatWasSavedAndNothingElse() throws {
        let dir = try TempDirectory()
        let copy = LastGoodConfiguration(stateDirectory: dir.path)
        let entries = [ConfigEntry(section: "location", key: "enabled", value: "true", origin: "permissions.conf:2")]
        let other = [ConfigEntry(section: "location", key: "enabled", value: "false", origin: "permissions.conf:2")]
        #expect(!copy.holds(entries), "no copy yet")
        copy.save(entries)
        #expect(copy.holds(entries))
        #expect(!copy.holds(other))
        #expect(!copy.holds([]))
        copy.save(other)
        #expect(copy.holds(other) && !copy.holds(entries))
    }
}
