// How every benchmark stops when it cannot go on: one message, every child it
// started killed, its directory removed, one exit status.
import Foundation

/// "permissions-bench COMMAND", the prefix of every failure message.
let benchCommand: String = (["permissions-bench"] + CommandLine.arguments.dropFirst().prefix(1)).joined(separator: " ")

/// Prints `message`, kills every child still running and removes the run's
/// directory (exit skips `defer`, and the children would outlive the bench), then
/// exits with `code` (2: a usage error). Callable from any thread.
func fail(_ message: String, code: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data((benchCommand + ": " + message + "\n").utf8))
    Children.shared.killAll()
    exit(code)
}
