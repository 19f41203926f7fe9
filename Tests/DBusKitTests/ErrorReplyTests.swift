import Testing
@testable import DBusKit
internal import CDBus

@Suite("Error replies")
struct ErrorReplyTests {
    /// A call as if received: libdbus refuses to build a reply to serial 0 (it aborts),
    /// and a call off the bus always has a serial.
    private func receivedCall() throws -> Message {
        let call = try makeCall()
        dbus_message_set_serial(call.raw, 42)
        return call
    }

    @Test func keepsAValidErrorName() throws {
        let reply = try receivedCall().makeErrorReply(BusError("org.example.Permissions.Error.Cancelled", "gone"))
        #expect(reply.kind == .error)
        #expect(reply.errorName == "org.example.Permissions.Error.Cancelled")
        #expect(reply.asError == BusError("org.example.Permissions.Error.Cancelled", "gone"))
        #expect(reply.arguments() == [.string("gone")])
    }

    @Test(arguments: ["", "Cancelled", "org..example.Error", "org.example.Error.", "1org.example.Error",
                      "org.example.Error-X", "org.example Error.X", "org.example\0.X", "org.examplé.X"])
    func invalidErrorNameFallsBackToFailed(name: String) throws {
        let reply = try receivedCall().makeErrorReply(BusError(name, "text kept"))
        #expect(reply.kind == .error)
        #expect(reply.errorName == BusError.failed)
        #expect(reply.asError == BusError(BusError.failed, "text kept"))
    }

    @Test func nulInTheTextIsEscaped() throws {
        let reply = try receivedCall().makeErrorReply(BusError(BusError.invalidArgs, "a\0b\0"))
        #expect(reply.asError == BusError(BusError.invalidArgs, "a\\0b\\0"))
    }

    @Test func plainReplyIsAMethodReturn() throws {
        let reply = try receivedCall().makeReply()
        #expect(reply.kind == .methodReturn)
        #expect(reply.asError == nil)
        try reply.append(.uint32(1))
        #expect(reply.arguments() == [.uint32(1)])
    }
}
