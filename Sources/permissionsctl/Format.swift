import DBusKit
import Glibc

/// Plain-text output: aligned tables with a header, and readable values.
enum Format {
    static func table(_ header: [String], _ rows: [[String]]) -> String {
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        return all.map { row in
            row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[column] - cell.count)
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }

    static func detail(_ key: String, _ value: DBusValue) -> String {
        if key == "decision-set-at", case .variant(.int64(let micros)) = value {
            return "\(key): \(timestamp(micros))"
        }
        if key == "plugin-details", value.stringKeyedEntries?.isEmpty ?? false { return "plugin-details: none" }
        if key == "devices", let devices = value.arrayElements {
            if devices.isEmpty { return "devices: none" }
            return "devices:\n" + devices.map { device in
                "  - " + (device.stringKeyedEntries ?? []).map { "\($0.0)=\($0.1.stringValue ?? "")" }
                    .joined(separator: " ")
            }.joined(separator: "\n")
        }
        return "\(key): \(Self.value(value))"
    }

    static func value(_ value: DBusValue) -> String {
        switch value {
        case .variant(let inner): return Self.value(inner)
        case .string(let s), .objectPath(let s): return s
        case .uint32(let v): return String(v)
        case .int64(let v): return String(v)
        case .boolean(let b): return b ? "true" : "false"
        case .array(_, let items): return items.map(Self.value).joined(separator: ",")
        case .dictionary(_, _, let entries):
            return entries.map { "\(Self.value($0.key))=\(Self.value($0.value))" }.joined(separator: " ")
        case .structure(let fields): return "(" + fields.map(Self.value).joined(separator: " ") + ")"
        default: return String(describing: value)
        }
    }

    static func decisionRow(_ row: DBusValue) -> [String] {
        guard case .structure(let f) = row, f.count == 5, case .int64(let at) = f[3] else { return [] }
        return [f[0].stringValue ?? "", f[1].stringValue ?? "", f[2].stringValue ?? "", timestamp(at),
                f[4].stringValue ?? ""]
    }

    /// A ListAllDecisions row: (owner uid or -1, then as ListDecisions), owner first.
    static func ownedDecisionRow(_ row: DBusValue) -> [String] {
        guard case .structure(let f) = row, f.count == 6, case .int64(let owner) = f[0] else { return [] }
        return [owner < 0 ? "unassigned" : String(owner)] + decisionRow(.structure(Array(f.dropFirst())))
    }

    static func pluginRow(_ row: DBusValue) -> [String] {
        guard case .structure(let f) = row, f.count == 4 else { return [] }
        return [f[0].stringValue ?? "", f[1].stringValue ?? "", f[2].stringValue ?? "",
                (f[3].stringArray ?? []).joined(separator: ",")]
    }

    /// A ListPipeWireRemotes row (tusssx): id, uid, app, permission, status as
    /// last told to the plugin, opened at.
    static func remoteRow(_ row: DBusValue) -> [String] {
        guard case .structure(let f) = row, f.count == 6, case .uint64(let id) = f[0], case .uint32(let uid) = f[1],
              case .int64(let at) = f[5] else { return [] }
        return [String(id), String(uid), f[2].stringValue ?? "", f[3].stringValue ?? "", f[4].stringValue ?? "",
                timestamp(at)]
    }

    /// Microseconds since the epoch as UTC ISO 8601.
    static func timestamp(_ micros: Int64) -> String {
        var seconds = time_t(micros / 1_000_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 32)
        let n = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%SZ", &parts)
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
