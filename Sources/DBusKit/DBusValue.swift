internal import Glibc

/// A D-Bus value with its type, for marshalling through `DBusMessageIter`.
///
/// Containers carry their element signatures so that empty arrays and
/// dictionaries still have a type on the wire.
public indirect enum DBusValue: Sendable, Hashable {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(String)
    case signature(String)
    /// `a<element>`; every element must have `elementSignature`.
    case array(elementSignature: String, [DBusValue])
    /// `a{<key><value>}`, entries in wire order.
    case dictionary(keySignature: String, valueSignature: String, [DictEntry])
    /// `(...)`
    case structure([DBusValue])
    /// `v`
    case variant(DBusValue)
    /// `h`: a file descriptor, passed over the Unix socket beside the message.
    case unixFD(FileDescriptor)

    public struct DictEntry: Sendable, Hashable {
        public var key: DBusValue
        public var value: DBusValue
        public init(_ key: DBusValue, _ value: DBusValue) {
            self.key = key
            self.value = value
        }
    }

    /// The single complete type signature of this value.
    public var signature: String {
        switch self {
        case .byte: "y"
        case .boolean: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .array(let element, _): "a" + element
        case .dictionary(let key, let value, _): "a{" + key + value + "}"
        case .structure(let fields): "(" + fields.map(\.signature).joined() + ")"
        case .variant: "v"
        case .unixFD: "h"
        }
    }
}

// Convenience constructors and accessors for the shapes this project uses most.
extension DBusValue {
    /// `as`
    public static func strings(_ values: [String]) -> DBusValue {
        .array(elementSignature: "s", values.map { .string($0) })
    }

    /// `a{ss}`
    public static func stringDictionary(_ pairs: [(String, String)]) -> DBusValue {
        .dictionary(keySignature: "s", valueSignature: "s",
                    pairs.map { DictEntry(.string($0.0), .string($0.1)) })
    }

    /// `a{sv}`
    public static func vardict(_ pairs: [(String, DBusValue)]) -> DBusValue {
        .dictionary(keySignature: "s", valueSignature: "v",
                    pairs.map { DictEntry(.string($0.0), .variant($0.1)) })
    }

    public var stringValue: String? {
        switch self {
        case .string(let s), .objectPath(let s), .signature(let s): s
        case .variant(let inner): inner.stringValue
        default: nil
        }
    }

    public var uint32Value: UInt32? {
        switch self {
        case .uint32(let v): v
        case .variant(let inner): inner.uint32Value
        default: nil
        }
    }

    public var uint64Value: UInt64? {
        switch self {
        case .uint64(let v): v
        case .variant(let inner): inner.uint64Value
        default: nil
        }
    }

    public var boolValue: Bool? {
        switch self {
        case .boolean(let v): v
        case .variant(let inner): inner.boolValue
        default: nil
        }
    }

    /// Elements of an array (`a…`), or nil.
    public var arrayElements: [DBusValue]? {
        if case .array(_, let elements) = self { return elements }
        if case .variant(let inner) = self { return inner.arrayElements }
        return nil
    }

    /// Entries of a dictionary whose keys are strings, in wire order, or nil.
    public var stringKeyedEntries: [(String, DBusValue)]? {
        switch self {
        case .dictionary(_, _, let entries):
            return entries.compactMap { entry in entry.key.stringValue.map { ($0, entry.value) } }
        case .variant(let inner):
            return inner.stringKeyedEntries
        default:
            return nil
        }
    }

    /// An `as` value as Swift strings, or nil.
    public var stringArray: [String]? {
        arrayElements?.compactMap(\.stringValue)
    }
}

/// A file descriptor this process owns, closed when the last reference goes: what
/// a message carries as `h`. libdbus duplicates a descriptor it sends, and hands
/// over a new one for each it receives, so each side keeps its own.
///
/// `Sendable`: the descriptor number never changes, and closing happens once, in
/// deinit, when no one else can use it.
public final class FileDescriptor: Sendable, Hashable {
    public let fd: Int32

    /// Takes ownership of `fd`.
    public init(adopting fd: Int32) { self.fd = fd }

    /// A duplicate (close-on-exec) that the caller owns, or -1 with errno set: for
    /// handing the descriptor on beyond this object's life.
    public func duplicate() -> Int32 { fcntl(fd, F_DUPFD_CLOEXEC, 0) }

    deinit { if fd >= 0 { close(fd) } }

    public static func == (a: FileDescriptor, b: FileDescriptor) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
