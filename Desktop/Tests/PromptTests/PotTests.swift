import Foundation
import PermissionsTestSupport
import Testing

/// The translation template is complete: po/update-pot, run now, writes the
/// committed po/permissions-desktop.pot; and no translatable string interpolates
/// (xgettext, reading Swift as C, would take `\(name)` for part of the msgid).
@Suite struct PotTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    @Test func theTemplateHoldsEveryStringOfTheSources() throws {
        let fresh = try makeTemporaryDirectory("pot") + "/fresh.pot"
        let result = try run(Self.root + "/po/update-pot", [fresh])
        #expect(result.status == 0, "\(result.stderr)")
        let committed = try String(contentsOfFile: Self.root + "/po/permissions-desktop.pot", encoding: .utf8)
        #expect(try String(contentsOfFile: fresh, encoding: .utf8) == committed,
                "po/permissions-desktop.pot is out of date: run Desktop/po/update-pot")
        #expect(committed.contains("msgid \"Always allow\""))
    }

    @Test func noTranslatableStringInterpolates() throws {
        let sources = try FileManager.default.subpathsOfDirectory(atPath: Self.root + "/Sources")
            .filter { $0.hasSuffix(".swift") }
        #expect(!sources.isEmpty)
        for file in sources {
            let text = try String(contentsOfFile: Self.root + "/Sources/" + file, encoding: .utf8)
            for line in text.split(separator: "\n") where line.contains("tr(\"") {
                let literal = line[line.range(of: "tr(\"")!.upperBound...].prefix { $0 != "\"" }
                #expect(!literal.contains("\\("), "\(file): \(line)")
            }
        }
    }
}
