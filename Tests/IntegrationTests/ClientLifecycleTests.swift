import DBusKit
import Foundation
import Glibc
import PermissionsClient
import PermissionsTestSupport
import Testing
import SystemPrimitives

/// The PermissionsClient library as an app on a desktop meets it: the service
/// started by an `updates` stream alone (D-Bus activation), the bus going away
/// under a stream, and an identity answer with more keys than this library knows.
@Suite struct ClientLifecycleTests {
    /// A bus whose activation directory starts permissionsd (this build, with the
    /// directories of `daemon`, which is never started itself) when the name is asked for.
    static func activatableService() throws -> (bus: TestBus, daemon: DaemonUnderTest, services: String) {
        let services = try makeTemporaryDirectory("activation")
        let bus = try TestBus(services: services)
        let daemon = try DaemonUnderTest(bus: bus, start: false)
        let command = [binDir + "/permissionsd", "--config-dir", daemon.configDirectory, "--state-dir",
                       daemon.stateDirectory, "--verbose", "--host-pid", String(getpid())]
            + daemon.pluginDirectories.flatMap { ["--plugin-dir", $0] }
        // No bus option: the daemon serves the bus that started it (DBUS_STARTER_ADDRESS).
        // Through sh only for its log; exec keeps the process the bus started.
        let exec = "/bin/sh -c 'exec \"$0\" \"$@\" 2>>\(daemon.logFile)' " + command.joined(separator: " ")
        try "[D-BUS Service]\nName=org.example.Permissions\nExec=\(exec)\n"
            .write(toFile: services + "/org.example.Permissions.service", atomically: true, encoding: .utf8)
        return (bus, daemon, services)
    }

    /// The process id of the name's owner on `bus`, or nil if it has none.
    static func ownerPID(on bus: TestBus) throws -> Int32? {
        let r = try run("/usr/bin/busctl", ["--address=\(bus.address)", "call", "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                            "org.freedesktop.DBus", "GetConnectionUnixProcessID", "s", "org.example.Permissions"])
        guard r.status == 0 else { return nil }
        return Int32(r.stdout.dropFirst(2).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    @Test func updatesAloneStartsTheService() async throws {
        try await onOwnThreads {
            let (bus, daemon, services) = try Self.activatableService()
            defer { try? FileManager.default.removeItem(atPath: services) }
            #expect(try Self.ownerPID(on: bus) == nil, "the service runs before anyone asked")
            let client = try PermissionsClient(bus: .address(bus.address))
            let seen = Consumed(client.updates(for: .location))
            #expect(try await seen.wait(1) == ["not-determined"], "\(daemon.log)")
            // The bus started the owner: only activation sets DBUS_STARTER_ADDRESS.
            let pid = try #require(try Self.ownerPID(on: bus))
            let environment = try run("/bin/cat", ["/proc/\(pid)/environ"]).stdout.split(separator: "\0")
            #expect(environment.contains { $0.hasPrefix("DBUS_STARTER_ADDRESS=unix:") })
            seen.stop()
            Installing.stop(pid)  // before its state directory goes
        }
    }

    @Test func aLostBusEndsEveryStreamWithDisconnected() async throws {
        try await onOwnThreads {
            let bus = try TestBus()
            let daemon = try DaemonUnderTest(bus: bus)
            let client = try PermissionsClient(bus: .address(bus.address))
            let one = Consumed(client.updates(for: .location))
            let all = Consumed(client.updates())
            #expect(try await one.wait(1) == ["not-determined"])
            #expect(try await all.wait(2) == ["location=not-determined", "notifications=not-determined"])
            bus.kill()
            let disconnected = "error: org.freedesktop.DBus.Error.Disconnected: "
            #expect(try await one.waitForFailure().hasPrefix(disconnected))
            #expect(try await all.waitForFailure().hasPrefix(disconnected))
            #expect(client.currentStatus(.location) == nil)
            // A stream begun after it ends at once, with the same error; calls throw it too.
            #expect(try await Consumed(client.updates()).waitForFailure().hasPrefix(disconnected))
            do {
                _ = try await client.status(.location)
                Issue.record("status() answered without a bus")
            } catch let error as PermissionsClientError {
                #expect(error.code == .disconnected, "\(error)")
            }
            daemon.kill()
        }
    }

    /// Dropping the client ends its streams (nothing could come on them any more).
    @Test func droppingTheClientEndsItsStreams() async throws {
        try await onOwnThreads {
            let bus = try TestBus()
            let daemon = try DaemonUnderTest(bus: bus)
            var client: PermissionsClient? = try PermissionsClient(bus: .address(bus.address))
            let seen = Consumed(client!.updates(for: .location))
            #expect(try await seen.wait(1) == ["not-determined"])
            client = nil
            #expect(try await seen.waitForEnd() == ["not-determined"])
            daemon.stop()
        }
    }

    /// A newer service may tell more in GetDiagnostics: identity() reads what it
    /// knows and leaves the rest; an answer without a key it needs is an error
    /// that names the key. The service here is a stand-in on a test bus: the real
    /// one sends only the keys of today.
    @Test func identityToleratesKeysItDoesNotKnow() async throws {
        try await onOwnThreads {
            let bus = try TestBus()
            let answer = Locked<DBusValue>(.vardict([
                ("app-id", .string("org.example.Newer")), ("identity-kind", .string("portal")),
                ("uid", .uint32(1000)), ("has-agent", .boolean(true)), ("version", .string("9.1")),
                ("unverified-reason", .string("")), ("agent-unreachable", .boolean(false)),
                ("extra", .array(elementSignature: "u", [.uint32(1), .uint32(2)])),
            ]))
            let queue = Queue(label: "stand-in-service")
            let service = try queue.sync { () throws -> Connection in
                let connection = try Connection.open(.address(bus.address), queue: queue)
                connection.export(ExportedObject(path: "/org/example/Permissions", interfaces: [
                    Interface("org.example.Permissions", methods: [
                        Method("GetDiagnostics") { $0.reply([answer.withLock { $0 }]) },
                    ]),
                ], introspection: ""))
                _ = try connection.requestName("org.example.Permissions")
                return connection
            }
            let client = try PermissionsClient(bus: .address(bus.address))
            #expect(try await client.identity() == AppIdentity(appID: "org.example.Newer", kind: .unknown("portal"),
                                                               uid: 1000, hasAgent: true, serviceVersion: "9.1"))
            answer.withLock { $0 = .vardict([("app-id", .string("org.example.Newer")), ("uid", .uint32(1000))]) }
            do {
                _ = try await client.identity()
                Issue.record("identity() answered without identity-kind and has-agent")
            } catch let error as PermissionsClientError {
                #expect(error.message == "GetDiagnostics answered without \"identity-kind\" (s)", "\(error)")
            }
            queue.sync { service.close() }
        }
    }
}

extension Consumed {
    /// Waits until the sequence ended with an error; returns its "error: …" line.
    func waitForFailure(timeout: TimeInterval = 15) async throws -> String {
        let ended = ended
        let end = try await offPool { try ended.wait(timeout: timeout, what: "the end") { !$0.isEmpty } }
        #expect(end.first?.hasPrefix("error: ") == true, "\(end)")
        return end.first ?? ""
    }
}
