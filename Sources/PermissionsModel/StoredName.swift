/// How the API names what a stored row holds, so that every row can be listed and
/// removed, even one whose app id or permission no method accepts: a row migrated
/// from a store of an older version that took ids this one refuses (`../etc/x`), or
/// a hand edit.
///
/// A valid app id (`Validate.isAppID`) or permission name is its own name. Any other
/// is named `invalid:` followed by its UTF-8 bytes, each byte outside printable
/// ASCII, and the backslash, written `\xNN` (two lowercase hex digits): printable,
/// one name per string and one string per name, and never a valid id (a valid id
/// has no ":" unless it is a path, and a path starts with "/").
public enum StoredName {
    public static let invalidPrefix = "invalid:"

    /// The name of a stored app id.
    public static func app(_ id: String) -> String {
        Validate.isAppID(id) ? id : escaped(id)
    }

    /// The name of a stored permission.
    public static func permission(_ name: String) -> String {
        Validate.isPermissionName(name) ? name : escaped(name)
    }

    /// The stored app id that `name` names: a valid app id, or the `invalid:` name of
    /// an id that is not valid, exactly as `app` writes it; nil for anything else.
    public static func appID(named name: String) -> String? {
        if Validate.isAppID(name) { return name }
        guard let id = unescaped(name), !Validate.isAppID(id), escaped(id) == name else { return nil }
        return id
    }

    /// The stored permission that `name` names, as `appID(named:)`.
    public static func permission(named name: String) -> String? {
        if Validate.isPermissionName(name) { return name }
        guard let text = unescaped(name), !Validate.isPermissionName(text), escaped(text) == name else { return nil }
        return text
    }

    /// Whether `name` is the `invalid:` name of an app id (which no caller can have).
    public static func namesInvalidAppID(_ name: String) -> Bool {
        !Validate.isAppID(name) && appID(named: name) != nil
    }

    private static func escaped(_ text: String) -> String {
        var out = invalidPrefix
        for byte in text.utf8 {
            if byte >= 0x20, byte < 0x7f, byte != UInt8(ascii: "\\") {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                let hex = String(byte, radix: 16)
                out += "\\x" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return out
    }

    /// The text of an `invalid:` name; nil if it is none, has a broken escape, or
    /// its bytes are not UTF-8.
    private static func unescaped(_ name: String) -> String? {
        guard name.hasPrefix(invalidPrefix),
              let bytes = HexEscapes.decode(Array(name.utf8.dropFirst(invalidPrefix.utf8.count)), strict: true)
        else { return nil }
        return String(validating: bytes, as: UTF8.self)
    }
}
