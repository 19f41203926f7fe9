/// Why a caller could not be identified (it left the bus, its process is gone, its
/// files did not answer in time, its app id is not valid). Not a bus error: the
/// service answers the call with its named error (UnknownCaller) made from it, so
/// that the error names stay the service's, in one place.
package struct IdentityError: Error, Sendable, CustomStringConvertible {
    /// Which caller and why, escaped where it quotes the caller's own text.
    package let message: String

    package init(_ message: String) { self.message = message }

    package var description: String { message }
}
