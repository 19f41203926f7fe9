// permissions-bench core: the processes the bench starts and how it watches them.
//
// Children are started with posix_spawn (no Foundation.Process: its set-up would be
// inside the start-up figure), with an empty signal mask and default SIGTERM/SIGINT/
// SIGPIPE dispositions, so that they never inherit a blocked SIGTERM. They are
// stopped with SIGKILL and reaped with waitpid. dbus-daemon (PermissionsTestSupport's
// TestBus, outside the start-up figures) is started through `setpriv --pdeathsig
// KILL`, so that even a crashed bench leaves no bus behind; the other children leave
// when their bus goes.
import DBusKit
import Foundation
import PermissionsTestSupport
import SystemPrimitives

/// Exits with a message after killing every child and removing the temporary
/// directory. Callable from any thread.
func coreFail(_ message: String, code: Int32 = 1) -> Never {
    FileHandle.standardError.write(("permissions-bench core: " + message + "\n").data(using: .utf8)!)
    CoreChildren.shared.killAll()
    exit(code)
}

/// Every child still running, and the directory to remove, for `coreFail` and the
/// end of the run. `@unchecked Sendable`: all state is under `lock`.
final class CoreChildren: @unchecked Sendable {
    static let shared = CoreChildren()
    private let lock = NSLock()
    private var pids: [pid_t] = []
    private var directory: String?
    var keepDirectory = false

    func add(_ pid: pid_t) { lock.withLock { pids.append(pid) } }
    func remove(_ pid: pid_t) { lock.withLock { pids.removeAll { $0 == pid } } }
    func setDirectory(_ dir: String) { lock.withLock { directory = dir } }

    /// SIGKILL to every child (newest first: the bus last), reaped, and the directory removed.
    func killAll() {
        let (list, dir) = lock.withLock { () -> ([pid_t], String?) in
            defer { pids = []; directory = nil }
            return (pids, directory)
        }
        for pid in list.reversed() {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            _ = waitpid(pid, &status, 0)
        }
        if let dir, !keepDirectory { try? FileManager.default.removeItem(atPath: dir) }
    }
}

/// A started child process.
final class CoreChild {
    let pid: pid_t
    let name: String
    private var reaped = false

    init(pid: pid_t, name: String) {
        self.pid = pid
        self.name = name
        CoreChildren.shared.add(pid)
    }

    /// SIGKILL and reap.
    func kill() {
        guard !reaped else { return }
        Glibc.kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
        reaped = true
        CoreChildren.shared.remove(pid)
    }

    /// True while the process has not exited (reaps it if it has).
    var isRunning: Bool {
        guard !reaped else { return false }
        var status: Int32 = 0
        if waitpid(pid, &status, WNOHANG) == pid {
            reaped = true
            CoreChildren.shared.remove(pid)
            return false
        }
        return true
    }

    /// Resident memory from /proc/PID/status, in KiB: (VmRSS, RssAnon, RssFile).
    var memory: (rss: Int, anon: Int, file: Int)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        func field(_ name: String) -> Int? {
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return nil }
            return line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first.flatMap { Int($0) }
        }
        guard let rss = field("VmRSS") else { return nil }
        return (rss, field("RssAnon") ?? 0, field("RssFile") ?? 0)
    }

    /// Threads of the process.
    var threads: Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task").count) ?? 0
    }
}

/// What to start; prepared before the clock starts, so that `spawn` does nothing
/// but posix_spawn.
final class CoreSpawnSpec {
    let path: String
    let name: String
    private let argv: [UnsafeMutablePointer<CChar>?]
    private let envp: [UnsafeMutablePointer<CChar>?]
    /// Where the child's stdout and stderr go (appended), unless `stdoutFD` is given.
    let logPath: String
    var stdoutFD: Int32?

    init(_ path: String, _ arguments: [String], name: String? = nil, environment: [String: String] = [:],
         removing: [String] = [], log: String = "/dev/null") {
        self.path = path
        self.name = name ?? URL(fileURLWithPath: path).lastPathComponent
        argv = ([path] + arguments).map { strdup($0) } + [nil]
        var env = ProcessInfo.processInfo.environment
        for key in env.keys where removing.contains(where: { key.hasPrefix($0) }) { env[key] = nil }
        env.merge(environment) { $1 }
        envp = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        logPath = log
    }

    deinit {
        for p in argv { free(p) }
        for p in envp { free(p) }
    }

    /// Starts the child; returns it and the CLOCK_MONOTONIC time just before posix_spawn.
    func spawn() -> (CoreChild, UInt64) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        if let fd = stdoutFD {
            posix_spawn_file_actions_adddup2(&actions, fd, 1)
            posix_spawn_file_actions_addopen(&actions, 2, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for s in [SIGTERM, SIGINT, SIGPIPE, SIGCHLD] { sigaddset(&defaults, s) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        let started = monotonicNanoseconds()
        let rc = argv.withUnsafeBufferPointer { a in
            envp.withUnsafeBufferPointer { e in posix_spawn(&pid, path, &actions, &attributes, a.baseAddress!, e.baseAddress!) }
        }
        guard rc == 0 else { coreFail("cannot start \(path): \(errnoName(rc))") }
        return (CoreChild(pid: pid, name: name), started)
    }
}

/// Runs a command to completion (for python3 and similar helpers); returns its exit status.
func coreRun(_ path: String, _ arguments: [String], log: String) -> Int32 {
    let (child, _) = CoreSpawnSpec(path, arguments, log: log).spawn()
    var status: Int32 = 0
    _ = valueOrErrno { waitpid(child.pid, &status, 0) }
    CoreChildren.shared.remove(child.pid)
    // WIFEXITED/WEXITSTATUS are macros: exited normally when the low 7 bits are 0.
    return status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
}

/// A fresh directory for the whole run.
func coreTemporaryDirectory() -> String {
    var template = Array((NSTemporaryDirectory() + "/permissions-bench-core.XXXXXX").utf8CString)
    guard let made = mkdtemp(&template) else { coreFail("mkdtemp failed") }
    return String(cString: made)
}

/// The directory of this executable, where the same build put permissionsd and the plugins.
let coreBinDirectory: String = {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    return URL(fileURLWithPath: exe).deletingLastPathComponent().path
}()

let coreSelfExecutable: String = {
    (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
}()

/// Reads one line from `fd` within `seconds`.
func coreReadLine(_ fd: Int32, seconds: Double) -> String? {
    let deadline = monotonicNanoseconds() + UInt64(seconds * 1e9)
    var bytes: [UInt8] = []
    while true {
        let now = monotonicNanoseconds()
        guard now < deadline else { return nil }
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let r = poll(&p, 1, Int32((deadline - now) / 1_000_000) + 1)
        // Not valueOrErrno: after a signal the wait is shortened to what is left of
        // the deadline, at the top of the loop.
        if r < 0, errno == EINTR { continue }
        guard r > 0 else { continue }
        var byte: UInt8 = 0
        let n = read(fd, &byte, 1)
        if n <= 0 { return nil }
        if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
        bytes.append(byte)
    }
}

/// The bench's private bus: PermissionsTestSupport's, started through `setpriv
/// --pdeathsig KILL` so that even a crashed bench leaves no bus behind.
func coreStartBus() -> TestBus {
    do { return try TestBus(diesWithParent: true) } catch { coreFail("cannot start dbus-daemon: \(error)") }
}

/// NameOwnerChanged as seen by a connection that subscribed before anything was
/// started, with the CLOCK_MONOTONIC time its handler ran.
///
/// `@unchecked Sendable`: the connection is only touched on `queue`; `events` locks
/// itself.
final class CoreNameWatcher: @unchecked Sendable {
    struct Event {
        let name: String
        let newOwner: String
        let at: UInt64
    }

    private let events = Timeline<Event>()
    private let queue = DispatchQueue(label: "core.names")
    private var connection: Connection?

    init(address: String) {
        let opened: Result<Connection, BusError> = queue.sync {
            do throws(BusError) {
                let c = try Connection.open(.address(address), queue: queue)
                c.subscribe(SignalMatch(sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                        interface: "org.freedesktop.DBus", member: "NameOwnerChanged")) {
                    [unowned self] message in
                    let at = monotonicNanoseconds()
                    let args = message.arguments().map { $0.stringValue ?? "" }
                    guard args.count == 3, !args[0].hasPrefix(":") else { return }
                    self.events.record(Event(name: args[0], newOwner: args[2], at: at))
                }
                return .success(c)
            } catch {
                return .failure(error)
            }
        }
        guard case .success(let c) = opened else { coreFail("cannot connect the name watcher to the bus") }
        connection = c
        corePingBus([c])
    }

    /// Events so far; pass it to `wait(from:)` to see only what comes next.
    var mark: Int { events.count }

    /// The first event from index `from` on for `name`, owned (`owned`) or released.
    func wait(from: Int, name: String, owned: Bool, seconds: Double = 20) -> Event? {
        events.first(from: from, timeout: seconds) { e in e.name == name && e.newOwner.isEmpty != owned ? e : nil }
    }

    func close() {
        queue.sync { connection?.close(); connection = nil }
    }
}

/// Waits until the bus has answered a Ping on each connection: every message sent
/// before (AddMatch included) has then been processed by the bus.
func corePingBus(_ connections: [Connection], seconds: Double = 20) {
    let group = DispatchGroup()
    for c in connections {
        group.enter()
        c.queue.async {
            let ping = try! Message.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                               interface: "org.freedesktop.DBus.Peer", member: "Ping")
            c.call(ping) { _ in group.leave() }
        }
    }
    guard group.wait(timeout: .now() + seconds) == .success else { coreFail("the bus did not answer a Ping") }
}

/// A process's time on a CPU so far, in nanoseconds: the first field of each of its
/// threads' /proc/PID/task/TID/schedstat (0 if it cannot be read).
func coreCPUNanoseconds(_ pid: pid_t) -> UInt64 {
    guard pid > 0, let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return 0 }
    var total: UInt64 = 0
    for task in tasks {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/task/\(task)/schedstat"),
              let first = String(decoding: data, as: UTF8.self).split(separator: " ").first,
              let ns = UInt64(first) else { continue }
        total += ns
    }
    return total
}
