import Foundation
import Testing
import PermissionsTestSupport

// Real components for integration tests, one set per test (the dbus-broker
// util-broker habit): a private dbus-daemon, permissionsd as a real process with
// its own config, state and plugin directories, and real clients (busctl, gdbus,
// permissionsctl). Waiting is always for an event with a deadline, never a sleep.

/// `permissionsctl monitor` as a subscriber. Lines are compared without their
/// " serial=N" part, which `serials` gives separately.
final class Monitor {
    private let process = Process()
    private let output: LineCollector

    /// `broadcast`: only the everyone-level signals (`monitor --broadcast`), as any
    /// match rule sees them; else the test user's own stream (Subscribe).
    init(_ daemon: DaemonUnderTest, broadcast: Bool = false) throws {
        process.executableURL = URL(fileURLWithPath: binDir + "/permissionsctl")
        process.arguments = ["--address", daemon.bus.address, "monitor"] + (broadcast ? ["--broadcast"] : [])
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        output = LineCollector(out.fileHandleForReading)
        // The monitor says "Monitoring …" once its match rules are in force.
        _ = try waitFor { $0.hasPrefix("Monitoring") }
    }

    deinit {
        kill(process.processIdentifier, SIGKILL)  // see TestBus.kill
        process.waitUntilExit()
    }

    private static func withoutSerial(_ line: String) -> String {
        line.range(of: " serial=").map { String(line[..<$0.lowerBound]) } ?? line
    }

    /// Waits for a line (without its serial) matching `predicate`, after the lines
    /// earlier waits returned; returns it.
    @discardableResult
    func waitFor(timeout: TimeInterval = 15, _ predicate: (String) -> Bool) throws -> String {
        Self.withoutSerial(try output.next(timeout: timeout) { predicate(Self.withoutSerial($0)) })
    }

    /// Every line received so far (without serials), consumed or not.
    var all: [String] { output.all.map(Self.withoutSerial) }

    /// The StatusChanged lines received so far (all, including consumed ones).
    var statusChanges: [String] {
        output.all.filter { $0.hasPrefix("StatusChanged") }.map(Self.withoutSerial)
    }

    /// The serial Subscribe returned: the stream's serial before its first signal.
    var subscribedSerial: UInt64 {
        output.all.first.flatMap { line in
            line.range(of: "(serial ").flatMap { UInt64(line[$0.upperBound...].prefix { $0.isNumber }) }
        } ?? 0
    }

    /// The serials of the StatusChanged signals received so far, in order.
    var serials: [UInt64] {
        output.all.compactMap { line in line.range(of: " serial=").flatMap { UInt64(line[$0.upperBound...]) } }
    }
}

/// The line `permissionsctl monitor` prints for StatusChanged(app, permission, status).
func statusLine(app: String, _ permission: String, _ status: String) -> String {
    "StatusChanged app=\(app.isEmpty ? "*" : app) permission=\(permission) status=\(status)"
}
