import DBusKit
import Foundation
internal import SystemPrimitives
import Testing
import PermissionsTestSupport

/// An org.example.Permissions.Agent in the test process, on its own connection
/// and queue: the one test agent. Prompts wait until the test answers them, or
/// are answered at once by `autoAnswer` or by the script given to `init` (a
/// scripted user, such as ModelTests' many clients need).
final class TestAgent: @unchecked Sendable {
    // @unchecked Sendable: `prompts`, `answered`, `cancelledIDs`, `checks`,
    // `serviceLeft` and `_autoAnswer` are touched only under `condition`'s lock;
    // `script` is immutable; the connection is used only on `queue`.
    struct Prompt {
        let id: String
        let app: String
        let permission: String
        let reason: String
        let details: [String: DBusValue]
        let call: MethodCall
    }

    let queue = Queue(label: "test-agent")
    let connection: Connection
    let path: String
    private let condition = NSCondition()
    private var prompts: [Prompt] = []
    private var answered = 0
    private var cancelledIDs: [String] = []
    private var checks = 0
    /// Set when org.example.Permissions loses its owner. On this connection the bus
    /// delivers it after everything the owner sent before it left.
    private var serviceLeft = false
    /// When set, every prompt is answered at once with this answer.
    var autoAnswer: String? {
        get { condition.lock(); defer { condition.unlock() }; return _autoAnswer }
        set { condition.lock(); _autoAnswer = newValue; condition.unlock() }
    }
    private var _autoAnswer: String?
    /// Answers every prompt at once with what it returns for the prompt's app and
    /// permission, unless `autoAnswer` is set.
    private let script: (@Sendable (_ app: String, _ permission: String) -> String)?

    init(bus: TestBus, path: String = "/test/Agent", register: Bool = true,
         script: (@Sendable (_ app: String, _ permission: String) -> String)? = nil) throws {
        self.path = path
        self.script = script
        let q = queue
        connection = try q.sync { try Connection.open(.address(bus.address), queue: q) }
        queue.sync {
            connection.export(ExportedObject(path: path, interfaces: [Interface("org.example.Permissions.Agent", methods: [
                // weak: the daemon may still call an agent a finished test has let go;
                // the call then gets no answer (the daemon times it out), not a crash.
                Method("Ask", input: "ssssa{sv}") { [weak self] call in self?.ask(call) },
                Method("Cancel", input: "s") { [weak self] call in
                    guard let self else { return }
                    self.condition.lock()
                    // The empty id names no prompt: the service's reachability check
                    // when the agent registers (counted apart, not a cancellation).
                    let id = call.arguments[0].stringValue ?? ""
                    if id.isEmpty { self.checks += 1 } else { self.cancelledIDs.append(id) }
                    self.condition.broadcast()
                    self.condition.unlock()
                    call.reply()
                },
            ])], introspection: ""))
            connection.subscribe(SignalMatch(sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                             interface: "org.freedesktop.DBus", member: "NameOwnerChanged",
                                             arg0: "org.example.Permissions")) { [weak self] message in
                guard let self, message.arguments().count == 3, message.arguments()[2].stringValue == "" else { return }
                self.condition.lock()
                self.serviceLeft = true
                self.condition.broadcast()
                self.condition.unlock()
            }
        }
        // RegisterAgent (or any call) after AddMatch: the bus applies the rule first.
        if register { try call("RegisterAgent", [.objectPath(path)]) }
    }

    /// A method call on the service from the agent's connection, waited for.
    @discardableResult
    func call(_ member: String, _ arguments: [DBusValue]) throws -> [DBusValue] {
        let message = try Message.methodCall(destination: "org.example.Permissions", path: "/org/example/Permissions",
                                             interface: "org.example.Permissions", member: member)
        try message.append(arguments)
        let done = Semaphore(value: 0)
        nonisolated(unsafe) var result: Result<Message, BusError> = .failure(BusError(BusError.noReply, "no reply"))
        queue.async {
            self.connection.call(message) { r in
                result = r
                done.signal()
            }
        }
        done.wait()
        return try result.get().arguments()
    }

    private func ask(_ call: MethodCall) {
        let a = call.arguments
        let details = Dictionary(a[4].stringKeyedEntries ?? [], uniquingKeysWith: { x, _ in x })
        let prompt = Prompt(id: a[0].stringValue!, app: a[1].stringValue!, permission: a[2].stringValue!,
                            reason: a[3].stringValue!, details: details, call: call)
        condition.lock()
        let auto = _autoAnswer ?? script?(prompt.app, prompt.permission)
        prompts.append(prompt)
        if auto != nil { answered += 1 }
        condition.broadcast()
        condition.unlock()
        if let auto { call.reply([.string(auto), .vardict([])]) }
    }

    /// Every prompt received so far.
    var received: [Prompt] {
        condition.lock()
        defer { condition.unlock() }
        return prompts
    }

    /// Waits for the `count`-th prompt (1-based) and returns it.
    func waitForPrompt(_ count: Int = 1, timeout: TimeInterval = 15) throws -> Prompt {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while prompts.count < count {
            if !condition.wait(until: deadline) {
                throw HarnessError(description: "no prompt #\(count) within \(timeout) s (got \(prompts.count))")
            }
        }
        return prompts[count - 1]
    }

    func waitForCancel(_ id: String, timeout: TimeInterval = 15) throws {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while !cancelledIDs.contains(id) {
            if !condition.wait(until: deadline) { throw HarnessError(description: "no Cancel(\(id)) within \(timeout) s") }
        }
    }

    /// Waits until the service has checked this agent `count` times (Cancel with the
    /// empty id, once a registration).
    func waitForChecks(_ count: Int = 1, timeout: TimeInterval = 15) throws {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while checks < count {
            if !condition.wait(until: deadline) { throw HarnessError(description: "no reachability check within \(timeout) s") }
        }
    }

    /// The prompt ids the service cancelled so far, in order.
    var cancelled: [String] {
        condition.lock()
        defer { condition.unlock() }
        return cancelledIDs
    }

    /// Waits until org.example.Permissions has lost its owner: everything the
    /// service sent this agent before it left has been received by then.
    func waitUntilServiceLeft(timeout: TimeInterval = 15) throws {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while !serviceLeft {
            if !condition.wait(until: deadline) {
                throw HarnessError(description: "org.example.Permissions did not leave the bus within \(timeout) s")
            }
        }
    }

    /// Answers a prompt (on the agent's queue, as a real agent would).
    func answer(_ prompt: Prompt, _ answer: String, expiresAt: Int64? = nil) {
        let results: DBusValue = .vardict(expiresAt.map { [("expires-at", .int64($0))] } ?? [])
        queue.sync { prompt.call.reply([.string(answer), results]) }
    }

    /// Drops off the bus, as a crashed agent would.
    func disconnect() {
        queue.sync { connection.close() }
    }
}

/// A client in the test process, on a connection and queue of its own, that sends
/// calls to the service without waiting and collects their answers. Calls go out in
/// the order `send` is called.
final class Requester: @unchecked Sendable {
    // @unchecked Sendable: `replies` and `sent` are touched only under `condition`'s
    // lock; the connection only on `queue`.
    let queue = Queue(label: "test-requester")
    let connection: Connection
    private let condition = NSCondition()
    private var replies: [Int: Result<[DBusValue], BusError>] = [:]
    private var sent = 0

    init(bus: TestBus) throws {
        let q = queue
        connection = try q.sync { try Connection.open(.address(bus.address), queue: q) }
    }

    /// Sends a call on the service; returns its number, for `wait`.
    func send(_ member: String, _ arguments: [DBusValue]) throws -> Int {
        let message = try Message.methodCall(destination: "org.example.Permissions", path: "/org/example/Permissions",
                                             interface: "org.example.Permissions", member: member)
        try message.append(arguments)
        condition.lock()
        sent += 1
        let number = sent
        condition.unlock()
        queue.sync {
            connection.call(message, timeoutMilliseconds: 60_000) { [self] result in
                let answer = result.map { $0.arguments() }
                condition.lock()
                replies[number] = answer
                condition.broadcast()
                condition.unlock()
            }
        }
        return number
    }

    /// Whether the answer to call `number` (a reply or an error) has come.
    func isAnswered(_ number: Int) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return replies[number] != nil
    }

    /// Waits for the answer to call `number`.
    func wait(_ number: Int, timeout: TimeInterval = 20) throws -> Result<[DBusValue], BusError> {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while replies[number] == nil {
            if !condition.wait(until: deadline) {
                throw HarnessError(description: "call #\(number) not answered within \(timeout) s")
            }
        }
        return replies[number]!
    }

    /// Sends a call and waits for its answer.
    func call(_ member: String, _ arguments: [DBusValue]) throws -> [DBusValue] {
        try wait(send(member, arguments)).get()
    }
}

/// A command running in the background (a client waiting for a prompt's answer).
final class BackgroundCommand: @unchecked Sendable {
    // @unchecked Sendable: `output` and `errors` are written once by the reader
    // threads before `finished` is signalled, and read only after waiting for it.
    let process = Process()
    private let finished = Semaphore(value: 0)
    private var output = Data()
    private var errors = Data()

    init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let errorsRead = Semaphore(value: 0)
        Thread.detachNewThread { [self] in
            errors = err.fileHandleForReading.readDataToEndOfFile()
            errorsRead.signal()
        }
        Thread.detachNewThread { [self] in
            output = out.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            errorsRead.wait()
            finished.signal()
        }
    }

    /// What it printed on stderr; read it after `wait` has returned.
    var errorOutput: String { String(decoding: errors, as: UTF8.self) }

    /// Waits for the exit; returns (status, stdout).
    func wait(timeout: TimeInterval = 20) throws -> (Int32, String) {
        guard finished.wait(timeout: .now() + timeout) == .success else {
            kill()
            throw HarnessError(description: "command did not finish within \(timeout) s")
        }
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }

    var isRunning: Bool { process.isRunning }

    func kill() {
        Glibc.kill(process.processIdentifier, SIGKILL)
    }
}

extension DaemonUnderTest {
    /// `busctl call … Request s PERMISSION a{sv} 0` in the background (the caller is
    /// /usr/bin/busctl), with a long method-call timeout.
    func requestInBackground(_ permission: String, reason: String? = nil) throws -> BackgroundCommand {
        var args = ["--address=\(bus.address)", "--timeout=60", "call", "org.example.Permissions",
                    "/org/example/Permissions", "org.example.Permissions", "Request", "sa{sv}", permission]
        if let reason { args += ["1", "reason", "s", reason] } else { args += ["0"] }
        return try BackgroundCommand("/usr/bin/busctl", args)
    }
}
