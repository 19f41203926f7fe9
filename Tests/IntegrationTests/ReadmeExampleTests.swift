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
