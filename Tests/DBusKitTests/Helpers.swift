import Testing
@testable import DBusKit

/// A method call with valid header fields, ready for `append`. No bus is involved:
/// libdbus marshals into the message's own buffer.
func makeCall() throws -> Message {
    try Message.methodCall(destination: "org.example.Permissions", path: "/org/example/Permissions",
                           interface: "org.example.Permissions", member: "Echo")
}

/// Appends `values` to a fresh message and decodes them again.
func roundTrip(_ values: [DBusValue]) throws -> (decoded: [DBusValue], wireSignature: String) {
    let message = try makeCall()
    try message.append(values)
    return (message.arguments(), message.signature)
}

/// The `BusError` that `body` throws, or nil (with an issue recorded) when it throws
/// nothing.
func busError(_ body: () throws(BusError) -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> BusError? {
    do {
        try body()
        Issue.record("expected a BusError, nothing was thrown", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}
