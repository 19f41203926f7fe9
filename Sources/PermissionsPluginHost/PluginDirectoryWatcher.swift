internal import Glibc
internal import PermissionsSupport
package import SystemPrimitives

/// Watches the plugin directories, including those that do not exist yet.
///
/// - In a directory: a `libpermissions-*.so` written (closed after writing),
///   renamed in or away, removed, linked in (a symbolic or hard link: only
///   IN_CREATE reports those), or whose attributes changed (chmod, chown, touch)
///   is reported by name; the host looks at it again.
/// - A directory that does not exist (yet) is waited for: its nearest existing
///   ancestor is watched for subdirectories coming, and each step down is watched
///   in turn until the directory itself appears. A directory that appears, goes, or
///   is replaced by another (removed and made again, or a symbolic link switched)
///   is logged and every name is looked at again (`rescan`).
/// - Each existing directory's parent is watched for its name: a symbolic link
///   switched to another target is seen as a directory replaced. IN_ATTRIB on a
///   directory itself (chmod, chown) has every name looked at again, since the trust
///   checks depend on the directory's mode and owner.
/// - When inotify lost events (IN_Q_OVERFLOW), every name is looked at again.
package final class PluginDirectoryWatcher {
    let inotify: InotifyWatcher
    private let directories: [String]
    private let fileChanged: (_ name: String) -> Void
    private let rescan: () -> Void
    /// Each directory's identity when last looked at (nil: it did not exist).
    private var present: [String: DirectoryIdentity] = [:]
    /// What is watched now, and with which mask.
    private var watched: [String: UInt32] = [:]

    private static let directoryMask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE
                                              | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
    private static let parentMask = UInt32(IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ONLYDIR)
    private static let ancestorMask = UInt32(IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

    package init?(directories: [String], queue: Queue, fileChanged: @escaping (_ name: String) -> Void,
                 rescan: @escaping () -> Void) {
        guard let inotify = InotifyWatcher(queue: queue) else { return nil }
        self.inotify = inotify
        self.directories = directories
        self.fileChanged = fileChanged
        self.rescan = rescan
        for directory in directories { present[directory] = DirectoryIdentity(directory) }
        arm()
        // Weak, as InotifyWatcher's own handler: this may go while its events are read.
        inotify.onEvent = { [weak self] directory, name, mask in self?.handle(directory, name, mask) }
        inotify.onOverflow = { [weak self] in
            guard let self else { return }
            logInfo("inotify lost events; looking at the plugin directories again")
            sync(quietly: true)
            rescan()
        }
    }

    private func handle(_ directory: String, _ name: String, _ mask: UInt32) {
        // A directory came, went or moved, here or on the way to a directory that does
        // not exist yet: look at every directory again (a few stat calls).
        // A plugin directory's own mode or owner changed (the trust checks depend on them).
        if name.isEmpty, mask & UInt32(IN_ATTRIB) != 0, present[directory] != nil {
            return directoryAttributesChanged(directory)
        }
        // A plugin directory's name in its parent now names something else (a symbolic
        // link switched: `ln -s g2 tmp; mv -T tmp DIR`).
        if mask & UInt32(IN_ISDIR | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT) != 0
            || directories.contains(Self.join(directory, name)) {
            return sync(quietly: false)
        }
        guard present[directory] != nil, PluginHost.isPluginFile(name) else { return }
        if mask & UInt32(IN_CREATE) != 0 {
            // A new file being written reports again when closed; only a link comes
            // complete with IN_CREATE alone.
            var st = stat()
            guard lstat(directory + "/" + name, &st) == 0,
                  (st.st_mode & S_IFMT) == S_IFLNK || st.st_nlink > 1 else { return }
        }
        fileChanged(PluginHost.pluginName(name))
    }

    /// A plugin directory's mode or owner changed: every name is looked at again, so
    /// that a directory made writable by others gets its plugins refused.
    private func directoryAttributesChanged(_ directory: String) {
        logInfo("plugin directory \(directory): its mode or owner changed; looking at its plugins again")
        rescan()
    }

    /// Compares each directory with what it was, watches what is to be watched now,
    /// and, when a directory came, went or was replaced, logs it and has every name
    /// looked at again.
    private func sync(quietly: Bool) {
        var changed = false
        // A directory made (or switched) while the watches were being added sent its
        // event to no watch: look again once they are in place, until nothing moved
        // (bounded; a path changing faster is caught by the watches set by then).
        for _ in 0..<8 {
            for directory in directories {
                let now = DirectoryIdentity(directory)
                let before = present[directory]
                guard now != before else { continue }
                present[directory] = now
                changed = true
                // The old directory's watch would report for a directory no longer ours.
                if before != nil { inotify.unwatch(directory) }
                if quietly { continue }
                if now == nil {
                    logInfo("plugin directory \(directory) is gone; its plugins are stopped; waiting for it to come back")
                } else {
                    let what = before == nil ? "appeared" : "was replaced"
                    logInfo("plugin directory \(directory) \(what); loading its plugins")
                }
            }
            arm()
            if directories.allSatisfy({ DirectoryIdentity($0) == present[$0] }) { break }
        }
        if changed, !quietly { rescan() }
    }

    /// Watches each directory that exists, and the nearest existing ancestor of
    /// each that does not; stops watching the rest.
    private func arm() {
        var wanted: [String: UInt32] = [:]
        for directory in directories {
            if present[directory] != nil {
                wanted[directory, default: 0] |= Self.directoryMask
                // Its name, so that a symbolic link switched to another target is seen.
                if let parent = Self.parent(of: directory) { wanted[parent, default: 0] |= Self.parentMask }
            } else if let ancestor = Files.nearestExistingAncestor(of: directory)?.directory {
                wanted[ancestor, default: 0] |= Self.ancestorMask
            }
        }
        for (path, mask) in wanted {
            // Adding a watch again replaces its mask (a cheap call); a path that now
            // names another directory gets a new watch.
            if !inotify.watch(path, mask: mask) {
                logDebug("cannot watch \(path): \(errnoName(errno))")
            }
        }
        for path in watched.keys where wanted[path] == nil { inotify.unwatch(path) }
        watched = wanted
    }

    static func parent(of path: String) -> String? {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        if slash == path.startIndex { return path == "/" ? nil : "/" }
        return String(path[..<slash])
    }

    static func join(_ directory: String, _ name: String) -> String {
        directory == "/" ? "/" + name : directory + "/" + name
    }
}

/// Which directory a path names: another one after it was removed and made again,
/// or when a symbolic link on the way now leads elsewhere.
struct DirectoryIdentity: Equatable {
    let device: UInt64
    let inode: UInt64

    /// Nil if the path is not a directory (or cannot be looked at).
    init?(_ path: String) {
        var st = stat()
        guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { return nil }
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
    }
}
