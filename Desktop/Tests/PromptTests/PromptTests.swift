import Foundation
import PermissionsTestSupport
import Testing

extension OnTheDisplay {
    /// permissions-prompt under Xvfb, clicked through AT-SPI, against a real
    /// permissionsd. Each test leaves a screenshot of the dialog it checked in the test
    /// run's output directory. Serialized with every suite on the display (OnTheDisplay).
    @Suite
    struct PromptTests {
        @Test func aCameraRequestOpensTheDialogAndAlwaysAllowIsStored() throws {
            let session = try PromptSession()
            let start = Date()
            let (request, tree) = try session.askCamera(reason: "To scan the code on your ticket",
                                                        screenshot: "prompt-camera")
            #expect(Date().timeIntervalSince(start) < 5)
            #expect(tree.contains("dialog\tPermission request"))
            #expect(tree.contains { $0.hasPrefix("label\tAllow /usr/bin/busctl to use your camera?") })
            #expect(tree.contains("label\tCamera"))
            #expect(tree.contains("label\t“To scan the code on your ticket”"))
            for choice in ["Allow once", "Allow while the app runs", "Always allow", "Don’t allow"] {
                #expect(tree.contains { $0.hasPrefix("push button\t\(choice)") }, "no button \(choice)")
            }
            #expect(tree.contains("image\tCamera"), "the permission's icon has no accessible name")
            let controls = tree.filter { $0.hasPrefix("push button\t") || $0.hasPrefix("image\t") }
            #expect(controls.count >= 6 && controls.allSatisfy { !$0.hasSuffix("\t") }, "a control has no name: \(tree)")
            try session.click("Always allow")
            #expect(try request.wait() == "s \"authorized\"")
            try session.waitUntilNoDialog()
            let rows = try session.storedRows()
            #expect(rows.count == 1)
            #expect(rows.first.map { $0.hasPrefix("/usr/bin/busctl") && $0.contains("camera") && $0.contains("authorized") }
                    == true, "\(rows)")
        }

        @Test func allowOnceAnswersAuthorizedAndStoresNothing() throws {
            let session = try PromptSession()
            let (request, _) = try session.askCamera(screenshot: "prompt-allow-once")
            try session.click("Allow once")
            #expect(try request.wait() == "s \"authorized\"")
            #expect(try session.storedRows() == [])
        }

        @Test func escapeIsADismissalThatStoresNothing() throws {
            let session = try PromptSession()
            let (request, _) = try session.askCamera(screenshot: "prompt-escape")
            try session.press("Escape")
            #expect(try request.wait() == "s \"not-determined\"")
            try session.waitUntilNoDialog()
            #expect(try session.storedRows() == [])
            _ = try session.log.next { $0.contains("dismiss") }
        }

        @Test func aHostileReasonIsShownAsPlainEscapedText() throws {
            let session = try PromptSession()
            // The largest reason accepted (1024 bytes), with markup and bidi overrides.
            let head = "<b>Bold</b> <span foreground=\"red\">red</span> \u{202E}exe.txt\u{202C} \u{2066}x\u{2069} "
            let reason = head + String(repeating: "a", count: 1024 - head.utf8.count)
            #expect(reason.utf8.count == 1024)
            let (request, tree) = try session.askCamera(reason: reason, screenshot: "prompt-hostile-reason")
            let shown = try #require(tree.first { $0.hasPrefix("label\t“<b>Bold</b>") }, "\(tree)")
            #expect(shown.contains(#"<span foreground="red">red</span> \u{202E}exe.txt\u{202C} \u{2066}x\u{2069} aaa"#))
            #expect(!shown.unicodeScalars.contains { [0x202E, 0x202C, 0x2066, 0x2069].contains($0.value) })
            #expect(shown.hasSuffix("aaaa”"), "cut short: \(shown.suffix(20))")
            try session.click("Don’t allow")
            #expect(try request.wait() == "s \"denied\"")
            // One byte more is refused by the service: no dialog.
            let over = try session.request("camera", reason: reason + "a")
            #expect(throws: HarnessError.self) { try over.wait() }
            #expect(over.errorText.contains("InvalidArgument") || over.errorText.contains("1025 bytes"), "\(over.errorText)")
            #expect(try session.dialogCount() == 0)
        }

        @Test func aLocationRequestShowsTheAccuracyAsked() throws {
            let session = try PromptSession(declare: "camera", corePlugins: true)
            let request = try session.request("location", accuracy: "city")
            let tree = try session.dialog()
            try session.screenshot("prompt-location-city")
            #expect(tree.contains { $0.hasPrefix("label\tAllow /usr/bin/busctl to know your location?") }, "\(tree)")
            #expect(tree.contains("label\tAccuracy asked: Your city"), "\(tree)")
            try session.click("Allow once")
            #expect(try request.wait() == "s \"authorized\"")
        }

        @Test func theAppsNameAndIconComeFromItsDesktopFile() throws {
            // A desktop file whose Exec names busctl (by name, found in PATH), the app
            // that asks, in a data directory of the test's own before the system's (its icons).
            let environment = try ticketScannerDesktopFile()
            let session = try PromptSession(environment: environment)
            let (request, tree) = try session.askCamera(screenshot: "prompt-desktop-file")
            #expect(tree.contains("label\tAllow Ticket Scanner to use your camera?"), "\(tree)")
            #expect(tree.contains("label\tTicket Scanner"))
            #expect(tree.contains("label\t/usr/bin/busctl"), "the id, under the name")
            #expect(tree.contains("image\tApp icon"))
            try session.press("Escape")
            #expect(try request.wait() == "s \"not-determined\"")
        }

        @Test func returnFromTheKeyboardAnswersTheDefaultDontAllow() throws {
            let session = try PromptSession()
            let (request, _) = try session.askCamera(screenshot: "prompt-return")
            try session.press("Return")
            #expect(try request.wait() == "s \"denied\"")
            let rows = try session.storedRows()
            #expect(rows.count == 1 && rows[0].contains("denied"), "\(rows)")
        }

        @Test func theAppLeavingClosesItsDialog() throws {
            let session = try PromptSession()
            let (request, _) = try session.askCamera(screenshot: "prompt-before-the-app-left")
            request.kill()
            try session.waitUntilNoDialog()
            _ = try session.log.next { $0.contains("cancelled") }
            #expect(try session.storedRows() == [])
        }

        /// Three requests queued behind a fourth prompt (so that the service holds all
        /// three when it asks the first: Ask's "queued" is 2, then 1, then 0) show one
        /// dialog after another, counted "1 of 3", "2 of 3", "3 of 3"; the one alone
        /// shows no count.
        @Test func threeRequestsAtOnceShowOneDialogAfterAnother() throws {
            let session = try PromptSession(declare: "camera;microphone;scanner;printer")
            let holder = try session.request("printer")
            let alone = try session.dialog()
            #expect(!alone.contains { $0.hasPrefix("label\tRequest ") }, "a count on a prompt alone: \(alone)")
            let requests = try ["camera", "microphone", "scanner"].map { try session.request($0) }
            try session.daemon.waitForLog("in its queue", count: 3)
            var seen = [try #require(alone.first { $0.hasPrefix("label\tAllow /usr/bin/busctl") })]
            try session.click("Allow once")
            #expect(try holder.wait() == "s \"authorized\"")
            for index in requests.indices {
                // The next dialog: one whose heading was not shown before (the one just
                // answered may still be on its way out).
                let deadline = Date().addingTimeInterval(5)
                var tree: [String] = []
                var heading: String?
                while heading == nil || seen.contains(heading!) {
                    #expect(Date() < deadline, "no new dialog after \(seen)")
                    if Date() >= deadline { return }
                    tree = try session.dialog()
                    heading = tree.first { $0.hasPrefix("label\tAllow /usr/bin/busctl") }
                }
                #expect(try session.dialogCount() == 1)
                // The count, by its accessible name (the label shows "1 of 3").
                #expect(tree.contains("label\tRequest \(index + 1) of 3"), "\(tree)")
                seen.append(heading!)
                try session.screenshot("prompt-queue-\(index + 1)")
                try session.click("Allow once")
                try session.log.wait(what: "answer \(index + 2)") { $0.filter { $0.contains(": allow-once") }.count > index + 1 }
            }
            for request in requests { #expect(try request.wait() == "s \"authorized\"") }
            #expect(Set(seen).count == 4, "\(seen)")
        }

        /// With `parent_window` naming an X11 window of the test's (an xmessage), the
        /// dialog is transient for it: xprop shows that window in WM_TRANSIENT_FOR.
        @Test func theDialogIsTransientForTheAppsX11Window() throws {
            let session = try PromptSession()
            let title = "An app of PromptTests \(getpid())"
            let app = Process()
            app.executableURL = URL(fileURLWithPath: "/usr/bin/xmessage")
            app.arguments = ["-title", title, "-geometry", "+400+60", "The app's own window"]
            app.standardError = FileHandle.nullDevice
            try app.run()
            defer {
                kill(app.processIdentifier, SIGKILL)
                app.waitUntilExit()
            }
            let parent = try session.windowID(title: "^\(title)$")
            let request = try session.request("camera", parentWindow: "x11:" + String(parent, radix: 16))
            _ = try session.dialog()
            let dialog = try session.windowID(title: "^Permission request$")
            try session.screenshot("prompt-parent-window")
            let property = try run("/usr/bin/xprop", ["-id", String(dialog), "WM_TRANSIENT_FOR"])
            #expect(property.stdout == "WM_TRANSIENT_FOR(WINDOW): window id # 0x\(String(parent, radix: 16))\n",
                    "\(property.stdout) \(property.stderr)")
            try session.click("Allow once")
            #expect(try request.wait() == "s \"authorized\"")
        }

        @Test func theAgentRegistersAgainWhenTheServiceComesBack() throws {
            let session = try PromptSession()
            session.daemon.stop()
            _ = try session.log.next { $0.contains("the service left the bus") }
            try session.daemon.start()
            try session.log.wait(what: "a second registration") { $0.filter { $0.contains("registered as the agent") }.count == 2 }
            let (request, _) = try session.askCamera(screenshot: "prompt-after-restart")
            try session.click("Always allow")
            #expect(try request.wait() == "s \"authorized\"")
        }
    }
}
