import DBusKit
import PermissionsTestSupport

// Random D-Bus values for the fuzz test: of a given type (to get past the
// signature check into the handlers) or of a random one, biased towards the values
// the service cares about and the ones that break parsers: invalid names, control
// characters, huge strings, deep variants, extreme numbers.

/// The complete types of a signature, in order ("sa{sv}" -> ["s", "a{sv}"]).
func completeTypes(_ signature: String) -> [String] {
    var result: [String] = []
    var rest = Substring(signature)
    while !rest.isEmpty {
        let length = completeTypeLength(rest)
        result.append(String(rest.prefix(length)))
        rest = rest.dropFirst(length)
    }
    return result
}

/// The length of the complete type at the start of `signature`.
private func completeTypeLength(_ signature: Substring) -> Int {
    guard let first = signature.first else { return 0 }
    switch first {
    case "a":
        return 1 + completeTypeLength(signature.dropFirst())
    case "(", "{":
        let close: Character = first == "(" ? ")" : "}"
        var length = 1
        var rest = signature.dropFirst()
        while let c = rest.first, c != close {
            let inner = completeTypeLength(rest)
            length += inner
            rest = rest.dropFirst(inner)
        }
        return length + 1
    default:
        return 1
    }
}

struct FuzzValues {
    var random: SeededRandom
    /// Bytes left for the values of the current message: big arrays of big strings
    /// nest, and without a cap one message could take gigabytes. `arguments(for:)`
    /// sets it; past it, strings are short and arrays empty.
    var budget = 0
    static let messageBudget = 2 << 20

    /// Strings the service parses: names it knows, names it must refuse, and text
    /// that has broken parsers elsewhere.
    static let interesting: [String] = [
        "location", "notifications", "camera", "microphone", "bluetooth", "teleport", "", "Cam/era", "LOCATION",
        String(repeating: "a", count: 64), String(repeating: "a", count: 65), "-location", "loc ation",
        "org.example.App", "/usr/bin/app", "../etc/passwd", "/a/../b", "org..example", "/", "//", ".",
        String(repeating: "x", count: 255), String(repeating: "x", count: 256),
        "line\nbreak", "tab\tx", "\u{7f}", "\u{1b}[31m", "é", "😀", "\u{202E}evil", "%s%s%n", "' OR 1=1 --",
        "authorized", "denied", "not-determined", "maybe", "allow-always", "allow-once", "deny", "dismiss",
        "org.example.Permissions", "org.freedesktop.DBus.Properties", "org.freedesktop.DBus.Introspectable",
        "org.freedesktop.DBus.Peer", "Permissions", "Plugins", "ChangeSerial", "version",
        "reason", "accuracy", "city", "exact", "expires-at", ":1.1", "org.freedesktop.DBus",
    ]

    static let optionKeys = ["reason", "accuracy", "expires-at", "", "unknown", String(repeating: "k", count: 300)]

    static let basicTypes: [Character] = ["y", "b", "n", "q", "i", "u", "x", "t", "d", "s", "o", "g"]

    init(seed: UInt64, stream: Int) { random = SeededRandom(seed: seed, stream: stream) }

    mutating func pick<T>(_ items: [T]) -> T { items.randomElement(using: &random)! }
    mutating func chance(_ p: Double) -> Bool { random.chance(p) }
    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }

    mutating func string() -> String {
        let s = unbudgetedString()
        guard s.utf8.count <= budget else { return pick(Self.interesting.filter { $0.utf8.count < 300 }) }
        budget -= s.utf8.count
        return s
    }

    private mutating func unbudgetedString() -> String {
        switch int(0...99) {
        case 0..<55: return pick(Self.interesting)
        case 55..<85:
            let alphabet = Array("abcdefghijklmnopqrstuvwxyz-._/0123456789 ABC\u{1}\u{ff}é")
            return String((0..<int(0...40)).map { _ in pick(alphabet) })
        case 85..<97: return String(repeating: pick(["a", "/", "é", "\n"]), count: pick([1024, 1025, 4096, 65_536]))
        default: return String(repeating: "z", count: 1 << 20)  // 1 MiB
        }
    }

    mutating func objectPath() -> String {
        switch int(0...9) {
        case 0: return "/"
        case 1: return "/org/example/Permissions"
        case 2: return "/" + String(repeating: "p/", count: 200) + "end"
        default:
            let alphabet = Array("abcXYZ019_")
            return "/" + (0..<int(1...4)).map { _ in String((0..<int(1...8)).map { _ in pick(alphabet) }) }
                .joined(separator: "/")
        }
    }

    /// A random single complete type, nested at most `depth` more levels.
    mutating func type(depth: Int = 3) -> String {
        let roll = depth <= 0 ? 0 : int(0...9)
        switch roll {
        case 0..<5: return String(pick(Self.basicTypes))
        case 5: return "v"
        case 6, 7: return "a" + type(depth: depth - 1)
        case 8: return "a{" + String(pick(Self.basicTypes)) + type(depth: depth - 1) + "}"
        default: return "(" + (0..<int(1...3)).map { _ in type(depth: depth - 1) }.joined() + ")"
        }
    }

    mutating func signatureValue() -> String {
        chance(0.5) ? pick(["", "s", "sa{sv}", "a(sssxs)", "v", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaas"]) : type()
    }

    /// A value of a random type.
    mutating func anyValue(depth: Int = 0) -> DBusValue {
        value(of: type(), depth: depth)
    }

    /// A value of the single complete type `type`.
    mutating func value(of type: String, depth: Int = 0) -> DBusValue {
        let first = type.first!
        switch first {
        case "y": return .byte(UInt8.random(in: 0...255, using: &random))
        case "b": return .boolean(chance(0.5))
        case "n": return .int16(pick([0, 1, -1, .min, .max]))
        case "q": return .uint16(pick([0, 1, .max]))
        case "i": return .int32(pick([0, 1, -1, .min, .max, Int32.random(in: .min ... .max, using: &random)]))
        case "u": return .uint32(pick([0, 1, .max, UInt32.random(in: 0 ... .max, using: &random)]))
        case "x": return .int64(pick([0, -1, .min, .max, Int64.random(in: .min ... .max, using: &random)]))
        case "t": return .uint64(pick([0, .max, UInt64.random(in: 0 ... .max, using: &random)]))
        case "d": return .double(pick([0, -0.0, .nan, .infinity, -.infinity, .leastNonzeroMagnitude, 1e308]))
        case "s": return .string(string())
        case "o": return .objectPath(objectPath())
        case "g": return .signature(signatureValue())
        case "v":
            // Variants nest: sometimes a chain deep enough to reach the wire format's limit.
            if depth < 31, chance(depth == 0 ? 0.15 : 0.85) { return .variant(value(of: "v", depth: depth + 1)) }
            return .variant(anyValue(depth: depth + 1))
        case "a":
            let element = String(type.dropFirst())
            var count = chance(0.03) ? int(200...2000) : int(0...4)
            // Each element costs the daemon a decoded value or more, whatever its size.
            if budget < count * 64 { count = 0 }
            budget -= count * 64
            if element.hasPrefix("{") {
                let inner = completeTypes(String(element.dropFirst().dropLast()))
                let entries = (0..<count).map { _ in
                    let key: DBusValue = inner[0] == "s" && chance(0.7) ? .string(pick(Self.optionKeys))
                        : value(of: inner[0], depth: depth + 1)
                    return DBusValue.DictEntry(key, value(of: inner[1], depth: depth + 1))
                }
                return .dictionary(keySignature: inner[0], valueSignature: inner[1], entries)
            }
            return .array(elementSignature: element, (0..<count).map { _ in value(of: element, depth: depth + 1) })
        case "(":
            return .structure(completeTypes(String(type.dropFirst().dropLast())).map { value(of: $0, depth: depth + 1) })
        default:
            return .string("?")
        }
    }

    /// Arguments for a method taking `signature`: mostly of the right types, else
    /// with one of the wrong type, one too many or too few, or any count of any type.
    mutating func arguments(for signature: String) -> [DBusValue] {
        budget = Self.messageBudget
        var types = completeTypes(signature)
        switch int(0...99) {
        case 0..<50:
            break
        case 50..<70 where !types.isEmpty:
            types[int(0...types.count - 1)] = type()
        case 70..<85:
            if types.isEmpty || chance(0.5) { types.append(type()) } else { types.removeLast() }
        default:
            types = (0..<int(0...5)).map { _ in type() }
        }
        return types.map { value(of: $0) }
    }
}
