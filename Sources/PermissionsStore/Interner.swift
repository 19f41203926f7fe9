internal import Glibc

/// A string compared and hashed by its UTF-8 bytes, as SQLite compares TEXT (see
/// DecisionKey): Swift's `==` would make "é" and "e" + U+0301 one key, the file
/// holds two rows.
struct ByteString: Hashable, Sendable {
    let value: String

    static func == (a: Self, b: Self) -> Bool { sameBytes(a.value, b.value) }

    func hash(into hasher: inout Hasher) { Self.combine(value, into: &hasher) }

    /// The bytes and their count, without an array or a generic byte walk per key:
    /// every read hashes keys.
    static func combine(_ string: String, into hasher: inout Hasher) {
        var string = string
        string.withUTF8 { bytes in
            hasher.combine(bytes.count)
            hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
        }
    }

    static func sameBytes(_ a: String, _ b: String) -> Bool {
        var (a, b) = (a, b)
        return a.withUTF8 { x in
            b.withUTF8 { y in x.count == y.count && (x.isEmpty || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0) }
        }
    }
}

/// Each distinct string once, named by a small number: the index keeps app ids,
/// permission names and setters as `UInt32`s, so that a row holds no String (no
/// heap object and no 16-byte string per row; a store has far fewer distinct
/// names than rows). Strings are never forgotten while the daemon runs: a user let
/// go leaves their names behind, which a later load of the same names reuses.
///
/// A value type owned by its index; not shared.
struct Interner: Sendable {
    private var numbers: [ByteString: UInt32] = [:]
    private(set) var strings: [String] = []

    /// The number of `string`, made on first sight.
    mutating func intern(_ string: String) -> UInt32 {
        if let number = numbers[ByteString(value: string)] { return number }
        let number = UInt32(strings.count)
        strings.append(string)
        numbers[ByteString(value: string)] = number
        return number
    }

    /// The number of `string` if it was ever interned: a string never seen is in no row.
    func number(of string: String) -> UInt32? { numbers[ByteString(value: string)] }

    subscript(number: UInt32) -> String { strings[Int(number)] }
}
