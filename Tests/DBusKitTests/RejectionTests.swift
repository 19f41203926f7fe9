import Testing
@testable import DBusKit
#if canImport(Glibc)
import Glibc
#endif

/// Values libdbus would refuse (with an abort, for some) are thrown as `InvalidArgs`
/// before anything is appended.
@Suite("Rejected values")
struct RejectionTests {
    static let rejected: [(String, DBusValue, String)] = [
        ("NUL in a string", .string("a\0b"), "a\\x00b"),
        ("path without slash", .objectPath("no/slash"), "\"no/slash\""),
        ("path with trailing slash", .objectPath("/trailing/"), "\"/trailing/\""),
        ("path with double slash", .objectPath("//double"), "\"//double\""),
        ("empty path", .objectPath(""), "\"\""),
        ("path with a dash", .objectPath("/a-b"), "\"/a-b\""),
        ("path with NUL", .objectPath("/a\0b"), "\"/a\\x00b\""),
        ("unbalanced signature", .signature("a{sv"), "\"a{sv\""),
        ("unknown type code", .signature("z"), "\"z\""),
        ("array without element type", .signature("a"), "\"a\""),
        ("string in an array of int32", .array(elementSignature: "i", [.int32(1), .string("x")]), "'s'"),
        ("int32 in an array of strings", .array(elementSignature: "s", [.int32(1)]), "'i'"),
        ("two types as an element signature", .array(elementSignature: "ss", []), "\"ss\""),
        ("invalid element signature", .array(elementSignature: "{sv}", []), "\"{sv}\""),
        ("arrays nested 33 deep", .array(elementSignature: String(repeating: "a", count: 33) + "y", []),
         "invalid single type"),
        ("bad path inside an array", .array(elementSignature: "o", [.objectPath("/ok"), .objectPath("bad")]),
         "\"bad\""),
        ("NUL string inside a{sv}", .vardict([("k", .string("x\0y"))]), "x\\x00y"),
        ("wrong key type in a{sv}", .dictionary(keySignature: "s", valueSignature: "v",
                                                [.init(.int32(1), .variant(.int32(1)))]), "a{sv}"),
        ("wrong value type in a{ss}", .dictionary(keySignature: "s", valueSignature: "s",
                                                  [.init(.string("k"), .uint32(1))]), "a{ss}"),
        ("container as a dictionary key", .dictionary(keySignature: "as", valueSignature: "s", []), "a{ass}"),
        ("empty structure", .structure([]), "empty structure"),
        ("bad signature inside a variant", .variant(.signature("((")), "\"((\""),
    ]

    @Test("rejected with InvalidArgs", arguments: rejected)
    func rejectedValue(name: String, value: DBusValue, quoted: String) throws {
        let message = try makeCall()
        let error = busError { () throws(BusError) in try message.append([value]) }
        #expect(error?.name == BusError.invalidArgs)
        #expect(error?.message.contains(quoted) == true, "message: \(error?.message ?? "-")")
        // Validation runs before marshalling: nothing half-written is left behind.
        #expect(message.arguments().isEmpty)
        #expect(message.signature == "")
    }

    @Test func aBadValueAfterGoodOnesAppendsNothing() throws {
        let message = try makeCall()
        let error = busError { () throws(BusError) in
            try message.append([.string("fine"), .uint32(1), .objectPath("not a path")])
        }
        #expect(error?.name == BusError.invalidArgs)
        #expect(message.arguments().isEmpty)
        // The message is still usable afterwards.
        try message.append(.string("ok"))
        #expect(message.arguments() == [.string("ok")])
    }

    @Test func exactMessagesForNames() throws {
        let message = try makeCall()
        #expect(busError { () throws(BusError) in try message.append(.objectPath("no/slash")) }
                == BusError(BusError.invalidArgs, "invalid object path \"no/slash\""))
        #expect(busError { () throws(BusError) in try message.append(.signature("a{")) }
                == BusError(BusError.invalidArgs, "invalid signature \"a{\""))
        #expect(busError { () throws(BusError) in
            try message.append(.array(elementSignature: "s", [.int32(1)]))
        } == BusError(BusError.invalidArgs, "array element of type 'i' in an array of 's'"))
    }

    /// Error texts escape the value they quote, so that control characters cannot
    /// forge log lines.
    @Test func nulStringErrorEscapesControlCharacters() throws {
        let message = try makeCall()
        let error = busError { () throws(BusError) in try message.append(.string("x\0\nFORGED LOG LINE")) }
        #expect(error?.name == BusError.invalidArgs)
        #expect(error?.message.unicodeScalars.contains { $0.value < 0x20 } == false,
                "message: \(String(reflecting: error?.message))")
    }

    // Values whose signature passes the per-value checks but breaks libdbus's limits
    // (a signature is at most 255 bytes and 32 levels of structure nesting). The append
    // must throw, not take the process down or hang it (as libdbus would), so each
    // runs in a child process with a watchdog alarm that never fires when it works.

    @Test func variantOfAStructureWithAnOverlongSignatureIsRejected() async {
        await #expect(processExitsWith: .success) {
            alarm(5)
            let message = try makeCall()
            let fields = [DBusValue](repeating: .byte(0), count: 300)
            do {
                try message.append(.variant(.structure(fields)))
            } catch let error as BusError {
                if error.name == BusError.invalidArgs { return }
            } catch {}
            exit(3)  // appended without an error, or the wrong error
        }
    }

    @Test func structureWithAnOverlongSignatureIsRejected() async {
        await #expect(processExitsWith: .success) {
            alarm(5)
            let message = try makeCall()
            let fields = [DBusValue](repeating: .byte(0), count: 300)
            do {
                try message.append(.structure(fields))
            } catch let error as BusError {
                if error.name == BusError.invalidArgs { return }
            } catch {}
            _ = message.signature  // libdbus used to loop here for such a message
            exit(3)
        }
    }

    @Test func moreThan255ArgumentsAreRejected() async {
        await #expect(processExitsWith: .success) {
            alarm(5)
            let message = try makeCall()
            do {
                try message.append([DBusValue](repeating: .byte(0), count: 300))
            } catch let error as BusError {
                if error.name == BusError.invalidArgs { return }
            } catch {}
            exit(3)
        }
    }

    @Test func variantOfTooDeeplyNestedStructuresIsRejected() async {
        await #expect(processExitsWith: .success) {
            alarm(5)
            let message = try makeCall()
            var value = DBusValue.byte(1)
            for _ in 0..<40 { value = .structure([value]) }
            do {
                try message.append(.variant(value))
            } catch let error as BusError {
                if error.name == BusError.invalidArgs { return }
            } catch {}
            exit(3)
        }
    }

    @Test func exactly255ArgumentsAreFine() throws {
        let values = [DBusValue](repeating: .byte(7), count: 255)
        let (decoded, wire) = try roundTrip(values)
        #expect(decoded == values)
        #expect(wire == String(repeating: "y", count: 255))
    }
}
