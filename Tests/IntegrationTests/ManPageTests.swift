import Foundation
import Testing
import PermissionsTestSupport

/// A man page of doc/man/, read as far as these tests need: its sections, and the
/// text of roff lines with the font escapes and macros taken off.
struct ManPage {
    /// Section name (`.SH`) to its lines, in order.
    let sections: [String: [String]]

    init(_ name: String) throws {
        let text = try String(contentsOfFile: packageRoot + "/doc/man/" + name, encoding: .utf8)
        var sections: [String: [String]] = [:]
        var current = ""
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix(".\\\"") { continue }
            if line.hasPrefix(".SH ") {
                current = Self.text(line)
                continue
            }
            sections[current, default: []].append(line)
        }
        self.sections = sections
    }

    /// One roff line as text: `.BR a b` joins its arguments (alternating fonts),
    /// `.B a b` keeps the spaces; escapes become what they print.
    static func text(_ line: String) -> String {
        var body = Substring(line)
        var join = false
        if line.hasPrefix(".") {
            let macro = line.prefix { $0 != " " }
            body = line.dropFirst(macro.count).drop { $0 == " " }
            join = ["BR", "BI", "IR", "RB", "IB", "RI"].contains(macro.dropFirst())
        }
        var arguments: [String] = []
        var current = ""
        var quoted = false
        for c in body {
            if c == "\"" { quoted.toggle(); continue }
            if c == " ", !quoted {
                if !current.isEmpty { arguments.append(current) }
                current = ""
                continue
            }
            current.append(c)
        }
        if !current.isEmpty || quoted { arguments.append(current) }
        var out = arguments.joined(separator: join ? "" : " ")
        for (escape, printed) in [("\\fB", ""), ("\\fI", ""), ("\\fR", ""), ("\\fP", ""), ("\\-", "-"), ("\\~", " "),
                                  ("\\(aq", "'"), ("\\(dq", "\""), ("\\&", ""), ("\\e", "\\")] {
            out = out.replacingOccurrences(of: escape, with: printed)
        }
        return out
    }

    /// The tag lines of a section's `.TP` paragraphs, as text.
    func tags(_ section: String) -> [String] {
        let lines = sections[section] ?? []
        return lines.indices.filter { lines[$0] == ".TP" && $0 + 1 < lines.count }.map { Self.text(lines[$0 + 1]) }
    }

    /// A section's lines as text, one string.
    func text(_ section: String) -> String {
        (sections[section] ?? []).map(Self.text).joined(separator: "\n")
    }
}

/// The `--word` options a piece of text names.
func longOptions(_ text: some StringProtocol) -> Set<String> {
    var names = Set<String>()
    var rest = Substring(text)
    while let start = rest.range(of: "--") {
        let name = rest[start.upperBound...].prefix { $0.isLetter || $0 == "-" }
        if let first = name.first, first.isLetter { names.insert("--" + name) }
        rest = rest[start.upperBound...].dropFirst(name.count)
    }
    return names
}

/// The man pages in doc/man/ are the one reference for options, subcommands and
/// configuration keys, so they are held to the programs: the options of each
/// page's OPTIONS section are those `--help` lists (permissions-prompt's too),
/// permissionsctl's COMMANDS are its subcommands with their options, the default
/// plugin directories agree, and every key permissions.conf(5) documents is one the
/// daemon reads.
@Suite struct ManPageTests {
    /// The options of `permissionsd --help`: the "--" words before each option
    /// line's description.
    static func helpOptions(_ text: String) -> Set<String> {
        var names = Set<String>()
        for line in text.split(separator: "\n") {
            let trimmed = line.drop { $0 == " " }
            guard trimmed.hasPrefix("-") else { continue }
            let head = trimmed.range(of: "  ").map { trimmed[..<$0.lowerBound] } ?? trimmed
            names.formUnion(longOptions(head))
        }
        return names
    }

    /// The lines of a `Heading:` block of permissionsctl's help, up to the blank line.
    static func helpBlock(_ text: String, _ heading: String) -> [Substring] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(of: Substring(heading)) else { return [] }
        return Array(lines[(start + 1)...].prefix { !$0.isEmpty })
    }

    static func pluginDirectories(_ text: String) -> [String] {
        text.split(whereSeparator: { " \n,()".contains($0) }).map { $0.trimmingSuffix(".;:") }
            .filter { $0.hasSuffix("/lib/permissions/plugins") }
    }

    /// A daemon's `--help` and its man page, whose OPTIONS must be the options the
    /// help lists (at least `minimum` of them, so that a page that lost its options
    /// cannot pass).
    static func checkOptions(of program: String, page name: String, minimum: Int,
                             in directory: String = binDir) throws -> (help: String, page: ManPage) {
        let help = try run(directory + "/" + program, ["--help"])
        #expect(help.status == 0)
        let page = try ManPage(name)
        let documented = page.tags("OPTIONS").reduce(into: Set<String>()) { $0.formUnion(longOptions($1)) }
        #expect(documented.count >= minimum)
        #expect(documented == Self.helpOptions(help.stdout), "\(help.stdout)")
        return (help.stdout, page)
    }

    @Test func permissionsdOptionsAreThoseOfItsHelp() throws {
        let (help, page) = try Self.checkOptions(of: "permissionsd", page: "permissionsd.8", minimum: 10)
        let directories = Self.pluginDirectories(page.text("OPTIONS"))
        #expect(directories == ["<exe>/../lib/permissions/plugins", "/usr/local/lib/permissions/plugins",
                                "/usr/lib/permissions/plugins"])
        #expect(Self.pluginDirectories(help) == directories, "\(help)")
    }

    @Test func permissionsdConnectorOptionsAreThoseOfItsHelp() throws {
        _ = try Self.checkOptions(of: "permissionsd-connector", page: "permissionsd-connector.8", minimum: 5)
    }

    /// The desktop's agent, from Desktop/'s release build (the one InstallTests install).
    @Test func permissionsPromptOptionsAreThoseOfItsHelp() throws {
        let directory = try #require(Installing.desktopReleaseDir,
                                     "run through scripts/test, which makes the desktop package's release build")
        _ = try Self.checkOptions(of: "permissions-prompt", page: "permissions-prompt.1", minimum: 5, in: directory)
    }

    /// The privacy page, from the same build.
    @Test func permissionsSettingsOptionsAreThoseOfItsHelp() throws {
        let directory = try #require(Installing.desktopReleaseDir,
                                     "run through scripts/test, which makes the desktop package's release build")
        _ = try Self.checkOptions(of: "permissions-settings", page: "permissions-settings.1", minimum: 6, in: directory)
    }

    @Test func permissionsctlOptionsAreThoseOfItsHelp() throws {
        let help = try run(binDir + "/permissionsctl", ["--help"])
        #expect(help.status == 0)
        let page = try ManPage("permissionsctl.1")
        let documented = page.tags("OPTIONS").reduce(into: Set<String>()) { $0.formUnion(longOptions($1)) }
        let listed = Self.helpOptions(Self.helpBlock(help.stdout, "Options:").joined(separator: "\n"))
        #expect(documented.count >= 5)
        #expect(documented == listed, "\(help.stdout)")
    }

    /// Subcommand to its options, from lines whose first word is the subcommand.
    static func commands(_ lines: [some StringProtocol]) -> [String: Set<String>] {
        var commands: [String: Set<String>] = [:]
        for line in lines {
            let words = line.split(separator: " ")
            guard let name = words.first, name.allSatisfy({ $0.isLowercase || $0 == "-" }) else { continue }
            let head = line.drop { $0 == " " }
            let synopsis = head.range(of: "  ").map { head[..<$0.lowerBound] } ?? head
            commands[String(name)] = longOptions(synopsis)
        }
        return commands
    }

    @Test func permissionsctlCommandsAreThoseOfItsHelp() throws {
        let help = try run(binDir + "/permissionsctl", ["--help"])
        #expect(help.status == 0)
        // In the help, a subcommand's line is indented by 2; its description by more.
        let listed = Self.commands(Self.helpBlock(help.stdout, "Commands:")
            .filter { $0.hasPrefix("  ") && !$0.hasPrefix("   ") })
        let documented = Self.commands(try ManPage("permissionsctl.1").tags("COMMANDS"))
        #expect(listed.count >= 13, "\(help.stdout)")
        #expect(documented == listed, "\(help.stdout)")
    }

    // MARK: Configuration keys

    /// A value each documented key refuses, so that `--check-config` shows the
    /// daemon (or a plugin) reads the key: an unread key is ignored.
    static let badValues = ["enabled": "maybe", "allow": "not an app id", "deny": "not an app id",
                            "no-agent": "maybe", "max-accuracy": "maybe", "agent-timeout": "0",
                            "declare": "no/such/name", "host-pid": "abc", "interpreters": "two words",
                            "outgoing-calls": "0", "outgoing-calls-per-user": "0", "pending-calls-per-connection": "0",
                            "pending-calls-per-user": "0", "agents-per-user": "0",
                            "requests-per-connection": "0", "requests-per-user": "100001"]

    /// The sections of plugins without a `validate` entry (pipewire, bluetooth):
    /// `--check-config` cannot check their keys, which are checked when the daemon
    /// applies them (permissionsd(8), --check-config).
    static let checkedOnlyWhenApplied: Set = ["camera", "microphone", "bluetooth"]

    /// The keys permissions.conf(5) documents: section to keys. "*" stands for
    /// every permission's section, with the permissions it names.
    static func documentedKeys() throws -> (keys: [String: Set<String>], permissions: [String]) {
        let page = try ManPage("permissions.conf.5")
        var keys: [String: Set<String>] = [:]
        let lines = page.sections["PERMISSION SECTIONS"] ?? []
        // The permissions, bold before "takes:"; then each tag's key.
        var permissions: [String] = []
        for line in lines.prefix(while: { !$0.contains("takes:") }) where line.hasPrefix(".B") || line.hasPrefix(".RB") {
            let word = ManPage.text(line).trimmingCharacters(in: CharacterSet(charactersIn: "(),. "))
            if !word.isEmpty, word.allSatisfy({ $0.isLowercase || $0 == "-" }) { permissions.append(word) }
        }
        keys["*"] = Set(page.tags("PERMISSION SECTIONS").compactMap { $0.split(separator: "=").first.map(String.init) })
        let text = page.text("PERMISSION SECTIONS").replacingOccurrences(of: "\n", with: " ")
        var rest = Substring(text)
        while let also = rest.range(of: "] also takes ") {
            let section = rest[..<also.lowerBound].split(separator: "[").last.map(String.init) ?? ""
            let key = rest[also.upperBound...].prefix { $0 != "=" }
            keys[section, default: []].insert(String(key))
            rest = rest[also.upperBound...]
        }
        for tag in page.tags("OTHER SECTIONS") {
            let parts = tag.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, parts[0].hasPrefix("["), let key = parts[1].split(separator: "=").first else { continue }
            keys[String(parts[0].dropFirst().dropLast()), default: []].insert(String(key))
        }
        return (keys, permissions)
    }

    static func checkConfig(_ text: String) throws -> CommandResult {
        let directory = try makeTemporaryDirectory("man-keys")
        let state = try makeTemporaryDirectory("man-keys-state")
        defer {
            try? FileManager.default.removeItem(atPath: directory)
            try? FileManager.default.removeItem(atPath: state)
        }
        try text.write(toFile: directory + "/permissions.conf", atomically: true, encoding: .utf8)
        // The build directory holds every built plugin: every permission has its reader.
        return try run(binDir + "/permissionsd", ["--check-config", "--config-dir", directory, "--state-dir", state,
                                                  "--plugin-dir", binDir])
    }

    @Test func everyDocumentedKeyIsReadByTheDaemon() throws {
        let (keys, permissions) = try Self.documentedKeys()
        #expect(permissions == ["location", "notifications", "camera", "microphone", "bluetooth", "local-network"])
        #expect(keys["*"] == ["enabled", "allow", "deny", "no-agent"])
        #expect(keys["location"] == ["max-accuracy"])
        #expect(keys["service"] == ["agent-timeout", "outgoing-calls", "outgoing-calls-per-user",
                                    "pending-calls-per-connection", "pending-calls-per-user", "agents-per-user",
                                    "requests-per-connection", "requests-per-user"])
        #expect(keys["permissions"] == ["declare"])
        #expect(keys["identity"] == ["host-pid", "interpreters"])
        // The control: a key nobody reads is ignored, so the check below can fail.
        #expect(try Self.checkConfig("[location]\nno-such-key=maybe\n").status == 0)
        var cases: [(section: String, key: String)] = []
        for (section, names) in keys {
            for key in names {
                cases += section == "*" ? permissions.map { ($0, key) } : [(section, key)]
            }
        }
        for (section, key) in cases {
            let bad = try #require(Self.badValues[key], "permissions.conf(5) documents \(key)=: give it a bad value here")
            let result = try Self.checkConfig("[\(section)]\n\(key)=\(bad)\n")
            if Self.checkedOnlyWhenApplied.contains(section), key != "no-agent" {
                #expect(result.status == 0, "[\(section)] \(key)=\(bad) is refused now: take \(section) off checkedOnlyWhenApplied")
                continue
            }
            #expect(result.status == 1 && result.stderr.contains(key),
                    "[\(section)] \(key)=\(bad) was not refused: does the daemon read \(key)? \(result.stderr)")
        }
    }

    /// The other way round: every key the shipped configuration and the
    /// documentation's examples use is documented.
    @Test func everyKeyUsedInExamplesIsDocumented() throws {
        let (keys, _) = try Self.documentedKeys()
        let shipped = try String(contentsOfFile: packageRoot + "/dbus/permissions.conf", encoding: .utf8)
        var used = 0
        for (file, text) in try Docs.iniBlocks() + [("dbus/permissions.conf", shipped)] {
            var section = ""
            for line in text.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) {
                if line.hasPrefix("#") || line.isEmpty { continue }
                if line.hasPrefix("[") { section = String(line.dropFirst().dropLast()); continue }
                let key = String(line.prefix { $0 != "=" })
                let allowed = ["service", "identity", "permissions"].contains(section)
                    ? keys[section] ?? [] : (keys["*"] ?? []).union(keys[section] ?? [])
                #expect(allowed.contains(key), "\(file): [\(section)] \(key)= is not in permissions.conf(5)")
                used += 1
            }
        }
        #expect(used >= 10)
    }
}

extension Substring {
    func trimmingSuffix(_ characters: String) -> String {
        var s = self
        while let last = s.last, characters.contains(last) { s = s.dropLast() }
        return String(s)
    }
}
