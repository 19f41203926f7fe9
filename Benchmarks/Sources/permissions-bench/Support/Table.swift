// The benchmarks' human output: aligned tables, and numbers short enough to read.
import Foundation

/// A titled table: the first column left-aligned, the others right-aligned.
struct Table {
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

/// 3 significant digits: enough to compare, short enough to read; "-" for NaN.
func format(_ v: Double) -> String {
    guard v.isFinite else { return "-" }
    let a = abs(v)
    if a >= 1000 { return String(format: "%.0f", v) }
    if a >= 100 { return String(format: "%.1f", v) }
    if a >= 10 { return String(format: "%.2f", v) }
    return String(format: "%.3f", v)
}

/// a / b, NaN when either is not a number or b is not positive.
func ratio(_ a: Double, _ b: Double) -> Double { b > 0 && a.isFinite && b.isFinite ? a / b : .nan }

func ratioText(_ r: Double) -> String { r.isFinite ? String(format: "%.2fx", r) : "-" }

func mebibytes(_ kib: Int) -> Double { Double(kib) / 1024 }
