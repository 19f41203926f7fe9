import Foundation
import Testing
import PermissionsTestSupport

/// Where the daemon maps its plugins from (PrivateCopy): an unnamed file in its
/// state directory when that is on a disk, so that the copy's pages are a disk's
/// cache, which the kernel may reclaim once start-up's code is released; a sealed
/// memfd when the state directory is in memory anyway. Either way the path the
/// plugin came from is never mapped, and no copy ever has a name.
@Suite struct PluginCopyTests {
    @Test func thePluginsRunFromUnnamedFilesInTheStateDirectory() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus)
        defer { daemon.stop() }
        // Where the copies go to memory (PrivateCopy): a test directory there cannot show the disk's.
        try #require(!["tmpfs", "overlayfs"].contains(try fileSystemType(of: daemon.stateDirectory)),
                     "the test directory is on tmpfs or overlayfs: set TMPDIR to a disk with 32 MiB free")
        _ = try daemon.waitForLog(StartUpCodeTests.released)
        let maps = try Self.codeMappings(of: daemon)
        // "STATE/#INODE (deleted)": O_TMPFILE's files, one per plugin (location, notifications).
        let state = URL(fileURLWithPath: daemon.stateDirectory).resolvingSymlinksInPath().path
        let copies = Set(maps.filter { $0.hasPrefix(state + "/#") && $0.hasSuffix(" (deleted)") })
        #expect(copies.count == 2, "\(maps)")
        #expect(!maps.contains { $0.hasPrefix("/memfd:") }, "\(maps)")
        #expect(!maps.contains { $0.hasSuffix("libpermissions-location.so") }, "\(maps)")
        // Nothing with a name was left in the state directory: the store's files only.
        let names = try FileManager.default.contentsOfDirectory(atPath: daemon.stateDirectory)
        #expect(names.allSatisfy { $0.hasPrefix("decisions.sqlite") || $0 == "last-good.conf" }, "\(names)")
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
