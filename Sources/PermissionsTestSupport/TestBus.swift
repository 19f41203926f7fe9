import Foundation

/// A private dbus-daemon that any local user may connect to (so tests can call as
/// an unprivileged user). `type` "system" makes a stand-in system bus;
/// `restartable` puts its socket at a fixed path, so that it can be killed and
/// started again at the same address. `diesWithParent` starts it through `setpriv
/// --pdeathsig KILL`, so that even a process that exits without cleaning up (a
/// bench failing) leaves no bus behind. `services` is a directory of activation
/// files (`<servicedir>`): the bus starts what they name when a call or
/// `StartServiceByName` asks for the name. `limits` are dbus-daemon's `<limit>`
/// elements (its built-in ones allow a user 256 connections). `configuration`, given the bus's
/// directory (removed with the bus) and its `<listen>` address, makes the bus's
/// configuration instead of the permissive one (a bus with a real system bus's
/// policy).
public final class TestBus {
    public let directory: String
    public private(set) var address = ""
    private let restartable: Bool
    private let diesWithParent: Bool
    private var process: Process?

    public init(type: String = "session", restartable: Bool = false, diesWithParent: Bool = false,
                services: String? = nil, limits: [String: Int] = [:],
                configuration: ((_ directory: String, _ listen: String) throws -> String)? = nil) throws {
        directory = try makeTemporaryDirectory("permissions-\(type)-bus")
        self.restartable = restartable
        self.diesWithParent = diesWithParent
        chmod(directory, 0o755)
        let listen = restartable ? "unix:path=\(directory)/bus_socket" : "unix:dir=\(directory)"
        let config = try configuration?(directory, listen) ?? """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>\(type)</type>
              <listen>\(listen)</listen>
              <auth>EXTERNAL</auth>
              \(services.map { "<servicedir>\($0)</servicedir>" } ?? "")
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
                <allow user="*"/>
              </policy>
              \(limits.sorted { $0.key < $1.key }.map { "<limit name=\"\($0.key)\">\($0.value)</limit>" }.joined())
            </busconfig>
            """
        try config.write(toFile: directory + "/bus.conf", atomically: true, encoding: .utf8)
        try start()
    }

    /// Starts the bus daemon; returns once it listens (it prints its address then).
    public func start() throws {
        precondition(process == nil, "the bus is running")
        if restartable { try? FileManager.default.removeItem(atPath: directory + "/bus_socket") }  // left by a SIGKILL
        let process = Process()
        let daemon = ["/usr/bin/dbus-daemon", "--nofork", "--config-file=\(directory)/bus.conf", "--print-address=1"]
        let command = diesWithParent ? ["/usr/bin/setpriv", "--pdeathsig", "KILL"] + daemon : daemon
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice  // "Failed to set fd limit" noise
        try process.run()
        self.process = process
        var line = Data()
        while true {
            let byte = out.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty { throw HarnessError(description: "dbus-daemon exited before printing its address") }
            if byte.first == UInt8(ascii: "\n") { break }
            line.append(byte)
        }
        // With a fixed socket, the same address every time (without the guid, which changes).
        address = restartable ? "unix:path=\(directory)/bus_socket" : String(decoding: line, as: UTF8.self)
    }

    /// SIGKILL (children of the test runner inherit its blocked SIGTERM): every
    /// client sees its connection drop.
    public func kill() {
        guard let process else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        self.process = nil
    }

    /// The bus daemon's process id while it runs.
    public var processIdentifier: Int32? { process?.processIdentifier }

    /// The test runner's environment with this bus as the system bus.
    public var asSystemBusEnvironment: [String: String] {
        ProcessInfo.processInfo.environment.merging(["DBUS_SYSTEM_BUS_ADDRESS": address]) { $1 }
    }

    deinit {
        kill()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
