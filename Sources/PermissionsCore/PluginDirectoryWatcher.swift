internal import Glibc
public import Dispatch

/// Watches plugin directories: a `libpermissions-*.so` written (closed after
/// writing) or renamed into place is loaded; one removed or renamed away is stopped.
///
/// When inotify lost events (IN_Q_OVERFLOW), each directory is listed again and
/// compared with what it held when last looked at; every difference is reported as
/// the lost event would have reported it: a file gone as removed, a new file or one
/// replaced (another inode, size or modification time) as present.
public final class PluginDirectoryWatcher {
    let inotify: InotifyWatcher
    private let directories: [String]
    private let changed: (_ directory: String, _ file: String, _ present: Bool) -> Void
    /// Per directory, the plugin files it held as last reported, with their identity.
    private var seen: [String: [String: FileIdentity]] = [:]

    public init?(directories: [String], queue: DispatchQueue,
                 changed: @escaping (_ directory: String, _ file: String, _ present: Bool) -> Void) {
        guard let inotify = InotifyWatcher(queue: queue) else { return nil }
        self.inotify = inotify
        self.directories = directories
        self.changed = changed
        let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE)
        for directory in directories where Files.isDirectory(directory) {
            inotify.watch(directory, mask: mask)
        }
        for directory in directories { seen[directory] = Self.listing(directory) }
        inotify.onEvent = { [unowned self] directory, name, eventMask in
            guard PluginHost.isPluginFile(name) else { return }
            let present = eventMask & UInt32(IN_CLOSE_WRITE | IN_MOVED_TO) != 0
            self.seen[directory, default: [:]][name] = present ? FileIdentity(directory + "/" + name) : nil
            changed(directory, name, present)
        }
        inotify.onOverflow = { [unowned self] in self.rescan() }
    }

    /// Reports what changed in every directory since it was last looked at.
    func rescan() {
        logInfo("inotify lost events; listing the plugin directories again")
        for directory in directories {
            let now = Self.listing(directory)
            let before = seen[directory] ?? [:]
            seen[directory] = now
            for name in before.keys.sorted() where now[name] == nil { changed(directory, name, false) }
            for name in now.keys.sorted() where before[name] != now[name] { changed(directory, name, true) }
        }
    }

    private static func listing(_ directory: String) -> [String: FileIdentity] {
        var files: [String: FileIdentity] = [:]
        for name in PluginHost.pluginFiles(in: directory) {
            files[name] = FileIdentity(directory + "/" + name)
        }
        return files
    }
}

/// Which file a path names, and which version of it: a file replaced by a rename
/// has another inode, one rewritten in place another size or modification time.
struct FileIdentity: Equatable {
    let device: UInt64
    let inode: UInt64
    let size: Int64
    let modified: timespec
    let changed: timespec

    /// Nil if the path cannot be looked at (gone since it was listed, say).
    init?(_ path: String) {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        size = Int64(st.st_size)
        modified = st.st_mtim
        changed = st.st_ctim
    }

    static func == (a: FileIdentity, b: FileIdentity) -> Bool {
        a.device == b.device && a.inode == b.inode && a.size == b.size
            && a.modified.tv_sec == b.modified.tv_sec && a.modified.tv_nsec == b.modified.tv_nsec
            && a.changed.tv_sec == b.changed.tv_sec && a.changed.tv_nsec == b.changed.tv_nsec
    }
}
