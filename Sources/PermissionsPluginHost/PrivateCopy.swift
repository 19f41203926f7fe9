internal import CShims
internal import Glibc
internal import SystemPrimitives

/// A plugin file's private copy, filled from the opened file and hashed on the way
/// (ContentHash), that the checks read and dlopen maps (LoadedPlugin.load). Once it
/// is filled, no descriptor that can write it is left, so what was checked is what
/// runs.
///
/// Where the copy lives (`Medium`):
/// - on a disk when it can be: a file without a name in the state directory
///   (O_TMPFILE | O_EXCL: none can ever be given to it), mode 0400, on the disk
///   (fdatasync) before it is used, and opened again read-only. Its pages are a
///   cache of the disk: once the code has run (start-up's code is unmapped once
///   the name is owned, CShims/code_pages.c) the kernel may reclaim them like any
///   file's, and they come back from the disk if the code runs again. The file
///   goes when its last descriptor closes, at the daemon's exit however it ends,
///   and never has a name to be left behind.
/// - in memory otherwise: a sealed memfd, when there is no such directory, or its
///   file system cannot make an unnamed file, is mounted noexec, keeps its files in
///   memory or may (tmpfs, overlayfs), would be left with little room for the
///   decisions (`cshims_unnamed_disk_file`, counting the copies being written),
///   or could not take the copy (full, a write-back that failed) or not in time
///   (`diskBudget`). Its pages stay in memory for the daemon's life.
///
/// A copy on a disk ties the daemon to that disk as its executable is tied to
/// its own: once its pages were reclaimed, a disk that can no longer be read
/// makes the next run of that code, or the runtime's next look at its metadata,
/// a SIGBUS. A state directory mounted noexec keeps the copies in memory.
///
/// Who can still write a copy on a disk: a process that can reach the daemon's
/// descriptors through /proc/PID/fd (the kernel's ptrace read check: a process
/// of the daemon's user, or root) and then undo the mode 0400 (its owner, with a
/// chmod, or CAP_DAC_OVERRIDE). On the system bus the daemon is root, and root can
/// replace the plugin files anyway. A daemon of another user (a session's) may
/// load plugins its user cannot write, root's, and a process of that user can then
/// change the copy, as it can attach to the daemon where ptrace is allowed within
/// one user: processes of one user are not kept from each other
/// (doc/threat-model.md, "Across users and within one"). The memfd's seal keeps
/// even such a process out.
///
/// The descriptor is closed when the copy is dropped, unless `keep` took it: a
/// loaded library's copy stays open for the daemon's life (see LoadedPlugin.load).
final class PrivateCopy {
    enum Medium: Equatable {
        /// An unnamed file on a disk, in this directory.
        case disk(String)
        /// A sealed memfd.
        case memory
    }

    private(set) var fd: Int32
    let size: Int
    /// `ContentHash` of the bytes written to the copy, which are all it holds.
    let hash: UInt64
    /// The plugin file's name: the memfd's name, and the name of a copy made again.
    let name: String
    let medium: Medium

    private init(fd: Int32, size: Int, hash: UInt64, name: String, medium: Medium) {
        self.fd = fd
        self.size = size
        self.hash = hash
        self.name = name
        self.medium = medium
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    /// How much is read, hashed and written at a time: a multiple of the hash's
    /// 32-byte blocks, small enough to stay in the CPU's cache between the three.
    static let chunk = 64 << 10

    /// Copies `size` bytes of `source` (from its start) into a new private copy: an
    /// unnamed file in `directory` when that directory can hold one on a disk, else a
    /// sealed memfd named after the plugin. Why not, as the file's refusal.
    ///
    /// Through a buffer of our own, hashed while it is in the cache, rather than by
    /// sendfile and a mapping of the copy to hash it: the mapping's set-up and
    /// tear-down (a TLB flush on every CPU the daemon's threads ran on) cost more
    /// than the second copy of each chunk (doc/performance.md, "Plugin copies
    /// without a mapping"). The bytes hashed are the bytes written, and only this
    /// process writes the copy until it is sealed or opened again read-only.
    static func make(from source: Int32, size: Int, name: String, directory: String?) -> Result<PrivateCopy, PluginFile.Failure> {
        if let directory, let copy = onDisk(from: source, size: size, name: name, directory: directory) {
            return .success(copy)
        }
        let fd = cshims_memfd_create(name)
        guard fd >= 0 else { return .failure(.refused("cannot make a private copy: \(errnoName(errno))")) }
        switch fill(fd, from: source, size: size) {
        case .failure(let failure):
            close(fd)
            return .failure(failure)
        case .success(let hash):
            guard cshims_memfd_seal(fd) == 0 else {
                let error = errnoName(errno)
                close(fd)
                return .failure(.refused("cannot seal the private copy: \(error)"))
            }
            return .success(PrivateCopy(fd: fd, size: size, hash: hash, name: name, medium: .memory))
        }
    }

    /// How long a copy may take to reach the disk before it is made in memory
    /// instead: a quarter of a plugin step's deadline (PluginHost's, 2 s), so that a
    /// slow disk, a frozen file system (fsfreeze, a backup's snapshot) or thin
    /// storage that queues its writes costs the plugin a moment, not its start.
    static let diskBudget: Deadline.Interval = .milliseconds(500)

    /// Bytes of copies being written, by directory: counted against the room each
    /// new copy must leave (`cshims_unnamed_disk_file`), since the file system
    /// shows them only once written (the plugins are read side by side).
    private static let writing = Locked([String: Int]())

    /// How a copy on the disk ended: made, given up (nil), or not waited for any
    /// more (then whatever comes is closed).
    private enum Attempt: Sendable {
        case pending
        case done((fd: Int32, hash: UInt64)?)
        case abandoned
    }

    /// The copy as an unnamed file in `directory`, or nil when the directory cannot
    /// hold one (see `cshims_unnamed_disk_file`), it could not be written to the
    /// disk, or that took longer than `diskBudget`: the memfd is made then, and a
    /// fault of the source itself is told from there. The writing runs on a thread
    /// of its own, which a frozen file system may hold: given up on, it closes
    /// what it made when it returns.
    private static func onDisk(from source: Int32, size: Int, name: String, directory: String) -> PrivateCopy? {
        // The source's own descriptor: the caller closes its one when this returns.
        let own = fcntl(source, F_DUPFD_CLOEXEC, 0)
        guard own >= 0 else { return nil }
        // Counted from here until the thread below is done with it, whatever it does.
        let others = writing.withLock { writing in
            defer { writing[directory, default: 0] += size }
            return writing[directory, default: 0]
        }
        let attempt = Locked(Attempt.pending)
        let finished = Semaphore(value: 0)
        // Everything that touches the directory's file system on that thread: even
        // making the file waits while the file system is frozen.
        Queue.runOnItsOwn(label: "org.example.Permissions.plugin-copy") {
            let fd = cshims_unnamed_disk_file(directory, size + others)
            let made = fd >= 0 ? onTheDisk(fd, from: own, size: size) : nil
            close(own)
            writing.withLock { $0[directory, default: 0] -= size }
            let taken = attempt.withLock { state -> Bool in
                guard case .pending = state else { return false }
                state = .done(made)
                return true
            }
            if !taken, let made { close(made.fd) }
            finished.signal()
        }
        _ = finished.wait(timeout: .now() + diskBudget)
        let outcome = attempt.withLock { state -> (fd: Int32, hash: UInt64)? in
            guard case .done(let made) = state else {
                state = .abandoned
                return nil
            }
            return made
        }
        guard let outcome else { return nil }
        return PrivateCopy(fd: outcome.fd, size: size, hash: outcome.hash, name: name, medium: .disk(directory))
    }

    /// Fills the unnamed file `fd` from `source`, has it on the disk and opens it
    /// again read-only: that descriptor and the hash, or nil (every descriptor of
    /// the file closed).
    private static func onTheDisk(_ fd: Int32, from source: Int32, size: Int) -> (fd: Int32, hash: UInt64)? {
        // On the disk before it is used: its pages may be reclaimed once written
        // back, and read again from the disk, so a write-back that fails (thin
        // storage that ran out, a disk error) would leave other bytes there, and
        // run them. write(2) succeeding says only that the page cache has them.
        guard case .success(let hash) = fill(fd, from: source, size: size), fdatasync(fd) == 0 else {
            close(fd)
            return nil
        }
        // No writable descriptor is kept: reopened read-only, and the other closed.
        let readOnly = cshims_reopen_read_only(fd)
        return readOnly >= 0 ? (readOnly, hash) : nil
    }

    /// The copy into `fd`: the hash of what was written.
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
        return .success(hash.value)
    }

    /// The same bytes again, in a sealed memfd: for a copy on a disk that dlopen
    /// could not map (LoadedPlugin.load). Nil if it cannot be made or its bytes
    /// differ.
    func inMemory() -> PrivateCopy? {
        guard case .success(let copy) = Self.make(from: fd, size: size, name: name, directory: nil),
              copy.hash == hash else { return nil }
        return copy
    }

    /// Hands the descriptor over for good (the library mapped from it).
    func keep() -> Int32 {
        let kept = fd
        fd = -1
        return kept
    }
}
