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

    /// Prints a line per StatusChanged and PropertiesChanged until the bus goes away.
    /// The first line ("Monitoring …") is printed once the match rules are in force,
    /// so a script can wait for it before it changes anything.
    ///
    /// By default it calls Subscribe and prints its own user's stream (the changes
    /// of its user's decisions and the everyone-level ones, with that stream's
    /// serials), subscribing again when the service restarts; with `broadcast`,
    /// only the broadcast StatusChanged signals that any match rule sees
    /// (everyone-level changes, with ChangeSerial's serials).
    func monitor(broadcast: Bool, _ print: @escaping (String) -> Void) throws(BusError) -> Never {
        try connection.enableRouting()
        // Unattached, subscribe waits for the bus to accept each rule: once every
        // call returned without an error, the rules are in force.
        var refused: BusError?
        let added = { (error: BusError?) in refused = refused ?? error }
        let printStatus = { (message: Message) in
            let args = message.arguments()
            let a = args.map { $0.stringValue ?? "" }
            guard a.count >= 3 else { return }
            let serial = args.count > 3 ? args[3].uint64Value.map { " serial=\($0)" } ?? "" : ""
            print("StatusChanged app=\(a[0].isEmpty ? "*" : a[0]) permission=\(a[1]) status=\(a[2])\(serial)")
        }
        connection.subscribe(SignalMatch(sender: Self.name, path: Self.path,
                                         interface: "org.freedesktop.DBus.Properties",
                                         member: "PropertiesChanged"), added: added) { message in
            let changed = message.arguments().dropFirst().first?.stringKeyedEntries ?? []
            print("PropertiesChanged " + changed.map { "\($0.0)=\(Format.value($0.1))" }.joined(separator: " "))
        }
        if broadcast {
            connection.subscribe(SignalMatch(sender: Self.name, path: Self.path, interface: Self.interface,
                                             member: "StatusChanged"), added: added, handler: printStatus)
            if let refused { throw refused }
            print("Monitoring \(Self.name) for broadcast StatusChanged and PropertiesChanged")
        } else {
            // The stream is unicast: taken only from the service's current owner.
            var stream: Int?
            func subscribe(owner: String) throws(BusError) -> UInt64 {
                if let stream { connection.unsubscribe(stream) }
                stream = connection.subscribe(.unicast(to: connection.uniqueName, sender: owner,
                                                       path: Self.subscriptionPath, interface: Self.interface,
                                                       member: "StatusChanged"), added: added, handler: printStatus)
                return try call("Subscribe", .vardict([])).first?.uint64Value ?? 0
            }
            connection.subscribe(SignalMatch(sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus",
                                             member: "NameOwnerChanged", arg0: Self.name), added: added) { message in
                let args = message.arguments()
                guard args.count == 3, let owner = args[2].stringValue, !owner.isEmpty else { return }
                do throws(BusError) {
                    print("Subscribed to \(Self.name) at \(owner) (serial \(try subscribe(owner: owner)))")
                } catch {
                    print("Cannot subscribe again to \(Self.name): \(error.message) (\(error.name))")
                }
            }
            // Not running yet: the NameOwnerChanged rule subscribes once it is.
            let owner = try? busCall("GetNameOwner", .string(Self.name)).first?.stringValue
            if let refused { throw refused }
            if let owner {
                let serial = try subscribe(owner: owner)
                print("Monitoring \(Self.name) for your StatusChanged (serial \(serial)) and PropertiesChanged")
            } else {
                print("Monitoring \(Self.name) for your StatusChanged and PropertiesChanged once it runs")
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
