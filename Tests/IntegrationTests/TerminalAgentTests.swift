import Foundation
import Testing

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
        let lines = LineReader(output.fileHandleForReading)
        #expect(try lines.waitFor { $0.hasPrefix("Agent registered at /org/example/PermissionsAgent") } != "")

        for (answer, permission, expected, stored) in [("o\n", "location", "authorized", false),
                                                       ("\n", "location", "not-determined", false),
                                                       ("d\n", "notifications", "denied", true),
                                                       ("a\n", "location", "authorized", true)] {
            let request = try daemon.requestInBackground(permission, reason: "testing")
            #expect(try lines.waitFor { $0.hasPrefix("Prompt ") && $0.hasSuffix("/usr/bin/busctl asks for \(permission)") } != "")
            #expect(try lines.waitFor { $0 == "  reason: testing" } != "")
            input.fileHandleForWriting.write(answer.data(using: .utf8)!)
            #expect(try request.wait().1 == "s \"\(expected)\"\n")
            let list = try daemon.call("ListDecisions", "s", "/usr/bin/busctl").stdout
            #expect(list.contains("\"\(permission)\" \"\(expected)\"") == stored, "\(answer) -> \(list)")
        }
    }
}

/// Lines from a pipe, waited for with a deadline.
final class LineReader: @unchecked Sendable {
    // @unchecked Sendable: `lines` is only touched under `condition`'s lock.
    private let condition = NSCondition()
    private var lines: [String] = []
    private var consumed = 0

    init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            var pending = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...newline)
                    condition.lock()
                    lines.append(line)
                    condition.broadcast()
                    condition.unlock()
                }
            }
        }
    }

    func waitFor(timeout: TimeInterval = 15, _ predicate: (String) -> Bool) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let index = lines[consumed...].firstIndex(where: predicate) {
                consumed = index + 1
                return lines[index]
            }
            if !condition.wait(until: deadline) {
                throw HarnessError(description: "no matching line within \(timeout) s; saw: \(lines)")
            }
        }
    }
}
