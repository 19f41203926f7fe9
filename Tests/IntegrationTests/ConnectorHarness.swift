import Foundation
import Testing
import PermissionsTestSupport

/// permissionsd-connector as its unit runs it: root, its capabilities bounded to
/// CAP_DAC_OVERRIDE (`setpriv --bounding-set -all,+dac_override`), listening on a
/// socket of a test directory (`--listen`, mode 0600), following a test runtime
/// root. Its log lines (standard error) are collected; it is killed with the object.
final class TestConnector {
    static let unitBoundingSet = "-all,+dac_override"

    let directory: String
    let socket: String
    let lines: LineCollector
    private let process = Process()

    init(root: String, boundingSet: String = unitBoundingSet) throws {
        directory = try makeTemporaryDirectory("connector")
        socket = directory + "/connector.socket"
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = ["--bounding-set", boundingSet, "--", binDir + "/permissionsd-connector",
                             "--listen", socket, "--user-runtime-root", root, "--verbose"]
        process.environment = ["PATH": "/usr/bin:/bin"]
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        lines = LineCollector(err.fileHandleForReading)
        _ = try lines.next { $0.contains("serving user sockets in \(root)/UID") }
    }

    deinit {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }

    var isRunning: Bool { process.isRunning }

    /// The lines it logged at warning or above ("<3>", "<4>"): its refusals.
    var refusals: [String] { lines.all.filter { $0.hasPrefix("<3>") || $0.hasPrefix("<4>") } }

    /// Its next log line containing `text`.
    @discardableResult
    func waitForLine(_ text: String) throws -> String {
        try lines.next { $0.contains(text) }
    }

    /// One request through Tests/testenv/connector-client.py (its own writing of the
    /// protocol), as root or as `uid`, with the client's options: its one line of
    /// output ("result R", then "fd peer-uid=U type=T"; or "closed").
    func ask(_ options: [String], as uid: UInt32? = nil) throws -> String {
        let r = try run("/usr/bin/python3", [packageRoot + "/Tests/testenv/connector-client.py", socket] + options,
                        asUser: uid)
        #expect(r.status == 0, "connector-client \(options): \(r.stdout) \(r.stderr)")
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "\n", with: "; ")
    }

    /// user `uid`'s pipewire-0, asked for as root.
    func ask(uid: UInt32) throws -> String { try ask(["--uid", String(uid)]) }
}

/// A Unix stream socket listening at `path`, made and served by a process running
/// as `uid` (Python: bind, listen, then wait until it is killed), for the tests
/// that need a server of someone else's.
final class SocketServer {
    let program: RunningProgram

    init(at path: String, as uid: UInt32) throws {
        let script = """
            import socket, sys, time
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(sys.argv[1]); s.listen(4)
            print("listening", flush=True)
            sys.stdin.read()
            """
        program = try RunningProgram("/usr/bin/python3", ["-c", script, path], asUser: uid)
        _ = try program.lines.next { $0 == "listening" }
    }
}

extension TestBus {
    /// GetStatus of `permission` as user `uid` (busctl through setpriv): the reply
    /// line, `s "…"`.
    func status(_ permission: String, as uid: UInt32) throws -> String {
        let r = try run("/usr/bin/busctl", ["--address=\(address)", "call", "org.example.Permissions",
                                            "/org/example/Permissions", "org.example.Permissions", "GetStatus", "s",
                                            permission], asUser: uid)
        #expect(r.status == 0, "GetStatus as \(uid): \(r.stderr)")
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Asks until `permission` reads `expected` for `uid` (a round trip each), with a deadline.
    func waitForStatus(_ permission: String, as uid: UInt32, _ expected: String) throws {
        let deadline = Date().addingTimeInterval(15)
        while try status(permission, as: uid) != "s \"\(expected)\"" {
            guard Date() < deadline else { throw HarnessError(description: "\(permission) for \(uid) not \(expected)") }
        }
    }
}
