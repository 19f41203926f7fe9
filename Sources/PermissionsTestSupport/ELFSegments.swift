/// The PT_LOAD segments of the ELF file `bytes` (64-bit, little-endian), as file
/// offset and file size, read here independently of the daemon's ELFCheck: what
/// the dynamic loader maps of a plugin.
public func loadSegments(of bytes: [UInt8]) -> [(offset: Int, size: Int)] {
    bytes.withUnsafeBytes { raw in
        let phoff = Int(raw.loadUnaligned(fromByteOffset: 32, as: UInt64.self))
        let entry = Int(raw.loadUnaligned(fromByteOffset: 54, as: UInt16.self))
        let count = Int(raw.loadUnaligned(fromByteOffset: 56, as: UInt16.self))
        return (0..<count).map { phoff + $0 * entry }
            .filter { raw.loadUnaligned(fromByteOffset: $0, as: UInt32.self) == 1 }
            .map { (Int(raw.loadUnaligned(fromByteOffset: $0 + 8, as: UInt64.self)),
                    Int(raw.loadUnaligned(fromByteOffset: $0 + 32, as: UInt64.self))) }
    }
}
