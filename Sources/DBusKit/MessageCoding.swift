internal import CDBus
internal import SystemPrimitives

/// Marshalling between `DBusValue` and libdbus's `DBusMessageIter`.
/// libdbus does the wire format; this only walks the type tree.
enum MessageCoding {
    // The DBUS_TYPE_* macros are `((int) 'x')` and do not import into Swift.
    static func code(_ c: Character) -> Int32 { Int32(c.asciiValue!) }

    /// The wire format's limits: a signature is at most 255 bytes and containers
    /// nest at most 32 deep; libdbus aborts or loops instead of failing past them.
    static let maxSignatureLength = 255
    static let maxDepth = 32

    /// Checks a value against the wire format before libdbus sees it.
    static func validate(_ value: DBusValue) throws(BusError) {
        let signature = value.signature
        guard signature.utf8.count <= maxSignatureLength else {
            throw BusError(BusError.invalidArgs,
                           "a value of type \"\(signature.escapedForMessage)\" exceeds the 255-byte signature limit")
        }
        try validate(value, depth: 0)
    }

    private static func validate(_ value: DBusValue, depth: Int) throws(BusError) {
        guard depth <= maxDepth else {
            throw BusError(BusError.invalidArgs, "containers nested deeper than \(maxDepth)")
        }
        switch value {
        case .string(let s):
            if s.utf8.contains(0) {
                throw BusError(BusError.invalidArgs, "string contains a NUL byte: \"\(s.escapedForMessage)\"")
            }
        case .objectPath(let p):
            try ObjectPath.validate(p)
        case .signature(let g):
            try Signature.validate(g)
        case .array(let element, let items):
            try Signature.validateSingle(element)
            for item in items {
                guard item.signature == element else {
                    throw BusError(BusError.invalidArgs,
                                   "array element of type '\(item.signature)' in an array of '\(element)'")
                }
                try validate(item, depth: depth + 1)
            }
        case .dictionary(let key, let val, let entries):
            try Signature.validateSingle("a{" + key + val + "}")
            for entry in entries {
                guard entry.key.signature == key, entry.value.signature == val else {
                    throw BusError(BusError.invalidArgs, "dictionary entry of the wrong type in 'a{\(key)\(val)}'")
                }
                try validate(entry.key, depth: depth + 1)
                try validate(entry.value, depth: depth + 1)
            }
        case .structure(let fields):
            guard !fields.isEmpty else { throw BusError(BusError.invalidArgs, "empty structure") }
            for field in fields { try validate(field, depth: depth + 1) }
        case .variant(let inner):
            // A variant carries its own signature, with the same 255-byte limit.
            guard inner.signature.utf8.count <= maxSignatureLength else {
                throw BusError(BusError.invalidArgs, "a variant's type exceeds the 255-byte signature limit")
            }
            try validate(inner, depth: depth + 1)
        default:
            break
        }
    }

    /// Appends a validated value. libdbus only fails here on out-of-memory.
    static func append(_ value: DBusValue, to iter: inout DBusMessageIter) {
        let ok: dbus_bool_t
        switch value {
        case .byte(var v): ok = dbus_message_iter_append_basic(&iter, code("y"), &v)
        case .boolean(let b):
            var v: dbus_bool_t = b ? 1 : 0
            ok = dbus_message_iter_append_basic(&iter, code("b"), &v)
        case .int16(var v): ok = dbus_message_iter_append_basic(&iter, code("n"), &v)
        case .uint16(var v): ok = dbus_message_iter_append_basic(&iter, code("q"), &v)
        case .int32(var v): ok = dbus_message_iter_append_basic(&iter, code("i"), &v)
        case .uint32(var v): ok = dbus_message_iter_append_basic(&iter, code("u"), &v)
        case .int64(var v): ok = dbus_message_iter_append_basic(&iter, code("x"), &v)
        case .uint64(var v): ok = dbus_message_iter_append_basic(&iter, code("t"), &v)
        case .double(var v): ok = dbus_message_iter_append_basic(&iter, code("d"), &v)
        case .string(let s): ok = appendString(s, type: "s", to: &iter)
        case .objectPath(let s): ok = appendString(s, type: "o", to: &iter)
        case .signature(let s): ok = appendString(s, type: "g", to: &iter)
        case .array(let element, let items):
            ok = container(&iter, "a", element) { sub in
                for item in items { append(item, to: &sub) }
            }
        case .dictionary(let key, let val, let entries):
            ok = container(&iter, "a", "{" + key + val + "}") { sub in
                for entry in entries {
                    _ = container(&sub, "e", nil) { pair in
                        append(entry.key, to: &pair)
                        append(entry.value, to: &pair)
                    }
                }
            }
        case .structure(let fields):
            ok = container(&iter, "r", nil) { sub in
                for field in fields { append(field, to: &sub) }
            }
        case .variant(let inner):
            ok = container(&iter, "v", inner.signature) { sub in append(inner, to: &sub) }
        case .unixFD(let descriptor):
            // libdbus sends a duplicate: the message does not take `descriptor` over.
            var v = descriptor.fd
            ok = dbus_message_iter_append_basic(&iter, code("h"), &v)
        }
        if ok == 0 { fatalError("libdbus: out of memory while appending an argument") }
    }

    private static func appendString(_ s: String, type: Character, to iter: inout DBusMessageIter) -> dbus_bool_t {
        s.withCString { cstr in
            var pointer: UnsafePointer<CChar>? = cstr
            return dbus_message_iter_append_basic(&iter, code(type), &pointer)
        }
    }

    private static func container(_ iter: inout DBusMessageIter, _ type: Character, _ signature: String?,
                                  _ body: (inout DBusMessageIter) -> Void) -> dbus_bool_t {
        var sub = DBusMessageIter()
        let opened: dbus_bool_t
        if let signature {
            opened = signature.withCString { dbus_message_iter_open_container(&iter, code(type), $0, &sub) }
        } else {
            opened = dbus_message_iter_open_container(&iter, code(type), nil, &sub)
        }
        guard opened != 0 else { return 0 }
        body(&sub)
        return dbus_message_iter_close_container(&iter, &sub)
    }

    /// Reads the value under the iterator (not advancing it). A Unix fd is read as
    /// a new descriptor of this process's, closed with its `FileDescriptor`.
    static func read(_ iter: inout DBusMessageIter) -> DBusValue? {
        let type = dbus_message_iter_get_arg_type(&iter)
        switch type {
        case code("y"): var v: UInt8 = 0; dbus_message_iter_get_basic(&iter, &v); return .byte(v)
        case code("b"): var v: dbus_bool_t = 0; dbus_message_iter_get_basic(&iter, &v); return .boolean(v != 0)
        case code("n"): var v: Int16 = 0; dbus_message_iter_get_basic(&iter, &v); return .int16(v)
        case code("q"): var v: UInt16 = 0; dbus_message_iter_get_basic(&iter, &v); return .uint16(v)
        case code("i"): var v: Int32 = 0; dbus_message_iter_get_basic(&iter, &v); return .int32(v)
        case code("u"): var v: UInt32 = 0; dbus_message_iter_get_basic(&iter, &v); return .uint32(v)
        case code("x"): var v: Int64 = 0; dbus_message_iter_get_basic(&iter, &v); return .int64(v)
        case code("t"): var v: UInt64 = 0; dbus_message_iter_get_basic(&iter, &v); return .uint64(v)
        case code("d"): var v: Double = 0; dbus_message_iter_get_basic(&iter, &v); return .double(v)
        case code("s"): return .string(readString(&iter))
        case code("o"): return .objectPath(readString(&iter))
        case code("g"): return .signature(readString(&iter))
        case code("h"):
            var v: Int32 = -1
            dbus_message_iter_get_basic(&iter, &v)
            return v >= 0 ? .unixFD(FileDescriptor(adopting: v)) : nil
        case code("v"):
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            return read(&sub).map { .variant($0) }
        case code("r"):
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            return .structure(readAll(&sub))
        case code("a"):
            let full = iteratorSignature(&iter)
            let element = String(full.dropFirst())
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            if element.hasPrefix("{") {
                let inner = element.dropFirst().dropLast()
                let keySig = String(inner.prefix(1))      // dict keys are always basic types
                let valueSig = String(inner.dropFirst())
                var entries: [DBusValue.DictEntry] = []
                while dbus_message_iter_get_arg_type(&sub) == code("e") {
                    var pair = DBusMessageIter()
                    dbus_message_iter_recurse(&sub, &pair)
                    let kv = readAll(&pair)
                    if kv.count == 2 { entries.append(.init(kv[0], kv[1])) }
                    dbus_message_iter_next(&sub)
                }
                return .dictionary(keySignature: keySig, valueSignature: valueSig, entries)
            }
            return .array(elementSignature: element, readAll(&sub))
        default:
            return nil
        }
    }

    private static func readAll(_ iter: inout DBusMessageIter) -> [DBusValue] {
        var values: [DBusValue] = []
        while dbus_message_iter_get_arg_type(&iter) != 0 /* DBUS_TYPE_INVALID */ {
            if let value = read(&iter) { values.append(value) }
            dbus_message_iter_next(&iter)
        }
        return values
    }

    private static func readString(_ iter: inout DBusMessageIter) -> String {
        var pointer: UnsafePointer<CChar>? = nil
        dbus_message_iter_get_basic(&iter, &pointer)
        return pointer.map { String(cString: $0) } ?? ""
    }

    private static func iteratorSignature(_ iter: inout DBusMessageIter) -> String {
        guard let sig = dbus_message_iter_get_signature(&iter) else { return "" }
        defer { dbus_free(sig) }
        return String(cString: sig)
    }
}
