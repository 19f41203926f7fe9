import Testing
import PermissionsModel

/// allow= and deny= take the app ids the daemon takes (`Validate.isAppID`), so a
/// configuration is refused for an id the daemon would only drop later.
@Suite("SwitchConfig app ids")
struct SwitchConfigTests {
    private func parse(_ value: String) throws(SwitchConfig.Invalid) -> SwitchConfig {
        try SwitchConfig.parse([ConfigEntry(section: "location", key: "allow", value: value, origin: "t.conf:3")],
                               section: "location", warn: { _ in })
    }

    @Test func anIDTheDaemonRefusesRefusesTheConfiguration() {
        #expect(throws: SwitchConfig.Invalid.self) { try parse("org.gnome.Maps; org.example@App") }
        #expect(throws: SwitchConfig.Invalid.self) { try parse("-org.example.App") }
    }

    @Test func anIDTheDaemonTakesIsTaken() throws {
        #expect(try parse(" org.gnome.Maps ;/opt/My App/bin/app").allow == ["org.gnome.Maps", "/opt/My App/bin/app"])
    }
}
