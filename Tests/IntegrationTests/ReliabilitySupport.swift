import DBusKit
import Foundation
import Testing
import PermissionsTestSupport
import SystemPrimitives

// Support for the reliability suite (DurabilityTests, ModelTests, FuzzTests): the
// knobs scripts/stress turns, a seeded random source, bus clients on their own
// connections in this process, a StatusChanged recorder, and the daemon's fd and
// RSS figures. The bus and the daemon come from Harness.swift.

/// The suite's sizes: small defaults for scripts/test, each one
/// overridable from the environment (scripts/stress sets them from its flags).
enum Knobs {
    static func int(_ name: String, default value: Int) -> Int {
        ProcessInfo.processInfo.environment[name].flatMap { Int($0) } ?? value
    }

    /// PERMISSIONS_STRESS_SEED, else a fixed seed, so that a failure in CI repeats.
    /// Every failure message and figure line prints it.
    static let seed: UInt64 = ProcessInfo.processInfo.environment["PERMISSIONS_STRESS_SEED"].flatMap { UInt64($0) }
        ?? 20_240_610

    static var cycles: Int { int("PERMISSIONS_STRESS_CYCLES", default: 20) }
    static var writers: Int { int("PERMISSIONS_STRESS_WRITERS", default: 4) }
    static var clients: Int { int("PERMISSIONS_STRESS_CLIENTS", default: 50) }
    static var ops: Int { int("PERMISSIONS_STRESS_OPS", default: 300) }
    static var fuzzCalls: Int { int("PERMISSIONS_STRESS_FUZZ_CALLS", default: 4000) }
}

/// One line of figures per test, on stdout and, when PERMISSIONS_STRESS_REPORT names
/// a file, appended there for scripts/stress to print.
func reportFigures(_ test: String, _ figures: KeyValuePairs<String, Any>) {
    let line = "reliability \(test): " + figures.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
    print(line)
    if let path = ProcessInfo.processInfo.environment["PERMISSIONS_STRESS_REPORT"],
       let handle = FileHandle(forWritingAtPath: path) ?? {
           _ = FileManager.default.createFile(atPath: path, contents: nil)
           return FileHandle(forWritingAtPath: path)
       }() {
        handle.seekToEndOfFile()
        handle.write(Data((line + "\n").utf8))
        try? handle.close()
    }
}


/// Monotonic nanoseconds, to order events seen by different threads of this process.
func monotonicNanoseconds() -> UInt64 { Deadline.now().uptimeNanoseconds }

/// A client of the service on its own private connection and queue in this
/// process: the connection is attached to the queue, so method calls that reach it
/// (an agent's Ask sent to a path nothing exports) get an error at once; `call`
/// blocks the calling thread, never the queue.
///
/// `@unchecked Sendable`: the connection is used only on `queue` (DBusKit checks it).
final class BusClient: @unchecked Sendable {
    let queue: Queue
    let connection: Connection

    init(bus: TestBus, label: String = "bus-client") throws {
        let q = Queue(label: label)
        queue = q
        connection = try q.sync { try Connection.open(.address(bus.address), queue: q) }
    }

    var uniqueName: String { connection.uniqueName }

    /// Sends `message` and waits for the reply, an error reply, or `NoReply` after
    /// `timeoutMilliseconds`.
    func send(_ message: Message, timeoutMilliseconds: Int32 = 25_000) -> Result<Message, BusError> {
        let done = Semaphore(value: 0)
        nonisolated(unsafe) var result: Result<Message, BusError> = .failure(BusError(BusError.noReply, "no reply"))
        let connection = self.connection
        queue.async {
            connection.call(message, timeoutMilliseconds: timeoutMilliseconds) { r in
                result = r
                done.signal()
            }
        }
        done.wait()
        return result
    }

    /// A method of org.example.Permissions on the service object.
    func call(_ member: String, _ arguments: [DBusValue] = [],
              timeoutMilliseconds: Int32 = 25_000) -> Result<[DBusValue], BusError> {
        do {
            let message = try Self.serviceCall(member, arguments)
            return send(message, timeoutMilliseconds: timeoutMilliseconds).map { $0.arguments() }
        } catch {
            return .failure(error)
        }
    }

    /// A call of `member` of org.example.Permissions on the service object.
    static func serviceCall(_ member: String, _ arguments: [DBusValue]) throws(BusError) -> Message {
        let message = try Message.methodCall(destination: "org.example.Permissions", path: "/org/example/Permissions",
                                             interface: "org.example.Permissions", member: member)
        try message.append(arguments)
        return message
    }

    /// A round trip to the bus daemon: everything this connection sent before it
    /// (match rules included) has been processed when it returns.
    /// The unique name that owns `name` now.
    func nameOwner(_ name: String) throws -> String {
        let message = try Message.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                             interface: "org.freedesktop.DBus", member: "GetNameOwner")
        try message.append(.string(name))
        return try send(message).get().arguments().first?.stringValue ?? ""
    }

    func pingBus() throws {
        let message = try Message.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                             interface: "org.freedesktop.DBus.Peer", member: "Ping")
        _ = try send(message).get()
    }

    func close() {
        queue.sync { connection.close() }
    }
}

extension BusClient {
    /// ListDecisions("") as (app, permission) -> decision.
    func storedDecisions() throws -> [String: String] {
        let rows = try call("ListDecisions", [.string("")]).get().first?.arrayElements ?? []
        var result: [String: String] = [:]
        for row in rows {
            guard case .structure(let fields) = row, fields.count == 5, let app = fields[0].stringValue,
                  let permission = fields[1].stringValue, let decision = fields[2].stringValue
            else { throw HarnessError(description: "ListDecisions row of an unexpected shape: \(row)") }
            result[app + " " + permission] = decision
        }
        return result
    }

    /// The app id the daemon gives this process (its executable, resolved).
    func ownAppID() throws -> String {
        let details = try call("GetDetails", [.string("location")]).get().first?.stringKeyedEntries ?? []
        guard let id = details.first(where: { $0.0 == "app-id" })?.1.stringValue else {
            throw HarnessError(description: "GetDetails without app-id: \(details)")
        }
        return id
    }
}

/// One StatusChanged as a subscriber saw it.
struct ReceivedStatusChange {
    let app: String
    let permission: String
    let status: String
    let serial: UInt64
    /// monotonicNanoseconds() when the subscriber's queue ran the handler.
    let receivedAt: UInt64
}

/// A subscriber (Subscribe) to its user's StatusChanged stream on a connection of
/// its own, recording every signal with the time it arrived. The daemon must run.
///
/// `@unchecked Sendable`: `received` is touched only under `condition`'s lock; the
/// connection only on the client's queue.
final class StatusRecorder: @unchecked Sendable {
    let client: BusClient
    private let condition = NSCondition()
    private var received: [ReceivedStatusChange] = []

    init(bus: TestBus) throws {
        client = try BusClient(bus: bus, label: "status-recorder")
        let connection = client.connection
        let owner = try client.nameOwner("org.example.Permissions")
        client.queue.sync {
            let match = SignalMatch.unicast(to: connection.uniqueName, sender: owner,
                                            path: "/org/example/Permissions/Subscription",
                                            interface: "org.example.Permissions", member: "StatusChanged")
            _ = connection.subscribe(match) { [unowned self] message in
                let args = message.arguments()
                guard message.signature == "ssst", args.count == 4 else {
                    Issue.record("StatusChanged with signature \(message.signature)")
                    return
                }
                let change = ReceivedStatusChange(app: args[0].stringValue!, permission: args[1].stringValue!,
                                                  status: args[2].stringValue!, serial: args[3].uint64Value!,
                                                  receivedAt: monotonicNanoseconds())
                self.condition.lock()
                self.received.append(change)
                self.condition.broadcast()
                self.condition.unlock()
            }
        }
        _ = try client.call("Subscribe", [.vardict([])]).get()
    }

    var all: [ReceivedStatusChange] {
        condition.lock()
        defer { condition.unlock() }
        return received
    }

    /// Waits for a signal matching `predicate`, received at any time.
    func waitFor(timeout: TimeInterval = 15, _ what: String,
                 _ predicate: (ReceivedStatusChange) -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while !received.contains(where: predicate) {
            if !condition.wait(until: deadline) {
                throw HarnessError(description: "no StatusChanged \(what) within \(timeout) s")
            }
        }
    }

    func close() { client.close() }
}

/// Figures about a running process, from /proc.
enum ProcessFigures {
    /// Open file descriptors of `pid`.
    static func fileDescriptors(_ pid: Int32) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    }

    /// Resident set size of `pid` in KiB (VmRSS), or -1.
    static func residentKiB(_ pid: Int32) -> Int { status(pid, "VmRSS") }

    /// The largest resident set size `pid` has had, in KiB (VmHWM), or -1.
    static func peakResidentKiB(_ pid: Int32) -> Int { status(pid, "VmHWM") }

    private static func status(_ pid: Int32, _ field: String) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") })
        else { return -1 }
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? -1
    }
}

/// Runs `body(index)` on `count` threads of its own at once and waits for all of
/// them: real concurrency, unlike a dispatch pool sized to the 2 cores.
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let group = Group()
    for index in 0..<count {
        group.enter()
        let thread = Thread {
            body(index)
            group.leave()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }
    group.wait()
}

extension Result {
    /// The error of a failed call, for expectations on its name and message.
    var error: Failure? {
        if case .failure(let e) = self { return e }
        return nil
    }
}
