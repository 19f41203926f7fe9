/// `\xNN` escapes (two hexadecimal digits for one byte), as systemd writes them in
/// unit names and as the service writes a stored name it does not accept
/// (`StoredName`).
package enum HexEscapes {
    /// The bytes `input` (UTF-8) stands for. `strict`: a backslash must begin an
    /// escape, or the input is refused (nil); else a backslash that begins none
    /// stands for itself.
    package static func decode(_ input: [UInt8], strict: Bool) -> [UInt8]? {
        var bytes: [UInt8] = []
        var i = 0
        while i < input.count {
            if input[i] == UInt8(ascii: "\\") {
                if i + 3 < input.count, input[i + 1] == UInt8(ascii: "x"),
                   let value = UInt8(String(decoding: input[(i + 2)...(i + 3)], as: UTF8.self), radix: 16) {
                    bytes.append(value)
                    i += 4
                    continue
                }
                if strict { return nil }
            }
            bytes.append(input[i])
            i += 1
        }
        return bytes
    }
}
