import Foundation
import Testing
import PermissionsTestSupport
import SystemPrimitives
@testable import PermissionsPluginHost

/// The pure parts of reading a plugin file: the ELF bounds check that keeps a
/// truncated library (an interrupted copy) away from dlopen, where touching a page
/// past the end of the file would be a SIGBUS, and the content hash.
@Suite struct PluginFileTests {
    static let library: [UInt8] = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
        let bin = ProcessInfo.processInfo.environment["PERMISSIONS_BIN_DIR"] ?? root + "/.build/debug"
        return Array((try? Data(contentsOf: URL(fileURLWithPath: bin + "/libpermissions-location.so"))) ?? Data())
    }()

    /// The built plugins' directory, resolved, as /proc/self/fd shows paths.
    static var resolvedBinDirectory: String { URL(fileURLWithPath: binDir).resolvingSymlinksInPath().path }

    /// A new temporary directory on a disk, its path resolved, as /proc/self/fd
    /// shows it; removed again, and the test stopped, when it is on tmpfs or
    /// overlayfs (requireDisk).
    static func diskDirectory(_ prefix: String) throws -> String {
        let directory = URL(fileURLWithPath: try makeTemporaryDirectory(prefix)).resolvingSymlinksInPath().path
        do {
            try requireDisk(directory)
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
        return directory
    }

    @Test func aWholeLibraryPassesAndATruncatedOneIsRefused() throws {
        try #require(Self.library.count > 4096)
        #expect(ELFCheck.problem(Self.library) == nil)
        // Cut inside the first segment (headers, symbols, code: far more than 8 KiB).
        // A cut past the last segment is harmless, as dlopen maps nothing from there.
        #expect(ELFCheck.problem(Array(Self.library.prefix(8192))) == "truncated: a segment ends past the end of the file")
        #expect(ELFCheck.problem(Array(Self.library.prefix(100))) == "truncated: program headers past the end")
        #expect(ELFCheck.problem(Array("not a library, just some text that is long enough to have a header".utf8))
                == "not an ELF file")
        #expect(ELFCheck.problem([]) == "not an ELF file")
    }

    @Test func theHashFollowsTheContent() {
        let a = Self.library
        var b = a
        b[b.count / 2] ^= 1
        #expect(ContentHash.of(a) == ContentHash.of(a))
        #expect(ContentHash.of(a) != ContentHash.of(b))
        // The length counts: a file grown by zeros is another file.
        #expect(ContentHash.of([1, 2, 3]) != ContentHash.of([1, 2, 3, 0]))
        #expect(ContentHash.of([]) != ContentHash.of([0]))
    }

    /// The copy is hashed a chunk at a time (PrivateCopy.make): pieces of whole
    /// 32-byte blocks and a last piece of any length hash as the bytes in one piece.
    @Test func theHashInPiecesIsTheHashInOne() {
        let bytes = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        for split in [0, 32, 64, 992, 1000] {
            for end in [split, 999, 1000] where end >= split {
                var stream = ContentHash.Stream()
                bytes.withUnsafeBytes { raw in
                    stream.add(UnsafeRawBufferPointer(rebasing: raw[0..<split]))
                    stream.add(UnsafeRawBufferPointer(rebasing: raw[split..<end]))
                }
                #expect(stream.value == ContentHash.of(Array(bytes[0..<end])), "split at \(split), end \(end)")
            }
        }
    }

    /// The hash names the kept copies (PrivateCopy), so it must not change from one
    /// build to the next: the algorithm as documented (four FNV-1a lanes over
    /// little-endian words, the rest into the first, the lanes and the length
    /// folded), written out plainly here, against the one that runs (its blocks in
    /// C, cshims_content_hash_blocks).
    @Test func theHashIsTheDocumentedOne() {
        func plain(_ bytes: [UInt8]) -> UInt64 {
            let prime: UInt64 = 0x100_0000_01b3, basis: UInt64 = 0xcbf2_9ce4_8422_2325
            var lanes = [basis, basis ^ 1, basis ^ 2, basis ^ 3]
            func word(_ i: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(bytes[i * 8 + $1]) << (8 * $1) } }
            for i in 0..<(bytes.count / 32 * 4) { lanes[i % 4] = (lanes[i % 4] ^ word(i)) &* prime }
            for i in (bytes.count / 32 * 4)..<(bytes.count / 8) { lanes[0] = (lanes[0] ^ word(i)) &* prime }
            for i in (bytes.count / 8 * 8)..<bytes.count { lanes[0] = (lanes[0] ^ UInt64(bytes[i])) &* prime }
            var hash = basis
            for lane in lanes { hash = (hash ^ lane) &* prime }
            return (hash ^ UInt64(bytes.count)) &* prime
        }
        let bytes = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) }
        for count in [0, 1, 7, 8, 31, 32, 33, 63, 64, 65, 100, 999, 1000] {
            #expect(ContentHash.of(Array(bytes[0..<count])) == plain(Array(bytes[0..<count])), "\(count) bytes")
        }
        #expect(ContentHash.of(Self.library) == plain(Self.library))
    }

    /// The check of the sealed copy reads its headers only, and says what the
    /// check of the whole bytes says.
    @Test func theCheckOfADescriptorIsTheCheckOfTheBytes() throws {
        try #require(Self.library.count > 4096)
        let cases: [[UInt8]] = [Self.library, Array(Self.library.prefix(8192)), Array(Self.library.prefix(100)),
                                Array("not a library, just some text that is long enough to have a header".utf8),
                                Array(Self.library.prefix(10)), []]
        for bytes in cases {
            var template = Array(NSTemporaryDirectory().appending("elf-check.XXXXXX").utf8CString)
            let fd = mkstemp(&template)
            try #require(fd >= 0)
            let path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            defer { close(fd); unlink(path) }
            #expect(bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count)
            #expect(ELFCheck.problem(fd, size: bytes.count) == ELFCheck.problem(bytes), "\(bytes.count) bytes")
        }
    }

    /// A file read before, unchanged, is checked again but not copied or hashed
    /// (the rescan after start-up); a stamp is not trusted for a file changed in
    /// the last 2 seconds, nor taken for another file's.
    @Test func anUnchangedFileIsNotReadAgain() throws {
        let bin = ProcessInfo.processInfo.environment["PERMISSIONS_BIN_DIR"]
            ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().path + "/.build/debug"
        let directory = URL(fileURLWithPath: bin).resolvingSymlinksInPath().path
        var st = stat()
        try #require(stat(directory + "/libpermissions-location.so", &st) == 0)
        #expect(FileStamp(st, now: st.st_ctim.tv_sec + 1) == nil)
        let stamp = try #require(FileStamp(st, now: st.st_ctim.tv_sec + 3))
        var grown = st
        grown.st_size += 1
        #expect(FileStamp(grown, now: st.st_ctim.tv_sec + 3) != stamp)
        var touched = st
        touched.st_ctim.tv_nsec += 1
        #expect(FileStamp(touched, now: st.st_ctim.tv_sec + 3) != stamp)

        // The built library, written more than 2 s ago by the build: stamped.
        try #require(FileStamp.wallClockSeconds() - st.st_ctim.tv_sec > 2, "built just now: run again")
        guard case .success(let first) = PluginFile.read(directory: directory, name: "libpermissions-location.so") else {
            Issue.record("the built library was refused")
            return
        }
        #expect(first.copy != nil)
        let known = try #require(first.stamp)
        guard case .success(let again) = PluginFile.read(directory: directory, name: "libpermissions-location.so",
                                                         known: (known, first.hash)) else {
            Issue.record("the built library was refused the second time")
            return
        }
        #expect(again.copy == nil)
        #expect(again.hash == first.hash)
        // Another file's stamp: read and hashed.
        guard case .success(let other) = PluginFile.read(directory: directory, name: "libpermissions-notifications.so",
                                                         known: (known, first.hash)) else {
            Issue.record("the notifications library was refused")
            return
        }
        #expect(other.copy != nil)
        #expect(other.hash != first.hash)
    }

    /// The private copy holds what the loader maps, up to the end of the last
    /// loadable segment: a build's debug information after it is not copied or
    /// hashed, so the same library with other bytes there is the same plugin. A
    /// file cut inside a segment is copied whole, and refused.
    @Test func theCopyHoldsWhatTheLoaderMaps() throws {
        let library = Self.library
        try #require(library.count > 4096)
        let end = loadEnd(library)
        // A debug build: its DWARF sections lie after the segments.
        try #require(end < library.count, "no bytes after the loadable segments in this build")
        var template = Array(NSTemporaryDirectory().appending("plugin-file.XXXXXX").utf8CString)
        let directory = String(cString: try #require(mkdtemp(&template)))
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func write(_ bytes: [UInt8], _ name: String) throws {
            try Data(bytes).write(to: URL(fileURLWithPath: directory + "/" + name))
            chmod(directory + "/" + name, 0o644)
        }
        try write(library, "libpermissions-a.so")
        try write(Array(library.prefix(end)) + [UInt8](repeating: 0xA5, count: 4096), "libpermissions-b.so")
        try write(Array(library.prefix(end - 1)), "libpermissions-cut.so")

        guard case .success(let a) = PluginFile.read(directory: directory, name: "libpermissions-a.so"),
              case .success(let b) = PluginFile.read(directory: directory, name: "libpermissions-b.so") else {
            Issue.record("a library was refused")
            return
        }
        #expect(a.copy?.size == end)
        #expect(b.copy?.size == end)
        #expect(a.hash == b.hash)
        #expect(a.hash == ContentHash.of(Array(library.prefix(end))))
        guard case .failure(.refused(let reason)) = PluginFile.read(directory: directory, name: "libpermissions-cut.so")
        else {
            Issue.record("a library cut inside its last segment was not refused")
            return
        }
        #expect(reason == "not a loadable library (truncated: a segment ends past the end of the file)")
    }

    /// A copy made in a directory on a disk is a file there, in plugin-copies,
    /// mode 0400, with no descriptor left that can write it, named after the file
    /// and its hash once it is mapped (`keep`): the same bytes and hash as a sealed
    /// memfd's, which is what a directory on tmpfs, or none, gets. `inMemory` makes
    /// the memfd from the file.
    @Test func theCopyIsAKeptFileOnADiskAndASealedMemfdOtherwise() throws {
        let bin = Self.resolvedBinDirectory
        let name = "libpermissions-location.so"
        let disk = try Self.diskDirectory("plugin-copy")
        defer { try? FileManager.default.removeItem(atPath: disk) }

        guard case .success(let onDisk) = PluginFile.read(directory: bin, name: name, copyDirectory: disk),
              case .success(let inMemory) = PluginFile.read(directory: bin, name: name) else {
            Issue.record("the built library was refused")
            return
        }
        let file = try #require(onDisk.copy)
        #expect(file.medium == .disk(disk))
        let kept = name + "." + Self.hex(onDisk.hash)
        #expect(file.kept == kept && !file.reused)
        // No name until it is mapped: a file refused before that leaves nothing.
        #expect(Self.link(file.fd).hasPrefix(disk + "/plugin-copies/#"), "\(Self.link(file.fd))")
        #expect(try FileManager.default.contentsOfDirectory(atPath: disk + "/plugin-copies").isEmpty)
        var st = stat()
        #expect(fstat(file.fd, &st) == 0 && st.st_nlink == 0 && st.st_mode & 0o7777 == 0o400)
        let inode = st.st_ino
        #expect(stat(disk + "/plugin-copies", &st) == 0 && st.st_mode & 0o7777 == 0o700)
        #expect(fcntl(file.fd, F_GETFL) & O_ACCMODE == O_RDONLY)
        let mapped = try Self.kept(file)
        defer { close(mapped) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: disk + "/plugin-copies") == [kept])
        #expect(stat(disk + "/plugin-copies/" + kept, &st) == 0 && st.st_ino == inode && st.st_nlink == 1)

        let memfd = try #require(inMemory.copy)
        #expect(memfd.medium == .memory && memfd.kept == nil)
        #expect(Self.link(memfd.fd).hasPrefix("/memfd:\(name)"), "\(Self.link(memfd.fd))")
        // F_GET_SEALS and F_SEAL_WRITE (linux/fcntl.h), which Glibc does not export.
        #expect(fcntl(memfd.fd, 1024 + 10) & 0x0008 != 0)
        #expect(inMemory.hash == onDisk.hash && memfd.size == file.size)

        // tmpfs is memory anyway: a sealed memfd, and nothing in the directory.
        try #require(try fileSystemType(of: "/dev/shm") == "tmpfs", "no tmpfs at /dev/shm")
        var shmTemplate = Array("/dev/shm/plugin-copy.XXXXXX".utf8CString)
        let shm = String(cString: try #require(mkdtemp(&shmTemplate)))
        defer { try? FileManager.default.removeItem(atPath: shm) }
        guard case .success(let onTmpfs) = PluginFile.read(directory: bin, name: name, copyDirectory: shm) else {
            Issue.record("the built library was refused")
            return
        }
        #expect(onTmpfs.copy?.medium == .memory)
        #expect(try FileManager.default.contentsOfDirectory(atPath: shm).isEmpty)
    }

    /// Within one process a kept copy is handed out once (glibc would take a second
    /// mapping of that file for the first library), so the same content read again
    /// gets a copy of its own, without a name, and the kept one stays.
    @Test func aKeptCopyIsHandedOutOncePerProcess() throws {
        let bin = Self.resolvedBinDirectory
        let name = "libpermissions-notifications.so"
        let disk = try Self.diskDirectory("plugin-kept")
        defer { try? FileManager.default.removeItem(atPath: disk) }
        guard case .success(let first) = PluginFile.read(directory: bin, name: name, copyDirectory: disk) else {
            Issue.record("the built library was refused")
            return
        }
        let firstCopy = try #require(first.copy)
        let kept = try #require(firstCopy.kept)
        let again = try #require(firstCopy.inMemory())
        #expect(again.medium == .memory && again.hash == firstCopy.hash)
        let mapped = try Self.kept(firstCopy)
        defer { close(mapped) }
        let path = disk + "/plugin-copies/" + kept
        var st = stat()
        #expect(stat(path, &st) == 0)
        let inode = st.st_ino

        // The same process again: a copy of its own, not the kept one.
        guard case .success(let second) = PluginFile.read(directory: bin, name: name, copyDirectory: disk) else {
            Issue.record("the built library was refused the second time")
            return
        }
        let own = try #require(second.copy)
        #expect(own.medium == .disk(disk) && own.kept == nil && second.hash == first.hash)
        #expect(fstat(own.fd, &st) == 0 && st.st_ino != inode && st.st_nlink == 0)
        #expect(stat(path, &st) == 0 && st.st_ino == inode)

        // Another start finds it, and one whose bytes changed writes it again:
        // PluginCopyTests, with the daemon.
    }

    /// A file refused before it is loaded (not an ELF file, a library cut short:
    /// a copy or download caught half-way) leaves no kept copy behind: nothing will
    /// ever map it, and doc/admin.md counts on the disk only the versions loaded.
    /// (Breaker: the copy is named before ELFCheck runs, so it stays in
    /// plugin-copies, handed out, until a start without that file.)
    @Test func aRefusedFileLeavesNoKeptCopy() throws {
        let library = Self.library
        try #require(library.count > 4096)
        let disk = try Self.diskDirectory("plugin-refused")
        defer { try? FileManager.default.removeItem(atPath: disk) }
        let source = disk + "/plugins"
        try FileManager.default.createDirectory(atPath: source, withIntermediateDirectories: false)
        chmod(source, 0o755)
        func write(_ bytes: [UInt8], _ name: String) throws {
            try Data(bytes).write(to: URL(fileURLWithPath: source + "/" + name))
            chmod(source + "/" + name, 0o644)
        }
        try write([UInt8](repeating: 0x41, count: 1 << 20), "libpermissions-junk.so")
        try write(Array(library.prefix(8192)), "libpermissions-cut.so")
        for name in ["libpermissions-junk.so", "libpermissions-cut.so"] {
            guard case .failure(.refused) = PluginFile.read(directory: source, name: name, copyDirectory: disk) else {
                Issue.record("\(name) was not refused")
                continue
            }
        }
        let left = (try? FileManager.default.contentsOfDirectory(atPath: disk + "/plugin-copies")) ?? []
        #expect(left.isEmpty, "kept copies of refused files: \(left)")
    }

    /// Keeps `copy` as LoadedPlugin.load does once the library is mapped, and
    /// waits (at most 10 s) for it to be given its name: the descriptor kept.
    private static func kept(_ copy: PrivateCopy) throws -> Int32 {
        let named = DispatchSemaphore(value: 0)
        let outcome = Locked(false)
        let fd = copy.keep { done in
            outcome.withLock { $0 = done }
            named.signal()
        }
        try #require(named.wait(timeout: .now() + 10) == .success, "the copy was not named within 10 s")
        try #require(outcome.withLock { $0 }, "the copy could not be named")
        return fd
    }

    private static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    private static func link(_ fd: Int32) -> String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)")) ?? ""
    }

    /// The end of the last PT_LOAD segment in the file (offset + file size), read
    /// here independently of ELFCheck.
    private func loadEnd(_ bytes: [UInt8]) -> Int {
        loadSegments(of: bytes).map { $0.offset + $0.size }.max() ?? 0
    }
}
