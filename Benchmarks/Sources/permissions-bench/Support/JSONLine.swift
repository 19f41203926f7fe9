// The benchmarks' machine-readable output: one JSON object a line, each naming its
// benchmark ("bench"), so that a run's output can be filtered with grep and jq.
import CLISupport
import Foundation

/// One value of a JSON line: numbers with a fixed precision, NaN and infinities as null.
indirect enum JSONValue {
    case number(Double, decimals: Int)
    case int(Int)
    case string(String)
    case bool(Bool)
    case strings([String])
    case object([(String, JSONValue)])
    case null

    static func num(_ v: Double, _ decimals: Int = 3) -> JSONValue { .number(v, decimals: decimals) }

    var text: String {
        switch self {
        case .number(let v, let d): return v.isFinite ? String(format: "%.\(d)f", v) : "null"
        case .int(let v): return String(v)
        case .string(let s): return jsonQuoted(s)
        case .bool(let b): return b ? "true" : "false"
        case .strings(let list): return "[" + list.map(jsonQuoted).joined(separator: ",") + "]"
        case .object(let fields): return "{" + fields.map { jsonQuoted($0.0) + ":" + $0.1.text }.joined(separator: ",") + "}"
        case .null: return "null"
        }
    }
}

/// Prints `{"bench":BENCH,FIELDS…}` and flushes, so that a run cut short keeps its lines.
func printJSONLine(_ bench: String, _ fields: [(String, JSONValue)]) {
    print(JSONValue.object([("bench", .string(bench))] + fields).text)
    fflush(nil)
}
