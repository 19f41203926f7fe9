internal import CAdw
internal import PermissionsModel

/// A method call to the permissions service on a GDBus connection, answered on
/// the main context (GDBus runs the callback there): the reply's body, or the
/// error. Asynchronous, so that a service that is slow or restarting never
/// stops the window from drawing.
public func callService(_ connection: OpaquePointer, _ method: String, _ arguments: [OpaquePointer] = [],
                        then completion: @escaping (Result<Variant, GLibError>) -> Void) {
    final class Box {
        let completion: (Result<Variant, GLibError>) -> Void
        init(_ completion: @escaping (Result<Variant, GLibError>) -> Void) { self.completion = completion }
    }
    var values: [OpaquePointer?] = arguments
    let parameters = g_variant_new_tuple(&values, gsize(values.count))
    g_dbus_connection_call(connection, BusNames.busName, BusNames.objectPath, BusNames.interfaceName, method,
                           parameters, nil, G_DBUS_CALL_FLAGS_NONE, 25_000, nil, { source, result, data in
        let box = Unmanaged<Box>.fromOpaque(data!).takeRetainedValue()
        var error: UnsafeMutablePointer<GError>?
        if let reply = g_dbus_connection_call_finish(OpaquePointer(source), result, &error) {
            box.completion(.success(Variant(taking: reply)))
        } else {
            box.completion(.failure(GLibError(taking: error)))
        }
    }, Unmanaged.passRetained(Box(completion)).toOpaque())
}

/// GVariant constructors for call arguments (each returns a floating reference
/// that the call takes).
public enum Arguments {
    public static func string(_ value: String) -> OpaquePointer { g_variant_new_string(value) }

    public static func strings(_ values: [String]) -> OpaquePointer {
        let type = g_variant_type_new("s")!
        defer { g_variant_type_free(type) }
        var items: [OpaquePointer?] = values.map { g_variant_new_string($0) }
        return g_variant_new_array(type, &items, gsize(items.count))
    }

    /// An a{sv} of strings.
    public static func options(_ values: [String: String]) -> OpaquePointer {
        let type = g_variant_type_new("{sv}")!
        defer { g_variant_type_free(type) }
        var entries: [OpaquePointer?] = values.sorted { $0.key < $1.key }.map {
            g_variant_new_dict_entry(g_variant_new_string($0.key), g_variant_new_variant(g_variant_new_string($0.value)))
        }
        return g_variant_new_array(type, &entries, gsize(entries.count))
    }
}
