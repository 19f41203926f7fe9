import Foundation
import Testing
import PermissionsTestSupport

/// `permissionsctl agent`, driven through its standard input like a person.
@Suite struct TerminalAgentTests {
    @Test func answersFromStandardInput() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus)
        let agent = Process()
        agent.executableURL = URL(fileURLWithPath: binDir + "/permissionsctl")
        agent.arguments = ["--address", bus.address, "agent"]
        let input = Pipe(), output = Pipe()
        agent.standardInput = input
        agent.standardOutput = output
        agent.standardError = FileHandle.nullDevice
        try agent.run()
        defer { kill(agent.processIdentifier, SIGKILL); agent.waitUntilExit() }
        let lines = LineCollector(output.fileHandleForReading)
        #expect(try lines.next { $0.hasPrefix("Agent registered at /org/example/PermissionsAgent") } != "")

        for (answer, permission, expected, stored) in [("o\n", "location", "authorized", false),
                                                       ("\n", "location", "not-determined", false),
                                                       ("d\n", "notifications", "denied", true),
                                                       ("a\n", "location", "authorized", true)] {
            let request = try daemon.requestInBackground(permission, reason: "testing")
            #expect(try lines.next { $0.hasPrefix("Prompt ") && $0.hasSuffix("/usr/bin/busctl asks for \(permission)") } != "")
            #expect(try lines.next { $0 == "  reason: testing" } != "")
            input.fileHandleForWriting.write(answer.data(using: .utf8)!)
            #expect(try request.wait().1 == "s \"\(expected)\"\n")
            let list = try daemon.call("ListDecisions", "s", "/usr/bin/busctl").stdout
            #expect(list.contains("\"\(permission)\" \"\(expected)\"") == stored, "\(answer) -> \(list)")
        }
    }
}

