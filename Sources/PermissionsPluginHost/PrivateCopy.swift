internal import CShims
internal import Glibc
internal import SystemPrimitives

/// A plugin file's private copy: a sealed memfd, filled from the opened file and
/// hashed on the way (ContentHash), that the checks read and dlopen maps
/// (LoadedPlugin.load). Nothing can change it once sealed, so what was checked is
/// what runs.
///
/// The descriptor is closed when the copy is dropped, unless `keep` took it: a
/// loaded library's memfd stays open for the daemon's life (see LoadedPlugin.load).
final class PrivateCopy {
    private(set) var fd: Int32
    let size: Int
    /// `ContentHash` of the bytes written to the copy, which are all it holds.
    let hash: UInt64

    private init(fd: Int32, size: Int, hash: UInt64) {
        self.fd = fd
        self.size = size
        self.hash = hash
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    /// How much is read, hashed and written at a time: a multiple of the hash's
    /// 32-byte blocks, small enough to stay in the CPU's cache between the three.
    static let chunk = 64 << 10

    /// Copies `size` bytes of `source` (from its start) into a new sealed memfd named
    /// after the plugin; why not, as the file's refusal.
    ///
    /// Through a buffer of our own, hashed while it is in the cache, rather than by
    /// sendfile and a mapping of the copy to hash it: the mapping's set-up and
    /// tear-down (a TLB flush on every CPU the daemon's threads ran on) cost more
    /// than the second copy of each chunk (doc/performance.md, "Plugin copies
    /// without a mapping"). The bytes hashed are the bytes written, and only this
    /// process writes the memfd until it is sealed.
    static func make(from source: Int32, size: Int, name: String) -> Result<PrivateCopy, PluginFile.Failure> {
        let fd = cshims_memfd_create(name)
        guard fd >= 0 else { return .failure(.refused("cannot make a private copy: \(errnoName(errno))")) }
        switch fill(fd, from: source, size: size) {
        case .failure(let failure):
            close(fd)
            return .failure(failure)
        case .success(let hash):
            return .success(PrivateCopy(fd: fd, size: size, hash: hash))
        }
    }

    /// The copy into `fd` and its seal; the hash of what was written.
    private static func fill(_ fd: Int32, from source: Int32, size: Int) -> Result<UInt64, PluginFile.Failure> {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        var hash = ContentHash.Stream()
        var copied = 0
        while copied < size {
            // A whole chunk unless the end is nearer: every piece hashed but the
            // last is whole blocks.
            let piece = min(chunk, size - copied)
            var filled = 0
            while filled < piece {
                switch valueOrErrno({ pread(source, buffer.baseAddress! + filled, piece - filled, off_t(copied + filled)) }) {
                case .failure(let error): return .failure(.refused("cannot read: \(error)"))
                // Shrunk since fstat (being rewritten): not the whole library.
                case .success(0): return .failure(.refused("not a loadable library (it changed while read)"))
                case .success(let count): filled += count
                }
            }
            let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<piece])
            hash.add(bytes)
            if case .failure(let error) = writeAll(fd, bytes) {
                return .failure(.refused("cannot fill the private copy: \(error)"))
            }
            copied += piece
        }
        guard cshims_memfd_seal(fd) == 0 else {
            return .failure(.refused("cannot seal the private copy: \(errnoName(errno))"))
        }
        return .success(hash.value)
    }

    /// Hands the descriptor over for good (the library mapped from it).
    func keep() -> Int32 {
        let kept = fd
        fd = -1
        return kept
    }
}
