import DBusKit
import Foundation
internal import SystemPrimitives
import Testing
import PermissionsTestSupport

/// DBusKit's connection against a real dbus-daemon: match rules and their results.
@Suite struct DBusKitBusTests {
    let bus: TestBus
    let queue = Queue(label: "dbuskit-bus-test")

    init() throws {
        bus = try TestBus()
    }

    private func attached() throws -> Connection {
        let q = queue
        let address = bus.address
        return try q.sync { try Connection.open(.address(address), queue: q) }
    }

    private static func describe(_ error: BusError?) -> String {
        error.map { "\($0.name): \($0.message)" } ?? "ok"
    }

    /// The rule's arg0 holds a quote, a comma and a backslash: quoted as the
    /// specification says, the bus accepts it and delivers the signal. (Quoted
    /// naively, the quote ends the value and the bus refuses the rule.)
    @Test func ruleWithAQuoteInArg0IsAcceptedAndMatches() throws {
        let value = #"it's, a \ 'test'"#
        let listener = try attached()
        defer { queue.sync { listener.close() } }
        let seen = LineCollector()
        _ = queue.sync {
            listener.subscribe(SignalMatch(interface: "org.example.Test", member: "Quoted", arg0: value),
                               added: { seen.append("added \(Self.describe($0))") }) { message in
                seen.append("signal \(message.arguments().first?.stringValue ?? "-")")
            }
        }
        try seen.wait(what: "AddMatch answered") { !$0.isEmpty }
        #expect(seen.all == ["added ok"])

        let sender = try Connection.open(.address(bus.address))
        // The first would match a rule cut short at the quote ("it").
        for arg0 in ["it", value] {
            try sender.emitSignal(path: "/org/example/Test", interface: "org.example.Test", member: "Quoted",
                                  [.string(arg0)])
        }
        sender.flush()
        try seen.wait(what: "the signal") { $0.count == 2 }
        #expect(seen.all == ["added ok", "signal \(value)"])
    }

    /// A rule the bus refuses (dbus-daemon takes at most 1024 bytes) is reported: to
    /// `added` when given, else to `onError`; unattached, before subscribe returns.
    @Test func aRefusedRuleIsReported() throws {
        let long = SignalMatch(interface: "org.example.Test", arg0: String(repeating: "x", count: 2000))
        let listener = try attached()
        defer { queue.sync { listener.close() } }
        let seen = LineCollector()
        queue.sync {
            listener.onError = { seen.append("onError \(Self.describe($0))") }
            listener.subscribe(long, added: { seen.append("added \(Self.describe($0))") }) { _ in }
            listener.subscribe(long) { _ in }
        }
        try seen.wait(what: "both refusals") { $0.count == 2 }
        for line in seen.all {
            #expect(line.contains("org.freedesktop.DBus.Error.LimitsExceeded"), "\(line)")
            #expect(line.contains("AddMatch type='signal',interface='org.example.Test',arg0='xxx"), "\(line)")
        }
        #expect(Set(seen.all.map { $0.prefix { $0 != " " } }) == ["added", "onError"])

        let unattached = try Connection.open(.address(bus.address))
        var refusal: BusError?
        unattached.subscribe(long, added: { refusal = $0 }) { _ in }
        #expect(refusal?.name == "org.freedesktop.DBus.Error.LimitsExceeded")
    }
}
