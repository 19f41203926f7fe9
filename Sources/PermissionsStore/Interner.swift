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
/// names than rows).
///
/// The index holds a reference on a name for each row that names it (`retain`,
/// `release`); a name whose last row goes (deleted, or its owner let go) is
/// forgotten, and its number is given to the next new name. So the names in
/// memory are those of the rows in memory: the loaded users' and the unassigned
/// ones, never every name a user let go once had. The table of numbers is as long
/// as the most names held at once; the lookup table shrinks when most of it is
/// empty. `PackedRows`, which lives for one load, only interns.
///
/// A value type owned by its index; not shared.
struct Interner: Sendable {
    private var numbers: [ByteString: UInt32] = [:]
    /// By number; "" for a number free to be given again.
    private(set) var strings: [String] = []
    /// References held on each number.
    private var references: [UInt32] = []
    private var freeNumbers: [UInt32] = []

    /// Distinct strings held.
    var count: Int { numbers.count }

    /// The number of `string`, made on first sight (with no reference yet).
    mutating func intern(_ string: String) -> UInt32 {
        if let number = numbers[ByteString(value: string)] { return number }
        let number: UInt32
        if let free = freeNumbers.popLast() {
            number = free
            strings[Int(number)] = string
        } else {
            number = UInt32(strings.count)
            strings.append(string)
            references.append(0)
        }
        numbers[ByteString(value: string)] = number
        return number
    }

    /// The number of `string`, with one more reference on it.
    mutating func retain(_ string: String) -> UInt32 {
        let number = intern(string)
        retain(number)
        return number
    }

    mutating func retain(_ number: UInt32) {
        references[Int(number)] += 1
    }

    /// One reference fewer on `number`; with none left, the string is forgotten.
    mutating func release(_ number: UInt32) {
        let slot = Int(number)
        references[slot] -= 1
        guard references[slot] == 0 else { return }
        numbers[ByteString(value: strings[slot])] = nil
        strings[slot] = ""
        freeNumbers.append(number)
        // A Dictionary keeps its capacity when emptied: rebuilt at a quarter full,
        // it costs its live entries once per three quarters of them forgotten.
        if numbers.capacity > 64, numbers.count * 4 < numbers.capacity {
            var smaller = [ByteString: UInt32](minimumCapacity: numbers.count * 2)
            for (key, value) in numbers { smaller[key] = value }
            numbers = smaller
        }
    }

    /// The number of `string` if a row names it: a string not held is in no row.
    func number(of string: String) -> UInt32? { numbers[ByteString(value: string)] }

    subscript(number: UInt32) -> String { strings[Int(number)] }
}
