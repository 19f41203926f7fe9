// permissions-bench core: numbers and how they are printed. Percentiles, the
// human tables (value, floor, peer, ratio, target, met) and one JSON line per
// measurement. Everything here is plain computation on the main thread.
import CLISupport
import Foundation

/// Nearest-rank percentiles of a set of samples (any unit).
struct CoreSamples {
    private(set) var sorted: [Double]

    init(_ values: [Double]) { sorted = values.sorted() }

    var count: Int { sorted.count }

    func percentile(_ p: Double) -> Double {
        guard !sorted.isEmpty else { return .nan }
        let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
        return sorted[Swift.min(sorted.count - 1, Swift.max(0, rank - 1))]
    }

    var p50: Double { percentile(50) }
    var p99: Double { percentile(99) }
    var median: Double { percentile(50) }
    var max: Double { sorted.last ?? .nan }
    var min: Double { sorted.first ?? .nan }
}

/// One field of a JSON line: numbers are printed with a fixed precision, NaN as null.
enum CoreJSON {
    case number(Double, decimals: Int)
    case int(Int)
    case string(String)
    case bool(Bool)
    case strings([String])
    case null

    static func num(_ v: Double, _ decimals: Int = 3) -> CoreJSON { .number(v, decimals: decimals) }

    var text: String {
        switch self {
        case .number(let v, let d): return v.isFinite ? String(format: "%.\(d)f", v) : "null"
        case .int(let v): return String(v)
        case .string(let s): return CoreJSON.quote(s)
        case .bool(let b): return b ? "true" : "false"
        case .strings(let list): return "[" + list.map(CoreJSON.quote).joined(separator: ",") + "]"
        case .null: return "null"
        }
    }

    static func quote(_ s: String) -> String { jsonQuoted(s) }
}

/// A target (the "target" column of doc/performance.md), judged on one measured value.
struct CoreTarget {
    enum Kind { case atMost, atLeast, below }
    let name: String
    let kind: Kind
    let limit: Double
    let value: Double
    /// How the value and limit are shown, e.g. "1.07x" or "14.2 ms".
    let unit: String

    var met: Bool {
        guard value.isFinite else { return false }
        switch kind {
        case .atMost: return value <= limit
        case .atLeast: return value >= limit
        case .below: return value < limit
        }
    }

    var limitText: String {
        let op = kind == .atLeast ? ">=" : kind == .atMost ? "<=" : "<"
        return "\(op) \(coreFormat(limit))\(unit)"
    }

    var valueText: String { "\(coreFormat(value))\(unit)" }
}

/// Prints rows of a section as an aligned table, with the section's targets.
struct CoreTable {
    let title: String
    let columns: [String]
    var rows: [[String]] = []

    init(_ title: String, columns: [String]) {
        self.title = title
        self.columns = columns
    }

    mutating func add(_ cells: [String]) { rows.append(cells) }

    func print() {
        let all = [columns] + rows
        var widths = [Int](repeating: 0, count: columns.count)
        for row in all {
            for (i, cell) in row.enumerated() where i < widths.count { widths[i] = Swift.max(widths[i], cell.count) }
        }
        func line(_ row: [String]) -> String {
            row.enumerated().map { i, cell in
                i == 0 ? cell.padding(toLength: widths[i], withPad: " ", startingAt: 0)
                       : String(repeating: " ", count: Swift.max(0, widths[i] - cell.count)) + cell
            }.joined(separator: "  ")
        }
        Swift.print("")
        Swift.print("== \(title)")
        Swift.print(line(columns))
        Swift.print(String(repeating: "-", count: widths.reduce(0, +) + 2 * (widths.count - 1)))
        for row in rows { Swift.print(line(row)) }
        fflush(nil)
    }
}

/// Prints the JSON lines and collects the targets of the whole run.
final class CoreReport {
    private(set) var targets: [CoreTarget] = []

    /// Prints one JSON line.
    func json(_ bench: String, _ fields: [(String, CoreJSON)]) {
        let line = "{\"bench\":\(CoreJSON.quote(bench))," + fields.map { "\(CoreJSON.quote($0.0)):\($0.1.text)" }
            .joined(separator: ",") + "}"
        print(line)
        fflush(nil)
    }

    @discardableResult
    func target(_ name: String, _ kind: CoreTarget.Kind, _ limit: Double, _ value: Double, unit: String) -> CoreTarget {
        let t = CoreTarget(name: name, kind: kind, limit: limit, value: value, unit: unit)
        targets.append(t)
        return t
    }

    func printTargets() {
        var table = CoreTable("Targets (ratios measured in this run)", columns: ["target", "measured", "wanted", "met"])
        for t in targets { table.add([t.name, t.valueText, t.limitText, t.met ? "yes" : "NO"]) }
        table.print()
        let met = targets.filter(\.met).count
        print("\(met) of \(targets.count) targets met")
        json("targets", [("met", .int(met)), ("total", .int(targets.count)),
                         ("missed", .strings(targets.filter { !$0.met }.map(\.name)))])
    }
}

/// Numbers for tables: 3 significant digits, enough to compare, short enough to read.
func coreFormat(_ v: Double) -> String {
    guard v.isFinite else { return "-" }
    let a = abs(v)
    if a >= 1000 { return String(format: "%.0f", v) }
    if a >= 100 { return String(format: "%.1f", v) }
    if a >= 10 { return String(format: "%.2f", v) }
    return String(format: "%.3f", v)
}

func coreRatio(_ a: Double, _ b: Double) -> Double { b > 0 && a.isFinite && b.isFinite ? a / b : .nan }

func coreRatioText(_ r: Double) -> String { r.isFinite ? String(format: "%.2fx", r) : "-" }

func coreMiB(_ kib: Int) -> Double { Double(kib) / 1024 }
