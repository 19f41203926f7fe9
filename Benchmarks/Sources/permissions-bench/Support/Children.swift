// The processes a benchmark starts, and the directory it runs in.
//
// Children are started with posix_spawn (no Foundation.Process: its set-up would be
// inside the start-up figures, and its own reaper would race ours), with an empty
// signal mask and default SIGTERM/SIGINT/SIGPIPE/SIGCHLD dispositions, so that they
// never inherit a blocked SIGTERM. Each is registered in `Children.shared` until it
// is reaped, so that `fail` can kill whatever is left from any thread. dbus-daemon
// (PermissionsTestSupport's TestBus) is started through `setpriv --pdeathsig KILL`
// and so leaves with the bench even when the bench crashes.
import Foundation
import PermissionsTestSupport
import SystemPrimitives

/// Every child still running, and the run's directory: what `fail` and the end of a
/// run undo. `@unchecked Sendable`: all state is under `lock`.
final class Children: @unchecked Sendable {
    static let shared = Children()
    private let lock = NSLock()
    private var pids: [pid_t] = []
    private var directory: String?
    private var keep = false

    func add(_ pid: pid_t) { lock.withLock { pids.append(pid) } }
    func remove(_ pid: pid_t) { lock.withLock { pids.removeAll { $0 == pid } } }

    /// The run's directory, removed by `killAll` unless `keep` (--keep: logs to read).
    func setDirectory(_ dir: String, keep: Bool = false) {
        lock.withLock {
            directory = dir
            self.keep = keep
        }
    }

    /// SIGKILL to every child (newest first: the bus last), reaped, and the directory removed.
    func killAll() {
        let (list, dir) = lock.withLock { () -> ([pid_t], String?) in
            defer { pids = []; directory = nil }
            return (pids, keep ? nil : directory)
        }
        for pid in list.reversed() {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            _ = waitpid(pid, &status, 0)
        }
        if let dir { try? FileManager.default.removeItem(atPath: dir) }
    }
}

/// A started child process.
final class Child {
    let pid: pid_t
    let name: String
    private var reaped = false

    init(pid: pid_t, name: String) {
        self.pid = pid
        self.name = name
        Children.shared.add(pid)
    }

    /// Sends `signal` (SIGTERM lets permissionsd run its plugins' fini) and reaps.
    func kill(_ signal: Int32 = SIGKILL) {
        guard !reaped else { return }
        Glibc.kill(pid, signal)
        _ = wait()
    }

    /// Waits for the child to exit; its exit status, or 128 + the signal that ended it.
    @discardableResult
    func wait() -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        reaped = true
        Children.shared.remove(pid)
        // WIFEXITED/WEXITSTATUS are macros: exited normally when the low 7 bits are 0.
        return status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }

    /// True while the process has not exited (reaps it if it has).
    var isRunning: Bool {
        guard !reaped else { return false }
        var status: Int32 = 0
        if waitpid(pid, &status, WNOHANG) == pid {
            reaped = true
            Children.shared.remove(pid)
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

    /// Descriptors the process has open (0 if /proc cannot be read).
    var descriptors: Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? 0
    }
}

/// What to start; prepared before the clock starts, so that `spawn` does nothing
/// but posix_spawn.
final class SpawnSpec {
    let path: String
    let name: String
    private let argv: [UnsafeMutablePointer<CChar>?]
    private let envp: [UnsafeMutablePointer<CChar>?]
    /// Where the child's stdout and stderr go (appended), unless a descriptor is given.
    let logPath: String
    var stdinFD: Int32?
    var stdoutFD: Int32?
    var stderrFD: Int32?

    /// The environment is the bench's, less the variables starting with one of
    /// `removing`, plus `environment`.
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
    func spawn() -> (Child, UInt64) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let fd = stdinFD {
            posix_spawn_file_actions_adddup2(&actions, fd, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        if let fd = stdoutFD {
            posix_spawn_file_actions_adddup2(&actions, fd, 1)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        }
        if let fd = stderrFD {
            posix_spawn_file_actions_adddup2(&actions, fd, 2)
        } else if stdoutFD != nil {
            posix_spawn_file_actions_addopen(&actions, 2, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        } else {
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
        guard rc == 0 else { fail("cannot start \(path): \(String(cString: strerror(rc)))") }
        return (Child(pid: pid, name: name), started)
    }

    /// Starts the child and waits for it to exit; its exit status (`Child.wait`).
    func run() -> Int32 { spawn().0.wait() }
}

/// A pipe to or from a child. Both ends are close-on-exec (posix_spawn's dup2 gives
/// the child its own copy); the bench closes the child's end once it has started, so
/// that it sees end-of-file when the child exits.
struct ChildPipe {
    let read: Int32
    let write: Int32

    init() {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { fail("pipe failed: \(String(cString: strerror(errno)))") }
        // pipe2 is not in Glibc's Swift overlay; no other thread of the bench starts a child meanwhile.
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        (read, write) = (fds[0], fds[1])
    }
}

/// A fresh directory for the whole run, removed at its end (or by `fail`) unless `keep`.
func makeRunDirectory(keep: Bool = false) -> String {
    let prefix = benchCommand.replacingOccurrences(of: " ", with: "-")
    var template = Array((NSTemporaryDirectory() + "/\(prefix).XXXXXX").utf8CString)
    guard let made = mkdtemp(&template) else { fail("mkdtemp failed") }
    let dir = String(cString: made)
    Children.shared.setDirectory(dir, keep: keep)
    return dir
}

/// This executable: the floor service, the config-edits caller and the link helper
/// are started as subcommands of it.
let selfExecutable: String = {
    (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
}()

/// Reads one line from `fd` within `seconds`.
func readChildLine(_ fd: Int32, seconds: Double) -> String? {
    let deadline = monotonicNanoseconds() + UInt64(seconds * 1e9)
    var bytes: [UInt8] = []
    while true {
        let now = monotonicNanoseconds()
        guard now < deadline else { return nil }
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let r = poll(&p, 1, Int32((deadline - now) / 1_000_000) + 1)
        if r < 0, errno == EINTR { continue }
        guard r > 0 else { continue }
        var byte: UInt8 = 0
        let n = read(fd, &byte, 1)
        if n <= 0 { return nil }
        if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
        bytes.append(byte)
    }
}

/// A process's time on a CPU so far, in nanoseconds: the first field of each of its
/// threads' /proc/PID/task/TID/schedstat (0 if it cannot be read).
func cpuNanoseconds(_ pid: pid_t) -> UInt64 {
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

/// Sleeps for `seconds` (a measuring window or a pace, never a synchronisation).
func sleepSeconds(_ seconds: Double) {
    var ts = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - Double(Int(seconds))) * 1e9))
    var left = timespec()
    while nanosleep(&ts, &left) != 0, errno == EINTR { ts = left }
}
