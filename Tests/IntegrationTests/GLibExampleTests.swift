import Foundation
import Glibc
import PermissionsTestSupport
import Testing

/// The C/GLib example app of dbus/examples: built with its Makefile (proxy from
/// gdbus-codegen over the interface XML), run against the real daemon.
@Suite struct GLibExampleTests {
    let bus: TestBus
    let daemon: DaemonUnderTest

    init() throws {
        bus = try TestBus()
        daemon = try DaemonUnderTest(bus: bus)
    }

    /// Builds the example in a fresh directory; returns the program's resolved path.
    static func build() throws -> String { try buildGLibExample() }

    /// The example running on the test bus as its session bus, its output collected.
    final class Example {
        let process = Process()
        let output: LineCollector

        init(_ program: String, bus: TestBus, arguments: [String] = []) throws {
            process.executableURL = URL(fileURLWithPath: program)
            process.arguments = arguments
            process.environment = ProcessInfo.processInfo.environment.merging(
                ["DBUS_SESSION_BUS_ADDRESS": bus.address]) { $1 }
            let out = Pipe()
            process.standardOutput = out
            process.standardError = out
            try process.run()
            output = LineCollector(out.fileHandleForReading)
        }

        @discardableResult
        func next(_ line: String) throws -> String { try output.next { $0 == line } }

        deinit {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    @Test func buildsPrintsItsStatusAndEachChange() throws {
        let program = try Self.build()
        let example = try Example(program, bus: bus)
        _ = try example.output.next { $0.hasPrefix("subscribed to :") }
        try example.next("location: not-determined")
        try example.next("notifications: not-determined")
        // Its own decision (its stream), then an everyone-level change (broadcast).
        #expect(try daemon.ctl("grant", program, "location").status == 0)
        try example.next("location: authorized")
        try daemon.writeConfig("[notifications]\nenabled=false\n")
        try example.next("notifications: disabled")
        // Another app's decision is not this app's change.
        #expect(try daemon.ctl("deny", "/usr/bin/other", "notifications").status == 0)
        try daemon.writeConfig("")
        try example.next("notifications: not-determined")
        #expect(example.output.all.filter { !$0.hasPrefix("subscribed") } == [
            "location: not-determined", "notifications: not-determined", "location: authorized",
            "notifications: disabled", "notifications: not-determined"])
    }

    /// Its request is a StartRequest whose answer comes as the handle's Response.
    @Test func requestsThroughStartRequestAndItsResponse() throws {
        let program = try Self.build()
        let agent = try TestAgent(bus: bus)
        let example = try Example(program, bus: bus, arguments: ["--request", "location", "to test"])
        let prompt = try agent.waitForPrompt()
        #expect(prompt.app == program)
        #expect(prompt.reason == "to test")
        agent.answer(prompt, "allow-once")
        try example.next("request location: authorized")
        // Then a dismissal, told apart from an answer.
        let again = try Example(program, bus: bus, arguments: ["--request", "notifications"])
        agent.answer(try agent.waitForPrompt(2), "dismiss")
        try again.next("request notifications: not-determined (dismissed)")
    }
}
