import Testing
@testable import DBusKit

/// `ArgumentLimits` read on libdbus's iterator, over messages libdbus marshalled.
@Suite("Argument limits")
struct ArgumentLimitsTests {
    static let limits = ArgumentLimits(maxBytes: 4096, maxElements: 16, maxStringBytes: 64, maxValues: 100,
                                       error: { BusError("org.example.Test.Error.TooBig", $0) })

    private func message(_ values: DBusValue...) throws -> Message {
        let message = try Message.methodCall(destination: nil, path: "/t", interface: "org.example.T", member: "M")
        try message.append(values)
        return message
    }

    private func strings(_ count: Int, length: Int = 4) -> DBusValue {
        .strings((0..<count).map { _ in String(repeating: "x", count: length) })
    }

    @Test func callsWithinEveryLimitPass() throws {
        #expect(try message().exceeds(Self.limits) == nil)
        #expect(try message(.string("location"), .vardict([("reason", .string("to show the map"))]))
            .exceeds(Self.limits) == nil)
        // Exactly at each limit.
        #expect(try message(strings(16)).exceeds(Self.limits) == nil)
        #expect(try message(.string(String(repeating: "s", count: 64))).exceeds(Self.limits) == nil)
    }

    @Test func tooManyBytesAreRefusedFromTheArraysHeader() throws {
        let big = try message(.array(elementSignature: "y", [DBusValue](repeating: .byte(1), count: 5000)))
        #expect(big.exceeds(Self.limits) == "the arguments are 5000 bytes; the limit is 4096")
    }

    @Test func tooManyElementsInOneArrayOrDictionary() throws {
        #expect(try message(.string("a"), strings(17)).exceeds(Self.limits)
                == "argument 2: an array of more than 16 elements; the limit is 16")
        let dict = DBusValue.vardict((0..<17).map { ("k\($0)", .boolean(true)) })
        #expect(try message(dict).exceeds(Self.limits)
                == "argument 1: an array of more than 16 elements; the limit is 16")
    }

    @Test func aStringTooLongAnywhere() throws {
        let long = String(repeating: "z", count: 65)
        #expect(try message(.string(long)).exceeds(Self.limits)
                == "argument 1: a string of more than 64 bytes; the limit is 64")
        // Inside a variant inside a dictionary, and as an object path.
        #expect(try message(.vardict([("reason", .string(long))])).exceeds(Self.limits)
                == "argument 1: a string of more than 64 bytes; the limit is 64")
        #expect(try message(.objectPath("/" + String(repeating: "p", count: 70))).exceeds(Self.limits)
                == "argument 1: a string of more than 64 bytes; the limit is 64")
    }

    @Test func tooManyValuesInAll() throws {
        // 8 arrays of 15 strings: every array within its limit, 128 values in all.
        let nested = DBusValue.array(elementSignature: "as", (0..<8).map { _ in strings(15) })
        #expect(try message(nested).exceeds(Self.limits)
                == "argument 1: more than 100 values in all; the limit is 100")
    }

    @Test func aVariantsContentsCountTowardTheBytes() throws {
        // A variant has no length in its header: its strings are counted as they are read.
        let limits = ArgumentLimits(maxBytes: 100, maxElements: 16, maxStringBytes: 64, maxValues: 100,
                                    error: { BusError("org.example.Test.Error.TooBig", $0) })
        let inner = DBusValue.variant(.structure([.string(String(repeating: "a", count: 60)),
                                                  .string(String(repeating: "b", count: 60))]))
        #expect(try message(inner).exceeds(limits) == "argument 1: more than 100 bytes in all; the limit is 100")
    }
}
