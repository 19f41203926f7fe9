internal import CDBus
internal import SystemPrimitives

/// One incoming method call, answered exactly once with `reply` or `fail`, now or
/// later (a handler may keep it while it waits for the user or another service).
///
/// Confined to the connection's queue, like the connection.
public final class MethodCall {
    public let message: Message
    /// The arguments, already checked against the method's input signature (empty
    /// until then: the router decodes them only after that check).
    public internal(set) var arguments: [DBusValue]
    public let connection: Connection
    private var answered = false
    /// Runs once when the call is answered, on the queue; for a call dropped
    /// unanswered, when its automatic error goes. For counting what waits.
    public var onAnswer: (() -> Void)?
    /// Whether `reply` or `fail` has run.
    public var isAnswered: Bool { answered }

    init(message: Message, arguments: [DBusValue], connection: Connection) {
        self.message = message
        self.arguments = arguments
        self.connection = connection
    }

    /// The caller's unique bus name, set by the bus daemon.
    public var sender: String { message.sender ?? "" }

    public func reply(_ values: [DBusValue] = []) {
        guard !answered else { return }
        answered = true
        answerTaken()
        guard !message.noReplyExpected else { return }
        let reply = message.makeReply()
        do {
            try reply.append(values)
        } catch {
            // Our own reply did not marshal: a bug, but the caller still gets an answer.
            return send(message.makeErrorReply(BusError(BusError.failed, "internal error: \(error.message)")))
        }
        do {
            try connection.send(reply)
        } catch {
            // libdbus could not queue the reply: the smaller error reply may still go.
            send(message.makeErrorReply(error))
        }
    }

    public func fail(_ error: BusError) {
        guard !answered else { return }
        answered = true
        answerTaken()
        guard !message.noReplyExpected else { return }
        send(message.makeErrorReply(error))
    }

    private func answerTaken() {
        let hook = onAnswer
        onAnswer = nil
        hook?()
    }

    /// Sends an answer; one that cannot be queued is reported to the connection's
    /// owner, as the caller cannot be told.
    private func send(_ answer: Message) {
        Self.send(answer, to: message, on: connection)
    }

    private static func send(_ answer: Message, to call: Message, on connection: Connection) {
        do {
            try connection.send(answer)
        } catch {
            connection.report(BusError(error.name, "cannot answer \((call.member ?? "").escapedForMessage) "
                                         + "from \(call.sender ?? "?"): \(error.message)"))
        }
    }

    deinit {
        // A handler that forgot to answer must not leave the caller waiting 25 s.
        // The last reference may go on any thread, so the reply is sent, and the
        // answer hook run, from the queue.
        guard !answered else { return }
        let hook = onAnswer.map { QueueConfined($0) }
        let reply = message.noReplyExpected ? nil : message.makeErrorReply(BusError(BusError.failed, "the call was dropped"))
        if reply == nil, hook == nil { return }
        let (connection, call) = (self.connection, message)
        connection.queue.async {
            if let reply { Self.send(reply, to: call, on: connection) }
            hook?.value()
        }
    }
}

/// A method in an exported interface.
public struct Method {
    public let name: String
    public let inputSignature: String
    public let handler: (MethodCall) -> Void

    public init(_ name: String, input: String = "", handler: @escaping (MethodCall) -> Void) {
        self.name = name
        self.inputSignature = input
        self.handler = handler
    }
}

/// A read-only property; its value is read when asked for (Get, GetAll,
/// PropertiesChanged), so it is always current.
public struct Property {
    public let name: String
    public let get: () -> DBusValue

    public init(_ name: String, get: @escaping () -> DBusValue) {
        self.name = name
        self.get = get
    }
}

public struct Interface {
    public let name: String
    public let methods: [String: Method]
    public let properties: [String: Property]
    /// Property names in the order GetAll returns them.
    let propertyOrder: [String]

    public init(_ name: String, methods: [Method], properties: [Property] = []) {
        self.name = name
        self.methods = Dictionary(methods.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        self.properties = Dictionary(properties.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        self.propertyOrder = properties.map(\.name)
    }
}

/// An object at a path with its interfaces. `introspection` is the `<interface>`
/// XML of those interfaces, returned by Introspect as is.
public final class ExportedObject {
    public let path: String
    public let interfaces: [String: Interface]
    /// Made at the first Introspect, not with the object: the service's XML is
    /// decoded from the 50 KiB interface file, which no start needs
    /// (doc/performance.md, "Start-up's own work, counted").
    public var introspection: String { makeIntrospection() }
    private let makeIntrospection: () -> String

    public init(path: String, interfaces: [Interface], introspection: @autoclosure @escaping () -> String) {
        self.path = path
        self.interfaces = Dictionary(interfaces.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        makeIntrospection = introspection
    }

    /// Emits org.freedesktop.DBus.Properties.PropertiesChanged with the current
    /// values of the named properties.
    public func emitPropertiesChanged(on connection: Connection, interface: String, _ names: [String]) {
        guard let iface = interfaces[interface] else { return }
        let changed = names.compactMap { name in iface.properties[name].map { (name, $0.get()) } }
        try? connection.emitSignal(path: path, interface: "org.freedesktop.DBus.Properties",
                                   member: "PropertiesChanged",
                                   [.string(interface), .vardict(changed), .strings([])])
    }
}

/// Routes method calls to exported objects, and answers the standard Peer,
/// Introspectable and Properties interfaces for them.
enum ObjectRouter {
    static let peerInterface = "org.freedesktop.DBus.Peer"
    static let propertiesInterface = "org.freedesktop.DBus.Properties"
    static let introspectableInterface = "org.freedesktop.DBus.Introspectable"

    /// The input signature of every method of the standard interfaces. A call with
    /// other arguments gets InvalidArgs, as a call to one of our own methods does.
    static let standardSignatures: [String: [String: String]] = [
        peerInterface: ["Ping": "", "GetMachineId": ""],
        introspectableInterface: ["Introspect": ""],
        propertiesInterface: ["Get": "ss", "GetAll": "s", "Set": "ssv"],
    ]

    static func dispatch(_ message: Message, objects: [String: ExportedObject], connection: Connection) {
        let path = message.path ?? "/"
        let member = message.member ?? ""
        // No method here takes file descriptors; a message carrying some would hold
        // them open for as long as the call waits (a prompt, polkit).
        if message.containsUnixFDs {
            return MethodCall(message: message, arguments: [], connection: connection)
                .fail(BusError(BusError.invalidArgs, "file descriptors are not accepted"))
        }
        // Arguments are decoded only once the signature is known to be the method's:
        // decoding builds a value per element, so a large message of the wrong type
        // (a 30 MB `ay` to GetStatus) must be refused from its signature alone, and
        // one of the right type from the connection's limits (ArgumentLimits.swift),
        // checked on libdbus's iterator. nil: refused.
        let bare = MethodCall(message: message, arguments: [], connection: connection)
        func decoded() -> MethodCall? {
            if let limits = connection.argumentLimits, let problem = limits.violation(message.raw) {
                bare.fail(limits.error("\(member.escapedForMessage): \(problem)"))
                return nil
            }
            bare.arguments = message.arguments()
            return bare
        }

        // Peer is answered at every path, exported or not, as libdbus would.
        if message.interface == peerInterface {
            return standard(bare, peerInterface, member) { peer(bare, member: member) }
        }
        if message.interface == introspectableInterface || (message.interface == nil && member == "Introspect") {
            return standard(bare, introspectableInterface, member) {
                bare.reply([.string(introspect(path, objects: objects))])
            }
        }
        guard let object = objects[path] else {
            return bare.fail(BusError(BusError.unknownObject, "no object at path \"\(path.escapedForMessage)\""))
        }
        let propertyMethod = ["Get", "GetAll", "Set"].contains(member)
            && !object.interfaces.values.contains { $0.methods[member] != nil }
        if message.interface == propertiesInterface || (message.interface == nil && propertyMethod) {
            return standard(bare, propertiesInterface, member) {
                if let call = decoded() { properties(call, object: object, member: member) }
            }
        }
        let candidates: [Interface]
        if let name = message.interface {
            guard let iface = object.interfaces[name] else {
                return bare.fail(BusError(BusError.unknownInterface,
                                          "no interface \"\(name.escapedForMessage)\" at \(path)"))
            }
            candidates = [iface]
        } else {
            candidates = Array(object.interfaces.values)
        }
        guard let method = candidates.lazy.compactMap({ $0.methods[member] }).first else {
            return bare.fail(unknownMethod(message))
        }
        guard message.signature == method.inputSignature else {
            return bare.fail(wrongSignature(message, expected: method.inputSignature))
        }
        if let call = decoded() { method.handler(call) }
    }

    /// A call to a method of a standard interface: UnknownMethod for a member it does
    /// not have, InvalidArgs for arguments of another type, else `answer`.
    private static func standard(_ call: MethodCall, _ interface: String, _ member: String, answer: () -> Void) {
        guard let expected = standardSignatures[interface]?[member] else {
            return call.fail(BusError(BusError.unknownMethod,
                                      "no method \"\(member.escapedForMessage)\" in interface \"\(interface)\""))
        }
        guard call.message.signature == expected else {
            return call.fail(wrongSignature(call.message, expected: expected))
        }
        answer()
    }

    private static func wrongSignature(_ message: Message, expected: String) -> BusError {
        BusError(BusError.invalidArgs, "\((message.member ?? "").escapedForMessage) takes arguments of type "
                   + "'\(expected)', not '\(message.signature.escapedForMessage)'")
    }

    private static func peer(_ call: MethodCall, member: String) {
        guard member == "GetMachineId" else { return call.reply() }  // Ping
        let error = CError()
        guard let id = dbus_try_get_local_machine_id(&error.raw) else { return call.fail(error.busError) }
        defer { dbus_free(id) }
        call.reply([.string(String(cString: id))])
    }

    private static func unknownMethod(_ message: Message) -> BusError {
        BusError(BusError.unknownMethod,
                 "no method \"\((message.member ?? "").escapedForMessage)\" in interface "
                   + "\"\((message.interface ?? "").escapedForMessage)\"")
    }

    private static func properties(_ call: MethodCall, object: ExportedObject, member: String) {
        let args = call.arguments
        let sig = call.message.signature
        func interface(_ name: String) -> Interface? { object.interfaces[name] }
        switch (member, sig) {
        case ("Get", "ss"):
            let (ifaceName, prop) = (args[0].stringValue!, args[1].stringValue!)
            guard let iface = interface(ifaceName) else {
                return call.fail(BusError(BusError.unknownInterface, "no interface \"\(ifaceName.escapedForMessage)\""))
            }
            guard let property = iface.properties[prop] else {
                return call.fail(BusError(BusError.unknownProperty, "no property \"\(prop.escapedForMessage)\""))
            }
            call.reply([.variant(property.get())])
        case ("GetAll", "s"):
            let ifaceName = args[0].stringValue!
            // An empty interface name asks for the properties of every interface.
            let ifaces = ifaceName.isEmpty ? object.interfaces.keys.sorted().compactMap(interface)
                                           : interface(ifaceName).map { [$0] }
            guard let ifaces else {
                return call.fail(BusError(BusError.unknownInterface, "no interface \"\(ifaceName.escapedForMessage)\""))
            }
            call.reply([.vardict(ifaces.flatMap { i in i.propertyOrder.map { ($0, i.properties[$0]!.get()) } })])
        case ("Set", "ssv"):
            let (ifaceName, prop) = (args[0].stringValue!, args[1].stringValue!)
            guard let iface = interface(ifaceName) else {
                return call.fail(BusError(BusError.unknownInterface, "no interface \"\(ifaceName.escapedForMessage)\""))
            }
            call.fail(iface.properties[prop] != nil
                      ? BusError(BusError.propertyReadOnly, "property \"\(prop)\" is read-only")
                      : BusError(BusError.unknownProperty, "no property \"\(prop.escapedForMessage)\""))
        default:
            // `standard` let through only these three members with their signatures.
            call.fail(wrongSignature(call.message, expected: standardSignatures[propertiesInterface]?[member] ?? ""))
        }
    }

    /// Introspection of `path`: its own interfaces if it is exported, and a `<node>`
    /// for each next path element leading to an exported object (so `busctl tree` works).
    static func introspect(_ path: String, objects: [String: ExportedObject]) -> String {
        let prefix = path == "/" ? "/" : path + "/"
        var children = Set<String>()
        for other in objects.keys where other.hasPrefix(prefix) && other != path {
            if let first = other.dropFirst(prefix.count).split(separator: "/").first { children.insert(String(first)) }
        }
        var xml = """
            <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
            <node>

            """
        if let object = objects[path] {
            xml += standardInterfaces + object.introspection
        }
        for child in children.sorted() { xml += " <node name=\"\(child)\"/>\n" }
        return xml + "</node>\n"
    }

    static let standardInterfaces = """
         <interface name="org.freedesktop.DBus.Peer">
          <method name="Ping"/>
          <method name="GetMachineId"><arg type="s" name="machine_uuid" direction="out"/></method>
         </interface>
         <interface name="org.freedesktop.DBus.Introspectable">
          <method name="Introspect"><arg name="xml_data" type="s" direction="out"/></method>
         </interface>
         <interface name="org.freedesktop.DBus.Properties">
          <method name="Get">
           <arg name="interface_name" direction="in" type="s"/>
           <arg name="property_name" direction="in" type="s"/>
           <arg name="value" direction="out" type="v"/>
          </method>
          <method name="GetAll">
           <arg name="interface_name" direction="in" type="s"/>
           <arg name="props" direction="out" type="a{sv}"/>
          </method>
          <method name="Set">
           <arg name="interface_name" direction="in" type="s"/>
           <arg name="property_name" direction="in" type="s"/>
           <arg name="value" direction="in" type="v"/>
          </method>
          <signal name="PropertiesChanged">
           <arg type="s" name="interface_name"/>
           <arg type="a{sv}" name="changed_properties"/>
           <arg type="as" name="invalidated_properties"/>
          </signal>
         </interface>

        """
}
