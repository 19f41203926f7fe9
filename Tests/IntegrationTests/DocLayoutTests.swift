import Foundation
import Testing
import PermissionsTestSupport

/// The documentation's shape: a README a newcomer reads in minutes, linking every
/// file of doc/; links that lead somewhere; and no references to planning
/// documents or issue numbers in what ships (Sources/, the README, doc/).
@Suite struct DocLayoutTests {
    static func read(_ path: String) throws -> String {
        try String(contentsOfFile: path, encoding: .utf8)
    }

    @Test func theReadmeIsShortAndLinksEveryDocFile() throws {
        let readme = try Self.read(packageRoot + "/README.md")
        let lines = readme.split(separator: "\n", omittingEmptySubsequences: false).count - 1
        #expect(lines <= 250, "README.md has \(lines) lines: move the detail into doc/")
        let docs = try Docs.markdownFiles().dropFirst().map { ($0 as NSString).lastPathComponent }
        #expect(docs.count >= 7)
        for name in docs {
            #expect(readme.contains("](doc/\(name)"), "README.md does not link doc/\(name)")
        }
    }

    /// GitHub's anchor for a heading: lower case, punctuation but - and _ dropped,
    /// spaces as hyphens.
    static func anchor(_ heading: some StringProtocol) -> String {
        String(heading.lowercased().compactMap { c -> Character? in
            if c == " " { return "-" }
            return c.isLetter || c.isNumber || c == "-" || c == "_" ? c : nil
        })
    }

    static func anchors(_ text: String) -> Set<String> {
        var anchors = Set<String>()
        var fenced = false
        for line in text.split(separator: "\n") {
            if line.hasPrefix("```") { fenced.toggle() }
            guard !fenced, line.hasPrefix("#") else { continue }
            anchors.insert(anchor(line.drop { $0 == "#" }.drop { $0 == " " }))
        }
        return anchors
    }

    @Test func everyLinkOfTheDocsLeadsToAFileAndHeadingThatExist() throws {
        var checked = 0
        for file in try Docs.markdownFiles() {
            let text = try Self.read(file)
            let directory = (file as NSString).deletingLastPathComponent
            var rest = Substring(text)
            while let open = rest.range(of: "](") {
                let target = rest[open.upperBound...].prefix { $0 != ")" }
                rest = rest[open.upperBound...]
                if target.contains("://") || target.contains(" ") { continue }
                let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
                let path = parts[0].isEmpty ? file : directory + "/" + parts[0]
                #expect(FileManager.default.fileExists(atPath: path), "\(file): link to \(target): no such file")
                if parts.count == 2, path.hasSuffix(".md"), let linked = try? Self.read(path) {
                    #expect(Self.anchors(linked).contains(String(parts[1])),
                            "\(file): link to \(target): no such heading")
                }
                checked += 1
            }
        }
        #expect(checked >= 50)
    }

    /// What names a planning document or an issue: the product brief, the test
    /// recipes and the style notes the project was built from, and issue numbers.
    static func planningReference(in line: Substring) -> String? {
        let lower = line.lowercased()
        for word in ["product.md", "style.md", "testenv.md", "(issue", "this issue", "issue #"] where lower.contains(word) {
            return word
        }
        if line.contains("TESTENV") { return "TESTENV" }
        var rest = Substring(lower)
        while let hit = rest.range(of: "issue ") {
            if let next = rest[hit.upperBound...].first, next.isNumber { return "issue N" }
            rest = rest[hit.upperBound...]
        }
        return nil
    }

    @Test func planningDocumentsAndIssueNumbersStayOutOfWhatShips() throws {
        #expect(Self.planningReference(in: "as issue 13 said") == "issue N")
        #expect(Self.planningReference(in: "an issue with 2 files") == nil)
        var files = [packageRoot + "/README.md"]
        for tree in ["Sources", "doc"] {
            let root = packageRoot + "/" + tree
            let enumerator = FileManager.default.enumerator(atPath: root)
            while let relative = enumerator?.nextObject() as? String {
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: root + "/" + relative, isDirectory: &isDirectory),
                   !isDirectory.boolValue {
                    files.append(root + "/" + relative)
                }
            }
        }
        #expect(files.count >= 100)
        for file in files {
            guard let text = try? Self.read(file) else { continue }
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                if let found = Self.planningReference(in: line) {
                    Issue.record("\(file):\(number + 1): names a planning document or an issue (\(found)): \(line)")
                }
            }
        }
    }
}
