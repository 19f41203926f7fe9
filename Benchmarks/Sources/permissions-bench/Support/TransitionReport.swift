// The report of the device benchmarks (pipewire, bluez, local-network): for each
// transition, the latencies of its cycles in milliseconds, as a table and as one
// JSON line whose keys later runs are compared by.
import Foundation

/// One row: what changed, its key in the JSON line, its latencies (ms).
struct Transition {
    let label: String
    let key: String
    let samples: Samples
}

func printTransitions(bench: String, title: String, fields: [(String, JSONValue)], _ rows: [Transition]) {
    var table = Table(title, columns: ["transition", "n", "p50", "p99", "min", "max", "mean"])
    for row in rows {
        let s = row.samples
        table.add([row.label, "\(s.count)"] + [s.p50, s.p99, s.min, s.max, s.mean].map { String(format: "%.3f", $0) })
    }
    table.print()
    printJSONLine(bench, fields + [("unit", .string("ms"))] + rows.map { row in
        let s = row.samples
        return (row.key, .object([("n", .int(s.count)), ("p50", .num(s.p50)), ("p99", .num(s.p99)),
                                  ("min", .num(s.min)), ("max", .num(s.max)), ("mean", .num(s.mean))]))
    })
}
