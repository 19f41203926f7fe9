internal import CDBus
internal import SystemPrimitives

// Validation of the D-Bus names a caller can hand us, using libdbus's own checks
// so that our idea of "valid" is exactly the wire protocol's. Each error quotes
// the bad value, escaped so that control characters cannot forge log lines.

public enum ObjectPath {
    public static func validate(_ path: String) throws(BusError) {
        try check(path, "object path", dbus_validate_path)
    }
}

public enum InterfaceName {
    public static func validate(_ name: String) throws(BusError) {
        try check(name, "interface name", dbus_validate_interface)
    }
}

public enum MemberName {
    public static func validate(_ name: String) throws(BusError) {
        try check(name, "member name", dbus_validate_member)
    }
}

public enum BusName {
    public static func validate(_ name: String) throws(BusError) {
        try check(name, "bus name", dbus_validate_bus_name)
    }
}

public enum Signature {
    public static func validate(_ signature: String) throws(BusError) {
        let error = CError()
        let ok = !signature.utf8.contains(0) && dbus_signature_validate(signature, &error.raw) != 0
        if !ok { throw BusError(BusError.invalidArgs, "invalid signature \"\(signature.escapedForMessage)\"") }
    }

    public static func validateSingle(_ signature: String) throws(BusError) {
        let error = CError()
        let ok = !signature.utf8.contains(0) && dbus_signature_validate_single(signature, &error.raw) != 0
        if !ok { throw BusError(BusError.invalidArgs, "invalid single type \"\(signature.escapedForMessage)\"") }
    }
}

/// A bus daemon's address (`unix:path=/run/dbus/system_bus_socket`,
/// `unix:abstract=…,guid=…`; several entries separated by `;`), read with
/// libdbus's own parser, as `dbus_connection_open` will read it.
public enum BusAddress {
    /// What is wrong with `address`, in libdbus's words ("Address does not
    /// contain a colon"), or nil if it parses.
    public static func problem(in address: String) -> String? {
        guard !address.utf8.contains(0) else { return "it contains a NUL byte" }
        let error = CError()
        var entries: UnsafeMutablePointer<OpaquePointer?>?
        var count: Int32 = 0
        guard dbus_parse_address(address, &entries, &count, &error.raw) != 0 else { return error.busError.message }
        dbus_address_entries_free(entries)
        return nil
    }
}

private func check(_ value: String, _ what: String,
                   _ validator: (UnsafePointer<CChar>?, UnsafeMutablePointer<DBusError>?) -> dbus_bool_t)
    throws(BusError)
{
    let error = CError()
    let ok = !value.utf8.contains(0) && validator(value, &error.raw) != 0
    if !ok { throw BusError(BusError.invalidArgs, "invalid \(what) \"\(value.escapedForMessage)\"") }
}
