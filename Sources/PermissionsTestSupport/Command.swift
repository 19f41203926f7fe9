import Foundation

/// What a finished command printed.
public struct CommandResult {
    public let status: Int32
    public let stdout: String
    public let stderr: String

    public init(status: Int32, stdout: String, stderr: String) {
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
    }
}

/// Runs a command to completion. With `asNobody`, it runs as uid/gid 65534 through
/// setpriv, to play a caller who is not an administrator; with `asUser`, as that
/// uid (and the gid of the same number), to play one of several users.
@discardableResult
public func run(_ executable: String, _ arguments: [String], asNobody: Bool = false, asUser: UInt32? = nil,
         environment: [String: String]? = nil, directory: String? = nil) throws -> CommandResult {
    let process = Process()
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    if let uid = asUser ?? (asNobody ? 65534 : nil) {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", executable] + arguments
    } else {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
    }
    if let environment { process.environment = environment }
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = FileHandle.nullDevice
    try process.run()
    // Read both pipes to the end before waiting, so a chatty command cannot block.
    let group = DispatchGroup()
    nonisolated(unsafe) var errData = Data()
    group.enter()
    runBlocking {
        errData = err.fileHandleForReading.readDataToEndOfFile()
        group.leave()
    }
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    group.wait()
    process.waitUntilExit()
    return CommandResult(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                         stderr: String(decoding: errData, as: UTF8.self))
}
