internal import CShims
internal import Glibc
internal import PermissionsSupport
internal import SystemPrimitives

/// A plugin file as the daemon loads it: opened, checked on the opened file (never
/// the path again, which may name another file by then), what dlopen maps of it
/// copied into a private copy (PrivateCopy), and hashed. What was checked is what is loaded: the
/// library is mapped from that private copy (LoadedPlugin.open), not from the path.
///
/// Trust, in the style of sshd's StrictModes and PAM: whoever can change the file
/// or swap it in its directory runs code in the daemon, so that must be root or the
/// daemon's own user:
/// - the file is owned by root or the daemon's uid, and not writable by group or
///   others;
/// - its directory (and, when the name is a symbolic link, the directory of every
///   link on the way and of the file the last one leads to) is owned by root or the daemon's uid, and not writable by
///   group or others unless it is sticky (like /tmp: then others cannot remove or
///   rename what they do not own).
struct PluginFile {
    /// The private copy; closed when dropped unless `PrivateCopy.keep` took it.
    /// Nil when the file was the one already read (`known`): nothing was copied.
    let copy: PrivateCopy?
    /// `ContentHash` of the copy: a file whose loaded content did not change (a
    /// `touch`, a copy of the same build, the same build stripped) is not loaded again.
    let hash: UInt64
    /// What identifies this very content without reading it again, when that can
    /// be trusted (FileStamp).
    let stamp: FileStamp?

    enum Failure: Error {
        /// No file by that name (any more): nothing to say.
        case missing
        /// Not loaded, for this reason (one log line).
        case refused(String)
    }

    static let sizeLimit = 256 << 20

    /// Opens `name` in `directory` through the directory's descriptor, checks both,
    /// and reads the file. `known`: the stamp and hash of the copy serving from this
    /// path; a file that still has that stamp passes every check again but is not
    /// copied or hashed (the rescan after start-up, a `touch`: no plugin's megabytes
    /// read again). `copyDirectory`: where the copy is made if it can be on a disk
    /// (PrivateCopy.make).
    static func read(directory: String, name: String, known: (stamp: FileStamp, hash: UInt64)? = nil,
                     copyDirectory: String? = nil) -> Result<PluginFile, Failure> {
        let dirFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dirFD >= 0 else {
            return errno == ENOENT ? .failure(.missing) : .failure(.refused("cannot open its directory: \(errnoName(errno))"))
        }
        defer { close(dirFD) }
        if let problem = directoryProblem(dirFD, "its directory \(directory)") { return .failure(.refused(problem)) }
        // Without blocking: a FIFO planted where a library should be must not hang us.
        let fd = openat(dirFD, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else {
            return errno == ENOENT ? .failure(.missing) : .failure(.refused("cannot open: \(errnoName(errno))"))
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return .failure(.refused("cannot look at it: \(errnoName(errno))")) }
        guard (st.st_mode & S_IFMT) == S_IFREG else { return .failure(.refused("not a regular file")) }
        if let problem = ownerProblem(st, "it") { return .failure(.refused(problem)) }
        if st.st_mode & 0o022 != 0 {
            return .failure(.refused("it is writable by group or others (mode \(octal(st.st_mode)))"))
        }
        // Reached through symbolic links: whoever may write the directory of any link
        // on the way, or of the target, can swap what it leads to.
        if let problem = linkChainProblem(directory + "/" + name) { return .failure(.refused(problem)) }
        if let target = Files.readLink("/proc/self/fd/\(fd)"), let dir = Files.readLink("/proc/self/fd/\(dirFD)"),
           let slash = target.lastIndex(of: "/") {
            let targetDirectory = slash == target.startIndex ? "/" : String(target[..<slash])
            if targetDirectory != dir {
                let targetFD = open(targetDirectory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                guard targetFD >= 0 else {
                    return .failure(.refused("cannot open the directory of its target \(target): \(errnoName(errno))"))
                }
                defer { close(targetFD) }
                if let problem = directoryProblem(targetFD, "the directory of its target, \(targetDirectory),") {
                    return .failure(.refused(problem))
                }
            }
        }
        guard Int(st.st_size) <= sizeLimit else { return .failure(.refused("larger than \(sizeLimit) bytes")) }
        let stamp = FileStamp(st)
        if let known, let stamp, stamp == known.stamp {
            return .success(PluginFile(copy: nil, hash: known.hash, stamp: stamp))
        }
        // Copied into the private copy the library will be mapped from, and hashed on the
        // way (PrivateCopy.make). Only what dlopen maps: a build's debug
        // information, often more than half the file, is neither copied nor hashed.
        let copy: PrivateCopy
        switch PrivateCopy.make(from: fd, size: ELFCheck.loadedExtent(fd, fileSize: Int(st.st_size)), name: name,
                                directory: copyDirectory) {
        case .failure(let failure): return .failure(failure)
        case .success(let made): copy = made
        }
        if let problem = ELFCheck.problem(copy.fd, size: copy.size) {
            return .failure(.refused("not a loadable library (\(problem))"))
        }
        return .success(PluginFile(copy: copy, hash: copy.hash, stamp: stamp))
    }

    /// Follows the links from `path`, one at a time, and checks the directory each
    /// next link (or the final file) lies in.
    private static func linkChainProblem(_ path: String) -> String? {
        var current = path
        for _ in 0..<40 {
            var st = stat()
            guard lstat(current, &st) == 0, (st.st_mode & S_IFMT) == S_IFLNK,
                  let target = Files.readLink(current) else { return nil }
            let slash = current.lastIndex(of: "/")!
            let linkDirectory = slash == current.startIndex ? "/" : String(current[..<slash])
            let next = target.hasPrefix("/") ? target : linkDirectory + "/" + target
            let nextSlash = next.lastIndex(of: "/")!
            let nextDirectory = nextSlash == next.startIndex ? "/" : String(next[..<nextSlash])
            let fd = open(nextDirectory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard fd >= 0 else { return "cannot open \(nextDirectory), on its way to its target: \(errnoName(errno))" }
            defer { close(fd) }
            if let problem = directoryProblem(fd, "\(nextDirectory), the directory of \(next) on its way to its target,") {
                return problem
            }
            current = next
        }
        return "too many levels of symbolic links"
    }

    private static func ownerProblem(_ st: stat, _ what: String) -> String? {
        let me = geteuid()
        guard st.st_uid != 0, st.st_uid != me else { return nil }
        return "\(what) is owned by uid \(st.st_uid), not by root or the daemon's uid \(me)"
    }

    private static func directoryProblem(_ fd: Int32, _ what: String) -> String? {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return "cannot look at \(what): \(errnoName(errno))" }
        if let problem = ownerProblem(st, what) { return problem }
        if st.st_mode & 0o022 != 0, st.st_mode & S_ISVTX == 0 {
            return "\(what) is writable by group or others and not sticky (mode \(octal(st.st_mode)))"
        }
        return nil
    }

    private static func octal(_ mode: mode_t) -> String { "0" + String(mode & 0o7777, radix: 8) }
}

/// A 64-bit hash of a file's content, to notice that a plugin file changed: FNV-1a
/// over the bytes taken eight at a time (little-endian) in four lanes, one word to
/// each in turn (four independent multiply chains, so the CPU runs them side by
/// side: the hash of every plugin is on start-up's path), then the remaining bytes,
/// then the lanes and the length folded together. This is change detection, not
/// security (the trust checks are what keep others from planting code), so a
/// non-cryptographic hash is enough; the toolchain has no SHA-256 without a
/// dependency.
enum ContentHash {
    static func of(_ bytes: [UInt8]) -> UInt64 {
        bytes.withUnsafeBytes { of($0) }
    }

    static func of(_ raw: UnsafeRawBufferPointer) -> UInt64 {
        var stream = Stream()
        stream.add(raw)
        return stream.value
    }

    /// The same hash over bytes that come in pieces (a file copied through a buffer):
    /// every piece but the last a whole number of 32-byte blocks, so that the lanes
    /// see the words as they would in one piece.
    struct Stream {
        private static let prime: UInt64 = 0x100_0000_01b3
        private static let basis: UInt64 = 0xcbf2_9ce4_8422_2325
        private var lanes = (basis, basis ^ 1, basis ^ 2, basis ^ 3)
        private var count = 0
        private var ended = false

        mutating func add(_ raw: UnsafeRawBufferPointer) {
            guard !raw.isEmpty else { return }
            precondition(!ended, "ContentHash.Stream: a piece after one that was not whole blocks")
            let prime = Self.prime
            func word(_ i: Int) -> UInt64 { UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: i * 8, as: UInt64.self)) }
            let blocks = raw.count / 32
            // In C, kept scalar (cshims_content_hash_blocks says why).
            withUnsafeMutableBytes(of: &lanes) { four in
                cshims_content_hash_blocks(four.baseAddress!.assumingMemoryBound(to: UInt64.self),
                                           raw.baseAddress!.assumingMemoryBound(to: UInt8.self), blocks)
            }
            for i in (blocks * 4)..<(raw.count / 8) { lanes.0 = (lanes.0 ^ word(i)) &* prime }
            for i in (raw.count / 8 * 8)..<raw.count { lanes.0 = (lanes.0 ^ UInt64(raw[i])) &* prime }
            count += raw.count
            ended = raw.count % 32 != 0
        }

        var value: UInt64 {
            var hash = Self.basis
            for lane in [lanes.0, lanes.1, lanes.2, lanes.3] { hash = (hash ^ lane) &* Self.prime }
            return (hash ^ UInt64(count)) &* Self.prime
        }
    }
}

/// The few checks that make a file safe to hand to dlopen: every segment it maps
/// lies inside the file. glibc maps segments without checking that, and touching a
/// page past the end of a truncated file (an interrupted copy) is a SIGBUS.
enum ELFCheck {
    /// How much of the file, from its start, dlopen reads: the ELF header, the
    /// program headers and every loadable segment (glibc's loader reads nothing
    /// else: not the section headers, not the debug information after the
    /// segments). The whole file when its headers cannot be read or a segment
    /// ends past the end: `problem` then says why it is refused.
    static func loadedExtent(_ fd: Int32, fileSize: Int) -> Int {
        var header = [UInt8](repeating: 0, count: 64)
        guard pread(fd, &header, 64, 0) == 64, problem(header, programHeaders: false) == nil else { return fileSize }
        let (phoff, entrySize, count) = header.withUnsafeBytes(programHeaderTable)
        let tableSize = entrySize * count
        guard entrySize >= 56, phoff <= UInt64(fileSize), tableSize <= fileSize - Int(phoff) else { return fileSize }
        var table = [UInt8](repeating: 0, count: tableSize)
        guard pread(fd, &table, tableSize, off_t(phoff)) == tableSize else { return fileSize }
        var extent = max(64, Int(phoff) + tableSize)
        for (offset, size) in table.withUnsafeBytes({ loads($0, at: 0, entrySize: entrySize, count: count) }) {
            guard offset <= UInt64(fileSize), size <= UInt64(fileSize) - offset else { return fileSize }
            extent = max(extent, Int(offset + size))
        }
        return extent
    }

    /// The ELF header's program header table: its offset, entry size and count.
    private static func programHeaderTable(_ raw: UnsafeRawBufferPointer) -> (UInt64, Int, Int) {
        (UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 32, as: UInt64.self)),
         Int(UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: 54, as: UInt16.self))),
         Int(UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: 56, as: UInt16.self))))
    }

    /// The file offset and size of each PT_LOAD segment in the table of `count`
    /// entries at `at` in `raw`.
    private static func loads(_ raw: UnsafeRawBufferPointer, at: Int, entrySize: Int,
                              count: Int) -> [(offset: UInt64, size: UInt64)] {
        (0..<count).map { at + $0 * entrySize }
            .filter { UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: $0, as: UInt32.self)) == 1 }
            .map { (UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: $0 + 8, as: UInt64.self)),
                    UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: $0 + 32, as: UInt64.self))) }
    }

    static func problem(_ bytes: [UInt8]) -> String? {
        bytes.withUnsafeBytes { problem($0) }
    }

    static func problem(_ bytes: [UInt8], programHeaders: Bool) -> String? {
        bytes.withUnsafeBytes { problem($0, programHeaders: programHeaders) }
    }

    /// `programHeaders` false: the ELF header's own checks only (its first 64 bytes).
    static func problem(_ raw: UnsafeRawBufferPointer, programHeaders: Bool = true) -> String? {
        problem(raw, fileSize: raw.count, programHeaders: programHeaders)
    }

    /// The same checks on the `size` bytes behind `fd` (a sealed private copy), of
    /// which only the headers are read: the ELF header, then the program header table.
    static func problem(_ fd: Int32, size: Int) -> String? {
        func prefix(_ count: Int) -> [UInt8]? {
            var bytes = [UInt8](repeating: 0, count: count)
            return pread(fd, &bytes, count, 0) == count ? bytes : nil
        }
        guard let header = prefix(min(size, 64)) else { return "cannot read its headers: \(errnoName(errno))" }
        if let problem = header.withUnsafeBytes({ problem($0, fileSize: size, programHeaders: false) }) {
            return problem
        }
        let (phoff, entrySize, count) = header.withUnsafeBytes(programHeaderTable)
        guard entrySize >= 56, phoff <= UInt64(size), entrySize * count <= size - Int(phoff) else {
            return "truncated: program headers past the end"
        }
        guard let headers = prefix(Int(phoff) + entrySize * count) else {
            return "cannot read its headers: \(errnoName(errno))"
        }
        return headers.withUnsafeBytes { problem($0, fileSize: size, programHeaders: true) }
    }

    /// `raw`: the first bytes of a file of `fileSize` bytes, as far as its program
    /// header table when that lies inside the file.
    private static func problem(_ raw: UnsafeRawBufferPointer, fileSize: Int, programHeaders: Bool) -> String? {
        guard raw.count >= 64, raw[0..<4].elementsEqual([0x7f, 0x45, 0x4c, 0x46]) else { return "not an ELF file" }
        guard raw[4] == 2, raw[5] == 1 else { return "not a 64-bit little-endian ELF file" }
        guard programHeaders else { return nil }
        let size = UInt64(fileSize)
        let (phoff, entrySize, count) = programHeaderTable(raw)
        guard entrySize >= 56, phoff <= size, UInt64(entrySize * count) <= size - phoff,
              Int(phoff) + entrySize * count <= raw.count else {
            return "truncated: program headers past the end"
        }
        for (offset, fileSize) in loads(raw, at: Int(phoff), entrySize: entrySize, count: count)
        where offset > size || fileSize > size - offset {
            return "truncated: a segment ends past the end of the file"
        }
        return nil
    }
}

/// A plugin file's identity and change times: the same device, inode, size,
/// modification and change time as when it was read means the same content (any
/// write or replacement changes the change time, which no process can set back).
/// Not trusted for a file changed in the last 2 seconds: timestamps come from a
/// coarse clock, so a write just after the read could leave them as they were
/// (git's "racily clean" index entries); such a file is read and hashed each time.
struct FileStamp: Equatable, Sendable {
    let device: UInt64, inode: UInt64, size: Int64
    let modified: timespec, changed: timespec

    /// `now`: the wall clock's seconds (a test's own).
    init?(_ st: stat, now: Int = FileStamp.wallClockSeconds()) {
        guard now - st.st_ctim.tv_sec > 2 else { return nil }
        (device, inode, size) = (UInt64(st.st_dev), UInt64(st.st_ino), Int64(st.st_size))
        (modified, changed) = (st.st_mtim, st.st_ctim)
    }

    static func wallClockSeconds() -> Int {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return now.tv_sec
    }

    static func == (a: FileStamp, b: FileStamp) -> Bool {
        a.device == b.device && a.inode == b.inode && a.size == b.size
            && a.modified.tv_sec == b.modified.tv_sec && a.modified.tv_nsec == b.modified.tv_nsec
            && a.changed.tv_sec == b.changed.tv_sec && a.changed.tv_nsec == b.changed.tv_nsec
    }
}
