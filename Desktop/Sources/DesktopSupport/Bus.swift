public import CAdw
public import PermissionsClient
internal import SystemPrimitives

// The desktop programs talk to the service through GDBus, not DBusKit. GLib's main
// loop, which GTK runs on the main thread, does not drain Dispatch's main queue on
// Linux, so DBusKit's callbacks (on a dispatch queue) would each have to be sent
// over with g_main_context_invoke, and every piece of state they touch be shared
// between two threads. GDBus delivers its method calls, replies and name changes
// as sources of the main context the widgets live on: one thread, no locks, no
// hand-over. The choice of bus is still the library's (`PermissionsClient.Bus`,
// PERMISSIONS_BUS read the way permissionsctl reads it).

/// The bus the options name (`--system`, `--session`, `--address ADDRESS`), else
/// PERMISSIONS_BUS, else the system bus: permissionsctl's rule.
public struct BusChoice {
    public let bus: PermissionsClient.Bus
    /// What was left after the bus options.
    public let rest: [String]

    public enum Problem: Error {
        case usage(String)
        case environment(String)
    }

    public static func parse(_ arguments: [String]) throws(Problem) -> BusChoice {
        var bus: PermissionsClient.Bus?
        var rest: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            switch argument {
            case "--system": bus = .system
            case "--session": bus = .session
            case "--address":
                index += 1
                guard index < arguments.count else { throw .usage("--address needs a value") }
                bus = .address(arguments[index])
            default:
                if argument.hasPrefix("--address=") { bus = .address(String(argument.dropFirst("--address=".count))) }
                else { rest.append(argument) }
            }
            index += 1
        }
        if let bus { return BusChoice(bus: bus, rest: rest) }
        do throws(PermissionsClientError) {
            return BusChoice(bus: try PermissionsClient.Bus.fromEnvironment(), rest: rest)
        } catch {
            throw .environment(error.message)
        }
    }

    /// A GDBus connection to the bus, or the error's message.
    public func connect() -> Result<OpaquePointer, GLibError> {
        var error: UnsafeMutablePointer<GError>?
        let connection: OpaquePointer?
        switch bus {
        case .system: connection = g_bus_get_sync(G_BUS_TYPE_SYSTEM, nil, &error)
        case .session: connection = g_bus_get_sync(G_BUS_TYPE_SESSION, nil, &error)
        case .address(let address):
            let flags = GDBusConnectionFlags(rawValue: G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT.rawValue
                                             | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION.rawValue)
            connection = g_dbus_connection_new_for_address_sync(address, flags, nil, nil, &error)
        }
        guard let connection else { return .failure(GLibError(taking: error)) }
        return .success(connection)
    }
}

/// A GError's message, the GError freed.
public struct GLibError: Error, CustomStringConvertible {
    public let description: String
    /// The D-Bus error name, for an error a peer sent.
    public let remoteName: String?

    public init(taking error: UnsafeMutablePointer<GError>?) {
        guard let error else {
            description = "unknown error"
            remoteName = nil
            return
        }
        remoteName = g_dbus_error_get_remote_error(error).map { name in
            defer { g_free(name) }
            return String(cString: name)
        }
        if remoteName != nil { g_dbus_error_strip_remote_error(error) }
        description = String(cString: error.pointee.message)
        g_error_free(error)
    }
}

/// A line on standard error, prefixed with the program's name.
public func printError(_ program: String, _ line: String) {
    _ = writeAll(2, Array("\(program): \(line)\n".utf8))
}
