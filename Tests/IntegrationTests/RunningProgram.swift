import Foundation
import PermissionsTestSupport

/// A program that keeps running while a test talks to it (a monitor, an agent):
/// its output lines are collected, its standard input is a pipe, and it is killed
/// when the object goes. With `asUser`, it runs as that uid (and gid) via setpriv;
/// with `environment`, in that environment instead of the test runner's; with
/// `collectingErrors`, its standard error lines are collected too (`errors`).
final class RunningProgram {
    let process = Process()
    let lines: LineCollector
    let errors: LineCollector?
    private let input = Pipe()

    init(_ executable: String, _ arguments: [String], asUser uid: UInt32? = nil,
         environment: [String: String]? = nil, collectingErrors: Bool = false) throws {
        if let uid {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", executable] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
        }
        if let environment { process.environment = environment }
        let out = Pipe()
        process.standardInput = input
        process.standardOutput = out
        let err = collectingErrors ? Pipe() : nil
        if let err { process.standardError = err } else { process.standardError = FileHandle.nullDevice }
        try process.run()
        lines = LineCollector(out.fileHandleForReading)
        errors = err.map { LineCollector($0.fileHandleForReading) }
    }

    deinit {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Writes a line to its standard input.
    func answer(_ text: String) { input.fileHandleForWriting.write((text + "\n").data(using: .utf8)!) }

    var statusChanges: [String] { lines.all.filter { $0.hasPrefix("StatusChanged") } }
}
