import Testing
import SystemPrimitives

@Suite("escapedForMessage")
struct EscapingTests {
    @Test(arguments: [
        ("a\nb", "a\\x0ab"),
        ("tab\there", "tab\\x09here"),
        ("\0", "\\x00"),
        ("\u{1b}[31mred", "\\x1b[31mred"),
        ("del\u{7f}", "del\\x7f"),
        ("cr\r\nlf", "cr\\x0d\\x0alf"),
        ("say \"hi\"", "say \\\"hi\\\""),
        ("back\\slash", "back\\\\slash"),
        ("héllo ✓ 日本 🎉", "héllo ✓ 日本 🎉"),
        ("", ""),
        ("plain org.gnome.Maps", "plain org.gnome.Maps"),
        // Bidirectional overrides and isolates would reorder what follows on a terminal.
        ("app.evil\u{202E}txt.exe", "app.evil\\u{202E}txt.exe"),
        ("\u{2066}x\u{2069}\u{200F}", "\\u{2066}x\\u{2069}\\u{200F}"),
        // Invisible: zero-width space and joiner, the byte order mark, the soft
        // hyphen; the line and paragraph separators. (Noncharacters: below, as Swift
        // has no literal for them.)
        ("a\u{200B}b\u{200D}c", "a\\u{200B}b\\u{200D}c"),
        ("\u{FEFF}org.app", "\\u{FEFF}org.app"),
        ("soft\u{AD}hyphen", "soft\\u{AD}hyphen"),
        ("one\u{2028}two\u{2029}", "one\\u{2028}two\\u{2029}"),
        // C1 controls (0x9b is a one-byte CSI on some terminals).
        ("csi\u{9b}31m", "csi\\x9b31m"),
    ])
    func escapes(input: String, expected: String) {
        #expect(input.escapedForMessage == expected)
    }

    @Test func escapesNoncharacters() {
        var text = ""
        for value: UInt32 in [0xFFFF, 0xFDD0, 0x1FFFE] { text.unicodeScalars.append(Unicode.Scalar(value)!) }
        #expect(text.escapedForMessage == "\\u{FFFF}\\u{FDD0}\\u{1FFFE}")
    }

    @Test func keepsExactly200Characters() {
        let s = String(repeating: "x", count: 200)
        #expect(s.escapedForMessage == s)
    }

    @Test func cutsLongerValues() {
        #expect(String(repeating: "x", count: 201).escapedForMessage == String(repeating: "x", count: 200) + "…")
        let long = String(repeating: "ab", count: 5000)
        #expect(long.escapedForMessage == String(long.prefix(200)) + "…")
    }

    @Test func cutCountsInputCharactersNotEscapes() {
        // 199 letters, a newline (one input character, four output characters), then more.
        let input = String(repeating: "a", count: 199) + "\n" + "tail"
        #expect(input.escapedForMessage == String(repeating: "a", count: 199) + "\\x0a…")
    }

    @Test func resultHasNoControlCharacters() {
        let hostile = String((0..<0x80).map { Character(Unicode.Scalar(UInt8($0))) })
        let escaped = hostile.escapedForMessage
        #expect(!escaped.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7f })
    }

    /// escapedForDisplay, for an app's reason in the prompt: the same escapes,
    /// quotes left alone, nothing cut.
    @Test func escapedForDisplayKeepsQuotesAndCutsNothing() {
        let reason = "say \"<b>hi</b>\"\u{202E}\n" + String(repeating: "x", count: 5000)
        #expect(reason.escapedForDisplay == "say \"<b>hi</b>\"\\u{202E}\\x0a" + String(repeating: "x", count: 5000))
    }
}
