import Foundation
import Testing
import PermissionsTestSupport

/// completion/permissionsctl.bash in a real bash, against the real daemon: what
/// COMPREPLY holds for a command line, as bash-completion would ask.
@Suite struct CompletionTests {
    let bus: TestBus
    let daemon: DaemonUnderTest

    init() throws {
        bus = try TestBus()
        daemon = try DaemonUnderTest(bus: bus)
    }

    /// The completions of the last word of `words` (the program is the built permissionsctl).
    func complete(_ words: [String]) throws -> [String] {
        let quoted = ([binDir + "/permissionsctl"] + words).map { "'" + $0 + "'" }.joined(separator: " ")
        let script = """
            . '\(packageRoot)/completion/permissionsctl.bash'
            COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count)
            _permissionsctl
            printf '%s\\n' "${COMPREPLY[@]}"
            """
        let r = try run("/bin/bash", ["--norc", "-c", script])
        #expect(r.status == 0, "\(r.stderr)")
        return r.stdout.split(separator: "\n").map(String.init).sorted()
    }

    @Test func subcommandsAndOptions() throws {
        #expect(try complete(["gr"]) == ["grant"])
        #expect(try complete(["--se"]) == ["--session"])
        #expect(try complete(["--address", bus.address, "re"]) == ["remotes", "request", "reset"])
        #expect(try complete(["list", "--"]) == ["--all", "--json", "--user"])
        #expect(try complete(["monitor", "--"]) == ["--broadcast", "--json"])
        #expect(try complete(["status", "--"]) == ["--json"])
        #expect(try complete(["plugins", "--"]) == ["--json"])
        #expect(try complete(["do"]) == ["doctor"])
        #expect(try complete(["he"]) == ["help"])
        #expect(try complete(["grant", "--user", "roo"]) == ["root"])
    }

    /// Every subcommand --help lists is completed, and nothing else.
    @Test func everySubcommandOfTheHelp() throws {
        let help = try run(binDir + "/permissionsctl", ["--help"])
        let listed = ManPageTests.commands(ManPageTests.helpBlock(help.stdout, "Commands:")
            .filter { $0.hasPrefix("  ") && !$0.hasPrefix("   ") })
        #expect(listed.count >= 13, "\(help.stdout)")
        #expect(try complete([""]) == listed.keys.sorted())
    }

    @Test func permissionNamesComeFromTheRunningService() throws {
        let all = try complete(["--address", bus.address, "request", ""])
        #expect(all == ["location", "notifications"], "\(all)")  // the plugins DaemonUnderTest loads
        #expect(try complete(["--address", bus.address, "grant", "org.example.App", "lo"]) == ["location"])
        // No service on the bus: nothing offered, no error.
        #expect(try complete(["--address", "unix:path=/nonexistent", "request", ""]) == [])
    }

    @Test func appIdsComeFromStoredDecisions() throws {
        #expect(try daemon.ctl("grant", "org.example.Kept", "location").status == 0)
        #expect(try daemon.ctl("deny", "/usr/bin/kept", "notifications").status == 0)
        #expect(try complete(["--address", bus.address, "reset", ""]) == ["/usr/bin/kept", "org.example.Kept"])
        #expect(try complete(["--address", bus.address, "grant", "org"]) == ["org.example.Kept"])
    }
}
