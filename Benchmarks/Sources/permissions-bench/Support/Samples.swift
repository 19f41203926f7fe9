// The statistics every benchmark prints: nearest-rank percentiles of one set of
// samples, in whatever unit they were taken.

struct Samples {
    /// The samples, smallest first.
    let sorted: [Double]

    init(_ values: [Double]) { sorted = values.sorted() }

    var count: Int { sorted.count }

    /// The nearest-rank percentile `p` (0–100): the smallest sample with at least
    /// p % of the samples at or below it; NaN without samples (printed as "-"/null).
    func percentile(_ p: Double) -> Double {
        guard !sorted.isEmpty else { return .nan }
        let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
        return sorted[Swift.min(sorted.count - 1, Swift.max(0, rank - 1))]
    }

    var p50: Double { percentile(50) }
    var p99: Double { percentile(99) }
    var min: Double { sorted.first ?? .nan }
    var max: Double { sorted.last ?? .nan }
    var mean: Double { sorted.isEmpty ? .nan : sorted.reduce(0, +) / Double(sorted.count) }
}
