internal import CDBus
internal import Glibc

/// A method with a fixed input signature that is answered without the generic
/// machinery: no `Message` object, no `DBusValue` decoding or encoding, no Swift
/// strings for the path, interface and member. The filter compares the message's
/// header with these C strings inside libdbus (`strcmp`), and the handler reads
/// its one argument and writes its reply with libdbus's iterators.
///
/// A handler answers the calls it can answer at once and declines (returns false)
/// the rest, which then take the ordinary way through `ObjectRouter`: a bad
/// argument, an unknown caller, a call that has to wait. So every error, and every
/// call without an interface header, keeps the one behaviour the router defines.
///
/// The four names are C strings made once when the method is added and kept for the
/// connection's life (a few per connection, never removed): matching a call then
/// reads them in place, with no reference counting per call, which copying Swift
/// arrays out of the table would cost (measured with `perf`: swift_retain/release
/// were 3 % of a GetStatus).
final class FastMethod {
    let path: UnsafeMutablePointer<CChar>
    let interface: UnsafeMutablePointer<CChar>
    let member: UnsafeMutablePointer<CChar>
    let signature: UnsafeMutablePointer<CChar>
    let handler: (borrowing FastMethodCall) -> Bool

    init(path: String, interface: String, member: String, signature: String,
         handler: @escaping (borrowing FastMethodCall) -> Bool) {
        self.path = strdup(path)
        self.interface = strdup(interface)
        self.member = strdup(member)
        self.signature = strdup(signature)
        self.handler = handler
    }

    deinit {
        free(path)
        free(interface)
        free(member)
        free(signature)
    }

    /// Whether `raw` calls this method (libdbus compares its header fields).
    func matches(_ raw: OpaquePointer) -> Bool {
        dbus_message_is_method_call(raw, interface, member) != 0 && dbus_message_has_path(raw, path) != 0
            && dbus_message_has_signature(raw, signature) != 0
    }
}

/// One incoming call on the fast path, valid only while its handler runs (the
/// message is libdbus's, lent to the filter).
public struct FastMethodCall: ~Copyable {
    let raw: OpaquePointer
    let connection: Connection

    /// The caller's unique bus name, set by the bus daemon (a small string: no
    /// allocation for names up to 15 bytes, such as `:1.1234`).
    public var sender: String { dbus_message_get_sender(raw).map { String(cString: $0) } ?? "" }

    /// The first argument, which the signature check made a string; "" if it is
    /// longer than the connection's limit for strings (the ordinary way then
    /// refuses it), so that a huge one is never copied.
    public var firstString: String {
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(raw, &iter) != 0, dbus_message_iter_get_arg_type(&iter) == typeString
        else { return "" }
        var value: UnsafePointer<CChar>? = nil
        dbus_message_iter_get_basic(&iter, &value)
        guard let value else { return "" }
        if let limit = connection.argumentLimits?.maxStringBytes, strnlen(value, limit + 1) > limit { return "" }
        return String(cString: value)
    }

    /// Replies with one string. False if libdbus ran out of memory (nothing was
    /// sent; the caller then takes the ordinary way, which reports it).
    public func reply(string: String) -> Bool {
        guard dbus_message_get_no_reply(raw) == 0 else { return true }
        guard let reply = dbus_message_new_method_return(raw) else { return false }
        defer { dbus_message_unref(reply) }
        var iter = DBusMessageIter()
        dbus_message_iter_init_append(reply, &iter)
        guard Self.append(string, to: &iter) else { return false }
        return dbus_connection_send(connection.raw, reply, nil) != 0
    }

    /// Replies with an `a{ss}` of `count` entries, the `index`th from `entry`.
    public func reply(stringDictionary count: Int, _ entry: (Int) -> (String, String)) -> Bool {
        guard dbus_message_get_no_reply(raw) == 0 else { return true }
        guard let reply = dbus_message_new_method_return(raw) else { return false }
        defer { dbus_message_unref(reply) }
        var iter = DBusMessageIter()
        dbus_message_iter_init_append(reply, &iter)
        var array = DBusMessageIter()
        guard dbus_message_iter_open_container(&iter, typeArray, "{ss}", &array) != 0 else { return false }
        for index in 0..<count {
            let (key, value) = entry(index)
            var pair = DBusMessageIter()
            guard dbus_message_iter_open_container(&array, typeDictEntry, nil, &pair) != 0,
                  Self.append(key, to: &pair), Self.append(value, to: &pair),
                  dbus_message_iter_close_container(&array, &pair) != 0
            else {
                dbus_message_iter_abandon_container_if_open(&iter, &array)
                return false
            }
        }
        guard dbus_message_iter_close_container(&iter, &array) != 0 else { return false }
        return dbus_connection_send(connection.raw, reply, nil) != 0
    }

    /// Strings here come from the service's own tables (status words, permission
    /// names it validated), never from a caller, so they are valid UTF-8 without NUL.
    private static func append(_ string: String, to iter: inout DBusMessageIter) -> Bool {
        string.withCString { bytes in
            var pointer: UnsafePointer<CChar>? = bytes
            return dbus_message_iter_append_basic(&iter, typeString, &pointer) != 0
        }
    }
}

// The DBUS_TYPE_* macros are `((int) 'x')` and do not import into Swift.
private let typeString = Int32(UInt8(ascii: "s"))
private let typeArray = Int32(UInt8(ascii: "a"))
private let typeDictEntry = Int32(UInt8(ascii: "e"))

extension Connection {
    /// Answers `interface.member(signature)` at `path` on the fast path when
    /// `handler` can (see FastMethod); otherwise the call takes the ordinary way to
    /// the exported object, which must also have the method.
    public func addFastMethod(path: String, interface: String, member: String, signature: String,
                              handler: @escaping (borrowing FastMethodCall) -> Bool) {
        assertOnQueue()
        fastMethods.append(FastMethod(path: path, interface: interface, member: member, signature: signature,
                                      handler: handler))
    }

    /// The filter's first stop for a method call: true if a fast handler answered it.
    func routeFast(_ raw: OpaquePointer) -> Bool {
        guard !fastMethods.isEmpty, dbus_message_get_type(raw) == DBUS_MESSAGE_TYPE_METHOD_CALL,
              dbus_message_get_interface(raw) != nil, dbus_message_contains_unix_fds(raw) == 0
        else { return false }
        for method in fastMethods where method.matches(raw) {
            return method.handler(FastMethodCall(raw: raw, connection: self))
        }
        return false
    }
}

extension Connection {
    /// Sends `signal` to each of `destinations` (unique names the bus gave, such as a
    /// method call's sender), one copy each: libdbus copies the marshalled message and
    /// sets the copy's destination, so per subscriber there is no validation or
    /// marshalling again. Throws `NoMemory` if a copy could not be made or queued
    /// (the copies before it went).
    public func sendCopies(of signal: Message, to destinations: [String]) throws(BusError) {
        assertOnQueue()
        for name in destinations {
            guard let copy = dbus_message_copy(signal.raw) else {
                throw BusError(BusError.noMemory, "out of memory copying a signal")
            }
            defer { dbus_message_unref(copy) }
            guard dbus_message_set_destination(copy, name) != 0, dbus_connection_send(raw, copy, nil) != 0 else {
                throw BusError(BusError.noMemory, "out of memory queueing a signal to \(name)")
            }
        }
    }
}
