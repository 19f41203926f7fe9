import DBusKit
import Glibc
import PermissionsModel

/// Blocking calls to org.example.Permissions, for a command-line tool.
struct Client {
    static let name = BusNames.busName
    static let path = BusNames.objectPath
    static let interface = BusNames.interfaceName
    let connection: Connection

    init(bus: Bus) throws(BusError) {
        connection = try Connection.open(bus)
    }

    /// libdbus's DBUS_TIMEOUT_INFINITE: a prompt may take as long as the user does.
    static let noTimeout: Int32 = 0x7fff_ffff

    func call(_ member: String, _ arguments: DBusValue..., timeout: Int32 = 25_000) throws(BusError) -> [DBusValue] {
        try call(member, arguments: arguments, timeout: timeout)
    }

    func call(_ member: String, arguments: [DBusValue], timeout: Int32 = 25_000) throws(BusError) -> [DBusValue] {
        let message = try Message.methodCall(destination: Self.name, path: Self.path, interface: Self.interface,
                                             member: member)
        try message.append(arguments)
        let reply = try connection.callBlocking(message, timeoutMilliseconds: timeout)
        if let error = reply.asError { throw error }
        return reply.arguments()
    }

    func property(_ name: String) throws(BusError) -> DBusValue {
        let message = try Message.methodCall(destination: Self.name, path: Self.path,
                                             interface: "org.freedesktop.DBus.Properties", member: "Get")
        try message.append(.string(Self.interface), .string(name))
        let reply = try connection.callBlocking(message)
        if let error = reply.asError { throw error }
        guard case .variant(let value)? = reply.arguments().first else { return .strings([]) }
        return value
    }

    /// Where the service sends a subscriber its own StatusChanged signals.
    static let subscriptionPath = BusNames.objectPath + "/Subscription"

    /// Reports each StatusChanged and PropertiesChanged, and the service leaving
    /// and returning, until the bus goes away. The first event (`.monitoring`) comes
    /// once the match rules are in force, so a script can wait for it before it
    /// changes anything.
    ///
    /// By default it calls Subscribe and reports its own user's stream (the changes
    /// of its user's decisions and the everyone-level ones, with that stream's
    /// serials), subscribing again when the service restarts; with `broadcast`,
    /// only the broadcast StatusChanged signals that any match rule sees
    /// (everyone-level changes, with ChangeSerial's serials).
    func monitor(broadcast: Bool, _ report: @escaping (MonitorEvent) -> Void) throws(BusError) -> Never {
        try connection.enableRouting()
        // Unattached, subscribe waits for the bus to accept each rule: once every
        // call returned without an error, the rules are in force.
        var refused: BusError?
        let added = { (error: BusError?) in refused = refused ?? error }
        let reportStatus = { (message: Message) in
            let args = message.arguments()
            let a = args.map { $0.stringValue ?? "" }
            guard a.count >= 3 else { return }
            report(.statusChanged(app: a[0], permission: a[1], status: a[2],
                                  serial: args.count > 3 ? args[3].uint64Value : nil))
        }
        connection.subscribe(SignalMatch(sender: Self.name, path: Self.path,
                                         interface: "org.freedesktop.DBus.Properties",
                                         member: "PropertiesChanged"), added: added) { message in
            report(.propertiesChanged(message.arguments().dropFirst().first?.stringKeyedEntries ?? []))
        }
        // The service leaving or returning: NameOwnerChanged from the bus driver.
        let ownerChanges = SignalMatch(sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus",
                                       member: "NameOwnerChanged", arg0: Self.name)
        if broadcast {
            connection.subscribe(SignalMatch(sender: Self.name, path: Self.path, interface: Self.interface,
                                             member: "StatusChanged"), added: added, handler: reportStatus)
            connection.subscribe(ownerChanges, added: added) { message in
                let args = message.arguments()
                guard args.count == 3, let owner = args[2].stringValue else { return }
                report(owner.isEmpty ? .serviceLeft : .serviceReturned(owner: owner, broadcast: true, serial: nil))
            }
            if let refused { throw refused }
            report(.monitoring(broadcast: true, serial: nil, running: true))
        } else {
            // The stream is unicast: taken only from the service's current owner.
            var stream: Int?
            func subscribe(owner: String) throws(BusError) -> UInt64 {
                if let stream { connection.unsubscribe(stream) }
                stream = connection.subscribe(.unicast(to: connection.uniqueName, sender: owner,
                                                       path: Self.subscriptionPath, interface: Self.interface,
                                                       member: "StatusChanged"), added: added, handler: reportStatus)
                return try call("Subscribe", .vardict([])).first?.uint64Value ?? 0
            }
            connection.subscribe(ownerChanges, added: added) { message in
                let args = message.arguments()
                guard args.count == 3, let owner = args[2].stringValue else { return }
                guard !owner.isEmpty else { return report(.serviceLeft) }
                do throws(BusError) {
                    report(.serviceReturned(owner: owner, broadcast: false, serial: try subscribe(owner: owner)))
                } catch {
                    report(.subscribeFailed(error))
                }
            }
            // Not running yet: the NameOwnerChanged rule subscribes once it is.
            let owner = try? busCall("GetNameOwner", .string(Self.name)).first?.stringValue
            if let refused { throw refused }
            if let owner {
                report(.monitoring(broadcast: false, serial: try subscribe(owner: owner), running: true))
            } else {
                report(.monitoring(broadcast: false, serial: nil, running: false))
            }
        }
        while connection.readWriteDispatch(timeoutMilliseconds: -1) {}
        throw BusError(BusError.disconnected, "the bus closed the connection")
    }

    /// A call to the bus driver (org.freedesktop.DBus).
    func busCall(_ member: String, _ arguments: DBusValue...) throws(BusError) -> [DBusValue] {
        let message = try Message.methodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                             interface: "org.freedesktop.DBus", member: member)
        try message.append(arguments)
        let reply = try connection.callBlocking(message)
        if let error = reply.asError { throw error }
        return reply.arguments()
    }
}
