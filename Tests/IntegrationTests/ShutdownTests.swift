import DBusKit
import Foundation
import Testing
import PermissionsTestSupport

/// Stopping: SIGTERM answers every waiting call with Cancelled, closes every open
/// prompt and starts none; a SIGTERM at any moment of start-up ends the daemon
/// cleanly (exit 0), before or after it owns its name.
@Suite struct ShutdownTests {
    static let config = "[location]\nenabled=true\n[notifications]\nenabled=true\n"

    @Test func sigtermDuringRequestManyAnswersCancelledAndAsksNothingMore() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config)
        let agent = try TestAgent(bus: bus)  // never answers
        let many = try BackgroundCommand("/usr/bin/gdbus", [
            "call", "--address", bus.address, "--dest", "org.example.Permissions",
            "--object-path", "/org/example/Permissions", "--method", "org.example.Permissions.RequestMany",
            "['location', 'notifications']", "@a{sv} {}", "--timeout", "60"])
        let prompt = try agent.waitForPrompt()
        #expect(prompt.permission == "location")

        let ending = daemon.terminate(timeout: 10)
        #expect(ending == .init(reason: .exit, status: 0), "\(ending?.description ?? "still running after 10 s")")
        // Everything the daemon sent the agent has arrived once the bus says it left.
        try agent.waitUntilServiceLeft()
        #expect(agent.cancelled == [prompt.id])
        #expect(agent.received.map(\.permission) == ["location"], "a prompt was started while stopping")

        let (status, output) = try many.wait()
        #expect(status != 0, "RequestMany answered \(output)")
        #expect(many.errorOutput.contains("org.example.Permissions.Error.Cancelled"), "\(many.errorOutput)")
        #expect(many.errorOutput.contains("stopping"), "\(many.errorOutput)")
    }

    /// After a clean stop, decisions.sqlite alone holds every decision: the WAL was
    /// checkpointed into it and is empty or gone, so a copy of the file alone (a
    /// backup) or a WAL lost between runs loses nothing.
    @Test func cleanStopLeavesEveryDecisionInTheMainFile() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config)
        for i in 0..<20 {
            #expect(try daemon.ctl(i % 2 == 0 ? "deny" : "grant", "org.example.App\(i)", "location").status == 0)
        }
        let ending = daemon.terminate(timeout: 10)
        #expect(ending == .init(reason: .exit, status: 0), "\(ending?.description ?? "still running")")
        let state = daemon.stateDirectory
        var st = stat()
        if lstat(state + "/decisions.sqlite-wal", &st) == 0 {
            #expect(st.st_size == 0, "the WAL holds \(st.st_size) bytes after a clean stop")
        }

        let copy = try makeTemporaryDirectory("store-copy")
        defer { try? FileManager.default.removeItem(atPath: copy) }
        try FileManager.default.copyItem(atPath: state + "/decisions.sqlite", toPath: copy + "/decisions.sqlite")
        let rows = try run("/usr/bin/sqlite3", [copy + "/decisions.sqlite",
                                                "SELECT app_id, decision FROM user_decisions ORDER BY app_id"])
        #expect(rows.status == 0, "\(rows.stderr)")
        let expected = (0..<20).map { "org.example.App\($0)|\($0 % 2 == 0 ? "denied" : "authorized")" }.sorted()
        #expect(rows.stdout.split(separator: "\n").map(String.init).sorted() == expected)
    }

    /// SIGTERM and SIGINT are blocked from main's first line, before option parsing.
    /// `permissionsd --help` with its stdout a full pipe blocks writing the usage,
    /// after main has begun: a SIGTERM then must stay pending (and the process exit
    /// 0 once the pipe is read), not kill it with the default action. Spawned with
    /// an empty signal mask (the test runner's children inherit a blocked SIGTERM).
    @Test func sigtermAfterMainBeginsIsNotTheDefaultAction() throws {
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        defer { close(fds[0]) }
        // Fill the pipe, so that the daemon's first write blocks.
        _ = fcntl(fds[1], F_SETFL, O_NONBLOCK)
        let chunk = [UInt8](repeating: 0x2e, count: 4096)
        var filled = 0
        while case let n = write(fds[1], chunk, chunk.count), n > 0 { filled += n }
        _ = fcntl(fds[1], F_SETFL, 0)

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_addclose(&actions, fds[0])
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGTERM)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let path = binDir + "/permissionsd"
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup(path), strdup("--help"), nil]
        defer { argv.forEach { free($0) } }
        try #require(posix_spawn(&pid, path, &actions, &attributes, argv, environ) == 0)
        close(fds[1])

        // Wait until it is blocked in write(1, ...): main has begun.
        let deadline = Date().addingTimeInterval(20)
        var syscall = ""
        while Date() < deadline {
            syscall = (try? String(contentsOfFile: "/proc/\(pid)/syscall", encoding: .utf8)) ?? ""
            if syscall.hasPrefix("1 0x1 ") { break }
            usleep(1000)  // polling /proc for a state, with a deadline; not a timing guess
        }
        #expect(syscall.hasPrefix("1 0x1 "), "never blocked writing its stdout: \(syscall)")
        kill(pid, SIGTERM)

        // Drain the pipe: the usage comes through and the process exits.
        var buffer = [UInt8](repeating: 0, count: 65536)
        var output: [UInt8] = []
        while true {
            let n = read(fds[0], &buffer, buffer.count)
            if n <= 0 { break }
            output += buffer[0..<n]
        }
        var status: Int32 = 0
        try #require(waitpid(pid, &status, 0) == pid)
        let signalled = status & 0x7f
        #expect(signalled == 0, "killed by signal \(signalled)")
        #expect(signalled != 0 || (status >> 8) & 0xff == 0, "exit status \((status >> 8) & 0xff)")
        #expect(String(decoding: output.dropFirst(filled), as: UTF8.self).hasPrefix("Usage: permissionsd"))
    }

    /// A service manager may stop the daemon the moment its name appears. Each
    /// attempt starts a daemon and sends SIGTERM as soon as the bus announces the
    /// owner.
    @Test func sigtermTheMomentTheNameAppearsStopsTheDaemon() throws {
        let bus = try TestBus()
        for attempt in 1...5 {
            let watcher = try NameWatcher(bus: bus)
            let daemon = try DaemonUnderTest(bus: bus, config: Self.config, start: false)
            try daemon.start(waitForName: false)
            try watcher.waitForOwner(timeout: 20)
            let ending = daemon.terminate(timeout: 10)
            #expect(ending == .init(reason: .exit, status: 0),
                    "attempt \(attempt): \(ending?.description ?? "still running 10 s after SIGTERM"); log:\n\(daemon.log)")
        }
    }

    /// SIGTERM while start-up waits for a plugin that blocks, in its init or in its
    /// constructor (inside dlopen, holding the dynamic loader's lock): the daemon
    /// ends start-up, stops the plugins that did start, and exits 0 without ever
    /// owning its name.
    @Test(arguments: ["init", "constructor"])
    func sigtermDuringStartUpExitsWithoutOwningTheName(blockingIn place: String) throws {
        let dir = try makeTemporaryDirectory("slow-plugins")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fifo = dir + "/blocking"
        #expect(mkfifo(fifo, 0o600) == 0)
        let block = """
            static void block(void) {
                int fd = open("\(fifo)", O_WRONLY);
                if (fd >= 0) { if (write(fd, "blocking\\n", 9) != 9) {} close(fd); }
                for (;;) pause();
            }
            """
        try PluginLoadingTests.compile("""
            #include <fcntl.h>
            #include <unistd.h>
            #include "permissions-plugin.h"
            \(block)
            \(place == "constructor" ? "__attribute__((constructor)) static void stall(void) { block(); }" : "")
            static const char *const perms[] = { "slow-start", NULL };
            static int plugin_init(const struct permissions_host *h, void **s) {
                (void)h; (void)s;
                \(place == "init" ? "block();" : "")
                return 0;
            }
            static const struct permissions_plugin d = {
                PERMISSIONS_PLUGIN_ABI_VERSION, sizeof d, "slow-start", "0.1", "blocks", perms, plugin_init, NULL, NULL };
            const struct permissions_plugin *permissions_plugin_entry_v1(void) { return &d; }
            """, into: dir, file: "libpermissions-slow-start.so")

        let bus = try TestBus()
        let watcher = try NameWatcher(bus: bus)
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config,
                                         pluginDirectories: [corePluginDirectory, dir], start: false)
        // Opened before the daemon starts, so that the plugin's open() for writing
        // finds a reader.
        let blocking = try FIFOReader(fifo)
        try daemon.start(waitForName: false)
        try blocking.waitForLine(timeout: 20)

        let ending = daemon.terminate(timeout: 10)
        #expect(ending == .init(reason: .exit, status: 0),
                "\(ending?.description ?? "still running 10 s after SIGTERM"); log:\n\(daemon.log)")
        try watcher.sync()
        #expect(watcher.owners.isEmpty, "the name was owned: \(watcher.owners)")
        #expect(daemon.log.contains("stopping during start-up"), "\(daemon.log)")
        #expect(!daemon.log.contains("serving org.example.Permissions"))
    }
}

extension ShutdownTests {
    /// A serving queue held in the kernel, where a stop cannot run: here by a hung
    /// disk under the store at start-up (a state directory on a file system that
    /// never answers, Tests/testenv/stallfs.c). SIGTERM still ends the process, at
    /// the stop's deadline (15 s), with status 1 (the store may not be closed).
    @Test(.hangGuard) func sigtermEndsADaemonWhoseServingQueueIsHeld() throws {
        let fs = try StallFS()
        defer { fs.stop() }
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config, start: false)
        try FileManager.default.createSymbolicLink(atPath: daemon.stateDirectory,
                                                   withDestinationPath: fs.mountpoint + "/state")
        try daemon.start(waitForName: false)
        let pid = try #require(daemon.pid)
        // The serving queue's start-up looks the state directory up, and waits.
        try fs.waitForStalls(1, by: pid)
        kill(pid, SIGTERM)
        _ = try daemon.waitForLog("the stop did not end within 15 s", timeout: 40)
        // The thread that waits for the file system keeps the exited process from
        // being gone until the file system answers: its server's end fails it.
        fs.stop()
        let ending = daemon.waitForExit(timeout: 20)
        #expect(ending == .init(reason: .exit, status: 1), "\(ending?.description ?? "still running")")
    }

    /// A log reader that is behind does not hold a stop: the daemon waits a little
    /// for its last lines, then ends cleanly (status 0) without them.
    @Test(.hangGuard) func sigtermEndsADaemonWhoseLogReaderIsBehind() throws {
        let pipe = try FullPipe()
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: Self.config, start: false)
        daemon.standardError = pipe.writeHandle
        try daemon.start()
        let ending = daemon.terminate(timeout: 10)
        #expect(ending == .init(reason: .exit, status: 0), "\(ending?.description ?? "still running 10 s after SIGTERM")")
    }
}

/// Watches org.example.Permissions get and lose owners through a match rule on a
/// connection of the test's own: the bus tells us, nothing polls.
final class NameWatcher {
    let connection: Connection
    /// The new owner of every NameOwnerChanged seen ("" when the name was lost).
    private(set) var owners: [String] = []

    init(bus: TestBus) throws {
        connection = try Connection.open(.address(bus.address))
        try connection.enableRouting()
        connection.subscribe(SignalMatch(sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                         interface: "org.freedesktop.DBus", member: "NameOwnerChanged",
                                         arg0: "org.example.Permissions")) { [unowned self] message in
            self.owners.append(message.arguments().last?.stringValue ?? "?")
        }
        try sync()  // the rule is in force once a call made after it has been answered
    }

    /// Waits for the bus to announce an owner (handling messages as they come).
    func waitForOwner(timeout: TimeInterval) throws {
        try waitUntil(timeout: timeout, "org.example.Permissions got no owner") { $0.contains { !$0.isEmpty } }
    }

    /// Waits for the bus to announce that the name has lost its owner.
    func waitForLoss(timeout: TimeInterval) throws {
        try waitUntil(timeout: timeout, "org.example.Permissions kept its owner") { $0.last == "" }
    }

    private func waitUntil(timeout: TimeInterval, _ what: String, _ done: ([String]) -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while !done(owners) {
            let left = deadline.timeIntervalSinceNow
            guard left > 0, connection.readWriteDispatch(timeoutMilliseconds: Int32(left * 1000) + 1) else {
                throw HarnessError(description: "\(what) within \(timeout) s (saw \(owners))")
            }
        }
    }

    /// Handles everything the bus sent before answering a call made now.
    func sync(timeout: TimeInterval = 15) throws {
        let message = try Message.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                             interface: "org.freedesktop.DBus", member: "GetId")
        var answered = false
        connection.call(message) { _ in answered = true }
        let deadline = Date().addingTimeInterval(timeout)
        while !answered {
            let left = deadline.timeIntervalSinceNow
            guard left > 0, connection.readWriteDispatch(timeoutMilliseconds: Int32(left * 1000) + 1) else {
                throw HarnessError(description: "the bus did not answer within \(timeout) s")
            }
        }
    }

    deinit { connection.close() }
}

/// The reading end of a FIFO, opened without waiting for a writer; `waitForLine`
/// waits (in poll, with a deadline) for what a writer sends.
final class FIFOReader {
    let fd: Int32

    init(_ path: String) throws {
        fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw HarnessError(description: "cannot open \(path): \(String(cString: strerror(errno)))") }
    }

    /// Waits for a newline-terminated line; returns it (without the newline).
    @discardableResult
    func waitForLine(timeout: TimeInterval) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        var line: [UInt8] = []
        while true {
            let left = deadline.timeIntervalSinceNow
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard left > 0, poll(&pfd, 1, Int32(left * 1000) + 1) >= 0 else {
                throw HarnessError(description: "no line within \(timeout) s (got \"\(String(decoding: line, as: UTF8.self))\")")
            }
            var byte: UInt8 = 0
            while read(fd, &byte, 1) == 1 {
                if byte == UInt8(ascii: "\n") { return String(decoding: line, as: UTF8.self) }
                line.append(byte)
            }
        }
    }

    deinit { close(fd) }
}
