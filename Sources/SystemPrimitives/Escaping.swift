// Untrusted text quoted in error messages and log lines: every part of the daemon,
// the client and the plugins quotes what a peer sent, so the one way to do it is here.

extension String {
    /// For a log line: control characters shown as `\xNN` (so that text cannot forge
    /// lines), quotes left alone, cut at 1000 characters.
    public var escapedForLog: String { escaped(limit: 1000, quotes: false) }

    /// The string with control characters shown as `\xNN` and long values cut, for
    /// quoting untrusted input in error messages and log lines.
    public var escapedForMessage: String { escaped(limit: 200, quotes: true) }

    /// For untrusted text shown whole to a person (an app's reason in a prompt):
    /// control, format and bidirectional characters shown as escapes, nothing cut,
    /// quotes left alone.
    public var escapedForDisplay: String { escaped(limit: .max, quotes: false) }

    /// Characters that change how the text around them is shown, or are not shown
    /// at all: format characters (the bidirectional marks, embeddings, overrides
    /// and isolates; zero-width spaces and joiners; the byte order mark; the soft
    /// hyphen), the line and paragraph separators (a new line in some viewers), and
    /// noncharacters. Shown raw, two values that differ in them read alike.
    private static func isInvisibleOrReordering(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .format, .lineSeparator, .paragraphSeparator: return true
        default: return scalar.properties.isNoncharacterCodePoint
        }
    }

    private func escaped(limit: Int, quotes: Bool) -> String {
        // Printable ASCII within the limit comes back as it is: looked at byte by
        // byte, without the scalar loop below and its Unicode property lookups
        // (a hundred thousand instructions for a plugin's 200-character log line,
        // doc/performance.md, "Start-up's own work, counted").
        if utf8.count <= limit, utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7f && !(quotes && ($0 == 0x5c || $0 == 0x22)) }) {
            return self
        }
        var out = ""
        var count = 0
        for scalar in unicodeScalars {
            if count == limit { out += "…"; break }
            count += 1
            if scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value) {
                let hex = String(scalar.value, radix: 16)
                out += "\\x" + (hex.count == 1 ? "0" + hex : hex)
            } else if Self.isInvisibleOrReordering(scalar) {
                // Shown raw, U+202E and its kin reorder the rest of the line on a
                // terminal: "app.evil\u{202E}txt.exe" reads as another name.
                out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else if quotes, scalar == "\\" || scalar == "\"" {
                out += "\\" + String(scalar)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
