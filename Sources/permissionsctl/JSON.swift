import CLISupport
import DBusKit

/// `--json` output: a small writer (keys keep their order, so output is stable),
/// and D-Bus values as JSON values. The schema is doc/man/permissionsctl.1's
/// (JSON OUTPUT).
// `indirect`: without it the compiler, checking main.swift on its own (an
// incremental build), reported "circular reference" in the layout of a value
// that holds arrays of itself in tuples.
indirect enum JSON {
    case string(String)
    case number(String)
    case bool(Bool)
    case null
    case array([JSON])
    case object([(String, JSON)])

    static func int<T: BinaryInteger>(_ value: T) -> JSON { .number(String(value)) }

    /// One line of JSON, no spaces.
    var text: String {
        switch self {
        case .string(let s): return Self.quote(s)
        case .number(let n): return n
        case .bool(let b): return b ? "true" : "false"
        case .null: return "null"
        case .array(let items): return "[" + items.map(\.text).joined(separator: ",") + "]"
        case .object(let pairs): return "{" + pairs.map { Self.quote($0.0) + ":" + $0.1.text }.joined(separator: ",") + "}"
        }
    }

    /// RFC 8259 string escaping (CLISupport's `jsonQuoted`).
    static func quote(_ s: String) -> String { jsonQuoted(s) }

    /// A D-Bus value as JSON: integers as numbers, a{s…} as objects, structures
    /// and other arrays as arrays, variants as what they hold.
    init(_ value: DBusValue) {
        switch value {
        case .variant(let inner): self.init(inner)
        case .string(let s), .objectPath(let s), .signature(let s): self = .string(s)
        case .boolean(let b): self = .bool(b)
        case .byte(let v): self = .int(v)
        case .int16(let v): self = .int(v)
        case .uint16(let v): self = .int(v)
        case .int32(let v): self = .int(v)
        case .uint32(let v): self = .int(v)
        case .int64(let v): self = .int(v)
        case .uint64(let v): self = .int(v)
        case .double(let v): self = v.isFinite ? .number(String(v)) : .null
        case .array(_, let items), .structure(let items): self = .array(items.map { JSON($0) })
        case .dictionary(_, _, let entries):
            self = .object(entries.map { (Format.value($0.key), JSON($0.value)) })
        case .unixFD: self = .null  // no method permissionsctl prints returns one
        }
    }
}

extension Format {
    /// A ListPipeWireRemotes row: {"id", "uid", "app", "permission", "status", "opened-at" (UTC ISO 8601)}.
    static func remoteObject(_ row: DBusValue) -> JSON {
        guard case .structure(let f) = row, f.count == 6, case .uint64(let id) = f[0], case .uint32(let uid) = f[1],
              case .int64(let at) = f[5] else { return .null }
        return .object([("id", .int(id)), ("uid", .int(uid)), ("app", .string(f[2].stringValue ?? "")),
                        ("permission", .string(f[3].stringValue ?? "")), ("status", .string(f[4].stringValue ?? "")),
                        ("opened-at", .string(timestamp(at)))])
    }

    /// A ListDecisions row: {"app", "permission", "decision", "set-at" (UTC ISO 8601), "set-by"}.
    static func decisionObject(_ row: DBusValue) -> JSON {
        guard case .structure(let f) = row, f.count == 5, case .int64(let at) = f[3] else { return .null }
        return .object([("app", JSON(f[0])), ("permission", JSON(f[1])), ("decision", JSON(f[2])),
                        ("set-at", .string(timestamp(at))), ("set-by", JSON(f[4]))])
    }

    /// A ListAllDecisions row: {"user": uid, or null when unassigned, then as decisionObject}.
    static func ownedDecisionObject(_ row: DBusValue) -> JSON {
        guard case .structure(let f) = row, f.count == 6, case .int64(let owner) = f[0],
              case .object(let rest) = decisionObject(.structure(Array(f.dropFirst())))
        else { return .null }
        return .object([("user", owner < 0 ? .null : .int(owner))] + rest)
    }

    /// A Plugins entry: {"name", "version", "state", "permissions": [...]}.
    static func pluginObject(_ row: DBusValue) -> JSON {
        guard case .structure(let f) = row, f.count == 4 else { return .null }
        return .object([("name", JSON(f[0])), ("version", JSON(f[1])), ("state", JSON(f[2])),
                        ("permissions", JSON(f[3]))])
    }
}
