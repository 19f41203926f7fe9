import Foundation
import Testing
import PermissionsTestSupport

/// The documentation's files: the README and every doc/*.md.
enum Docs {
    static func markdownFiles() throws -> [String] {
        let doc = packageRoot + "/doc"
        let names = try FileManager.default.contentsOfDirectory(atPath: doc).filter { $0.hasSuffix(".md") }.sorted()
        return [packageRoot + "/README.md"] + names.map { doc + "/" + $0 }
    }

    /// The text of every fenced block of `language` in a Markdown file, in order.
    static func blocks(_ language: String, in path: String) throws -> [String] {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        var blocks: [String] = []
        var current: [Substring]?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line == "```" + language {
                current = []
            } else if current != nil, line == "```" {
                blocks.append(current!.joined(separator: "\n") + "\n")
                current = nil
            } else {
                current?.append(line)
            }
        }
        return blocks
    }

    /// Every `ini` block of the README and doc/*.md, with the file it is in.
    static func iniBlocks() throws -> [(file: String, text: String)] {
        try markdownFiles().flatMap { file in try blocks("ini", in: file).map { (file, $0) } }
    }
}

/// What a reader copies from the documentation works: every `ini` block of the
/// README and of doc/*.md is a configuration the daemon accepts
/// (`permissionsd --check-config`), and the dbus/permissions.conf that dev-up
/// copies is one too; doc/apps.md's StartRequest snippet in Python runs.
@Suite struct DocExampleTests {
    @Test func everyIniBlockIsAValidConfiguration() throws {
        let blocks = try Docs.iniBlocks()
        // The README's tour and doc/admin.md's configuration examples at least.
        #expect(Set(blocks.map { ($0.file as NSString).lastPathComponent }).isSuperset(of: ["README.md", "admin.md"]))
        let shipped = try String(contentsOfFile: packageRoot + "/dbus/permissions.conf", encoding: .utf8)
        for (file, text) in blocks + [("dbus/permissions.conf", shipped)] {
            let (result, directory, state) = try CheckConfigTests.check(["permissions.conf": text])
            defer {
                try? FileManager.default.removeItem(atPath: directory)
                try? FileManager.default.removeItem(atPath: state)
            }
            #expect(result.status == 0, "\(file):\n\(text)\n\(result.stderr)")
        }
    }

    /// doc/apps.md's Python StartRequest snippet, as written, on the test bus as
    /// its system bus ("location" for "camera", which has no device here): it
    /// subscribes to the Response, asks, waits through the prompt, and prints the
    /// answer; allow-once stores nothing.
    @Test func theStartRequestPythonSnippetRuns() throws {
        let snippets = try Docs.blocks("python", in: packageRoot + "/doc/apps.md").filter { $0.contains("StartRequest") }
        #expect(snippets.count == 1)
        let snippet = try #require(snippets.first).replacingOccurrences(of: "[\"camera\"]", with: "[\"location\"]")
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: "[location]\nenabled=true\n")
        let agent = try TestAgent(bus: bus)
        let directory = try makeTemporaryDirectory("doc-snippet")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try snippet.write(toFile: directory + "/request.py", atomically: true, encoding: .utf8)
        let environment = ProcessInfo.processInfo.environment.merging(["DBUS_SYSTEM_BUS_ADDRESS": bus.address]) { $1 }
        let command = try BackgroundCommand("/usr/bin/python3", [directory + "/request.py"], environment: environment)
        let prompt = try agent.waitForPrompt()
        #expect(prompt.permission == "location" && prompt.reason == "to scan a document")
        agent.answer(prompt, "allow-once")
        let (status, output) = try command.wait()
        #expect(status == 0 && output == "response 0 {'location': 'authorized'}\n", "\(output) \(command.errorOutput)")
        #expect(try daemon.call("ListDecisions", "s", "").stdout == "a(sssxs) 0\n")
    }
}
