import DBusKit
import Foundation
import Glibc
@testable import PermissionsClient
import PermissionsTestSupport
import Testing
import SystemPrimitives

/// The PermissionsClient library against the real daemon on a private bus. The
/// app is this test process (its executable path); decisions for it are made with
/// permissionsctl, as an administrator would.
@Suite struct ClientLibraryTests {
    let bus: TestBus
    let daemon: DaemonUnderTest
    let client: PermissionsClient
    /// This process's app id: the daemon identifies it by its executable.
    static let selfApp: String = {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        return realpath("/proc/self/exe", &buffer).map { String(cString: $0) } ?? ""
    }()

    init() throws {
        bus = try TestBus()
        daemon = try DaemonUnderTest(bus: bus)
        client = try PermissionsClient(bus: .address(bus.address))
    }

    func ctl(_ arguments: String...) throws {
        let r = try run(binDir + "/permissionsctl", ["--address", bus.address] + arguments)
        guard r.status == 0 else { throw HarnessError(description: "permissionsctl \(arguments): \(r.stderr)") }
    }

    func stored() throws -> String { try daemon.call("ListDecisions", "s", "").stdout }

    @Test func statusStatusesAndCachedRead() async throws {
        try await onOwnThreads {
            #expect(try await client.status(.location) == .notDetermined)
            #expect(try await client.statuses() == [.location: .notDetermined, .notifications: .notDetermined])
            await #expect(throws: PermissionsClientError.self) { try await client.status("no-such") }
            do {
                _ = try await client.status("no-such")
            } catch let error as PermissionsClientError {
                #expect(error.code == .unknownPermission)
                #expect(error.message.contains("\"no-such\""), "\(error)")
            }
            // No stream yet: nothing cached.
            #expect(client.currentStatus(.location) == nil)
            let seen = Consumed(client.updates(for: .location))
            #expect(try await seen.wait(1) == ["not-determined"])
            #expect(client.currentStatus(.location) == .notDetermined)
            #expect(client.currentStatus(.camera) == nil)  // not served here
            try ctl("grant", Self.selfApp, "location")
            #expect(try await seen.wait(2) == ["not-determined", "authorized"])
            #expect(client.currentStatus(.location) == .authorized)
            #expect(try await client.status(.location) == .authorized)
            seen.stop()

            // Without the service: `unavailable`.
            daemon.stop()
            do {
                _ = try await client.statuses()
                Issue.record("statuses() answered without a service")
            } catch let error as PermissionsClientError {
                #expect(error.code == .unavailable, "\(error)")
            }
        }
    }

    /// Longer than any default method-call timeout (25 s): the answer still comes.
    /// The client's timeouts run on a clock the test moves, so the 40 s pass at
    /// once. The control, which shows that the clock reaches the client's request
    /// connections and that their timeouts would end a call: an ordinary `Request`
    /// with the default timeout, on a request connection of the same client, fails
    /// with `NoReply` at 25 virtual seconds, not a millisecond before.
    @Test func requestAnsweredFortySecondsLater() async throws {
        try await onOwnThreads {
            let agent = try TestAgent(bus: bus)
            let clock = ManualClock()
            let client = try PermissionsClient(bus: .address(bus.address), timers: clock)

            let ordinary = try client.takeRequestConnection()
            let result = Locked<Result<[DBusValue], PermissionsClientError>?>(nil)
            ordinary.queue.sync {
                ordinary.connection.callService("Request", [.string("notifications"), .vardict([])]) { r in
                    result.withLock { $0 = r }
                }
            }
            let held = try await prompt(agent)
            #expect(held.permission == "notifications")
            try await offPool { clock.advance(by: .milliseconds(24_999)) }
            #expect(result.withLock { $0 } == nil)
            try await offPool { clock.advance(by: .milliseconds(1)) }
            let timedOut = try #require(result.withLock { $0 })
            #expect(timedOut.error?.name == BusError.noReply, "\(timedOut)")
            // Its connection leaves the bus: the service cancels that prompt.
            ordinary.close()
            let heldID = held.id
            try await offPool { try agent.waitForCancel(heldID) }

            let answer = Task(executorPreference: testTasks) { try await client.request(.location, reason: "to show the weather") }
            let prompt = try await prompt(agent, 2)
            #expect(prompt.app == Self.selfApp)
            #expect(prompt.reason == "to show the weather")
            try await offPool { clock.advance(by: .seconds(40)) }
            agent.answer(prompt, "allow-always")
            #expect(try await answer.value == .authorized)
            #expect(try stored().contains("\"location\" \"authorized\""))
        }
    }

    /// A request past the user's share of the service's open requests (a request
    /// is a StartRequest handle) throws `.limitExceeded`, with the message quoting
    /// the limit.
    @Test func aCallPastTheUsersLimitThrowsLimitExceeded() async throws {
        try await onOwnThreads {
            let limited = try DaemonUnderTest(bus: TestBus(), config: "[service]\nrequests-per-user=1\n")
            let client = try PermissionsClient(bus: .address(limited.bus.address))
            let agent = try TestAgent(bus: limited.bus)  // never answers: the first request waits
            let first = Task(executorPreference: testTasks) { try await client.request(.location) }
            _ = try await prompt(agent)
            do {
                _ = try await client.request(.notifications)
                Issue.record("a second request was taken past the limit of 1")
            } catch let error as PermissionsClientError {
                #expect(error.code == .limitExceeded, "\(error)")
                #expect(error.message.contains("1"), "\(error)")
            }
            first.cancel()
            _ = try? await first.value
        }
    }

    /// Against an older service, one without StartRequest (a stand-in in Python
    /// that has only Request, and answers it), `request` falls back to Request.
    @Test func requestFallsBackToRequestOnAServiceWithoutStartRequest() async throws {
        try await onOwnThreads {
            let bus = try TestBus()
            let old = try standInService(on: bus, """
                class Old(dbus.service.Object):
                    @dbus.service.method("org.example.Permissions", in_signature="sa{sv}", out_signature="s")
                    def Request(self, permission, options):
                        print("Request", permission, flush=True)
                        return "authorized"
                Old(bus, "/org/example/Permissions")
                """)
            let client = try PermissionsClient(bus: .address(bus.address))
            #expect(try await client.request(.location) == .authorized)
            // Printed before the reply went, but read by the collector's own thread:
            // waited for, not looked at once.
            let lines = old.lines
            let asked = try await offPool { try lines.next { $0.hasPrefix("Request ") } }
            #expect(asked == "Request location", "\(old.lines.all)")
        }
    }

    @Test func cancellingTheTaskCancelsThePrompt() async throws {
        try await onOwnThreads {
            let agent = try TestAgent(bus: bus)
            let client = client
            let answer = Task(executorPreference: testTasks) { try await client.request(.location) }
            let prompt = try await prompt(agent)
            await cancelExpectingCancellation(answer)
            let id = prompt.id
            try await offPool { try agent.waitForCancel(id) }
            // Through the handle's Close (the request was a StartRequest), not by leaving the bus.
            _ = try daemon.waitForLog("closed by its caller")
            #expect(try stored() == "a(sssxs) 0\n")
            #expect(try await client.status(.location) == .notDetermined)
        }
    }

    /// A task cancelled while its StartRequest has not been answered yet throws at
    /// once; the handle the late reply brings is closed (Close), as it would have
    /// been had the reply come first. A stand-in service in Python holds its reply
    /// until told, so the cancellation always comes first.
    @Test func aTaskCancelledBeforeItsHandleCameClosesTheHandleWhenItComes() async throws {
        try await onOwnThreads {
            let bus = try TestBus()
            let service = try standInService(on: bus, """
                held = []
                class Service(dbus.service.Object):
                    @dbus.service.method("org.example.Permissions", in_signature="asa{sv}", out_signature="o",
                                         sender_keyword="sender", async_callbacks=("ok", "err"))
                    def StartRequest(self, permissions, options, sender, ok, err):
                        token = str(options["handle_token"])
                        path = "/org/example/Permissions/request/" + sender[1:].replace(".", "_") + "/" + token
                        held.append((ok, path))
                        print("StartRequest", path, flush=True)
                class Handles(dbus.service.FallbackObject):
                    @dbus.service.method("org.example.Permissions.RequestHandle", in_signature="", out_signature="",
                                         rel_path_keyword="path")
                    def Close(self, path):
                        print("Close", "/org/example/Permissions/request" + path, flush=True)
                Service(bus, "/org/example/Permissions")
                Handles(bus, "/org/example/Permissions/request")
                def release(source, condition):
                    sys.stdin.readline()
                    for ok, path in held: ok(dbus.ObjectPath(path))
                    return True
                GLib.io_add_watch(sys.stdin, GLib.IO_IN, release)
                """)
            let client = try PermissionsClient(bus: .address(bus.address))
            let answer = Task(executorPreference: testTasks) { try await client.request(.location) }
            let started = try service.lines.next { $0.hasPrefix("StartRequest ") }
            await cancelExpectingCancellation(answer)
            service.answer("reply")
            let path = String(started.dropFirst("StartRequest ".count))
            let closed = try service.lines.next { $0.hasPrefix("Close ") }
            #expect(closed == "Close " + path)
        }
    }

    /// A task cancelled before it asks throws at once, and no prompt comes.
    @Test func aTaskCancelledAlreadyThrowsCancellationErrorWithoutAsking() async throws {
        try await onOwnThreads {
            let agent = try TestAgent(bus: bus)
            let client = client
            let answer = Task(executorPreference: testTasks) { () async throws -> PermissionStatus in
                withUnsafeCurrentTask { $0?.cancel() }
                return try await client.request(.location)
            }
            do {
                _ = try await answer.value
                Issue.record("a cancelled task's request answered")
            } catch {
                #expect(error is CancellationError, "\(error)")
            }
            // The next request is the first prompt the agent sees.
            agent.autoAnswer = "deny"
            #expect(try await client.request(.location) == .denied)
            #expect(agent.received.map(\.permission) == ["location"])
        }
    }

    /// identity(): what GetDiagnostics says of this process, typed.
    @Test func identityIsWhatTheServiceTakesThisAppFor() async throws {
        try await onOwnThreads {
            let version = try run(binDir + "/permissionsd", ["--version"]).stdout
                .split(separator: "\n").first?.split(separator: " ").dropFirst().first.map(String.init)
            let alone = try await client.identity()
            #expect(alone == AppIdentity(appID: Self.selfApp, kind: .executable, uid: getuid(), hasAgent: false,
                                         serviceVersion: version))
            let agent = try TestAgent(bus: bus)
            #expect(try await client.identity().hasAgent)
            _ = agent
        }
    }

    /// localizedDescription is the error's own words, not Foundation's stock sentence.
    @Test func errorsDescribeThemselves() async throws {
        try await onOwnThreads {
            do {
                _ = try await client.status("no-such")
                Issue.record("status(\"no-such\") answered")
            } catch let error as PermissionsClientError {
                #expect(error.localizedDescription == error.message, "\(error)")
                #expect(error.localizedDescription.contains("\"no-such\""), "\(error.localizedDescription)")
                #expect(!error.localizedDescription.contains("could not be completed"))
                // Through `any Error`, as an app's catch-all sees it.
                let erased: any Error = error
                #expect(erased.localizedDescription == error.message)
            }
            // An error that came without a message says what its code means.
            let bare = PermissionsClientError(name: "org.example.Permissions.Error.NotAuthorized", message: "")
            #expect((bare as any Error).localizedDescription == "This app may not do this.")
        }
    }

    @Test func requestAllAsksOneAfterAnother() async throws {
        try await onOwnThreads {
            let agent = try TestAgent(bus: bus)
            let answers = Consumed(client.request([.location, .notifications], reason: "to remind you"))
            let first = try await prompt(agent, 1)
            #expect(first.permission == "location")
            #expect(agent.received.count == 1)  // the second is asked only after the first answer
            agent.answer(first, "allow-once")
            #expect(try await answers.wait(1) == ["location=authorized"])
            let second = try await prompt(agent, 2)
            #expect(second.permission == "notifications")
            agent.answer(second, "deny")
            #expect(try await answers.waitForEnd() == ["location=authorized", "notifications=denied"])
        }
    }

    @Test func requestAllStopsAtACancellation() async throws {
        try await onOwnThreads {
            let agent = try TestAgent(bus: bus)
            let answers = Consumed(client.request([.location, .notifications]))
            let first = try await prompt(agent, 1)
            answers.stop()
            let id = first.id
            try await offPool { try agent.waitForCancel(id) }
            // A request made after it is the next prompt: the sequence asked nothing more.
            agent.autoAnswer = "allow-once"
            #expect(try await client.request(.location) == .authorized)
            #expect(agent.received.map(\.permission) == ["location", "location"])
            #expect(try stored() == "a(sssxs) 0\n")
        }
    }

    @Test func theServiceLeavingDuringARequestThrows() async throws {
        try await onOwnThreads {
            let agent = try TestAgent(bus: bus)
            let client = client
            let answer = Task(executorPreference: testTasks) { try await client.request(.location) }
            _ = try await prompt(agent)
            daemon.kill()
            do {
                _ = try await answer.value
                Issue.record("the request answered after the service was killed")
            } catch let error as PermissionsClientError {
                #expect(error.code == .serviceRestarted, "\(error)")
            }
        }
    }

    /// Only this app's real changes, across a restart with nothing changed and a
    /// kill and restart after which a decision had changed: no stale status, no
    /// duplicate, and nothing of another app or another user.
    @Test func updatesYieldExactlyThisAppsRealChanges() async throws {
        try await onOwnThreads {
            let seen = Consumed(client.updates(for: .location))
            #expect(try await seen.wait(1) == ["not-determined"])
            try ctl("grant", Self.selfApp, "location")
            #expect(try await seen.wait(2) == ["not-determined", "authorized"])
            try ctl("deny", "/usr/bin/other", "location")                   // another app
            try ctl("deny", "--user", "1", Self.selfApp, "location")        // another user
            try daemon.writeConfig("[location]\nenabled=false\n")           // everyone-level
            #expect(try await seen.wait(3) == ["not-determined", "authorized", "disabled"])
            try daemon.writeConfig("")
            #expect(try await seen.wait(4) == ["not-determined", "authorized", "disabled", "authorized"])

            // A restart that changed nothing yields nothing.
            daemon.stop()
            try daemon.start()
            // A kill, and a decision changed while this client could not hear it: by a
            // second daemon on another bus, over the same state directory.
            daemon.kill()
            let otherBus = try TestBus()
            let other = try DaemonUnderTest(bus: otherBus, start: false)
            try FileManager.default.createSymbolicLink(atPath: other.stateDirectory, withDestinationPath: daemon.stateDirectory)
            try other.start()
            let changed = try run(binDir + "/permissionsctl", ["--address", otherBus.address, "deny", Self.selfApp, "location"])
            #expect(changed.status == 0, "\(changed.stderr)")
            other.stop()
            try daemon.start()
            #expect(try await seen.wait(5) == ["not-determined", "authorized", "disabled", "authorized", "denied"])
            #expect(client.currentStatus(.location) == .denied)
            // One more real change: nothing else came before it.
            try ctl("reset", Self.selfApp)
            #expect(try await seen.wait(6)
                    == ["not-determined", "authorized", "disabled", "authorized", "denied", "not-determined"])
            seen.stop()
        }
    }

    @Test func twoConsumersShareOneMatchRuleSet() async throws {
        try await onOwnThreads {
            let first = Consumed(client.updates(for: .location))
            #expect(try await first.wait(1) == ["not-determined"])
            let rules = try matchRules()
            let second = Consumed(client.updates())
            #expect(try await second.wait(2) == ["location=not-determined", "notifications=not-determined"])
            #expect(try matchRules() == rules)
            try ctl("grant", Self.selfApp, "location")
            #expect(try await first.wait(2) == ["not-determined", "authorized"])
            #expect(try await second.wait(3).last == "location=authorized")
            first.stop()
            second.stop()
        }
    }

    /// The bus's count of match rules of the client's connection.
    func matchRules() throws -> Int {
        let r = try daemon.busctl(["call", "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                   "org.freedesktop.DBus.Debug.Stats", "GetConnectionStats", "s", client.uniqueName])
        guard let range = r.stdout.range(of: "\"MatchRules\" u "),
              let count = Int(r.stdout[range.upperBound...].prefix { $0.isNumber }) else {
            throw HarnessError(description: "no MatchRules in \(r.stdout) \(r.stderr)")
        }
        return count
    }
}

/// An async sequence consumed by a task of its own, each element's description
/// collected for the test to wait on.
final class Consumed: Sendable {
    let lines = LineCollector()
    let ended = LineCollector()
    let task: Task<Void, Never>

    init<S: AsyncSequence & Sendable>(_ sequence: S) where S.Element: CustomStringConvertible {
        let (lines, ended) = (lines, ended)
        task = Task(executorPreference: testTasks) {
            do {
                for try await element in sequence { lines.append(element.description) }
                ended.append("finished")
            } catch {
                ended.append("error: \(error)")
            }
        }
    }

    /// Waits (off the cooperative pool) until `count` elements came; returns all so far.
    func wait(_ count: Int, timeout: TimeInterval = 15) async throws -> [String] {
        let lines = lines
        return try await offPool { try lines.wait(timeout: timeout, what: "\(count) elements") { $0.count >= count } }
    }

    func waitForEnd(timeout: TimeInterval = 15) async throws -> [String] {
        let ended = ended
        let end = try await offPool { try ended.wait(timeout: timeout, what: "the end") { !$0.isEmpty } }
        #expect(end == ["finished"])
        return lines.all
    }

    func stop() { task.cancel() }
}

/// Where the tests' tasks run: threads of their own, not the cooperative pool. That
/// pool has one thread per core (2 here), and the suite's synchronous tests hold
/// them while they wait for processes; a task whose progress a test waits for
/// with a deadline (a stream's consumer, a request) must not queue behind them.
/// Nor behind the blocked threads of a concurrent dispatch queue (`runBlocking`
/// says why): each job runs as blocking work.
final class DispatchTaskExecutor: TaskExecutor {
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        runBlocking { job.runSynchronously(on: executor) }
    }
}

let testTasks = DispatchTaskExecutor()

/// Runs a test's body, and every task it awaits, on `testTasks`.
func onOwnThreads<T>(_ body: () async throws -> T) async throws -> T {
    try await withTaskExecutorPreference(testTasks, operation: body)
}

/// Waits for the agent's `count`-th prompt, off the cooperative pool.
func prompt(_ agent: TestAgent, _ count: Int = 1) async throws -> TestAgent.Prompt {
    try await offPool { Unchecked(try agent.waitForPrompt(count)) }.value
}

/// A prompt carried back from the waiting thread. `@unchecked Sendable`: the test
/// only reads it, and answers it through `TestAgent.answer`, which replies on the
/// agent's queue.
struct Unchecked<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// Cancels `task`, a request under way, and expects it to throw CancellationError.
private func cancelExpectingCancellation<T: Sendable>(_ task: Task<T, any Error>) async {
    task.cancel()
    do {
        _ = try await task.value
        Issue.record("a cancelled request answered")
    } catch {
        #expect(error is CancellationError, "\(error)")
    }
}

/// A stand-in for the service, in Python (dbus-python on GLib's main loop):
/// `body` runs at the script's top level with `bus`, the test bus, and registers
/// its objects; the stand-in then takes the service's name, prints "ready" (waited
/// for here) and runs until it is killed.
private func standInService(on bus: TestBus, _ body: String) throws -> RunningProgram {
    let script = """
        import sys, dbus, dbus.service, dbus.mainloop.glib
        from gi.repository import GLib
        dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
        bus = dbus.bus.BusConnection("\(bus.address)")
        \(body)
        name = dbus.service.BusName("org.example.Permissions", bus)  # kept: released when collected
        print("ready", flush=True)
        GLib.MainLoop().run()
        """
    let program = try RunningProgram("/usr/bin/python3", ["-c", script])
    _ = try program.lines.next { $0 == "ready" }
    return program
}

/// Runs a blocking wait on a thread of its own (`runBlocking`), so that it holds
/// no thread of the cooperative pool (on which the synchronous tests run).
func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { done in
        runBlocking { done.resume(with: Result { try body() }) }
    }
}
