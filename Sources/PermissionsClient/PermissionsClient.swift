import DBusKit
import Glibc
import PermissionsModel
internal import SystemPrimitives

/// The permissions service (org.example.Permissions) as an app sees it: its own
/// status of each permission, requests that may prompt the user, and streams of
/// changes. Every answer is this app's: the service identifies the app from its
/// bus credentials, never from anything sent (`identity()` tells what it took the
/// app for).
///
/// `PermissionsClient()` talks to the service where it is installed, on the
/// system bus; a developer points it elsewhere with `PERMISSIONS_BUS` (see `Bus`)
/// or by naming the bus in `init(bus:)`.
///
/// One client keeps one connection for reads and change streams; each request
/// takes a connection of its own (see `request(_:reason:)`). Use it from any task
/// or thread.
public final class PermissionsClient: Sendable {
    /// Which bus the service is on.
    public enum Bus: Sendable, Equatable {
        /// The session bus (`DBUS_SESSION_BUS_ADDRESS`): where `scripts/dev-up`
        /// runs a development daemon.
        case session
        /// The system bus, where an installed service runs: the default.
        case system
        /// A bus daemon's address, such as `unix:path=/run/dbus/system_bus_socket`.
        case address(String)

        /// The environment variable that picks the bus of `PermissionsClient()`
        /// (and of `permissionsctl` without a bus option): `system`, `session`, or
        /// a D-Bus address such as `unix:path=/tmp/bus`.
        public static let environmentVariable = "PERMISSIONS_BUS"

        /// The bus `value` names, as `PERMISSIONS_BUS` takes it: `system`,
        /// `session`, or a D-Bus address (`unix:path=…`, checked as libdbus
        /// parses it).
        /// - Throws: `.unavailable` (`org.freedesktop.DBus.Error.BadAddress`),
        ///   whose message quotes the value, for anything else.
        public init(parsing value: String) throws(PermissionsClientError) {
            switch value {
            case "system": self = .system
            case "session": self = .session
            default:
                if let problem = BusAddress.problem(in: value) {
                    throw PermissionsClientError(
                        .unavailable, name: BusError.badAddress,
                        message: "\(Self.environmentVariable)=\"\(value.escapedForMessage)\": expected system, "
                            + "session or a D-Bus address such as unix:path=/run/dbus/system_bus_socket (\(problem))")
                }
                self = .address(value)
            }
        }

        /// The bus `PERMISSIONS_BUS` names, or `.system` when it is unset or empty.
        /// - Throws: `.unavailable` for a value `init(parsing:)` refuses: a typo
        ///   is told, never taken for the system bus.
        public static func fromEnvironment() throws(PermissionsClientError) -> Bus {
            guard let value = getenv(environmentVariable).map({ String(cString: $0) }), !value.isEmpty else {
                return .system
            }
            return try Bus(parsing: value)
        }
    }

    let bus: Bus
    let timers: any Timers
    let queue = Queue(label: "permissions-client")
    let connection: Connection
    let hub: UpdateHub
    /// Request connections whose last request ended with an answer, for the next
    /// one: a session grant (`allow-session`) lasts until its connection leaves
    /// the bus, so it lasts as long as this client.
    let idleRequestConnections = Locked<[RequestConnection]>([])

    /// Connects to the bus `PERMISSIONS_BUS` names, or else to the system bus,
    /// where the installed service runs (`Bus.fromEnvironment()`).
    /// - Throws: `.unavailable` when the bus cannot be reached, or for a
    ///   `PERMISSIONS_BUS` that names no bus.
    public convenience init() throws(PermissionsClientError) {
        try self.init(bus: Bus.fromEnvironment())
    }

    /// Connects to `bus` (one blocking round trip, Hello), whatever
    /// `PERMISSIONS_BUS` says. The service need not run yet: a call starts it
    /// when the bus can (D-Bus activation), and so does `updates`; otherwise
    /// calls throw `.unavailable`, and `updates` waits for it.
    /// - Throws: `.unavailable` when the bus cannot be reached.
    public convenience init(bus: Bus) throws(PermissionsClientError) {
        try self.init(bus: bus, timers: DispatchTimers())
    }

    /// `init(bus:)` with the timeouts of every connection of the client (its
    /// calls' and its requests') armed on `timers`: a test's `ManualClock` lets
    /// it show what a long wait does without waiting. Internal: the tests reach it
    /// through `@testable import`.
    init(bus: Bus, timers: any Timers) throws(PermissionsClientError) {
        self.bus = bus
        self.timers = timers
        do {
            connection = try Connection.open(bus.dbusKit, queue: queue, timers: timers)
        } catch {
            throw PermissionsClientError(.unavailable, name: error.name, message: "cannot connect to the bus: \(error.message)")
        }
        hub = UpdateHub(connection: connection)
    }

    /// The unique name of this client's connection for reads and updates (for
    /// diagnostics: `GetConnectionStats`, `busctl status`).
    public var uniqueName: String { connection.uniqueName }

    /// This app's status of `permission`, read now (`GetStatus`). Never prompts.
    /// - Throws: `.unknownPermission`, `.unknownCaller`, `.unavailable`, ….
    public func status(_ permission: Permission) async throws(PermissionsClientError) -> PermissionStatus {
        let reply = try await call("GetStatus", [.string(permission.rawValue)])
        return PermissionStatus(word: reply.first?.stringValue ?? "")
    }

    /// This app's status of every permission the service knows, read now in one
    /// call (`GetAll`). Never prompts.
    public func statuses() async throws(PermissionsClientError) -> [Permission: PermissionStatus] {
        let reply = try await call("GetAll", [])
        var all: [Permission: PermissionStatus] = [:]
        for (name, value) in reply.first?.stringKeyedEntries ?? [] {
            all[Permission(name)] = PermissionStatus(word: value.stringValue ?? "")
        }
        return all
    }

    /// This app's status of `permission` from the cache that a running `updates`
    /// stream keeps current, without a call: nil while no stream runs, before its
    /// first read, and while the service is not on the bus (a cached value could
    /// be stale then).
    public func currentStatus(_ permission: Permission) -> PermissionStatus? {
        hub.cached(permission)
    }

    /// A method call on the service, answered on the client's queue; the reply's
    /// arguments or the sorted error.
    func call(_ member: String, _ arguments: [DBusValue], interface: String = BusNames.interfaceName,
              destination: String = BusNames.busName) async throws(PermissionsClientError) -> [DBusValue] {
        let connection = connection
        let result: Result<[DBusValue], PermissionsClientError> = await withCheckedContinuation { done in
            connection.async {
                connection.callService(member, arguments, interface: interface, destination: destination) {
                    done.resume(returning: $0)
                }
            }
        }
        return try result.get()
    }

    deinit {
        let connection = connection
        let hub = hub
        queue.async {
            hub.stop()
            connection.close()
        }
        for idle in idleRequestConnections.withLock({ $0 }) { idle.close() }
    }
}

extension PermissionsClient.Bus {
    var dbusKit: DBusKit.Bus {
        switch self {
        case .session: .session
        case .system: .system
        case .address(let address): .address(address)
        }
    }
}

extension Connection {
    /// Calls `member` on the service (on the connection's queue) and hands `done`
    /// the reply's arguments or the sorted error, on the queue.
    func callService(_ member: String, _ arguments: [DBusValue], interface: String = BusNames.interfaceName,
                     destination: String = BusNames.busName, timeout: Int32 = 25_000,
                     done: @escaping (Result<[DBusValue], PermissionsClientError>) -> Void) {
        do {
            let message = try Message.methodCall(destination: destination, path: BusNames.objectPath,
                                                 interface: interface, member: member)
            try message.append(arguments)
            call(message, timeoutMilliseconds: timeout) { result in
                switch result {
                case .success(let reply): done(.success(reply.arguments()))
                case .failure(let error): done(.failure(PermissionsClientError(error)))
                }
            }
        } catch {
            done(.failure(PermissionsClientError(error)))
        }
    }

    /// A call to the bus driver (org.freedesktop.DBus), on the queue.
    func callBus(_ member: String, _ arguments: [DBusValue],
                 done: @escaping (Result<[DBusValue], PermissionsClientError>) -> Void) {
        do {
            let message = try Message.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                                 interface: "org.freedesktop.DBus", member: member)
            try message.append(arguments)
            call(message) { result in
                switch result {
                case .success(let reply): done(.success(reply.arguments()))
                case .failure(let error): done(.failure(PermissionsClientError(error)))
                }
            }
        } catch {
            done(.failure(PermissionsClientError(error)))
        }
    }
}
