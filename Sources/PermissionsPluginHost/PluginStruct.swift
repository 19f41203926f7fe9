internal import CPermissionsPlugin

/// A C struct a plugin wrote, seen through the size the plugin declared for it (its
/// `struct_size`, or its array's stride).
///
/// The plugin's header may be older or newer than the daemon's, so its struct may
/// be shorter or longer than `MemoryLayout<T>.size`: the struct is never copied
/// whole, and a field is read only when the declared size covers it (the
/// header's VERSIONING rules).
struct PluginStruct<T> {
    let base: UnsafeRawPointer
    let size: Int

    /// The field, or nil when the plugin's struct ends before it.
    subscript<V: BitwiseCopyable>(_ field: KeyPath<T, V>) -> V? {
        let offset = MemoryLayout<T>.offset(of: field)!
        guard offset + MemoryLayout<V>.size <= size else { return nil }
        return base.loadUnaligned(fromByteOffset: offset, as: V.self)
    }

    /// A field of the v1 layout; the caller checked that `size` is at least v1's.
    subscript<V: BitwiseCopyable>(v1 field: KeyPath<T, V>) -> V {
        self[field]!
    }

    /// The `count` elements of an array that starts at `base`, `stride` bytes apart.
    static func array(_ base: UnsafeRawPointer?, count: UInt32, stride: Int) -> [PluginStruct<T>] {
        guard let base else { return [] }
        return (0..<Int(count)).map { PluginStruct(base: base + $0 * stride, size: stride) }
    }
}

/// The v1 sizes of the ABI's structs (the smallest a plugin may hand over).
enum V1Size {
    static let plugin = Int(PERMISSIONS_PLUGIN_V1_SIZE.rawValue)
    static let snapshot = Int(PERMISSIONS_SNAPSHOT_V1_SIZE.rawValue)
    static let appPolicy = Int(PERMISSIONS_APP_POLICY_V1_SIZE.rawValue)
    static let kv = Int(PERMISSIONS_KV_V1_SIZE.rawValue)
    static let device = Int(PERMISSIONS_DEVICE_V1_SIZE.rawValue)
}
