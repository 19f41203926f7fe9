import Foundation
import PermissionsTestSupport
import Testing

/// permissions-prompt under Xvfb, clicked through AT-SPI, against a real
/// permissionsd. Each test leaves a screenshot of the dialog it checked in the test
/// run's output directory. Serialized: they share one display.
@Suite(.serialized)
struct PromptTests {
    @Test func aCameraRequestOpensTheDialogAndAlwaysAllowIsStored() throws {
        let session = try PromptSession()
        let start = Date()
        let request = try session.request("camera", reason: "To scan the code on your ticket")
        let tree = try session.dialog(timeout: 5)
        #expect(Date().timeIntervalSince(start) < 5)
        #expect(tree.contains("dialog\tPermission request"))
        #expect(tree.contains { $0.hasPrefix("label\tAllow /usr/bin/busctl to use your camera?") })
        #expect(tree.contains("label\tCamera"))
        #expect(tree.contains("label\t“To scan the code on your ticket”"))
        for choice in ["Allow once", "Allow while the app runs", "Always allow", "Don’t allow"] {
            #expect(tree.contains { $0.hasPrefix("push button\t\(choice)") }, "no button \(choice)")
        }
        #expect(tree.contains("image\tCamera"), "the permission's icon has no accessible name")
        try session.screenshot("prompt-camera")
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
        let request = try session.request("camera")
        _ = try session.dialog()
        try session.screenshot("prompt-allow-once")
        try session.click("Allow once")
        #expect(try request.wait() == "s \"authorized\"")
        #expect(try session.storedRows() == [])
    }

    @Test func escapeIsADismissalThatStoresNothing() throws {
        let session = try PromptSession()
        let request = try session.request("camera")
        _ = try session.dialog()
        try session.screenshot("prompt-escape")
        try session.pressEscape()
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
        let request = try session.request("camera", reason: reason)
        let tree = try session.dialog()
        try session.screenshot("prompt-hostile-reason")
        let shown = try #require(tree.first { $0.hasPrefix("label\t“<b>Bold</b>") }, "\(tree)")
        #expect(shown.contains(#"<span foreground="red">red</span> \u{202E}exe.txt\u{202C} \u{2066}x\u{2069} aaa"#))
        #expect(!shown.unicodeScalars.contains { [0x202E, 0x202C, 0x2066, 0x2069].contains($0.value) })
        #expect(shown.hasSuffix("aaaa”"), "cut short: \(shown.suffix(20))")
        try session.click("Don’t allow")
        #expect(try request.wait() == "s \"denied\"")
    }
}
