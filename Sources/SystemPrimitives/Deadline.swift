internal import CDispatch

/// A moment on libdispatch's clock (a `dispatch_time_t`: CLOCK_MONOTONIC
/// nanoseconds on Linux), for `asyncAfter`, timers and the waits of semaphores and
/// groups.
public struct Deadline: Comparable, Sendable {
    let rawValue: dispatch_time_t

    /// A span of time to add to a deadline.
    public enum Interval: Equatable, Sendable {
        case seconds(Int)
        case milliseconds(Int)
        case microseconds(Int)
        case nanoseconds(Int)

        /// In nanoseconds, at most Int64.max (as the overlay's, which saturates).
        public var nanoseconds: Int64 {
            func times(_ n: Int, _ unit: Int64) -> Int64 {
                let (product, overflow) = Int64(n).multipliedReportingOverflow(by: unit)
                return overflow ? (n < 0 ? .min : .max) : product
            }
            return switch self {
            case .seconds(let n): times(n, 1_000_000_000)
            case .milliseconds(let n): times(n, 1_000_000)
            case .microseconds(let n): times(n, 1_000)
            case .nanoseconds(let n): Int64(n)
            }
        }

        /// The same span, whatever the unit: `.seconds(1) == .milliseconds(1000)`.
        public static func == (a: Interval, b: Interval) -> Bool { a.nanoseconds == b.nanoseconds }
    }

    /// The deadline at that reading of the clock (`uptimeNanoseconds`).
    public init(uptimeNanoseconds: UInt64) { rawValue = uptimeNanoseconds }

    private init(rawValue: dispatch_time_t) { self.rawValue = rawValue }

    public static func now() -> Deadline { Deadline(rawValue: dispatch_time(DISPATCH_TIME_NOW, 0)) }

    /// Never: a wait that ends only when signalled.
    public static let distantFuture = Deadline(rawValue: DISPATCH_TIME_FOREVER)

    /// The clock's reading in nanoseconds, for differences between two deadlines.
    public var uptimeNanoseconds: UInt64 { rawValue }

    public static func + (deadline: Deadline, interval: Interval) -> Deadline {
        Deadline(rawValue: dispatch_time(deadline.rawValue, interval.nanoseconds))
    }

    /// `seconds` later (fractions included), as the overlay's `DispatchTime + Double`.
    /// Saturates, as the overlay's: a span too large (or NaN) is never, one too far
    /// back is the earliest deadline there is (already passed).
    public static func + (deadline: Deadline, seconds: Double) -> Deadline {
        let nanoseconds = seconds * 1_000_000_000
        let delta: Int64 = if nanoseconds.isNaN || nanoseconds >= Double(Int64.max) {
            .max
        } else if nanoseconds <= Double(Int64.min) {
            .min
        } else {
            Int64(nanoseconds)
        }
        return delta == .max ? .distantFuture : Deadline(rawValue: dispatch_time(deadline.rawValue, delta))
    }

    public static func < (a: Deadline, b: Deadline) -> Bool { a.rawValue < b.rawValue }
}
