/// What the tests and benches draw their random choices from.

/// SplitMix64: small, fast, and the same sequence for the same seed everywhere.
public struct SeededRandom: RandomNumberGenerator {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    /// A generator of its own for stream `index` (one per client thread).
    public init(seed: UInt64, stream index: Int) {
        var mixer = SeededRandom(seed: seed ^ (0x9E37_79B9_7F4A_7C15 &* UInt64(index + 1)))
        state = mixer.next()
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    public mutating func chance(_ probability: Double) -> Bool { Double.random(in: 0..<1, using: &self) < probability }
}
