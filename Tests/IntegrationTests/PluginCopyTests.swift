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
        // Where the copies go to memory (PrivateCopy): a test directory there cannot show the disk's.
        try #require(!["tmpfs", "overlayfs"].contains(try fileSystemType(of: daemon.stateDirectory)),
                     "the test directory is on tmpfs or overlayfs: set TMPDIR to a disk with 32 MiB free")
        _ = try daemon.waitForLog(StartUpCodeTests.released)
        let state = URL(fileURLWithPath: daemon.stateDirectory).resolvingSymlinksInPath().path
        let copies = state + "/plugin-copies/"
        // One per plugin (location, notifications), named after the file and its hash.
        let kept = try Self.keptCopies(of: daemon, in: copies)
        #expect(kept.count == 2 && kept.allSatisfy { $0.name.hasPrefix("libpermissions-") && $0.mode == 0o400 }, "\(kept)")
        let maps = try Self.codeMappings(of: daemon)
        #expect(!maps.contains { $0.hasPrefix("/memfd:") }, "\(maps)")
        #expect(!maps.contains { $0.hasSuffix("libpermissions-location.so") }, "\(maps)")
        #expect(try daemon.waitForLog("written now", count: 2).contains("/plugin-copies/libpermissions-"))
        #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"not-determined\"\n")

        // The next start maps the same files: nothing written.
        daemon.stop()
        try daemon.start()
        _ = try daemon.waitForLog(StartUpCodeTests.released)
        #expect(try Self.keptCopies(of: daemon, in: copies) == kept)
        #expect(try daemon.waitForLog("made by an earlier start", count: 2).contains("/plugin-copies/libpermissions-"))
        #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"not-determined\"\n")
    }

    /// A kept copy whose bytes changed between two starts fails its hash and is
    /// written again; kept copies no plugin uses (a plugin since removed or
    /// replaced) are removed once start-up is over.
    @Test func aChangedKeptCopyIsWrittenAgainAndUnusedOnesGo() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus)
        defer { daemon.stop() }
        try #require(!["tmpfs", "overlayfs"].contains(try fileSystemType(of: daemon.stateDirectory)),
                     "the test directory is on tmpfs or overlayfs: set TMPDIR to a disk with 32 MiB free")
        _ = try daemon.waitForLog(StartUpCodeTests.released)
        daemon.stop()
        let state = URL(fileURLWithPath: daemon.stateDirectory).resolvingSymlinksInPath().path
        let copies = state + "/plugin-copies/"
        let before = try FileManager.default.contentsOfDirectory(atPath: copies).sorted()
        let location = try #require(before.first { $0.hasPrefix("libpermissions-location.so.") })
        var st = stat()
        #expect(stat(copies + location, &st) == 0)
        let inode = st.st_ino
        // Its owner may undo the mode 0400: bytes inside its code changed.
        #expect(chmod(copies + location, 0o600) == 0)
        let handle = try #require(FileHandle(forWritingAtPath: copies + location))
        try handle.seek(toOffset: 8192)
        try handle.write(contentsOf: Data(repeating: 0xcc, count: 16))
        try handle.close()
        #expect(chmod(copies + location, 0o400) == 0)
        // Left by a plugin that is gone.
        #expect(FileManager.default.createFile(atPath: copies + "libpermissions-gone.so.0123456789abcdef",
                                               contents: Data([1, 2, 3]), attributes: [.posixPermissions: 0o400]))

        try daemon.start()
        _ = try daemon.waitForLog("removed 1 kept plugin copies no plugin uses")
        #expect(try FileManager.default.contentsOfDirectory(atPath: copies).sorted() == before)
        #expect(stat(copies + location, &st) == 0 && st.st_ino != inode && st.st_mode & 0o7777 == 0o400)
        #expect(try daemon.waitForLog("libpermissions-location.so: mapped from").contains("written now"))
        #expect(try daemon.waitForLog("libpermissions-notifications.so: mapped from").contains("made by an earlier start"))
        #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"not-determined\"\n")
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
