internal import Glibc
package import SystemPrimitives

/// inotify on a few directories, read by a dispatch source on the queue it is given.
/// Reports each event as (directory, file name, mask).
///
/// When the kernel's event queue for this descriptor fills up (more than
/// /proc/sys/fs/inotify/max_queued_events unread), it drops events and queues one
/// IN_Q_OVERFLOW instead: what changed meanwhile is unknown, so the users re-read
/// everything they watch (`onOverflow`).
package final class InotifyWatcher {
    private let fd: Int32
    private var source: ReadSource?
    private var directories: [Int32: String] = [:]
    /// Called on the queue for each event.
    package var onEvent: ((String, String, UInt32) -> Void)?
    /// Called on the queue when events were lost: every watched directory must be
    /// looked at again.
    package var onOverflow: (() -> Void)?

    package init?(queue: Queue) {
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        let source = ReadSource(fileDescriptor: fd, queue: queue)
        // Weak: the last reference may go on another thread while an event is being
        // handled here (a test's watcher dropped as its directory is removed); the
        // handler then keeps it until it returns, and one that comes later does nothing.
        source.setEventHandler { [weak self] in self?.drain() }
        source.setCancelHandler { [fd] in close(fd) }
        source.resume()
        self.source = source
    }

    deinit { source?.cancel() }

    /// Watches `directory` for the events in `mask`; false if it cannot (it does not
    /// exist yet, say). IN_IGNORED is reported when a watched directory goes.
    @discardableResult
    package func watch(_ directory: String, mask: UInt32) -> Bool {
        let wd = inotify_add_watch(fd, directory, mask)
        guard wd >= 0 else { return false }
        // A path now naming another directory: forget the old watch's name.
        for (old, path) in directories where path == directory && old != wd { directories[old] = nil }
        directories[wd] = directory
        return true
    }

    /// Stops watching `directory` (watched under that name).
    package func unwatch(_ directory: String) {
        for (wd, path) in directories where path == directory {
            inotify_rm_watch(fd, wd)
            directories[wd] = nil
        }
    }

    /// Reads and reports every event queued now (also called directly, to catch up).
    package func drain() {
        var buffer = [UInt8](repeating: 0, count: 8192)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            buffer.withUnsafeBytes { handle(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
        }
    }

    /// Handles the events in `bytes`, as read(2) returned them. Also the seam for
    /// tests: a real overflow needs the system-wide max_queued_events lowered, so
    /// tests hand this a synthetic IN_Q_OVERFLOW event instead.
    func handle(_ bytes: UnsafeRawBufferPointer) {
        let header = MemoryLayout<inotify_event>.size
        var offset = 0
        while offset + header <= bytes.count {
            let event = bytes.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
            let nameStart = offset + header
            offset = nameStart + Int(event.len)
            // Not tied to a watch (its wd is -1): events were dropped, any of them.
            if event.mask & UInt32(IN_Q_OVERFLOW) != 0 {
                onOverflow?()
                continue
            }
            let nameBytes = bytes[nameStart..<min(offset, bytes.count)].prefix { $0 != 0 }
            let directory = directories[event.wd] ?? ""
            if event.mask & UInt32(IN_IGNORED) != 0 { directories[event.wd] = nil }
            onEvent?(directory, String(decoding: nameBytes, as: UTF8.self), event.mask)
        }
    }
}
