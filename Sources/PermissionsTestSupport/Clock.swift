import Glibc

/// CLOCK_MONOTONIC in nanoseconds: the one clock of the benches' timelines (and of
/// any test that compares times across threads).
public func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}
