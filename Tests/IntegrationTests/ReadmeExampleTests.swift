import Foundation
import Testing
import PermissionsTestSupport

/// What a newcomer copies from the README works: every `ini` block of README.md
/// is a configuration the daemon accepts (`permissionsd --check-config`), and the
/// dbus/permissions.conf that dev-up copies is one too.
@Suite struct ReadmeExampleTests {
    /// The text of every ```ini fenced block of the README, in order.
    static func iniBlocks() throws -> [String] {
        let readme = try String(contentsOfFile: packageRoot + "/README.md", encoding: .utf8)
        var blocks: [String] = []
        var current: [Substring]?
        for line in readme.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line == "```ini" {
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

    @Test func everyIniBlockIsAValidConfiguration() throws {
        let blocks = try Self.iniBlocks()
        #expect(blocks.count >= 2)
        let shipped = try String(contentsOfFile: packageRoot + "/dbus/permissions.conf", encoding: .utf8)
        for text in blocks + [shipped] {
            let (result, directory, state) = try CheckConfigTests.check(["permissions.conf": text])
            defer {
                try? FileManager.default.removeItem(atPath: directory)
                try? FileManager.default.removeItem(atPath: state)
            }
            #expect(result.status == 0, "\(text)\n\(result.stderr)")
        }
    }
}

/// `permissionsd --help` and the README's "permissionsd options" agree: the same
/// options, and the same default plugin directories.
@Suite struct ReadmeOptionsTests {
    /// The README's fenced block under "## permissionsd options".
    static func readmeOptions() throws -> String {
        let readme = try String(contentsOfFile: packageRoot + "/README.md", encoding: .utf8)
        let section = try #require(readme.range(of: "## permissionsd options\n"))
        let rest = readme[section.upperBound...]
        let start = try #require(rest.range(of: "```\n"))
        let end = try #require(rest[start.upperBound...].range(of: "```"))
        return String(rest[start.upperBound..<end.lowerBound])
    }

    /// The options an option line names: the "--" words before its description.
    static func options(_ text: String) -> Set<String> {
        var names = Set<String>()
        for line in text.split(separator: "\n") {
            let trimmed = line.drop { $0 == " " }
            guard trimmed.hasPrefix("-") else { continue }
            let head = trimmed.range(of: "   ").map { trimmed[..<$0.lowerBound] } ?? trimmed
            names.formUnion(head.split(whereSeparator: { " |,".contains($0) }).filter { $0.hasPrefix("--") }
                .map(String.init))
        }
        return names
    }

    static func pluginDirectories(_ text: String) -> [String] {
        text.split(whereSeparator: { " \n,()".contains($0) }).filter { $0.hasSuffix("/lib/permissions/plugins") }
            .map(String.init)
    }

    @Test func helpAndReadmeAgree() throws {
        let help = try run(binDir + "/permissionsd", ["--help"])
        #expect(help.status == 0)
        let readme = try Self.readmeOptions()
        #expect(Self.options(help.stdout) == Self.options(readme), "\(help.stdout)\n\(readme)")
        #expect(Self.pluginDirectories(help.stdout) == Self.pluginDirectories(readme))
        #expect(Self.pluginDirectories(readme) == ["<exe>/../lib/permissions/plugins",
                                                   "/usr/local/lib/permissions/plugins", "/usr/lib/permissions/plugins"])
    }
}
