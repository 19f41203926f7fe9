import Foundation
import PermissionsTestSupport
import Testing

extension OnTheDisplay {
    /// permissions-settings under Xvfb, read and clicked through AT-SPI, against a
    /// real permissionsd. Each test leaves a screenshot of what it checked in the test
    /// run's output directory. Serialized with every suite on the display (OnTheDisplay).
    @Suite
    struct SettingsTests {
        /// The names of a row's three choices (accessible names hold the permission and app).
        static func choice(_ label: String, _ permission: String, _ app: String) -> String {
            "\(label): \(permission) for \(app)"
        }

        @Test func aGrantFromTheCommandLineShowsWithinASecond() throws {
            let session = try SettingsSession()
            try session.ctl("deny", "org.example.Maps", "location")
            try session.launch()
            let tree = try session.tree()
            // Every permission, with its state in words.
            for group in ["Camera", "Microphone", "Location", "Bluetooth devices", "Notifications"] {
                #expect(tree.contains { $0.hasPrefix("list\t\(group)\t") || $0.hasPrefix("label\t\(group)\t") }, "\(group)")
            }
            try session.find("push button", Self.choice("Don’t allow", "Location", "org.example.Maps"), "pressed")
            let start = Date()
            try session.ctl("grant", "org.example.Camera.App", "camera")
            try session.log.next(timeout: 1) { $0.contains("showing 2 decisions of 2 apps") }
            #expect(Date().timeIntervalSince(start) < 1)
            let line = try session.find("push button", Self.choice("Allow", "Camera", "org.example.Camera.App"), "pressed")
            #expect(line.contains("sensitive"))
            try session.find("label", "Always")
            try screenshotOfDisplay("settings-overview")
        }

        @Test func dontAllowClickedInThePageIsStored() throws {
            let session = try SettingsSession()
            try session.ctl("grant", "org.example.Chat", "microphone")
            try session.launch()
            try session.press(Self.choice("Don’t allow", "Microphone", "org.example.Chat"))
            try session.log.next(timeout: 5) { $0.contains("showing") }
            let rows = try session.storedRows()
            #expect(rows.count == 1)
            #expect(rows.first.map { $0.hasPrefix("org.example.Chat") && $0.contains("microphone") && $0.contains("denied") }
                    == true, "\(rows)")
            try session.find("push button", Self.choice("Don’t allow", "Microphone", "org.example.Chat"), "pressed")
            try screenshotOfDisplay("settings-dont-allow")
            // Ask next time forgets it.
            try session.press(Self.choice("Ask next time", "Microphone", "org.example.Chat"))
            try session.absent("list item", "org.example.Chat")
            #expect(try session.storedRows() == [])
        }

        @Test func anAdministratorsDenyShowsLockedWithItsReason() throws {
            let session = try SettingsSession()
            try session.ctl("grant", "org.example.Locked", "camera")
            try session.launch()
            try session.find("push button", Self.choice("Allow", "Camera", "org.example.Locked"), "pressed", "sensitive")
            // With the location service switched off by the administrator too: the
            // permission's state in words.
            try session.daemon.writeConfig(SettingsSession.config + "[camera]\ndeny=org.example.Locked\n"
                                           + "[location]\nenabled=false\n")
            // What is in force shows: the administrator's deny pressed, not the user's
            // own Allow, which has no effect while the lock lasts.
            try session.find("push button", Self.choice("Don’t allow", "Camera", "org.example.Locked"), "pressed",
                             "!sensitive", timeout: 10)
            for label in ["Allow", "Ask next time"] {
                try session.find("push button", Self.choice(label, "Camera", "org.example.Locked"), "!pressed", "!sensitive")
            }
            try session.find("image", "Turned off for this app by your administrator")
            try session.find("label", "Turned off for this app by your administrator")
            try session.find("label", "Turned off by your administrator")
            try screenshotOfDisplay("settings-locked")
            // The user's own choice is kept, and shows again when the lock goes.
            #expect(try session.storedRows().contains { $0.hasPrefix("org.example.Locked") && $0.contains("authorized") })
            try session.daemon.writeConfig(SettingsSession.config)
            try session.find("push button", Self.choice("Allow", "Camera", "org.example.Locked"), "pressed", "sensitive",
                             timeout: 10)
        }

        @Test func aServiceRestartShowsReconnectingThenRecovers() throws {
            let session = try SettingsSession()
            try session.launch()
            session.daemon.stop()
            try session.find("label", "Reconnecting…")
            try screenshotOfDisplay("settings-reconnecting")
            try session.daemon.start()
            try session.absent("label", "Reconnecting…", timeout: 10)
            try session.log.next(timeout: 10) { $0.contains("subscribed") }
            try session.ctl("grant", "org.example.AfterRestart", "notifications")
            try session.find("push button", Self.choice("Allow", "Notifications", "org.example.AfterRestart"), "pressed")
        }

        @Test func searchFiltersAndAnAppsPageShowsAllItsPermissions() throws {
            let session = try SettingsSession()
            try session.ctl("grant", "org.example.Alpha", "camera")
            try session.ctl("deny", "org.example.Beta", "camera")
            try session.launch()
            try session.find("list item", "org.example.Beta")
            try session.search("alp")
            try session.absent("list item", "org.example.Beta")
            try session.find("list item", "org.example.Alpha")
            try screenshotOfDisplay("settings-search")
            try session.press("All permissions of org.example.Alpha")
            try session.absent("entry", "Search apps")
            for permission in ["Camera", "Microphone", "Location", "Bluetooth devices", "Notifications"] {
                try session.find("list item", permission)
                try session.find("push button", Self.choice("Ask next time", permission, "org.example.Alpha"))
            }
            try session.find("push button", Self.choice("Allow", "Camera", "org.example.Alpha"), "pressed")
            try screenshotOfDisplay("settings-app-page")
            try session.press("Back")
            try session.find("entry", "Search apps")
            // From the keyboard: the arrow reached with Tab is a button; Escape goes back.
            try session.press("All permissions of org.example.Alpha")
            try session.absent("entry", "Search apps")
            try pressKey("Escape", inWindowOf: try #require(session.page).processIdentifier)
            try session.find("entry", "Search apps")
        }

        /// An app is shown as people know it: its desktop file's name and icon (a
        /// flatpak id's ID.desktop), found by search under that name, its id on its
        /// page under the name.
        @Test func appsAreShownByTheirDesktopFilesName() throws {
            let environment = try ticketScannerDesktopFile()
            let session = try SettingsSession()
            try session.ctl("grant", "org.example.TicketScanner", "camera")
            try session.ctl("deny", "org.example.Plain", "camera")
            try session.launch(environment: environment)
            try session.find("list item", "Ticket Scanner")
            try session.find("list item", "org.example.Plain")  // no desktop file: its id
            try session.search("ticket")
            try session.absent("list item", "org.example.Plain")
            try session.find("list item", "Ticket Scanner")
            try screenshotOfDisplay("settings-desktop-file")
            try session.press("All permissions of org.example.TicketScanner")
            try session.find("label", "Ticket Scanner")
            try session.find("label", "org.example.TicketScanner")
        }

        /// A change the service refuses is said, and undone on screen: the page of
        /// a user who may not change decisions (on a session bus, only root and the
        /// daemon's uid may: the daemon runs as root, the page as nobody, on
        /// nobody's own accessibility bus) clicks Allow for an app that user's
        /// stored deny holds.
        @Test func aRefusedChangeSaysSoAndPutsTheRowBack() throws {
            let session = try SettingsSession()
            try session.ctl("deny", "--user", "65534", "org.example.Refused", "camera")
            let nobody = try OtherUserDesktop()
            try session.launch(as: nobody)
            try session.find("push button", Self.choice("Don’t allow", "Camera", "org.example.Refused"), "pressed")
            try session.press(Self.choice("Allow", "Camera", "org.example.Refused"))
            try session.find("label", "You are not allowed to change this permission.")
            try session.find("push button", Self.choice("Don’t allow", "Camera", "org.example.Refused"), "pressed")
            try session.find("push button", Self.choice("Allow", "Camera", "org.example.Refused"), "!pressed")
            try screenshotOfDisplay("settings-not-allowed")
            // Ask next time (ResetDecisions) is refused the same way: the click's
            // toggle goes back.
            try session.press(Self.choice("Ask next time", "Camera", "org.example.Refused"))
            try session.find("push button", Self.choice("Ask next time", "Camera", "org.example.Refused"), "!pressed")
            try session.find("push button", Self.choice("Don’t allow", "Camera", "org.example.Refused"), "pressed")
            let list = try session.daemon.ctl("list", "--user", "65534")
            #expect(list.status == 0, "\(list.stderr)")
            #expect(list.stdout.split(separator: "\n").contains {
                $0.hasPrefix("org.example.Refused") && $0.contains("camera") && $0.contains("denied")
            }, "\(list.stdout)")
        }

        /// A session grant (an agent's "allow-session") shows "While the app runs"
        /// within a second, and goes when the app's connection leaves the bus.
        @Test func aSessionGrantShowsWhileTheAppRunsAndGoesWithIt() throws {
            let session = try SettingsSession()
            let agent = try BusApp(["agent", session.bus.address, "allow-session"])
            _ = try agent.next("registered")
            try session.launch()
            let app = try BusApp(["request", session.bus.address, "camera"])
            let appID = try app.next("app-id ")
            #expect(try app.next("authorized") == "")
            let start = Date()
            try session.log.next(timeout: 1) { $0.contains("showing 1 decisions of 1 apps") }
            #expect(Date().timeIntervalSince(start) < 1)
            try session.find("push button", Self.choice("Allow", "Camera", appID), "pressed")
            try session.find("label", "While the app runs")
            try screenshotOfDisplay("settings-session-grant")
            app.kill()
            try session.absent("list item", appID)
            try session.absent("label", "While the app runs")
        }

        /// A timed grant (an agent's "allow-always" with "expires-at") shows when
        /// it ends.
        @Test func aTimedGrantShowsWhenItEnds() throws {
            let session = try SettingsSession()
            var now = timeval()
            gettimeofday(&now, nil)
            let end = time_t(now.tv_sec) + 3600
            let agent = try BusApp(["agent", session.bus.address, "allow-always", String(Int64(end) * 1_000_000)])
            _ = try agent.next("registered")
            try session.launch()
            let app = try BusApp(["request", session.bus.address, "microphone"])
            let appID = try app.next("app-id ")
            #expect(try app.next("authorized") == "")
            try session.find("push button", Self.choice("Allow", "Microphone", appID), "pressed")
            // As the page writes it: the locale's date and time ("%x %X"), local time.
            var local = tm()
            var seconds = end
            localtime_r(&seconds, &local)
            var text = [CChar](repeating: 0, count: 64)
            strftime(&text, text.count, "%x %X", &local)
            let words = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            try session.find("label", "Until " + words)
            try screenshotOfDisplay("settings-timed-grant")
        }

        /// org.freedesktop.Application.ActivateAction("show-app") on the session bus,
        /// with nothing running: the bus starts the page from its activation file, and
        /// the page opens the app's page.
        @Test func showAppThroughDBusActivationOpensTheAppsPage() throws {
            let session = try SettingsSession()
            try session.ctl("deny", "org.example.Shown", "location")
            try session.updateActivationEnvironment()
            let called = try run("/usr/bin/gdbus", ["call", "--session", "--dest", "org.example.Permissions.Settings",
                                                    "--object-path", "/org/example/Permissions/Settings", "--method",
                                                    "org.freedesktop.Application.ActivateAction", "show-app",
                                                    "[<('org.example.Shown', '')>]", "{}"],
                                 environment: session.appEnvironment)
            #expect(called.status == 0, "\(called.stderr)")
            try session.find("label", "org.example.Shown", timeout: 15)
            try session.find("push button", Self.choice("Don’t allow", "Location", "org.example.Shown"), "pressed")
            try session.find("push button", Self.choice("Ask next time", "Camera", "org.example.Shown"), "pressed")
            try session.absent("entry", "Search apps")
            try screenshotOfDisplay("settings-show-app")
        }
    }
}
