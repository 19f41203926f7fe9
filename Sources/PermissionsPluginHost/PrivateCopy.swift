internal import CShims
internal import Glibc
internal import SystemPrimitives

/// A plugin file's private copy: a sealed memfd, filled by the kernel from the
/// opened file (sendfile), that the checks and the hash read through a mapping and
/// dlopen maps (LoadedPlugin.load). Nothing can change it once sealed, so what was
/// checked is what runs.
///
/// The descriptor is closed when the copy is dropped, unless `keep` took it: a
/// loaded library's memfd stays open for the daemon's life (see LoadedPlugin.load).
final class PrivateCopy {
    private(set) var fd: Int32
    let size: Int

    private init(fd: Int32, size: Int) {
        self.fd = fd
        self.size = size
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    /// Copies `size` bytes of `source` (from its start) into a new sealed memfd named
    /// after the plugin; why not, as the file's refusal.
    static func make(from source: Int32, size: Int, name: String) -> Result<PrivateCopy, PluginFile.Failure> {
        let fd = cshims_memfd_create(name)
        guard fd >= 0 else { return .failure(.refused("cannot make a private copy: \(errnoName(errno))")) }
        let copy = PrivateCopy(fd: fd, size: size)
        var offset = off_t(0)
        while Int(offset) < size {
            let sent = valueOrErrno { sendfile(fd, source, &offset, size - Int(offset)) }
            switch sent {
            case .failure(let error): return .failure(.refused("cannot read: \(error)"))
            case .success(0):
                // Shrunk since fstat (being rewritten): not the whole library.
                return .failure(.refused("not a loadable library (it changed while read)"))
            case .success: continue
            }
        }
        guard cshims_memfd_seal(fd) == 0 else { return .failure(.refused("cannot seal the private copy: \(errnoName(errno))")) }
        return .success(copy)
    }

    /// Runs `body` over the copy's bytes, mapped read-only for the call; nil (errno
    /// set) if they cannot be mapped.
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R? {
        guard size > 0 else { return body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        // Populated at once: one call instead of a page fault per 4 KiB read.
        guard let base = mmap(nil, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0), base != MAP_FAILED else {
            return nil
        }
        defer { munmap(base, size) }
        return body(UnsafeRawBufferPointer(start: base, count: size))
    }

    /// Hands the descriptor over for good (the library mapped from it).
    func keep() -> Int32 {
        let kept = fd
        fd = -1
        return kept
    }
}
