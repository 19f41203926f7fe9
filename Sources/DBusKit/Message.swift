internal import CDBus

/// A D-Bus message (method call, reply, error or signal), reference counted by libdbus.
///
/// `@unchecked Sendable`: libdbus reference counts messages atomically, and a
/// `Message` is never mutated after `append` has finished, so sharing a finished
/// message between threads is safe. Building one happens on a single thread.
public final class Message: @unchecked Sendable {
    let raw: OpaquePointer

    /// Takes over one reference that the caller owns.
    init(owning raw: OpaquePointer) {
        self.raw = raw
    }

    /// Adds a reference to a message that libdbus lends us.
    init(borrowing raw: OpaquePointer) {
        dbus_message_ref(raw)
        self.raw = raw
    }

    deinit { dbus_message_unref(raw) }

    public static func methodCall(destination: String?, path: String, interface: String?,
                                  member: String) throws(BusError) -> Message {
        try ObjectPath.validate(path)
        if let interface { try InterfaceName.validate(interface) }
        try MemberName.validate(member)
        if let destination { try BusName.validate(destination) }
        guard let raw = dbus_message_new_method_call(destination, path, interface, member) else {
            fatalError("dbus_message_new_method_call: out of memory")
        }
        return Message(owning: raw)
    }

    /// A signal, broadcast as it is; `Connection.sendCopies` unicasts copies of it.
    public static func signal(path: String, interface: String, member: String) throws(BusError) -> Message {
        try ObjectPath.validate(path)
        try InterfaceName.validate(interface)
        try MemberName.validate(member)
        guard let raw = dbus_message_new_signal(path, interface, member) else {
            fatalError("dbus_message_new_signal: out of memory")
        }
        return Message(owning: raw)
    }

    /// An exact copy without a serial, so that it can be sent as a call of its own
    /// (libdbus copies the marshalled bytes: nothing is validated or built again).
    public func copy() -> Message {
        guard let raw = dbus_message_copy(raw) else { fatalError("dbus_message_copy: out of memory") }
        return Message(owning: raw)
    }

    /// A method return for this call.
    public func makeReply() -> Message {
        guard let raw = dbus_message_new_method_return(raw) else {
            fatalError("dbus_message_new_method_return: out of memory")
        }
        return Message(owning: raw)
    }

    /// An error reply for this call. Invalid error names fall back to `Failed`, so a
    /// bug in an error name can never stop the caller from getting a reply.
    public func makeErrorReply(_ error: BusError) -> Message {
        let name = (try? InterfaceName.validate(error.name)) != nil ? error.name : BusError.failed
        let text = error.message.replacingNUL()
        guard let raw = dbus_message_new_error(raw, name, text) else {
            fatalError("dbus_message_new_error: out of memory")
        }
        return Message(owning: raw)
    }

    public enum Kind: Sendable { case methodCall, methodReturn, error, signal, invalid }

    public var kind: Kind {
        switch dbus_message_get_type(raw) {
        case DBUS_MESSAGE_TYPE_METHOD_CALL: .methodCall
        case DBUS_MESSAGE_TYPE_METHOD_RETURN: .methodReturn
        case DBUS_MESSAGE_TYPE_ERROR: .error
        case DBUS_MESSAGE_TYPE_SIGNAL: .signal
        default: .invalid
        }
    }

    public var path: String? { dbus_message_get_path(raw).map { String(cString: $0) } }
    public var interface: String? { dbus_message_get_interface(raw).map { String(cString: $0) } }
    public var member: String? { dbus_message_get_member(raw).map { String(cString: $0) } }
    /// The unique name of the sender (set by the bus daemon, so it can be trusted).
    public var sender: String? { dbus_message_get_sender(raw).map { String(cString: $0) } }
    public var destination: String? { dbus_message_get_destination(raw).map { String(cString: $0) } }
    public var signature: String { dbus_message_get_signature(raw).map { String(cString: $0) } ?? "" }
    public var errorName: String? { dbus_message_get_error_name(raw).map { String(cString: $0) } }
    public var noReplyExpected: Bool { dbus_message_get_no_reply(raw) != 0 }
    public var serial: UInt32 { dbus_message_get_serial(raw) }
    public var containsUnixFDs: Bool { dbus_message_contains_unix_fds(raw) != 0 }

    /// Appends values in order. Values are validated first, so a bad string or
    /// object path is a thrown error rather than a libdbus assertion.
    public func append(_ values: [DBusValue]) throws(BusError) {
        for value in values { try MessageCoding.validate(value) }
        let total = signature.utf8.count + values.reduce(0) { $0 + $1.signature.utf8.count }
        guard total <= MessageCoding.maxSignatureLength else {
            throw BusError(BusError.invalidArgs, "the arguments' signature would be \(total) bytes; the limit is 255")
        }
        var iter = DBusMessageIter()
        dbus_message_iter_init_append(raw, &iter)
        for value in values { MessageCoding.append(value, to: &iter) }
    }

    public func append(_ values: DBusValue...) throws(BusError) { try append(values) }

    /// Every argument of the message, decoded.
    public func arguments() -> [DBusValue] {
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(raw, &iter) != 0 else { return [] }
        var result: [DBusValue] = []
        repeat {
            if let value = MessageCoding.read(&iter) { result.append(value) }
        } while dbus_message_iter_next(&iter) != 0
        return result
    }

    /// For an error message, the error it carries.
    public var asError: BusError? {
        guard kind == .error else { return nil }
        let text = arguments().first?.stringValue ?? ""
        return BusError(errorName ?? BusError.failed, text)
    }
}

extension String {
    /// D-Bus strings cannot contain NUL; error texts quote user input, so we escape it.
    func replacingNUL() -> String {
        contains("\0") ? split(separator: "\0", omittingEmptySubsequences: false).joined(separator: "\\0") : self
    }
}
