internal import CDBus
internal import Glibc

/// Limits on the arguments of an incoming method call, checked on libdbus's
/// iterator before any Swift value is built from them.
///
/// libdbus has read and validated the whole message by the time it reaches us,
/// so the message's own size is paid already; what a limit saves is the decoding,
/// which builds a `DBusValue` (a heap box) per element: a 24 MB options dictionary
/// of a million keys became hundreds of MB of Swift values, and a call that waits
/// (for polkit, for a prompt) keeps its message. The size comes first and costs
/// one look per argument (an array's byte length is in its header); only a
/// message within it is walked, and the walk stops at the first limit passed.
public struct ArgumentLimits: Sendable {
    /// The arguments' size: the byte lengths of the top-level arrays, the lengths
    /// of strings, 8 for any other value outside an array.
    public var maxBytes: Int
    /// Elements of one array or dictionary.
    public var maxElements: Int
    /// Bytes of one string, object path or signature.
    public var maxStringBytes: Int
    /// Values in all, containers and their contents counted.
    public var maxValues: Int
    /// The error a call over a limit gets, from a description that quotes the limit.
    public var error: @Sendable (String) -> BusError

    public init(maxBytes: Int, maxElements: Int, maxStringBytes: Int, maxValues: Int,
                error: @escaping @Sendable (String) -> BusError) {
        self.maxBytes = maxBytes
        self.maxElements = maxElements
        self.maxStringBytes = maxStringBytes
        self.maxValues = maxValues
        self.error = error
    }

    /// What `message`'s arguments exceed, in words that quote the limit; nil if
    /// they are within every limit.
    func violation(_ raw: OpaquePointer) -> String? {
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(raw, &iter) != 0 else { return nil }
        var bytes = 0
        repeat {
            bytes += topLevelSize(&iter)
        } while dbus_message_iter_next(&iter) != 0
        if bytes > maxBytes { return "the arguments are \(bytes) bytes; the limit is \(maxBytes)" }

        var walk = Walk(limits: self)
        _ = dbus_message_iter_init(raw, &iter)
        var index = 1
        repeat {
            if let problem = walk.check(&iter) { return "argument \(index): \(problem)" }
            index += 1
        } while dbus_message_iter_next(&iter) != 0
        return nil
    }

    /// An array's byte length, from its header; a string's; 8 for the rest, whose
    /// contents (a variant's, a structure's) the walk counts.
    private func topLevelSize(_ iter: inout DBusMessageIter) -> Int {
        switch dbus_message_iter_get_arg_type(&iter) {
        case typeArray:
            // libdbus reads the length from an iterator inside the array.
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            return Int(cdbus_message_iter_array_bytes(&sub))
        case typeString, typeObjectPath, typeSignature:
            return Self.stringLength(&iter, max: maxBytes)
        default:
            return 8
        }
    }

    /// The length of the string under the iterator, counted up to `max + 1` bytes.
    fileprivate static func stringLength(_ iter: inout DBusMessageIter, max: Int) -> Int {
        var pointer: UnsafePointer<CChar>? = nil
        dbus_message_iter_get_basic(&iter, &pointer)
        guard let pointer else { return 0 }
        return strnlen(pointer, max + 1)
    }

    /// One walk over a message's values, counting them and their strings' bytes
    /// (a variant's contents have no length in a header): it stops after at most
    /// `maxValues` values and `maxBytes` bytes of strings read.
    private struct Walk {
        let limits: ArgumentLimits
        var values = 0
        var bytes = 0

        mutating func check(_ iter: inout DBusMessageIter) -> String? {
            values += 1
            if values > limits.maxValues {
                return "more than \(limits.maxValues) values in all; the limit is \(limits.maxValues)"
            }
            switch dbus_message_iter_get_arg_type(&iter) {
            case typeString, typeObjectPath, typeSignature:
                let length = ArgumentLimits.stringLength(&iter, max: limits.maxStringBytes)
                if length > limits.maxStringBytes {
                    return "a string of more than \(limits.maxStringBytes) bytes; the limit is \(limits.maxStringBytes)"
                }
                bytes += length
                if bytes > limits.maxBytes {
                    return "more than \(limits.maxBytes) bytes in all; the limit is \(limits.maxBytes)"
                }
            case typeArray:
                var sub = DBusMessageIter()
                dbus_message_iter_recurse(&iter, &sub)
                var count = 0
                while dbus_message_iter_get_arg_type(&sub) != typeInvalid {
                    count += 1
                    if count > limits.maxElements {
                        return "an array of more than \(limits.maxElements) elements; the limit is \(limits.maxElements)"
                    }
                    if let problem = check(&sub) { return problem }
                    dbus_message_iter_next(&sub)
                }
            case typeVariant, typeStruct, typeDictEntry:
                var sub = DBusMessageIter()
                dbus_message_iter_recurse(&iter, &sub)
                while dbus_message_iter_get_arg_type(&sub) != typeInvalid {
                    if let problem = check(&sub) { return problem }
                    dbus_message_iter_next(&sub)
                }
            default:
                break
            }
            return nil
        }
    }
}

// The DBUS_TYPE_* macros are `((int) 'x')` and do not import into Swift.
private let typeInvalid: Int32 = 0
private let typeString = Int32(UInt8(ascii: "s"))
private let typeObjectPath = Int32(UInt8(ascii: "o"))
private let typeSignature = Int32(UInt8(ascii: "g"))
private let typeArray = Int32(UInt8(ascii: "a"))
private let typeVariant = Int32(UInt8(ascii: "v"))
private let typeStruct = Int32(UInt8(ascii: "r"))
private let typeDictEntry = Int32(UInt8(ascii: "e"))

extension Message {
    /// What this message's arguments exceed of `limits`, quoting the limit, or nil.
    /// For replies from peers the daemon does not trust (an agent's answer).
    public func exceeds(_ limits: ArgumentLimits) -> String? {
        limits.violation(raw)
    }
}
