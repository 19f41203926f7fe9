import Foundation
import Testing
import PermissionsTestSupport
import SystemPrimitives
@testable import PermissionsPluginHost

/// Where a plugin's private copy goes when the state directory's file system is
/// not simply a disk with room (PrivateCopy): each case on a file system mounted
/// for the test (root only), where a copy on it would be a fault, and so is made
/// in memory. Breaker helpers' findings, each failing before its fix:
/// - write-back that fails (thin storage that ran out): write(2) succeeded into
///   the page cache, the daemon ran the copy, and once its pages were reclaimed
///   they read back as zeros (SIGSEGV);
/// - a file system nearly full: the copies took the room the decisions need;
/// - overlayfs, whose files may be on tmpfs (a live system's root).
@Suite(.serialized) struct PrivateCopyMediumTests {
    static let name = "libpermissions-location.so"

    @Test func aCopyWhoseWriteBackFailsIsMadeInMemory() throws {
        try Self.mounting("thin-disk") { base in
            // An ext4 file system of 256 MiB whose blocks are a sparse file on a tmpfs
            // of 24 MiB, filled: nothing written to it reaches its storage any more.
            try Self.sh("mkdir \(base)/backing \(base)/disk && mount -t tmpfs -o size=24M tmpfs \(base)/backing"
                        + " && truncate -s 256M \(base)/backing/disk.img"
                        + " && mkfs.ext4 -q -F -m 0 -E lazy_itable_init=0,lazy_journal_init=0 \(base)/backing/disk.img"
                        + " && mount -o loop \(base)/backing/disk.img \(base)/disk && mkdir \(base)/disk/state && sync"
                        + " && (dd if=/dev/zero of=\(base)/backing/fill bs=64k 2>/dev/null || true)")
            let copy = try Self.copy(into: base + "/disk/state")
            #expect(copy.medium == .memory)
        }
    }

    @Test func aCopyThatWouldLeaveTooLittleRoomIsMadeInMemory() throws {
        try Self.mounting("small-disk") { base in
            try Self.sh("mkdir \(base)/disk && truncate -s 96M \(base)/disk.img"
                        + " && mkfs.ext4 -q -F -m 0 \(base)/disk.img && mount -o loop \(base)/disk.img \(base)/disk"
                        + " && mkdir \(base)/disk/state")
            // Room: on the disk.
            #expect(try Self.copy(into: base + "/disk/state").medium == .disk(base + "/disk/state"))
            // 3 MiB left, under the 16 MiB kept for the decisions: in memory.
            try Self.sh("avail=$(df -B1 --output=avail \(base)/disk | tail -1)"
                        + " && fallocate -l $((avail - 3 * 1024 * 1024)) \(base)/disk/fill")
            #expect(try Self.copy(into: base + "/disk/state").medium == .memory)
        }
    }

    /// A file system that does not take the copy in time (frozen, as for a
    /// backup's snapshot) gets it in memory, within the plugin's deadline (2 s).
    /// (Before: the read waited for the thaw, and the plugin was skipped at its
    /// deadline, for good.)
    @Test func aCopyOnAFrozenFileSystemIsMadeInMemoryInTime() throws {
        try Self.mounting("frozen-disk") { base in
            try Self.sh("mkdir \(base)/disk && truncate -s 96M \(base)/disk.img"
                        + " && mkfs.ext4 -q -F -m 0 \(base)/disk.img && mount -o loop \(base)/disk.img \(base)/disk"
                        + " && mkdir \(base)/disk/state && sync && fsfreeze -f \(base)/disk")
            defer { _ = try? run("/usr/sbin/fsfreeze", ["-u", base + "/disk"]) }
            let began = Date()
            #expect(try Self.copy(into: base + "/disk/state").medium == .memory)
            #expect(Date().timeIntervalSince(began) < 2, "a plugin step's deadline")
        }
    }

    @Test func aCopyOnOverlayfsIsMadeInMemory() throws {
        try Self.mounting("overlay") { base in
            try Self.sh("mkdir \(base)/memory \(base)/root && mount -t tmpfs tmpfs \(base)/memory"
                        + " && mkdir \(base)/memory/lower \(base)/memory/upper \(base)/memory/work"
                        + " && mount -t overlay overlay -o lowerdir=\(base)/memory/lower,upperdir=\(base)/memory/upper,"
                        + "workdir=\(base)/memory/work \(base)/root && mkdir \(base)/root/state")
            #expect(try Self.copy(into: base + "/root/state").medium == .memory)
        }
    }

    /// The built location plugin, read with its copy made in `directory`.
    static func copy(into directory: String) throws -> PrivateCopy {
        let bin = URL(fileURLWithPath: binDir).resolvingSymlinksInPath().path
        guard case .success(let file) = PluginFile.read(directory: bin, name: name, copyDirectory: directory) else {
            throw HarnessError(description: "the built \(name) was refused")
        }
        let copy = try #require(file.copy)
        // What either medium holds is what was read.
        #expect(copy.hash == file.hash)
        return copy
    }

    /// Runs `body` with a new directory to mount file systems under, unmounted
    /// and removed after it.
    static func mounting(_ name: String, _ body: (String) throws -> Void) throws {
        try #require(geteuid() == 0, "mounts file systems: run as root")
        // As the kernel writes it in /proc/self/mounts (no "//"), for unmountAll.
        let base = URL(fileURLWithPath: try makeTemporaryDirectory(name)).resolvingSymlinksInPath().path
        defer { unmountAll(under: base) }
        try body(base)
    }

    static func sh(_ script: String) throws {
        let result = try run("/bin/sh", ["-c", script])
        guard result.status == 0 else { throw HarnessError(description: "\(script): \(result.stderr)") }
    }

    /// Unmounts what the test mounted under `base`, and removes it, unless
    /// something is still mounted there: removing would reach into it. In rounds,
    /// for up to 10 s: a mount holding another's backing file goes in a later
    /// round, and one where a copy given up on is still being written once that
    /// thread has closed it.
    static func unmountAll(under base: String) {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            let points = mounted(under: base)
            if points.isEmpty { break }
            for point in points.sorted(by: { $0.count > $1.count }) {
                _ = try? run("/usr/bin/umount", [point])
            }
            if !mounted(under: base).isEmpty { usleep(20_000) }
        }
        let left = mounted(under: base)
        #expect(left.isEmpty, "still mounted: \(left)")
        if left.isEmpty { try? FileManager.default.removeItem(atPath: base) }
    }

    /// The mount points at or under `base`, from /proc/self/mounts.
    static func mounted(under base: String) -> [String] {
        let mounts = (try? run("/bin/cat", ["/proc/self/mounts"]).stdout) ?? ""  // (Foundation reads /proc files short)
        return mounts.split(separator: "\n").compactMap { line -> String? in
            let fields = line.split(separator: " ")
            guard fields.count > 1 else { return nil }
            let point = String(fields[1])
            return point == base || point.hasPrefix(base + "/") ? point : nil
        }
    }
}
