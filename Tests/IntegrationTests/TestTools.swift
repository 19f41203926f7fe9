import Foundation
import PermissionsTestSupport

/// The C programs of Tests/testenv that tests run, as root or as other users
/// (`PWRemoteTool`, `WPRulesTool`), each built once per test process.
enum TestTool {
    /// Builds Tests/testenv/NAME.c with the pkg-config `packages` into a directory of
    /// its own that every user may enter; returns the program's canonical path (the
    /// app id the daemon gives a program is its executable's canonical path).
    static func build(_ name: String, packages: [String]) throws -> String {
        let directory = try makeTemporaryDirectory("testenv-" + name)
        guard chmod(directory, 0o755) == 0 else { throw HarnessError(description: "chmod \(directory) failed") }
        let flags = try run("/usr/bin/pkg-config", ["--cflags", "--libs"] + packages)
        guard flags.status == 0 else { throw HarnessError(description: "pkg-config \(packages): \(flags.stderr)") }
        let output = directory + "/" + name
        let cc = try run("/usr/bin/cc", ["-O2", "-Wall", "-Werror", "-o", output, packageRoot + "/Tests/testenv/\(name).c"]
                         + flags.stdout.split(whereSeparator: \.isWhitespace).map(String.init))
        guard cc.status == 0 else { throw HarnessError(description: "cc \(name).c: \(cc.stderr)") }
        guard let canonical = realpath(output, nil) else { throw HarnessError(description: "realpath \(output)") }
        defer { free(canonical) }
        return String(cString: canonical)
    }
}

/// Tests/testenv/wprules.c: what WirePlumber 0.5's access.rules make of a client,
/// worked out with PipeWire's own parser and matcher.
enum WPRulesTool {
    private static let built = Result { try TestTool.build("wprules", packages: ["libpipewire-0.3"]) }

    static func path() throws -> String { try built.get() }
}
