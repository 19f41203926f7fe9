internal import Glibc

/// CLOCK_MONOTONIC in nanoseconds: the one clock of the daemon's and the plugins'
/// throttles and of the benches' timelines, so that times taken in different
/// processes (a bench and its daemon) compare.
public func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}
