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

    /// A line piped in before any prompt answers nothing: not the next prompt, of
    /// whatever app (it would have stored "allow-always"). A reason's bidi override
    /// is shown escaped.
    @Test func inputBeforeAPromptIsDropped() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus)
        let agent = try RunningProgram(binDir + "/permissionsctl", ["--address", bus.address, "agent"])
        _ = try agent.lines.next { $0.hasPrefix("Agent registered at ") }
        agent.answer("a")
        _ = try agent.lines.next { $0 == "Input ignored: no prompt is open" }
        let request = try daemon.requestInBackground("notifications", reason: "see \u{202E}txt.exe")
        _ = try agent.lines.next { $0.hasPrefix("Prompt ") }
        #expect(try agent.lines.next { $0.hasPrefix("  reason: ") } == "  reason: see \\u{202E}txt.exe")
        agent.answer("d")
        #expect(try request.wait().1 == "s \"denied\"\n")
        #expect(try daemon.call("ListDecisions", "s", "").stdout.contains("\"notifications\" \"denied\""))
    }

    /// In a terminal, what was typed before the prompt appeared is flushed: "a"
    /// typed (no newline yet), then the prompt, then "d": the answer is deny, not
    /// the line "ad". Driven through a pty by Python's pty module.
    @Test func typedAheadInputIsFlushedInATerminal() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus)
        let driver = """
            import os, pty, sys
            pid, fd = pty.fork()
            if pid == 0:
                os.execv(sys.argv[1], sys.argv[1:])
            seen = b""
            def wait_for(text):
                global seen
                while text not in seen:
                    chunk = os.read(fd, 4096)
                    if not chunk:
                        sys.exit(1)
                    seen += chunk
                    sys.stdout.write(chunk.decode(errors="replace")); sys.stdout.flush()
            wait_for(b"waiting for prompts")
            os.write(fd, b"a")
            print("\\nTYPED AHEAD", flush=True)
            wait_for(b"to dismiss:")
            os.write(fd, b"d\\n")
            wait_for(b": deny")
            print("\\nDONE", flush=True)
            """
        let agent = try RunningProgram("/usr/bin/python3", ["-c", driver, binDir + "/permissionsctl",
                                                            "--address", bus.address, "agent"])
        _ = try agent.lines.next { $0 == "TYPED AHEAD" }
        let request = try daemon.requestInBackground("location")
        #expect(try request.wait().1 == "s \"denied\"\n")
        _ = try agent.lines.next { $0 == "DONE" }
    }

    /// The daemon restarts with a prompt open: the agent drops it, registers with the
    /// new daemon, and the next answer goes to the new prompt.
    @Test func promptsOfAServiceThatLeftAreDropped() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus)
        let agent = try RunningProgram(binDir + "/permissionsctl", ["--address", bus.address, "agent"])
        _ = try agent.lines.next { $0.hasPrefix("Agent registered at ") }
        let first = try daemon.requestInBackground("location")
        let prompt = try agent.lines.next { $0.hasPrefix("Prompt ") }
        daemon.kill()
        #expect(try first.wait().0 != 0)  // the caller hears the service go
        let id = prompt.dropFirst("Prompt ".count).prefix { $0 != ":" }
        _ = try agent.lines.next { $0 == "Prompt \(id) dropped: the service left" }
        try daemon.start()
        _ = try agent.lines.next { $0.hasPrefix("Agent registered at ") }
        let second = try daemon.requestInBackground("notifications")
        _ = try agent.lines.next { $0.hasPrefix("Prompt ") && $0.hasSuffix("asks for notifications") }
        agent.answer("d")
        #expect(try second.wait().1 == "s \"denied\"\n")
    }
}
