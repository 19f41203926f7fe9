import Foundation
import Testing

/// A fresh directory under /tmp, removed with everything in it when the object goes.
final class TempDirectory {
    let path: String

    init() throws {
        var template = Array("/tmp/permissions-unit-XXXXXX".utf8CString)
        let created = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        path = String(cString: try #require(created))
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// `path` + "/" + `relative`
    func url(_ relative: String) -> String { path + "/" + relative }

    /// Writes `text` to `relative`, creating parent directories.
    func write(_ relative: String, _ text: String) throws {
        try write(relative, bytes: Array(text.utf8))
    }

    func write(_ relative: String, bytes: [UInt8]) throws {
        let full = url(relative)
        let parent = (full as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: full))
    }

    func symlink(_ relative: String, to target: String) throws {
        let full = url(relative)
        let parent = (full as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: full, withDestinationPath: target)
    }

    func contents(_ relative: String = "") throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: relative.isEmpty ? path : url(relative)).sorted()
    }
}

/// The user whose decisions the unit tests store (any uid but (uid_t)-1 would do).
let testUID: UInt32 = 1000

/// Runs the sqlite3 shell on `database` with `sql`; its standard output.
func sqlite3(_ database: String, _ sql: String) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
    process.arguments = [database, sql]
    let out = Pipe()
    process.standardOutput = out
    process.standardError = FileHandle.nullDevice
    try process.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw SQLite3Failed(description: "sqlite3 exited with \(process.terminationStatus) for \(sql)")
    }
    return String(decoding: data, as: UTF8.self)
}

struct SQLite3Failed: Error, CustomStringConvertible {
    let description: String
}
