internal import Glibc
public import Dispatch

/// Watches the config directory and its drop-in directory and calls `changed` on
/// the queue when a file was written (closed after writing), renamed into place, or
/// removed. Partial writes are not seen: an editor's truncate-then-write only
/// reports when the file is closed. When inotify lost events (IN_Q_OVERFLOW), the
/// configuration is read again whole: `changed` compares it with the last one.
public final class ConfigWatcher {
    let inotify: InotifyWatcher
    private let files: ConfigFiles
    private let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE)

    public init?(files: ConfigFiles, queue: DispatchQueue, changed: @escaping () -> Void) {
        guard let inotify = InotifyWatcher(queue: queue) else { return nil }
        self.inotify = inotify
        self.files = files
        if !inotify.watch(files.directory, mask: mask) {
            logInfo("not watching \(files.directory): \(String(cString: strerror(errno))); edits there need a restart")
        }
        inotify.watch(files.dropInDirectory, mask: mask)
        // The config directory itself may be replaced (moved away and created anew):
        // the parent tells us, and the new directory is watched from then on.
        let parent = files.directory.split(separator: "/", omittingEmptySubsequences: false).dropLast()
            .joined(separator: "/")
        let base = String(files.directory.split(separator: "/").last ?? "")
        inotify.watch(parent.isEmpty ? "/" : parent, mask: UInt32(IN_CREATE | IN_MOVED_TO | IN_ONLYDIR))
        inotify.onEvent = { [unowned self] directory, name, eventMask in
            if directory != files.directory, directory != files.dropInDirectory {
                guard name == base, eventMask & UInt32(IN_ISDIR) != 0 else { return }
                self.inotify.watch(files.directory, mask: self.mask)
                self.inotify.watch(files.dropInDirectory, mask: self.mask)
                return changed()
            }
            // The drop-in directory came (back): watch it, and read what it holds.
            if directory == files.directory, name == "permissions.conf.d", eventMask & UInt32(IN_ISDIR) != 0 {
                self.inotify.watch(files.dropInDirectory, mask: self.mask)
                return changed()
            }
            if name.hasSuffix(".conf") || eventMask & UInt32(IN_IGNORED) != 0 { changed() }
        }
        inotify.onOverflow = { [unowned self] in
            // The lost events may have been the directories coming back: watch them
            // again (a watch that exists is kept as it is), then read everything.
            self.inotify.watch(files.directory, mask: self.mask)
            self.inotify.watch(files.dropInDirectory, mask: self.mask)
            changed()
        }
    }
}
