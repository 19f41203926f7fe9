internal import CAdw

/// A GVariant held by Swift: one reference, dropped with the value. Reads what
/// the service's replies hold (strings, integers, dictionaries, arrays) and
/// answers nil for a value of another type than asked, so that a reply of an
/// unexpected shape is a missing value, never a crash.
public final class Variant {
    public let pointer: OpaquePointer

    /// Takes over a reference the caller owns (a reply, a child value).
    public init(taking pointer: OpaquePointer) { self.pointer = pointer }

    deinit { g_variant_unref(pointer) }

    private func isOfType(_ type: String) -> Bool {
        let variantType = g_variant_type_new(type)!
        defer { g_variant_type_free(variantType) }
        return g_variant_is_of_type(pointer, variantType) != 0
    }

    public var string: String? {
        guard isOfType("s") || isOfType("o") else { return nil }
        return String(cString: g_variant_get_string(pointer, nil))
    }

    public var int64: Int64? { isOfType("x") ? Int64(g_variant_get_int64(pointer)) : nil }
    public var uint64: UInt64? { isOfType("t") ? UInt64(g_variant_get_uint64(pointer)) : nil }
    public var uint32: UInt32? { isOfType("u") ? g_variant_get_uint32(pointer) : nil }

    /// The children of a container (a tuple, an array, a dictionary entry), a
    /// variant's value as its one child.
    public var children: [Variant] {
        guard g_variant_is_container(pointer) != 0 else { return [] }
        return (0..<g_variant_n_children(pointer)).map { Variant(taking: g_variant_get_child_value(pointer, $0)) }
    }

    /// The value of `key` in an a{sv} dictionary.
    public func lookup(_ key: String) -> Variant? {
        guard isOfType("a{sv}") else { return nil }
        return g_variant_lookup_value(pointer, key, nil).map(Variant.init(taking:))
    }

    /// An a{ss} (or the strings of an a{sv}) as a dictionary.
    public var stringDictionary: [String: String] {
        var result: [String: String] = [:]
        for entry in children {
            let pair = entry.children
            guard pair.count == 2, let key = pair[0].string else { continue }
            let value = pair[1].string ?? pair[1].children.first?.string
            if let value { result[key] = value }
        }
        return result
    }

    /// An `as` as strings.
    public var strings: [String] { children.compactMap(\.string) }
}
