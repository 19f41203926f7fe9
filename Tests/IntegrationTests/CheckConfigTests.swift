import Foundation
import Testing
import PermissionsTestSupport

/// `permissionsd --check-config`: the configuration checked as the running daemon
/// checks a new one (files, the daemon's own keys, each plugin's `validate`), every
/// problem printed with its file and line, nothing applied; exit 0 or 1.
@Suite struct CheckConfigTests {
    static func check(_ files: [String: String]) throws -> (CommandResult, directory: String, state: String) {
        let directory = try makeTemporaryDirectory("check-config")
        let state = try makeTemporaryDirectory("check-config-state")
        for (name, text) in files {
            let path = directory + "/" + name
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
            try text.write(toFile: path, atomically: true, encoding: .utf8)
        }
        let result = try run(binDir + "/permissionsd", ["--check-config", "--config-dir", directory,
                                                        "--state-dir", state, "--plugin-dir", corePluginDirectory])
        return (result, directory, state)
    }

    @Test func everyProblemIsPrintedWithItsFileAndLine() throws {
        let (result, directory, state) = try Self.check([
            "permissions.conf": "# site settings\n[location]\nenabled=maybe\n\n[service]\nagent-timeout=0\n",
            "permissions.conf.d/10-broken.conf": "[notifications]\njunk\n",
            "permissions.conf.d/20-apps.conf": "[notifications]\nenabled=true\ndeny=not an app id\n",
        ])
        defer {
            try? FileManager.default.removeItem(atPath: directory)
            try? FileManager.default.removeItem(atPath: state)
        }
        #expect(result.status == 1)
        #expect(result.stdout == "")
        let problems = result.stderr.split(separator: "\n").filter { !$0.hasPrefix("<") }.map(String.init)
        #expect(problems.sorted() == [
            // A file that does not parse (GLib's words), the daemon's own key, a plugin's key (its validate).
            "\(directory)/permissions.conf.d/10-broken.conf:2: Key file contains line “junk” which is not a key-value pair, group, or comment",
            "\(directory)/permissions.conf.d/20-apps.conf:3: [notifications] deny=not an app id: invalid app id \"not an app id\"",
            "\(directory)/permissions.conf:3: [location] enabled=maybe: expected true or false",
            "\(directory)/permissions.conf:6: [service] agent-timeout=0: expected 1..3600 seconds",
        ].sorted(), "\(result.stderr)")
        // Nothing applied, nothing written.
        #expect(try FileManager.default.contentsOfDirectory(atPath: state) == [])
    }

    @Test func aValidConfigurationExitsZero() throws {
        let (result, directory, state) = try Self.check([
            "permissions.conf": "[location]\nenabled=true\nmax-accuracy=city\n",
            "permissions.conf.d/50-site.conf": "[notifications]\nenabled=false\nallow=org.example.Chat\n",
        ])
        defer {
            try? FileManager.default.removeItem(atPath: directory)
            try? FileManager.default.removeItem(atPath: state)
        }
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == "\(directory): configuration OK (\(directory)/permissions.conf, "
                + "\(directory)/permissions.conf.d/50-site.conf)\n")
        #expect(try FileManager.default.contentsOfDirectory(atPath: state) == [])
    }

    /// Fail closed: a section no loaded plugin provides (a wrong --plugin-dir, a
    /// plugin not installed) cannot be checked, and a directory that does not exist
    /// holds nothing to check; neither passes. Problems only on stderr: no plugin
    /// start-up lines.
    @Test func whatCannotBeCheckedDoesNotPass() throws {
        let directory = try makeTemporaryDirectory("check-config")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "[location]\nenabled=maybe\n".write(toFile: directory + "/permissions.conf", atomically: true, encoding: .utf8)
        let noPlugins = try run(binDir + "/permissionsd", ["--check-config", "--config-dir", directory,
                                                           "--plugin-dir", directory + "/none"])
        #expect(noPlugins.status == 1)
        #expect(noPlugins.stdout == "")
        #expect(noPlugins.stderr == "\(directory)/permissions.conf:2: [location]: no plugin loaded (from \(directory)/none) "
                + "provides \"location\", and the configuration does not declare it: its keys are not checked\n")
        let missing = try run(binDir + "/permissionsd", ["--check-config", "--config-dir", directory + "/typo",
                                                         "--plugin-dir", corePluginDirectory])
        #expect(missing.status == 1)
        #expect(missing.stderr == "\(directory)/typo: no such directory\n")
    }
    /// Valid entries that no caller can ever match are warned about, with their file
    /// and line, and the check still passes; an app id some kind can produce is not
    /// (a bare name is an app scope's when a desktop file has that name).
    @Test func appIDsNoCallerCanHaveAreWarnings() throws {
        let apps = try makeTemporaryDirectory("check-config-apps")
        defer { try? FileManager.default.removeItem(atPath: apps) }
        let dir = URL(fileURLWithPath: apps).resolvingSymlinksInPath().path
        for script in ["tool.py", "allowed.py"] {
            try "#!/usr/bin/python3\n".write(toFile: dir + "/" + script, atomically: true, encoding: .utf8)
        }
        try FileManager.default.copyItem(atPath: "/usr/bin/true", toPath: dir + "/true")
        try FileManager.default.createSymbolicLink(atPath: dir + "/link", withDestinationPath: "true")
        try FileManager.default.createSymbolicLink(atPath: dir + "/linked-dir", withDestinationPath: dir)
        let python = URL(fileURLWithPath: "/usr/bin/python3").resolvingSymlinksInPath().path
        let (result, directory, state) = try Self.check([
            "permissions.conf": """
                [location]
                allow=firefox;\(dir)/true;\(dir)/allowed.py
                deny=\(dir)/tool.py;\(dir)/link;\(dir)/not-installed-yet;\(dir)/linked-dir/later
                [notifications]
                deny=\(dir);\(python)
                """,
        ])
        defer {
            try? FileManager.default.removeItem(atPath: directory)
            try? FileManager.default.removeItem(atPath: state)
        }
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == "\(directory): configuration OK (\(directory)/permissions.conf)\n")
        let file = directory + "/permissions.conf"
        #expect(result.stderr.split(separator: "\n").map(String.init) == [
            "\(file):2: warning: [location] allow=\(dir)/allowed.py is not an ELF executable: the kernel runs it through "
                + "an interpreter, so it is never an executable's id, and allow= does not count for a script's id; this "
                + "never matches (a user's own grant does count for a script)",
            "\(file):3: warning: [location] deny=\(dir)/link goes through a symbolic link (it resolves to \(dir)/true); "
                + "an app id is a path with every link resolved, so this never matches: write \(dir)/true",
            "\(file):3: warning: [location] deny=\(dir)/linked-dir/later goes through a symbolic link (it resolves to "
                + "\(dir)/later); an app id is a path with every link resolved, so this never matches: write \(dir)/later",
            "\(file):5: warning: [notifications] deny=\(dir) is not a regular file: no executable or script has this "
                + "id, so this never matches",
            "\(file):5: warning: [notifications] deny=\(python) is an interpreter ([identity] interpreters=): this is "
                + "the id of the interpreter only when it runs no script file (-c, -m, standard input); each script has "
                + "an id of its own, its path",
        ])
    }

    /// The daemon says the same when it applies a configuration.
    @Test func theDaemonLogsTheWarnings() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: "[location]\ndeny=/usr/bin/python3\n")
        let python = URL(fileURLWithPath: "/usr/bin/python3").resolvingSymlinksInPath().path
        try daemon.waitForLog("/permissions.conf:2: warning: [location] deny=/usr/bin/python3 goes through a symbolic "
                              + "link (it resolves to \(python))")
    }
}
