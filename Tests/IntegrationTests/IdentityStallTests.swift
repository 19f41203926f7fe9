import Foundation
import Testing
import PermissionsTestSupport

/// A caller whose own files never answer: its root directory is a FUSE file system
/// that leaves every request but the root's attributes unanswered (Tests/testenv/
/// stallfs.c), which is what an app can do with a FUSE mount of its own in a user
/// namespace. The daemon reads .flatpak-info through /proc/PID/root, so its read of
/// that caller's identity stalls for good; everyone else must still be served.
@Suite(.enabled(if: getuid() == 0 && access("/dev/fuse", R_OK | W_OK) == 0,
                "mounting the stalling FUSE file system needs root and /dev/fuse"))
struct IdentityStallTests {
    @Test func aCallerWhoseFilesNeverAnswerGetsUnknownCallerAndOthersAreServed() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: "[location]\nenabled=true\n")
        let pid = try #require(daemon.processIdentifier)
        let fs = try StallFS()
        // First, so that a daemon whose queue stalls (the fault) can still stop.
        defer { fs.stop() }
        // Identified before anything stalls: its identity is cached.
        let known = try ScriptedCaller(bus: bus)
        #expect(try known.call() == "ok not-determined")

        let stuck = try ScriptedCaller(bus: bus)
        try stuck.chroot(fs.mountpoint)
        stuck.startCall()
        try fs.waitForStalls(1, by: pid)
        // While the daemon's read of its files waits, everyone else is served: new
        // callers and known ones.
        for _ in 0..<3 {
            #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"not-determined\"\n")
        }
        #expect(try known.call() == "ok not-determined")
        let refused = try stuck.reply()
        #expect(refused.hasPrefix("error org.example.Permissions.Error.UnknownCaller "), "\(refused)")
        #expect(refused.contains(stuck.uniqueName) && refused.contains("identity did not resolve within 1 s"),
                "\(refused)")

        // Four more such callers: three take the other resolver threads and stall
        // them too; the fourth finds every thread held and waits for one.
        let more = try (0..<4).map { _ in
            let caller = try ScriptedCaller(bus: bus)
            try caller.chroot(fs.mountpoint)
            caller.startCall()
            return caller
        }
        try fs.waitForStalls(4, by: pid)
        for caller in more {
            #expect(try caller.reply().contains("identity did not resolve within 1 s"))
        }
        #expect(fs.stalls(by: pid) == 4, "more than 4 identity reads were started")
        // Every thread is stuck: a new caller is refused after the deadline; a known
        // caller is still served.
        let refusedNew = try daemon.call("GetStatus", "s", "location")
        #expect(refusedNew.status != 0)
        #expect(refusedNew.stderr.contains("identity did not resolve within 1 s"), "\(refusedNew.stderr)")
        #expect(try known.call() == "ok not-determined")

        // The file system goes: the stuck reads fail, their threads come back, and
        // new callers are identified again.
        fs.stop()
        #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"not-determined\"\n")
        #expect(daemon.isRunning)
        #expect(daemon.log.contains("identity did not resolve within 1 s"))
    }

    /// A stop while a caller's identity read is stuck: the caller is answered
    /// Cancelled and the daemon leaves the bus. The process finishes exiting only
    /// once the file system answers or goes: a thread waiting for a FUSE request the
    /// server has already read cannot be killed (the kernel waits for the answer).
    @Test func sigtermWhileAnIdentityReadIsStuckAnswersCancelled() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: "[location]\nenabled=true\n")
        let pid = try #require(daemon.processIdentifier)
        let fs = try StallFS()
        defer { fs.stop() }
        let watcher = try NameWatcher(bus: bus)
        let stuck = try ScriptedCaller(bus: bus)
        try stuck.chroot(fs.mountpoint)
        stuck.startCall()
        try fs.waitForStalls(1, by: pid)

        kill(pid, SIGTERM)  // well within the 1 s deadline of the identity read
        let answer = try stuck.reply()
        #expect(answer.hasPrefix("error org.example.Permissions.Error.Cancelled "), "\(answer)")
        try watcher.waitForLoss(timeout: 10)
        fs.stop()
        let ending = daemon.waitForExit(timeout: 10)
        #expect(ending == .init(reason: .exit, status: 0), "\(ending?.description ?? "still running")")
    }

    /// The old daemon lingers after a stop while its thread is stuck on the FUSE
    /// file system (an `_exit`ed process keeps its fd table while a thread waits in
    /// the kernel), but it closed the store first: its EXCLUSIVE lock is gone, and a
    /// new daemon on the same state directory starts and has every decision.
    @Test func aDaemonLingeringOnAStuckReadDoesNotHoldTheStore() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: "[location]\nenabled=true\n")
        let old = try #require(daemon.processIdentifier)
        #expect(try daemon.ctl("deny", "org.example.Kept", "location").status == 0)
        let fs = try StallFS()
        defer { fs.stop() }
        let watcher = try NameWatcher(bus: bus)
        let stuck = try ScriptedCaller(bus: bus)
        try stuck.chroot(fs.mountpoint)
        stuck.startCall()
        try fs.waitForStalls(1, by: old)

        kill(old, SIGTERM)
        try watcher.waitForLoss(timeout: 10)
        // Still there: its stuck thread waits for the file system, which never answers.
        #expect(kill(old, 0) == 0)
        let held = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(old)/fd")) ?? []).compactMap {
            try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(old)/fd/\($0)")
        }.filter { $0.contains("decisions.sqlite") }
        #expect(held.isEmpty, "the stopped daemon still holds \(held)")

        try daemon.start()
        #expect(try daemon.call("GetStatusForApp", "ss", "org.example.Kept", "location").stdout == "s \"denied\"\n")
        #expect(kill(old, 0) == 0, "the old daemon finished exiting: the test proved nothing")
        fs.stop()
        daemon.stop()
    }
}

/// Tests/testenv/stallfs.c, built and mounted on a fresh directory.
final class StallFS {
    let directory: String
    let mountpoint: String
    private let process = Process()
    private let output: LineCollector
    private var stopped = false

    init() throws {
        directory = try makeTemporaryDirectory("stallfs")
        mountpoint = directory + "/mnt"
        let built = try run("/usr/bin/cc", ["-Wall", "-Werror", "-o", directory + "/stallfs",
                                            packageRoot + "/Tests/testenv/stallfs.c"])
        guard built.status == 0 else { throw HarnessError(description: "cc stallfs.c: \(built.stderr)") }
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: false)
        process.executableURL = URL(fileURLWithPath: directory + "/stallfs")
        process.arguments = [mountpoint]
        let out = Pipe()
        process.standardOutput = out
        process.standardInput = FileHandle.nullDevice
        try process.run()
        output = LineCollector(out.fileHandleForReading)
        try output.next(timeout: 10) { $0 == "mounted" }
    }

    /// Requests left unanswered that came from threads of process `pid` (another
    /// process wandering into the mount does not count).
    func stalls(by pid: Int32) -> Int { Self.stalls(in: output.all, by: pid) }

    func waitForStalls(_ count: Int, by pid: Int32) throws {
        try output.wait(timeout: 15, what: "\(count) stalled requests from \(pid)") { Self.stalls(in: $0, by: pid) >= count }
    }

    private static func stalls(in lines: [String], by pid: Int32) -> Int {
        lines.filter { line in
            let fields = line.split(separator: " ")
            return fields.count == 3 && fields[0] == "stalled"
                && FileManager.default.fileExists(atPath: "/proc/\(pid)/task/\(fields[2])")
        }.count
    }

    /// Kills the server: the kernel fails every request still waiting, and the
    /// mount point is detached.
    func stop() {
        guard !stopped else { return }
        stopped = true
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        umount2(mountpoint, Int32(MNT_DETACH))
        try? FileManager.default.removeItem(atPath: directory)
    }

    deinit { stop() }
}

/// A D-Bus client in Python that takes commands on stdin: "chroot DIR" changes its
/// root directory (its connection stays), "call" calls GetStatus("location") and
/// prints "ok STATUS" or "error NAME MESSAGE".
final class ScriptedCaller {
    static let script = """
        import os, sys, dbus
        bus = dbus.bus.BusConnection(sys.argv[1])
        print("name", bus.get_unique_name(), flush=True)
        for line in sys.stdin:
            command = line.split()
            if command[0] == "chroot":
                os.chroot(command[1])
                print("chrooted", flush=True)
            elif command[0] == "call":
                try:
                    status = bus.call_blocking("org.example.Permissions", "/org/example/Permissions",
                                               "org.example.Permissions", "GetStatus", "s", ["location"], timeout=30)
                    print("ok", status, flush=True)
                except dbus.exceptions.DBusException as e:
                    print("error", e.get_dbus_name(), e.get_dbus_message(), flush=True)
        """
    private let process = Process()
    private let input = Pipe()
    private let output: LineCollector
    let uniqueName: String

    init(bus: TestBus) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", Self.script, bus.address]
        let out = Pipe()
        process.standardOutput = out
        process.standardInput = input
        process.standardError = FileHandle.nullDevice
        try process.run()
        output = LineCollector(out.fileHandleForReading)
        uniqueName = String(try output.next(timeout: 15) { $0.hasPrefix("name ") }.dropFirst("name ".count))
    }

    private func send(_ line: String) {
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    func chroot(_ directory: String) throws {
        send("chroot " + directory)
        try output.next(timeout: 15) { $0 == "chrooted" }
    }

    func startCall() { send("call") }

    /// The answer to the call started last.
    func reply(timeout: TimeInterval = 20) throws -> String {
        try output.next(timeout: timeout) { $0.hasPrefix("ok ") || $0.hasPrefix("error ") }
    }

    func call() throws -> String {
        startCall()
        return try reply()
    }

    deinit {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}
