internal import Glibc
public import Dispatch

/// Watches the config directory and its drop-in directory with inotify and calls
/// `changed` on the queue when a file was written (closed after writing), renamed
/// into place, or removed. Partial writes are not seen: an editor's truncate-then-
/// write only reports when the file is closed.
public final class ConfigWatcher {
    private let fd: Int32
    private let files: ConfigFiles
    private var source: (any DispatchSourceRead)?
    private var dropInWatch: Int32 = -1
    private let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE)

    public init?(files: ConfigFiles, queue: DispatchQueue, changed: @escaping () -> Void) {
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        self.files = files
        if inotify_add_watch(fd, files.directory, mask) < 0 {
            logInfo("not watching \(files.directory): \(String(cString: strerror(errno))); edits there need a restart")
        }
        watchDropIns()
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        let confined = Confined(changed)
        source.setEventHandler { [unowned self] in
            if self.drain() { confined.value() }
        }
        source.setCancelHandler { [fd] in close(fd) }
        source.resume()
        self.source = source
    }

    deinit { source?.cancel() }

    private func watchDropIns() {
        if dropInWatch < 0 { dropInWatch = inotify_add_watch(fd, files.dropInDirectory, mask) }
    }

    /// Reads all pending events; true if any concerns a config file.
    private func drain() -> Bool {
        var relevant = false
        var buffer = [UInt8](repeating: 0, count: 8192)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            var offset = 0
            while offset + MemoryLayout<inotify_event>.size <= n {
                let event = buffer.withUnsafeBytes {
                    $0.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                }
                let length = Int(event.len)
                let isDir = event.mask & UInt32(IN_ISDIR) != 0
                // The drop-in directory went away: its watch is gone; re-add it if it returns.
                if event.wd == dropInWatch, event.mask & UInt32(IN_IGNORED) != 0 { dropInWatch = -1; relevant = true }
                let nameStart = offset + MemoryLayout<inotify_event>.size
                let nameBytes = buffer[nameStart..<min(nameStart + length, n)].prefix { $0 != 0 }
                let name = String(decoding: nameBytes, as: UTF8.self)
                if isDir, name == "permissions.conf.d" { watchDropIns(); relevant = true }
                if name.hasSuffix(".conf") { relevant = true }
                offset = nameStart + length
            }
        }
        return relevant
    }
}

/// A non-Sendable value used only on the queue that created it.
/// `@unchecked Sendable`: the dispatch source runs its handler on that same queue.
struct Confined<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
