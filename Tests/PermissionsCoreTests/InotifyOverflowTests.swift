internal import SystemPrimitives
import Foundation
import Glibc
import Testing
@testable import PermissionsSupport
@testable import PermissionsPluginHost
@testable import PermissionsConfig

/// When inotify's queue overflows, the kernel drops events and queues one
/// IN_Q_OVERFLOW: the watchers must look at everything again. A real overflow needs
/// /proc/sys/fs/inotify/max_queued_events lowered, which is system-wide (and root
/// only), so these tests hand the watcher's event handler a synthetic IN_Q_OVERFLOW
/// event, exactly as read(2) would return it, through `InotifyWatcher.handle`.
@Suite("inotify overflow")
struct InotifyOverflowTests {
    /// One event as the kernel writes it: the header, then the name padded with NULs.
    static func event(wd: Int32, mask: UInt32, name: String = "") -> [UInt8] {
        var nameBytes = Array(name.utf8)
        if !nameBytes.isEmpty { nameBytes += Array(repeating: 0, count: 16 - nameBytes.count % 16) }
        var header = inotify_event()
        header.wd = wd
        header.mask = mask
        header.len = UInt32(nameBytes.count)
        return withUnsafeBytes(of: &header) { Array($0.prefix(MemoryLayout<inotify_event>.size)) } + nameBytes
    }

    static let overflow = event(wd: -1, mask: UInt32(IN_Q_OVERFLOW))

    /// Things seen on the queue, read on the queue.
    final class Seen {
        var lines: [String] = []
    }

    @Test func overflowIsReportedApartFromEvents() throws {
        let queue = Queue(label: "inotify-test")
        let seen = Seen()
        try queue.sync {
            let watcher = try #require(InotifyWatcher(queue: queue))
            watcher.onEvent = { directory, name, mask in seen.lines.append("event \(directory)|\(name)|\(mask)") }
            watcher.onOverflow = { seen.lines.append("overflow") }
            let bytes = Self.event(wd: 99, mask: UInt32(IN_CLOSE_WRITE), name: "a.conf") + Self.overflow
                + Self.event(wd: 99, mask: UInt32(IN_DELETE), name: "b.conf")
            bytes.withUnsafeBytes { watcher.handle($0) }
        }
        #expect(seen.lines == ["event |a.conf|\(IN_CLOSE_WRITE)", "overflow", "event |b.conf|\(IN_DELETE)"])
    }

    /// The configuration is read again: the daemon's `changed` compares it with the
    /// last one and applies what differs.
    @Test func configWatcherReloadsOnOverflow() throws {
        let dir = try TempDirectory()
        let queue = Queue(label: "config-watcher-test")
        let seen = Seen()
        try queue.sync {
            let watcher = try #require(ConfigWatcher(files: ConfigFiles(directory: dir.path), queue: queue) {
                seen.lines.append("changed")
            })
            // The queue is busy here, so no real event is read before the synthetic one.
            Self.overflow.withUnsafeBytes { watcher.inotify.handle($0) }
            #expect(seen.lines == ["changed"])
        }
    }

    /// Every plugin name is looked at again (the host compares each file with what it
    /// loaded), and a plugin directory that came while events were lost is watched.
    @Test func pluginWatcherLooksAtEverythingAgainOnOverflow() throws {
        let dir = try TempDirectory()
        let late = dir.url("late")
        let queue = Queue(label: "plugin-watcher-test")
        let seen = Seen()
        let reported = Semaphore(value: 0)
        let watcher = try queue.sync {
            try #require(PluginDirectoryWatcher(directories: [late], queue: queue,
                                                fileChanged: { seen.lines.append("changed \($0)"); reported.signal() },
                                                rescan: { seen.lines.append("rescan") }))
        }
        queue.sync {
            // The queue is busy here, so this directory's event is not read before the
            // synthetic overflow: as if it were lost.
            #expect(mkdir(late, 0o755) == 0)
            Self.overflow.withUnsafeBytes { watcher.inotify.handle($0) }
            #expect(seen.lines == ["rescan"])
        }
        try dir.write("late/libpermissions-new.so", "new")
        #expect(reported.wait(timeout: .now() + 10) == .success, "a file written in the new directory")
        #expect(queue.sync { seen.lines } == ["rescan", "changed new"])
        withExtendedLifetime(watcher) {}
    }
}
