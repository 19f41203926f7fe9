import Dispatch
import Foundation
import Glibc
import Testing
@testable import PermissionsCore

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
        let queue = DispatchQueue(label: "inotify-test")
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
        let queue = DispatchQueue(label: "config-watcher-test")
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

    /// Each plugin directory is listed again, and every difference from what it held
    /// before is reported as the lost event would have been.
    @Test func pluginWatcherRescansOnOverflow() throws {
        let dir = try TempDirectory()
        for name in ["gone", "kept", "replaced", "rewritten"] { try dir.write("libpermissions-\(name).so", name) }
        let queue = DispatchQueue(label: "plugin-watcher-test")
        let seen = Seen()
        try queue.sync {
            let watcher = try #require(PluginDirectoryWatcher(directories: [dir.path], queue: queue) {
                directory, file, present in
                seen.lines.append("\(directory == dir.path ? "" : directory)\(file) \(present ? "present" : "gone")")
            })
            // Changes whose events are lost: the queue is busy here, so none is read
            // before the synthetic overflow.
            #expect(unlink(dir.url("libpermissions-gone.so")) == 0)
            try dir.write("libpermissions-new.so", "new")
            try dir.write("replacement", "replaced, another inode")
            #expect(rename(dir.url("replacement"), dir.url("libpermissions-replaced.so")) == 0)
            let rewritten = open(dir.url("libpermissions-rewritten.so"), O_WRONLY | O_APPEND)
            #expect(write(rewritten, "+", 1) == 1)
            close(rewritten)
            try dir.write("not-a-plugin.so", "ignored")
            Self.overflow.withUnsafeBytes { watcher.inotify.handle($0) }
            #expect(seen.lines == ["libpermissions-gone.so gone", "libpermissions-new.so present",
                                   "libpermissions-replaced.so present", "libpermissions-rewritten.so present"])
            // Nothing changed since: a second overflow reports nothing.
            seen.lines = []
            Self.overflow.withUnsafeBytes { watcher.inotify.handle($0) }
            #expect(seen.lines == [])
        }
    }
}
