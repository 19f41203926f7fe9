import Testing
@testable import DBusKit

/// Values go through libdbus's real marshaller (`append`) and back (`arguments()`).
@Suite("Marshalling round trips")
struct MarshallingTests {
    /// Every basic type, with its boundary values and its one-letter signature.
    static let basics: [(DBusValue, String)] = [
        (.byte(0), "y"), (.byte(255), "y"),
        (.boolean(true), "b"), (.boolean(false), "b"),
        (.int16(.min), "n"), (.int16(0), "n"), (.int16(.max), "n"),
        (.uint16(0), "q"), (.uint16(.max), "q"),
        (.int32(.min), "i"), (.int32(-1), "i"), (.int32(.max), "i"),
        (.uint32(0), "u"), (.uint32(.max), "u"),
        (.int64(.min), "x"), (.int64(.max), "x"),
        (.uint64(0), "t"), (.uint64(.max), "t"),
        (.double(0), "d"), (.double(-1.5), "d"), (.double(.pi), "d"),
        (.double(.infinity), "d"), (.double(-.infinity), "d"),
        (.double(.greatestFiniteMagnitude), "d"), (.double(.leastNonzeroMagnitude), "d"),
        (.string(""), "s"), (.string("camera"), "s"),
        (.string("héllo wörld ✓ 日本語 🎉"), "s"), (.string(String(Unicode.Scalar(0xFFFF)!) + String(Unicode.Scalar(0xFDD0)!)), "s"),
        (.objectPath("/"), "o"), (.objectPath("/org/example/Permissions"), "o"),
        (.signature(""), "g"), (.signature("a{sv}"), "g"), (.signature("(sssxs)aa{ua{sv}}"), "g"),
    ]

    @Test("basic value survives a round trip", arguments: basics)
    func basicRoundTrip(value: DBusValue, signature: String) throws {
        #expect(value.signature == signature)
        let (decoded, wire) = try roundTrip([value])
        #expect(decoded == [value])
        #expect(wire == signature)
    }

    @Test func negativeZeroKeepsItsSign() throws {
        // -0.0 == 0.0, so equality of the trees alone would not notice a lost sign.
        let (decoded, _) = try roundTrip([.double(-0.0)])
        guard case .double(let d)? = decoded.first else {
            Issue.record("decoded \(decoded)")
            return
        }
        #expect(d == 0 && d.sign == .minus)
    }

    @Test func nanStaysNaN() throws {
        let (decoded, _) = try roundTrip([.double(.nan)])
        guard case .double(let d)? = decoded.first else {
            Issue.record("decoded \(decoded)")
            return
        }
        #expect(d.isNaN)
    }

    @Test func noArgumentsDecodeAsEmpty() throws {
        let message = try makeCall()
        #expect(message.arguments().isEmpty)
        #expect(message.signature == "")
    }

    @Test func severalArgumentsKeepTheirOrder() throws {
        let values: [DBusValue] = [.string("org.gnome.Maps"), .uint32(7), .boolean(true), .objectPath("/a/b")]
        let (decoded, wire) = try roundTrip(values)
        #expect(decoded == values)
        #expect(wire == "subo")
    }

    static let containers: [(String, DBusValue, String)] = [
        ("empty as", .array(elementSignature: "s", []), "as"),
        ("as", .strings(["camera", "", "microphone"]), "as"),
        ("ay", .array(elementSignature: "y", [.byte(0), .byte(1), .byte(255)]), "ay"),
        ("ai", .array(elementSignature: "i", [.int32(.min), .int32(0), .int32(.max)]), "ai"),
        ("ao", .array(elementSignature: "o", [.objectPath("/"), .objectPath("/x/y")]), "ao"),
        ("empty aas", .array(elementSignature: "as", []), "aas"),
        ("aas", .array(elementSignature: "as", [.strings(["a", "b"]), .strings([]), .strings(["c"])]), "aas"),
        ("empty a{sv}", .vardict([]), "a{sv}"),
        ("a{sv}", .vardict([("status", .string("denied")), ("serial", .uint64(42)),
                            ("enabled", .boolean(false)), ("apps", .strings(["org.a", "org.b"]))]), "a{sv}"),
        ("a{ss} in wire order", .stringDictionary([("z", "last letter"), ("a", ""), ("m", "é")]), "a{ss}"),
        ("a{ua{sv}}", .dictionary(keySignature: "u", valueSignature: "a{sv}", [
            .init(.uint32(1), .vardict([("name", .string("front camera"))])),
            .init(.uint32(.max), .vardict([])),
        ]), "a{ua{sv}}"),
        ("a{ys}", .dictionary(keySignature: "y", valueSignature: "s", [.init(.byte(9), .string("nine"))]), "a{ys}"),
        ("(sssxs)", .structure([.string("org.gnome.Maps"), .string("camera"), .string("authorized"),
                                .int64(1_700_000_000_000_000), .string("uid 1000 (:1.42)")]), "(sssxs)"),
        ("a(su)", .array(elementSignature: "(su)", [.structure([.string("a"), .uint32(1)]),
                                                    .structure([.string("b"), .uint32(2)])]), "a(su)"),
        ("aa{sv}", .array(elementSignature: "a{sv}", [.vardict([("k", .int32(1))]), .vardict([])]), "aa{sv}"),
        ("((i)(s))", .structure([.structure([.int32(1)]), .structure([.string("x")])]), "((i)(s))"),
        ("v of int", .variant(.int32(-7)), "v"),
        ("v of as", .variant(.strings(["x", "y"])), "v"),
        ("v of a{sv}", .variant(.vardict([("inner", .variant(.string("deep")))])), "v"),
        ("v of struct", .variant(.structure([.string("s"), .double(2.5)])), "v"),
        ("v of v", .variant(.variant(.variant(.uint16(3)))), "v"),
        ("av", .array(elementSignature: "v", [.variant(.byte(1)), .variant(.strings([]))]), "av"),
    ]

    @Test("container survives a round trip", arguments: containers)
    func containerRoundTrip(name: String, value: DBusValue, signature: String) throws {
        #expect(value.signature == signature)
        let (decoded, wire) = try roundTrip([value])
        #expect(decoded == [value])
        #expect(wire == signature)
    }

    @Test func convenienceAccessorsReadDecodedValues() throws {
        let (decoded, _) = try roundTrip([
            .vardict([("status", .string("denied")), ("serial", .uint64(9)), ("count", .uint32(3)),
                      ("on", .boolean(true)), ("apps", .strings(["a", "b"]))]),
        ])
        let entries = try #require(decoded.first?.stringKeyedEntries)
        #expect(entries.map(\.0) == ["status", "serial", "count", "on", "apps"])
        #expect(entries[0].1.stringValue == "denied")
        #expect(entries[1].1.uint64Value == 9)
        #expect(entries[2].1.uint32Value == 3)
        #expect(entries[3].1.boolValue == true)
        #expect(entries[4].1.stringArray == ["a", "b"])
        #expect(entries[0].1.uint32Value == nil)
    }
}
