import Testing
@testable import PermissionsModel
@testable import PermissionsConfig
import FoundationEssentials

@Suite("Config files")
struct ConfigFilesTests {
    let dir: TempDirectory
    let config: ConfigFiles

    init() throws {
        dir = try TempDirectory()
        config = ConfigFiles(directory: dir.path)
    }

    private func summary(_ entries: [ConfigEntry]) -> [String] {
        entries.map { "[\($0.section)] \($0.key)=\($0.value) @\($0.origin)" }
    }

    @Test func missingDirectoryGivesNoEntries() throws {
        let missing = ConfigFiles(directory: dir.url("does/not/exist"))
        #expect(missing.files.isEmpty)
        #expect(try missing.load().isEmpty)
    }

    @Test func emptyDirectoryGivesNoEntries() throws {
        #expect(config.files.isEmpty)
        #expect(try config.load().isEmpty)
    }

    @Test func mainFileWithOrigins() throws {
        try dir.write("permissions.conf", """
            # Site configuration
            [location]
            enabled=true
            max-accuracy = city

            [notifications]
            enabled=false
            deny=/usr/bin/untrusted;org.spam.App
            """)
        let main = config.mainFile
        #expect(main == dir.path + "/permissions.conf")
        #expect(summary(try config.load()) == [
            "[location] enabled=true @\(main):3",
            "[location] max-accuracy=city @\(main):4",
            "[notifications] enabled=false @\(main):7",
            "[notifications] deny=/usr/bin/untrusted;org.spam.App @\(main):8",
        ])
    }

    @Test func dropInsApplyInNameOrderAndOverride() throws {
        try dir.write("permissions.conf", """
            [location]
            enabled=true
            max-accuracy=city
            [notifications]
            enabled=true
            """)
        try dir.write("permissions.conf.d/20-local.conf", """
            [location]

            max-accuracy=street
            allow=org.gnome.Maps
            """)
        try dir.write("permissions.conf.d/10-site.conf", """
            [location]
            max-accuracy=exact
            [notifications]
            enabled=false
            """)
        // Not configuration: wrong suffix, hidden, or editor leftovers.
        try dir.write("permissions.conf.d/30-ignored.conf.bak", "[location]\nenabled=false\n")
        try dir.write("permissions.conf.d/README", "not a keyfile at all\n")
        try dir.write("permissions.conf.d/.hidden.conf", "[location]\nenabled=false\n")
        try dir.write("permissions.conf.d/40-notes.txt", "[location]\nenabled=false\n")

        let d = config.dropInDirectory
        #expect(config.files == [config.mainFile, d + "/10-site.conf", d + "/20-local.conf"])
        #expect(summary(try config.load()) == [
            "[location] enabled=true @\(config.mainFile):2",
            "[location] max-accuracy=street @\(d)/20-local.conf:3",
            "[notifications] enabled=false @\(d)/10-site.conf:4",
            "[location] allow=org.gnome.Maps @\(d)/20-local.conf:4",
        ])
    }

    @Test func nameOrderIsLexicographic() throws {
        // "10-…" sorts before "9-…", so 9-late.conf applies last.
        try dir.write("permissions.conf.d/9-late.conf", "[a]\nk=from 9\n")
        try dir.write("permissions.conf.d/10-early.conf", "[a]\nk=from 10\n")
        let entries = try config.load()
        #expect(summary(entries) == ["[a] k=from 9 @\(config.dropInDirectory)/9-late.conf:2"])
    }

    @Test func lastOccurrenceInOneFileWins() throws {
        try dir.write("permissions.conf", "[a]\nk=1\nother=x\nk=2\n")
        #expect(summary(try config.load()) == [
            "[a] k=2 @\(config.mainFile):4",
            "[a] other=x @\(config.mainFile):3",
        ])
    }

    @Test func malformedMainFileNamesFileAndLine() throws {
        try dir.write("permissions.conf", """
            [location]
            enabled=true
            junk here
            max-accuracy=city
            """)
        let error = #expect(throws: ConfigFiles.ParseError.self) { try config.load() }
        #expect(error?.file == config.mainFile)
        #expect(error?.line == 3)
        #expect(error?.description.hasPrefix("\(config.mainFile):3: ") == true)
    }

    @Test func malformedDropInNamesTheDropIn() throws {
        try dir.write("permissions.conf", "[location]\nenabled=true\n")
        try dir.write("permissions.conf.d/10-ok.conf", "[location]\nmax-accuracy=city\n")
        try dir.write("permissions.conf.d/20-bad.conf", "# comment\n[notifications]\nenabled=true\n\n  junk here\n")
        let error = #expect(throws: ConfigFiles.ParseError.self) { try config.load() }
        #expect(error?.file == config.dropInDirectory + "/20-bad.conf")
        #expect(error?.line == 5)
    }

    @Test func nonUTF8ValueNamesItsLine() throws {
        try dir.write("permissions.conf", bytes: Array("[location]\nenabled=true\nallow=".utf8) + [0xFF, 0xFE, 0x0A])
        let error = #expect(throws: ConfigFiles.ParseError.self) { try config.load() }
        #expect(error?.file == config.mainFile)
        #expect(error?.line == 3)
        #expect(error?.reason.hasPrefix("[location] allow: ") == true)
    }

    /// GLib returns a value *and* an error for a bad escape; parse() only looks at the
    /// error when the value is NULL, so the malformed value is taken as it is.
    @Test("invalid escape in a value is a parse error", arguments: ["allow=bad\\qescape", "allow=abc\\"])
    func invalidEscape(line: String) throws {
        try dir.write("permissions.conf", "[location]\nenabled=true\n\(line)\n")
        let error = #expect(throws: ConfigFiles.ParseError.self) { try config.load() }
        #expect(error?.file == config.mainFile)
        #expect(error?.line == 3)
    }

    /// PRODUCT.md: "A malformed file is reported with file and line." For these GLib
    /// errors the message quotes no line, and parse() then reports none.
    @Test("malformed file reports the line", arguments: [
        ("enabled=true\n[location]\n", 1),
        ("[location]\nenabled=true\nk[=1\n", 3),
        ("[location]\nenabled=true\n[]\nk=1\n", 3),
    ])
    func unquotedGLibErrors(text: String, line: Int) throws {
        try dir.write("permissions.conf", text)
        let error = #expect(throws: ConfigFiles.ParseError.self) { try config.load() }
        #expect(error?.file == config.mainFile)
        #expect(error?.line == line)
    }

    /// keyLines splits a Swift String on "\n", but "\r\n" is one Character, so a
    /// CRLF file is one long "line" and no key gets a line number.
    @Test func crlfLineEndingsKeepLineNumbers() throws {
        try dir.write("permissions.conf", "[location]\r\nenabled=true\r\nmax-accuracy=city\r\n")
        let entries = try config.load()
        #expect(entries.map(\.value) == ["true", "city"])
        #expect(entries.map(\.origin) == ["\(config.mainFile):2", "\(config.mainFile):3"])
    }

    /// A UTF-8 byte order mark (Notepad writes one) is not part of the first line.
    @Test func byteOrderMarkIsDroppedAndLineNumbersStay() throws {
        try dir.write("permissions.conf", bytes: [0xEF, 0xBB, 0xBF] + Array("[location]\nenabled=false\n".utf8))
        #expect(summary(try config.load()) == ["[location] enabled=false @\(config.mainFile):2"])
        try dir.write("permissions.conf.d/10-bom.conf", bytes: [0xEF, 0xBB, 0xBF] + Array("[a]\nk=1\njunk\n".utf8))
        let error = #expect(throws: ConfigFiles.ParseError.self) { try config.load() }
        #expect(error?.line == 3)
    }

    /// GLib drops the spaces after "=", not those at the end of the line; the host
    /// trims both, spaces and tabs, and nothing inside the value.
    @Test func valuesAreTrimmed() throws {
        try dir.write("permissions.conf", "[location]\nenabled=false \nallow=\t a b ;c\t \nempty=  \n")
        #expect(try config.load().map(\.value) == ["false", "a b ;c", ""])
    }

    /// The copy of the last good configuration reads back as the same settings.
    @Test func renderedEntriesReadBackTheSame() throws {
        let entries = [
            ConfigEntry(section: "location", key: "deny", value: "org.bad.App;/usr/bin/x y", origin: "a:1"),
            ConfigEntry(section: "service", key: "agent-timeout", value: "30", origin: "a:2"),
            ConfigEntry(section: "location", key: "note", value: "back\\slash, tab\tand “quotes” # not a comment",
                        origin: "b:7"),
            ConfigEntry(section: "permissions", key: "declare", value: "contacts;photos", origin: "b:9"),
        ]
        try dir.write("copy.conf", bytes: ConfigFiles.render(entries, comment: "two\nlines"))
        let back = try ConfigFiles.parse(dir.url("copy.conf"))
        #expect(ConfigFiles.sameSettings(back, entries))
        #expect(back.count == entries.count)
        #expect(try String(contentsOfFile: dir.url("copy.conf"), encoding: .utf8).hasPrefix("# two\n# lines\n"))
    }

    @Test func sameSettingsIgnoresOriginsAndOrder() {
        let a = [ConfigEntry(section: "s", key: "k", value: "1", origin: "x:1"),
                 ConfigEntry(section: "t", key: "k", value: "2", origin: "x:2")]
        let b = [ConfigEntry(section: "t", key: "k", value: "2", origin: "y:5"),
                 ConfigEntry(section: "s", key: "k", value: "1", origin: "y:9")]
        #expect(ConfigFiles.sameSettings(a, b))
        #expect(!ConfigFiles.sameSettings(a, [a[0]]))
        #expect(!ConfigFiles.sameSettings(a, [a[0], ConfigEntry(section: "t", key: "k", value: "3", origin: "x:2")]))
    }
}
