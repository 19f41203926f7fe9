import Foundation
import Testing
import PermissionsTestSupport

/// Where the daemon maps its plugins from (PrivateCopy): a kept copy in its state
/// directory's plugin-copies when that is on a disk, so that the copy's pages are
/// a disk's cache, which the kernel may reclaim once start-up's code is released,
/// and the next start maps it again with nothing written; a sealed memfd when the
/// state directory is in memory anyway. Either way the path the plugin came from
/// is never mapped.
@Suite struct PluginCopyTests {
    @Test func thePluginsRunFromKeptCopiesThatTheNextStartFinds() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus)
        defer { daemon.stop() }
        try requireDisk(daemon.stateDirectory)
        _ = try daemon.waitForLog(StartUpCodeTests.released)
        let state = URL(fileURLWithPath: daemon.stateDirectory).resolvingSymlinksInPath().path
        let copies = state + "/plugin-copies/"
        // Written now, and named once mapped: one per plugin (location,
        // notifications), after the file and its hash.
        #expect(try daemon.waitForLog("written now", count: 2).contains("/plugin-copies/libpermissions-"))
        _ = try daemon.waitForLog("kept for the next start", count: 2)
        let written = try FileManager.default.contentsOfDirectory(atPath: copies).sorted().map { name in
            var st = stat()
            #expect(stat(copies + name, &st) == 0)
            return KeptCopy(name: name, inode: UInt64(st.st_ino), mode: st.st_mode & 0o7777)
        }
        #expect(written.count == 2 && written.allSatisfy { $0.name.hasPrefix("libpermissions-") && $0.mode == 0o400 },
                "\(written)")
        let maps = try Self.codeMappings(of: daemon)
        #expect(Set(maps.filter { $0.hasPrefix(copies) }).count == 2, "\(maps)")
        #expect(!maps.contains { $0.hasPrefix("/memfd:") }, "\(maps)")
        #expect(!maps.contains { $0.hasSuffix("libpermissions-location.so") }, "\(maps)")
        #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"not-determined\"\n")

        // The next start maps the same files: nothing written.
        daemon.stop()
        try daemon.start()
        _ = try daemon.waitForLog(StartUpCodeTests.released)
        #expect(try Self.keptCopies(of: daemon, in: copies) == written)
        #expect(try daemon.waitForLog("made by an earlier start", count: 2).contains("/plugin-copies/libpermissions-"))
        #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"not-determined\"\n")
    }

    /// A kept copy whose bytes changed between two starts differs from the plugin
    /// file and is written again; kept copies no plugin uses (a plugin since
    /// removed or replaced) are removed once start-up is over.
    @Test func aChangedKeptCopyIsWrittenAgainAndUnusedOnesGo() throws {
        let bus = try TestBus()
        let (daemon, copies) = try Self.stoppedAfterOneStart(on: bus)
        defer { daemon.stop() }
        let before = try FileManager.default.contentsOfDirectory(atPath: copies).sorted()
        let location = try #require(before.first { $0.hasPrefix("libpermissions-location.so.") })
        var st = stat()
        #expect(stat(copies + location, &st) == 0)
        let inode = st.st_ino
        // Bytes inside its code changed.
        try Self.overwrite(copies + location, with: Data(repeating: 0xcc, count: 16), at: 8192)
        // Left by a plugin that is gone.
        #expect(FileManager.default.createFile(atPath: copies + "libpermissions-gone.so.0123456789abcdef",
                                               contents: Data([1, 2, 3]), attributes: [.posixPermissions: 0o400]))

        try daemon.start()
        _ = try daemon.waitForLog("removed 1 kept plugin copies no plugin uses")
        _ = try daemon.waitForLog("libpermissions-location.so.")  // named again
        #expect(try daemon.waitForLog("kept for the next start").contains("libpermissions-location.so."))
        #expect(try FileManager.default.contentsOfDirectory(atPath: copies).sorted() == before)
        #expect(stat(copies + location, &st) == 0 && st.st_ino != inode && st.st_mode & 0o7777 == 0o400)
        #expect(try daemon.waitForLog("libpermissions-location.so: mapped from").contains("written now"))
        #expect(try daemon.waitForLog("libpermissions-notifications.so: mapped from").contains("made by an earlier start"))
        #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"not-determined\"\n")
    }

    /// A kept copy changed so that its ContentHash stays the same (FNV-1a lanes:
    /// one 32-byte block chosen after the change sets every lane back, no search
    /// needed) is still not the plugin's bytes: the next start must write it again,
    /// not map it. (Breaker: the check compares hashes, so these bytes run.)
    @Test func aKeptCopyChangedWithItsHashKeptIsWrittenAgain() throws {
        let bus = try TestBus()
        let (daemon, copies) = try Self.stoppedAfterOneStart(on: bus)
        defer { daemon.stop() }
        let location = try #require(try FileManager.default.contentsOfDirectory(atPath: copies)
            .first { $0.hasPrefix("libpermissions-location.so.") })
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: copies + location)))
        // Bytes no segment maps (the padding between the first two PT_LOAD
        // segments), so that the changed copy still loads: what is shown is that
        // bytes other than the plugin's pass as its copy.
        let loads = loadSegments(of: bytes)
        try #require(loads.count >= 2)
        let changed = (loads[0].offset + loads[0].size + 31) / 32 * 32, fix = changed + 32
        try #require(fix + 32 <= loads[1].offset / 4096 * 4096, "no 64 bytes of padding between the segments: \(loads)")
        // The four lanes' states after each block, as ContentHash.Stream runs them.
        func lanesAfter(_ b: [UInt8], blocks: Int) -> [UInt64] {
            let prime: UInt64 = 0x100_0000_01b3, basis: UInt64 = 0xcbf2_9ce4_8422_2325
            var lanes = [basis, basis ^ 1, basis ^ 2, basis ^ 3]
            b.withUnsafeBytes { raw in
                for block in 0..<blocks {
                    for k in 0..<4 {
                        let word = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: block * 32 + k * 8, as: UInt64.self))
                        lanes[k] = (lanes[k] ^ word) &* prime
                    }
                }
            }
            return lanes
        }
        let want = lanesAfter(bytes, blocks: fix / 32 + 1)
        for i in changed..<(changed + 16) { bytes[i] ^= 0xff }
        let have = lanesAfter(bytes, blocks: fix / 32)
        // The inverse of the FNV prime modulo 2^64 (Newton's iteration).
        var inverse: UInt64 = 0x100_0000_01b3
        for _ in 0..<6 { inverse = inverse &* (2 &- 0x100_0000_01b3 &* inverse) }
        for k in 0..<4 {
            let word = (want[k] &* inverse) ^ have[k]
            for j in 0..<8 { bytes[fix + k * 8 + j] = UInt8(truncatingIfNeeded: word >> (8 * UInt64(j))) }
        }
        #expect(lanesAfter(bytes, blocks: fix / 32 + 1) == want)
        try Self.overwrite(copies + location, with: Data(bytes), at: 0)

        try daemon.start()
        #expect(try daemon.waitForLog("libpermissions-location.so: mapped from").contains("written now"))
    }

    /// A plugin-copies the daemon cannot trust (a symbolic link, here to a
    /// directory that would do) keeps the copies in memory, and says so once as a
    /// warning; one of its own that others may write is made 0700 again and used.
    /// (Breaker: both went to memory, at debug level only.)
    @Test func aPluginCopiesThatCannotBeTrustedIsToldAndOneLeftOpenIsClosed() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, start: false)
        defer { daemon.stop() }
        try requireDisk(daemon.root)
        try FileManager.default.createDirectory(atPath: daemon.stateDirectory, withIntermediateDirectories: false)
        chmod(daemon.stateDirectory, 0o700)
        try FileManager.default.createDirectory(atPath: daemon.root + "/elsewhere", withIntermediateDirectories: false)
        chmod(daemon.root + "/elsewhere", 0o700)
        try FileManager.default.createSymbolicLink(atPath: daemon.stateDirectory + "/plugin-copies",
                                                   withDestinationPath: daemon.root + "/elsewhere")
        try daemon.start()
        let warning = try daemon.waitForLog("plugin copies are kept in memory")
        #expect(warning.contains("<4>") && warning.contains("plugin-copies"), "\(warning)")
        #expect(daemon.logLines(containing: "plugin copies are kept in memory").count == 1)
        #expect(try daemon.waitForLog("mapped from its private copy in memory", count: 2).contains("libpermissions-"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: daemon.root + "/elsewhere").isEmpty)
        daemon.stop()

        try FileManager.default.removeItem(atPath: daemon.stateDirectory + "/plugin-copies")
        try FileManager.default.createDirectory(atPath: daemon.stateDirectory + "/plugin-copies",
                                                withIntermediateDirectories: false)
        chmod(daemon.stateDirectory + "/plugin-copies", 0o777)
        try daemon.start()
        _ = try daemon.waitForLog("written now", count: 2)
        var st = stat()
        #expect(stat(daemon.stateDirectory + "/plugin-copies", &st) == 0 && st.st_mode & 0o7777 == 0o700)
        #expect(daemon.logLines(containing: "plugin copies are kept in memory").isEmpty)
    }

    @Test func aStateDirectoryInMemoryGetsSealedMemfds() throws {
        let shm = "/dev/shm"
        try #require(try fileSystemType(of: shm) == "tmpfs", "no tmpfs at /dev/shm")
        var template = Array((shm + "/permissions-state.XXXXXX").utf8CString)
        let state = String(cString: try #require(mkdtemp(&template)))
        defer { try? FileManager.default.removeItem(atPath: state) }
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, start: false)
        daemon.extraArguments = ["--state-dir", state]  // the last one given counts
        try daemon.start()
        defer { daemon.stop() }
        let maps = try Self.codeMappings(of: daemon)
        #expect(Set(maps.filter { $0.hasPrefix("/memfd:libpermissions-") }).count == 2, "\(maps)")
        #expect(!maps.contains { $0.hasPrefix(state) }, "\(maps)")
        #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"not-determined\"\n")
    }

    /// A daemon on `bus` started once, its plugins' copies written and named, then
    /// stopped; and its plugin-copies directory (resolved, ending in "/").
    static func stoppedAfterOneStart(on bus: TestBus) throws -> (DaemonUnderTest, copies: String) {
        let daemon = try DaemonUnderTest(bus: bus)
        try requireDisk(daemon.stateDirectory)
        _ = try daemon.waitForLog(StartUpCodeTests.released)
        _ = try daemon.waitForLog("kept for the next start", count: 2)
        daemon.stop()
        let state = URL(fileURLWithPath: daemon.stateDirectory).resolvingSymlinksInPath().path
        return (daemon, state + "/plugin-copies/")
    }

    /// Writes `bytes` into the kept copy at `path` from `offset`, as its owner may
    /// (undoing its mode 0400 for the while).
    static func overwrite(_ path: String, with bytes: Data, at offset: UInt64) throws {
        #expect(chmod(path, 0o600) == 0)
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.seek(toOffset: offset)
        try handle.write(contentsOf: bytes)
        try handle.close()
        #expect(chmod(path, 0o400) == 0)
    }

    /// The kept copies the daemon maps, from `directory` (/proc/PID/maps), with
    /// their inodes.
    static func keptCopies(of daemon: DaemonUnderTest, in directory: String) throws -> [KeptCopy] {
        try Set(codeMappings(of: daemon).filter { $0.hasPrefix(directory) }).sorted().map { path in
            var st = stat()
            guard stat(path, &st) == 0 else { throw HarnessError(description: "\(path) is mapped but gone") }
            return KeptCopy(name: String(path.dropFirst(directory.count)), inode: UInt64(st.st_ino),
                            mode: st.st_mode & 0o7777)
        }
    }

    struct KeptCopy: Equatable, CustomStringConvertible {
        let name: String
        let inode: UInt64
        let mode: mode_t
        var description: String { "\(name) (inode \(inode), mode \(String(mode, radix: 8)))" }
    }

    /// The files of the daemon's executable mappings (/proc/PID/maps).
    static func codeMappings(of daemon: DaemonUnderTest) throws -> [String] {
        let pid = try #require(daemon.pid)
        let maps = try run("/bin/cat", ["/proc/\(pid)/maps"]).stdout  // (Foundation reads /proc files short)
        return maps.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            guard fields.count == 6, fields[1].contains("x") else { return nil }
            return fields[5].trimmingCharacters(in: .whitespaces)
        }
    }
}
