import Testing
@testable import DBusKit
import SystemPrimitives

@Suite("D-Bus name validation")
struct NameValidationTests {
    private func rejects(_ validate: (String) throws(BusError) -> Void, _ value: String,
                         _ what: String, sourceLocation: SourceLocation = #_sourceLocation)
    {
        let error = busError({ () throws(BusError) in try validate(value) }, sourceLocation: sourceLocation)
        #expect(error == BusError(BusError.invalidArgs, "invalid \(what) \"\(value.escapedForMessage)\""),
                sourceLocation: sourceLocation)
    }

    @Test(arguments: ["/", "/org/example/Permissions", "/a_b/C9/_", "/x"])
    func validObjectPath(_ path: String) throws {
        try ObjectPath.validate(path)
    }

    @Test(arguments: ["", "no/slash", "/trailing/", "//double", "/a//b", "/a-b", "/a.b", "/ä", "/a b",
                      "/a\0b", "/a\nb"])
    func invalidObjectPath(_ path: String) {
        rejects(ObjectPath.validate, path, "object path")
    }

    @Test(arguments: ["org.example.Permissions", "a.b", "org.example._private", "org.example.Error9",
                      "org.freedesktop.DBus.Error.InvalidArgs"])
    func validInterfaceName(_ name: String) throws {
        try InterfaceName.validate(name)
    }

    @Test(arguments: ["", "org", "org..example", ".org.example", "org.example.", "1org.example", "org.1example",
                      "org.exa-mple", "org.example Permissions", "org.exämple.x", "org.example\0.x",
                      "org." + String(repeating: "x", count: 252)])
    func invalidInterfaceName(_ name: String) {
        rejects(InterfaceName.validate, name, "interface name")
    }

    @Test(arguments: ["Get", "get_status", "_x", "A1", String(repeating: "m", count: 255)])
    func validMemberName(_ name: String) throws {
        try MemberName.validate(name)
    }

    @Test(arguments: ["", "1Get", "Get.Status", "Get-Status", "Get Status", "Gét", "Get\0",
                      String(repeating: "m", count: 256)])
    func invalidMemberName(_ name: String) {
        rejects(MemberName.validate, name, "member name")
    }

    @Test(arguments: ["org.example.Permissions", ":1.42", ":1.42.7", "org.example-dash.X", "a.b",
                      "org.freedesktop.DBus"])
    func validBusName(_ name: String) throws {
        try BusName.validate(name)
    }

    @Test(arguments: ["", "org", ".org.example", "org..example", "1org.example", "org.example.",
                      "org.example Permissions", "org.ex/ample", ":1.42\0"])
    func invalidBusName(_ name: String) {
        rejects(BusName.validate, name, "bus name")
    }

    @Test func signatureValidation() throws {
        try Signature.validate("")
        try Signature.validate("sa{sv}(ii)")
        try Signature.validateSingle("a{ua{sv}}")
        #expect(busError { () throws(BusError) in try Signature.validateSingle("ss") }
                == BusError(BusError.invalidArgs, "invalid single type \"ss\""))
        #expect(busError { () throws(BusError) in try Signature.validate("a{vs}") }
                == BusError(BusError.invalidArgs, "invalid signature \"a{vs}\""))
        #expect(busError { () throws(BusError) in try Signature.validate("s\0") }
                == BusError(BusError.invalidArgs, "invalid signature \"s\\x00\""))
    }

    @Test func methodCallRejectsBadHeaderFields() {
        #expect(busError { () throws(BusError) in
            _ = try Message.methodCall(destination: nil, path: "bad", interface: nil, member: "M")
        }?.message == "invalid object path \"bad\"")
        #expect(busError { () throws(BusError) in
            _ = try Message.methodCall(destination: "not a name", path: "/", interface: nil, member: "M")
        }?.message == "invalid bus name \"not a name\"")
        #expect(busError { () throws(BusError) in
            _ = try Message.methodCall(destination: nil, path: "/", interface: "nodots", member: "M")
        }?.message == "invalid interface name \"nodots\"")
        #expect(busError { () throws(BusError) in
            _ = try Message.signal(path: "/", interface: "org.example.X", member: "Bad.Member")
        }?.message == "invalid member name \"Bad.Member\"")
    }

    @Test func methodCallHeaderFields() throws {
        let message = try makeCall()
        #expect(message.kind == .methodCall)
        #expect(message.path == "/org/example/Permissions")
        #expect(message.interface == "org.example.Permissions")
        #expect(message.member == "Echo")
        #expect(message.destination == "org.example.Permissions")
        #expect(message.sender == nil)
        #expect(message.asError == nil)
    }
}
