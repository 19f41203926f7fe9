import Foundation
import PermissionsTestSupport
import Testing

extension OnTheDisplay {
    /// "Open settings" as apps do it (doc/apps.md), for real: with nothing running,
    /// on a session bus whose service directory holds the settings page's
    /// activation file, and a real permissionsd on that bus. Each way in is checked
    /// by what the page then shows, read through AT-SPI.
    @Suite
    struct OpenSettingsTests {
        /// PermissionsClient.openSettings() from an app (Tests/OpenSettingsApp): the
        /// bus starts the page, and it shows the page of the app id the service
        /// takes the caller for.
        @Test func openSettingsFromAnAppOpensItsOwnPage() throws {
            let session = try SettingsSession()
            try session.updateActivationEnvironment()
            let opened = try run(desktopBinDir + "/open-settings-app", [], environment: session.appEnvironment)
            #expect(opened.status == 0, "\(opened.stderr)")
            let app = try #require(opened.stdout.split(separator: "\n").first { $0.hasPrefix("app-id ") }?.dropFirst(7))
            #expect(app.hasSuffix("/open-settings-app"), "\(app)")
            try session.showsAppPage(String(app))
            try screenshotOfDisplay("open-settings-client")
        }

        /// `permissionsctl settings APP` opens APP's page; `permissionsctl settings`
        /// then goes to the overview.
        @Test func permissionsctlSettingsOpensAnAppsPageThenTheOverview() throws {
            let session = try SettingsSession()
            try session.ctl("deny", "org.example.FromCtl", "camera")
            try session.updateActivationEnvironment()
            let ctl = binDir + "/permissionsctl"
            let page = try run(ctl, ["settings", "org.example.FromCtl"], environment: session.appEnvironment)
            #expect(page.status == 0, "\(page.stderr)")
            try session.showsAppPage("org.example.FromCtl")
            try session.find("push button", SettingsTests.choice("Don’t allow", "Camera", "org.example.FromCtl"), "pressed")
            try screenshotOfDisplay("open-settings-permissionsctl-app")
            let overview = try run(ctl, ["settings"], environment: session.appEnvironment)
            #expect(overview.status == 0, "\(overview.stderr)")
            try session.find("entry", "Search apps")
            try session.find("list item", "org.example.FromCtl")
            try screenshotOfDisplay("open-settings-permissionsctl-overview")
        }

        /// The C/GLib example's `--open-settings` (dbus/examples) opens its own page.
        @Test func theGLibExampleOpensItsOwnPage() throws {
            let program = try buildGLibExample()
            let session = try SettingsSession()
            try session.updateActivationEnvironment()
            let opened = try run(program, ["--open-settings"], environment: session.appEnvironment)
            #expect(opened.status == 0, "\(opened.stderr)")
            #expect(opened.stdout.contains("settings opened on \(program)"), "\(opened.stdout)")
            try session.showsAppPage(program)
            try screenshotOfDisplay("open-settings-glib-example")
        }

        /// Without the settings application (no activation file): both fail, exit 1,
        /// with a message that names what is missing.
        @Test func withoutTheSettingsAppBothFailNamingIt() throws {
            let session = try SettingsSession(installed: false)
            let client = try run(desktopBinDir + "/open-settings-app", [], environment: session.appEnvironment)
            #expect(client.status == 1)
            #expect(client.stderr.contains("unavailable"), "\(client.stderr)")
            #expect(client.stderr.contains("org.example.Permissions.Settings"), "\(client.stderr)")
            let ctl = try run(binDir + "/permissionsctl", ["settings", "org.example.App"], environment: session.appEnvironment)
            #expect(ctl.status == 1)
            #expect(ctl.stderr.contains("org.example.Permissions.Settings"), "\(ctl.stderr)")
            // Nothing started.
            #expect(try runAtspi(["count", "permissions-settings"]).trimmingCharacters(in: .whitespacesAndNewlines) == "0")
            try screenshotOfDisplay("open-settings-not-installed")
        }
    }
}

extension SettingsSession {
    /// Waits until the page shows `app`'s own page (started by the bus: allow for
    /// its start), not the overview.
    func showsAppPage(_ app: String) throws {
        try find("label", app, timeout: 15)
        try find("push button", OnTheDisplay.SettingsTests.choice("Ask next time", "Notifications", app))
        try absent("entry", "Search apps")
    }
}
