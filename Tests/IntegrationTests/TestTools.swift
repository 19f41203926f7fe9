import Foundation
import PermissionsTestSupport

/// The C programs of Tests/testenv that tests run, as root or as other users, each
/// built once per test process (with the pkg-config packages it names) into a
/// directory of its own that every user may read and run from.
enum TestTools {
    /// pwremote.c: an app on a PipeWire connection, OpenPipeWireRemote's or a socket's.
    static func pwremote() throws -> String { try pwremoteBuild.get() }

    /// wprules.c: what WirePlumber 0.5's access.rules make of a client, worked out
    /// with PipeWire's own parser and matcher.
    static func wprules() throws -> String { try wprulesBuild.get() }

    private static let pwremoteBuild = Result {
        try build("pwremote", packages: ["libpipewire-0.3", "gio-2.0", "gio-unix-2.0"])
    }
    private static let wprulesBuild = Result { try build("wprules", packages: ["libpipewire-0.3"]) }

    private static func build(_ name: String, packages: [String]) throws -> String {
        let directory = try makeTemporaryDirectory("testenv-" + name)
        guard chmod(directory, 0o755) == 0 else { throw HarnessError(description: "chmod \(directory) failed") }
        let flags = try run("/usr/bin/pkg-config", ["--cflags", "--libs"] + packages)
        guard flags.status == 0 else { throw HarnessError(description: "pkg-config \(packages): \(flags.stderr)") }
        let program = directory + "/" + name
        let cc = try run("/usr/bin/cc", ["-O2", "-Wall", "-Werror", "-o", program, packageRoot + "/Tests/testenv/\(name).c"]
                         + flags.stdout.split(whereSeparator: \.isWhitespace).map(String.init))
        guard cc.status == 0 else { throw HarnessError(description: "cc \(name).c: \(cc.stderr)") }
        return program
    }
}
