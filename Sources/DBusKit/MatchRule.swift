import SystemPrimitives

/// A D-Bus match rule: the text that `AddMatch`, `RemoveMatch` and `BecomeMonitor`
/// take, such as `type='signal',sender='org.freedesktop.DBus',arg0='org.bluez'`.
///
/// Every value is quoted as the D-Bus specification says, so that a value can hold
/// any character: inside single quotes nothing is special (a backslash or a comma is
/// itself), and a single quote, which would end the quoted part, is written as
/// `'\''` (close the quote, an escaped quote, open again). A value taken from a peer
/// (a bus name, an `arg0`) can therefore neither break the rule nor add keys to it.
public struct MatchRule: Sendable, Equatable, CustomStringConvertible {
    /// The rule as the bus daemon parses it.
    public let text: String

    /// The rule with `pairs` in order; pairs whose value is nil are left out. Keys
    /// are the specification's (`type`, `sender`, `arg0`, …), written by the
    /// program; values may come from anyone. A value with a NUL byte cannot be
    /// passed to libdbus (the C string would end there) and is refused.
    public init(_ pairs: KeyValuePairs<String, String?>) throws(BusError) {
        var parts: [String] = []
        for case let (key, value?) in pairs {
            precondition(!key.isEmpty && key.utf8.allSatisfy(Self.isKeyByte), "match rule key \"\(key)\"")
            guard !value.utf8.contains(0) else {
                throw BusError(BusError.invalidArgs,
                               "match rule value for \(key) contains a NUL byte: \"\(value.escapedForMessage)\"")
            }
            parts.append(key + "=" + Self.quote(value))
        }
        text = parts.joined(separator: ",")
    }

    public var description: String { text }

    /// One value in quotes, with each single quote written as `'\''`.
    public static func quote(_ value: String) -> String {
        // Most values (bus names, paths, interfaces, members) hold no quote: as they
        // are, without a scalar-by-scalar copy (about 1 000 instructions a character,
        // which start-up's first match rule spent).
        if !value.utf8.contains(UInt8(ascii: "'")) { return "'" + value + "'" }
        var quoted = "'"
        for scalar in value.unicodeScalars {
            if scalar == "'" { quoted += #"'\''"# } else { quoted.unicodeScalars.append(scalar) }
        }
        return quoted + "'"
    }

    private static func isKeyByte(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }
}
