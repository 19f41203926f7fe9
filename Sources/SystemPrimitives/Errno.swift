internal import Glibc

/// An errno value, typed (swift-system's `Errno`, in the few lines we need): what
/// `valueOrErrno` returns for a failed call, and how messages name it. The one
/// place that calls strerror.
public struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's errno now: read it right after the call that failed,
    /// before anything else (a log line, an allocation) can change it.
    public static var current: Errno { Errno(rawValue: errno) }

    public static let interrupted = Errno(rawValue: EINTR)

    /// strerror's words alone ("No such file or directory"), for the few texts
    /// whose wording is kept as it was (the configuration's status).
    public var text: String {
        // glibc's strerror is safe from any thread: a known code's text is a
        // constant, an unknown one is formatted in a buffer of the calling thread.
        String(cString: strerror(rawValue))
    }

    /// "No such file or directory (errno 2)".
    public var description: String { "\(text) (errno \(rawValue))" }
}

/// "No such file or directory (errno 2)": how log lines and errors name an errno.
/// The number too: strerror's words differ between C libraries and locales, the
/// number is what one searches for.
public func errnoName(_ code: Int32) -> String {
    Errno(rawValue: code).description
}
