internal import CShims
internal import Glibc
internal import SystemPrimitives
internal import PermissionsSupport

/// A plugin file's private copy, filled from the opened file and hashed on the way
/// (ContentHash), that the checks read and dlopen maps (LoadedPlugin.load). Once it
/// is filled, no descriptor that can write it is left, so what was checked is what
/// runs.
///
/// Where the copy lives (`Medium`):
/// - on a disk when it can be: a kept copy, a file of the state directory's
///   `plugin-copies` directory (mode 0700) named after the plugin file and the
///   hash of its content (`libpermissions-location.so.0123456789abcdef`), mode
///   0400. A start finds the copy an earlier one kept: it checks it (this euid's
///   regular file, mode 0400, one link, the size, then its bytes compared with the
///   source's, byte for byte) and maps it, with nothing written. Otherwise the
///   copy is written: a new file without a name in that directory (O_TMPFILE), on
///   the disk (fdatasync) before it is used, and opened again read-only; it is
///   given its name (`keep`, in place of a file there that failed the checks)
///   only once the library is mapped, so that a file refused before that leaves
///   nothing behind. Either way its pages are a cache of the disk: once the code
///   has run (start-up's code is unmapped once the name is owned,
///   CShims/code_pages.c) the kernel may reclaim them like any file's, and they
///   come back from the disk if the code runs again. Kept copies that no plugin of
///   this process was given are removed once start-up is over (`removeUnused`); a
///   plugin replaced while the daemon runs keeps its old copy until the next
///   start. A kept copy written in place while the daemon maps it (truncated,
///   rewritten) stops the daemon with SIGBUS at its next fault, as for any
///   library: the state directory is the daemon's (doc/admin.md).
///   A kept copy is mapped once per process: glibc takes a file it has loaded
///   before (the same device and inode) for that library again, whatever the path,
///   and would hand back the old plugin's handle, so content loaded a second time
///   (a plugin replaced, then put back) gets a copy of its own without a name.
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
/// Who can still write a copy on a disk: a process of the daemon's user, or root,
/// that undoes the mode 0400 (its owner, with a chmod, or CAP_DAC_OVERRIDE), by
/// its name or through the daemon's descriptors (/proc/PID/fd). A kept copy
/// changed between two starts differs from the plugin file and is written again.
/// On the system bus the daemon is root, and root can replace the plugin files
/// anyway. A daemon of another user (a session's) may
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
        /// A file on a disk, in this state directory's `plugin-copies`.
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
    /// The kept copy's name in `plugin-copies`, if it has one: found there, or
    /// given once the library is mapped (`keep`). Nil in memory, and for a copy
    /// made without one.
    let kept: String?
    /// The kept copy was found, made by an earlier start: nothing was written.
    let reused: Bool
    /// The kept copy's path, claimed in `handedOut` for this process: let go if the
    /// copy is dropped unmapped.
    private let claimed: String?
    /// Where a copy written now gets its name once the library is mapped: only a
    /// copy that loads is kept for the next start.
    private let toName: String?

    private init(fd: Int32, size: Int, hash: UInt64, name: String, medium: Medium, kept: String? = nil,
                 reused: Bool = false, claimed: String? = nil, toName: String? = nil) {
        self.fd = fd
        self.size = size
        self.hash = hash
        self.name = name
        self.medium = medium
        self.kept = kept
        self.reused = reused
        self.claimed = claimed
        self.toName = toName
    }

    /// The kept copies' directory, in the state directory.
    static let keptDirectory = "plugin-copies"

    /// Where the copy lives, for the log line of the library mapped from it.
    var origin: String {
        switch medium {
        case .disk(let directory):
            guard let kept else {
                return "its private copy on the disk, in \(directory)/\(Self.keptDirectory), without a name"
            }
            return "its kept copy \(directory)/\(Self.keptDirectory)/\(kept), "
                + (reused ? "made by an earlier start" : "written now")
        case .memory: return "its private copy in memory"
        }
    }

    deinit {
        guard fd >= 0 else { return }
        close(fd)
        // Never mapped: nothing of this process holds that name, which the removal
        // after start-up may take.
        if let claimed { _ = Self.handedOut.withLock { $0.remove(claimed) } }
    }

    /// How much is read, hashed and written at a time: a multiple of the hash's
    /// 32-byte blocks, small enough to stay in the CPU's cache between the three.
    /// Two of them (a comparison's) are one allocation under malloc's mmap
    /// threshold (128 KiB), so that its pages come from the heap, often already
    /// touched, rather than from a mapping made, faulted in page by page and
    /// unmapped for each plugin (doc/performance.md, "Start-up's instructions,
    /// counted").
    static let chunk = 32 << 10

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
        case done(OnDisk?)
        case abandoned
    }

    private struct OnDisk: Sendable {
        let fd: Int32
        let hash: UInt64
    }

    /// The kept copies this process was given (found or named), by path: each is
    /// mapped at most once (see the type's comment), and `removeUnused` keeps them.
    private static let handedOut = Locked(Set<String>())

    /// The copy on the disk, in `directory`'s `plugin-copies`: the kept copy when
    /// one is there and passes the checks, else one written; nil when the directory
    /// cannot hold one (see `cshims_unnamed_disk_file`), it could not be written to
    /// the disk, or that took longer than `diskBudget`: the memfd is made then, and
    /// a fault of the source itself is told from there.
    ///
    /// The kept copy is looked for here, on the plugin's queue: that only reads, as
    /// reading the plugin file does. The writing runs on a thread of its own, which
    /// a frozen file system may hold: given up on, it closes what it made when it
    /// returns.
    private static func onDisk(from source: Int32, size: Int, name: String, directory: String) -> PrivateCopy? {
        // One buffer for the hash and the comparison.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2 * chunk, alignment: 16)
        defer { buffer.deallocate() }
        guard let hash = hashOf(source, size: size, through: buffer) else { return nil }
        let keptName = name + "." + hex(hash)
        let keptPath = directory + "/" + keptDirectory + "/" + keptName
        // Claimed for this process first: a second load of the same content must
        // not map the same file (see the type's comment).
        let first = handedOut.withLock { $0.insert(keptPath).inserted }
        if first, let found = found(keptName, directory: directory, source: source, size: size, through: buffer) {
            return PrivateCopy(fd: found, size: size, hash: hash, name: name, medium: .disk(directory),
                               kept: keptName, reused: true, claimed: keptPath)
        }
        // Named once mapped, and only when its bytes are the ones hashed above (the
        // source did not change since).
        let outcome = written(from: source, size: size, directory: directory)
        guard let outcome, first, outcome.hash == hash else {
            if first { _ = handedOut.withLock { $0.remove(keptPath) } }
            return outcome.map { PrivateCopy(fd: $0.fd, size: size, hash: $0.hash, name: name, medium: .disk(directory)) }
        }
        return PrivateCopy(fd: outcome.fd, size: size, hash: outcome.hash, name: name, medium: .disk(directory),
                           kept: keptName, claimed: keptPath, toName: directory)
    }

    /// The kept copy `name`, when it passes `cshims_kept_copy_open`'s checks and
    /// holds `source`'s first `size` bytes: its read-only descriptor. Compared byte
    /// for byte, not by hash: ContentHash tells a change, it does not resist one
    /// made to keep it (its lanes can be set back by one block chosen afterwards).
    private static func found(_ name: String, directory: String, source: Int32, size: Int,
                              through buffer: UnsafeMutableRawBufferPointer) -> Int32? {
        let fd = cshims_kept_copy_open(directory, keptDirectory, name, size)
        guard fd >= 0 else { return nil }
        if sameBytes(fd, source, size: size, through: buffer) { return fd }
        close(fd)
        return nil
    }

    /// Whether the first `size` bytes of `a` and `b` are the same, read through
    /// `buffer` (two chunks).
    private static func sameBytes(_ a: Int32, _ b: Int32, size: Int, through buffer: UnsafeMutableRawBufferPointer) -> Bool {
        precondition(buffer.count >= 2 * chunk)
        var done = 0
        while done < size {
            let piece = min(chunk, size - done)
            guard case .success = readFully(a, into: buffer.baseAddress!, count: piece, at: done),
                  case .success = readFully(b, into: buffer.baseAddress! + chunk, count: piece, at: done),
                  memcmp(buffer.baseAddress!, buffer.baseAddress! + chunk, piece) == 0 else { return false }
            done += piece
        }
        return true
    }

    /// Why `readFully` read fewer bytes than asked for.
    private enum ShortRead: Error {
        case failed(Errno)
        /// The file ended first.
        case ended
    }

    /// Reads `count` bytes of `fd` from `offset` into `base`, however many preads
    /// that takes.
    private static func readFully(_ fd: Int32, into base: UnsafeMutableRawPointer, count: Int,
                                  at offset: Int) -> Result<Void, ShortRead> {
        var filled = 0
        while filled < count {
            switch valueOrErrno({ pread(fd, base + filled, count - filled, off_t(offset + filled)) }) {
            case .failure(let error): return .failure(.failed(error))
            case .success(0): return .failure(.ended)
            case .success(let read): filled += read
            }
        }
        return .success(())
    }

    /// A copy of `source` written to the disk (`onTheDisk`), without a name, on a
    /// thread of its own.
    private static func written(from source: Int32, size: Int, directory: String) -> OnDisk? {
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
        // Everything that writes to the directory's file system on that thread: even
        // making the file waits while the file system is frozen.
        Queue.runOnItsOwn(label: "org.example.Permissions.plugin-copy") {
            let fd = cshims_unnamed_disk_file(directory, keptDirectory, size + others)
            if fd < 0 { noteKeptDirectoryProblem(errno, directory: directory) }
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
        return attempt.withLock { state -> OnDisk? in
            guard case .done(let made) = state else {
                state = .abandoned
                return nil
            }
            return made
        }
    }

    /// A `plugin-copies` that is not a directory of this user that only it may
    /// write (a file, a symbolic link, another owner's) keeps every copy in
    /// memory: said once, at warning level, with what to do.
    private static func noteKeptDirectoryProblem(_ error: Int32, directory: String) {
        guard [EPERM, ENOTDIR, ELOOP].contains(error) else { return }
        let first = keptDirectoryWarned.withLock { warned in
            defer { warned = true }
            return !warned
        }
        guard first else { return }
        logWarning("plugin copies are kept in memory: \(directory)/\(keptDirectory) is not a directory of uid "
                   + "\(geteuid()) that only it may write (\(errnoName(error))); remove it, and the next start makes it")
    }

    private static let keptDirectoryWarned = Locked(false)

    /// The hash of `fd`'s first `size` bytes, read through `buffer` (a chunk at
    /// least); nil if they cannot all be read.
    private static func hashOf(_ fd: Int32, size: Int, through buffer: UnsafeMutableRawBufferPointer) -> UInt64? {
        precondition(buffer.count >= chunk)
        var hash = ContentHash.Stream()
        var done = 0
        while done < size {
            let piece = min(chunk, size - done)
            guard case .success = readFully(fd, into: buffer.baseAddress!, count: piece, at: done) else { return nil }
            hash.add(UnsafeRawBufferPointer(rebasing: buffer[0..<piece]))
            done += piece
        }
        return hash.value
    }

    private static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// Removes the kept copies in `directory`'s `plugin-copies` that no plugin of
    /// this process was given: those of plugins since replaced or removed. On a
    /// thread of its own (a frozen file system may hold it); what is given out
    /// meanwhile is kept.
    static func removeUnused(directory: String) {
        Queue.runOnItsOwn(label: "org.example.Permissions.plugin-copies", priority: .utility) {
            var removed = 0
            let kept = directory + "/" + keptDirectory
            for name in Files.list(kept) {
                // Checked name by name: a copy given out meanwhile stays.
                let unused = handedOut.withLock { !$0.contains(kept + "/" + name) }
                if unused, cshims_remove_kept_copy(directory, keptDirectory, name) == 0 { removed += 1 }
            }
            if removed > 0 { logDebug("removed \(removed) kept plugin copies no plugin uses, from \(directory)/\(keptDirectory)") }
        }
    }

    /// Fills the unnamed file `fd` from `source`, has it on the disk and opens it
    /// again read-only: that descriptor and the hash, or nil (every descriptor of
    /// the file closed).
    private static func onTheDisk(_ fd: Int32, from source: Int32, size: Int) -> OnDisk? {
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
        return readOnly >= 0 ? OnDisk(fd: readOnly, hash: hash) : nil
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
            switch readFully(source, into: buffer.baseAddress!, count: piece, at: copied) {
            case .failure(.failed(let error)): return .failure(.refused("cannot read: \(error)"))
            // Shrunk since fstat (being rewritten): not the whole library.
            case .failure(.ended): return .failure(.refused("not a loadable library (it changed while read)"))
            case .success: break
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
    /// A copy written now is given its kept name then, on a thread of its own (a
    /// frozen file system may hold it); `named` hears whether it was.
    func keep(named: (@Sendable (Bool) -> Void)? = nil) -> Int32 {
        let kept = fd
        fd = -1
        if let directory = toName, let name = self.kept {
            Queue.runOnItsOwn(label: "org.example.Permissions.plugin-copy-name", priority: .utility) {
                let done = cshims_name_copy(kept, directory, Self.keptDirectory, name) == 0
                if done { logDebug("plugin copy \(directory)/\(Self.keptDirectory)/\(name) kept for the next start") }
                named?(done)
            }
        } else {
            named?(false)
        }
        return kept
    }
}
