internal import Glibc
package import SystemPrimitives
internal import PermissionsSupport

/// Watches everything the configuration is made of and calls `changed` on the queue
/// when any of it may have changed: the config directory and its drop-in
/// directory; the parent of the config directory, for its name (a directory
/// created or moved there, or a symbolic link switched to another generation,
/// `ln -s new tmp; mv -T tmp etc`), or, when the parent is gone, the nearest
/// existing ancestor for the next name down (the parent removed and made again);
/// and, for each part that is a symbolic link,
/// the directory of every link on the way to its target, for that name (a file
/// edited through its link). Where things point is resolved again after every
/// event, so a switched link is followed to its new target and the old one is
/// no longer watched.
///
/// A regular file just created is not whole yet: its writer's close (IN_CLOSE_WRITE)
/// says when it is, and until then it is in `beingWritten`. A link, a hard link or a
/// directory counts at once (creating them gives IN_CREATE only).
package final class ConfigWatcher {
    /// Parts of the configuration created and not yet closed by their writer.
    package private(set) var beingWritten: Set<String> = []
    /// Events about the configuration handled so far.
    private var eventCount: UInt64 = 0
    /// Those of them that say a part was written in place (created as a regular
    /// file, or closed after writing; or events were lost): a reading made meanwhile
    /// may have read it unfinished. A rename into place is not one: a reading has
    /// the old file or the new one, each whole.
    package private(set) var writes: UInt64 = 0
    let inotify: InotifyWatcher
    private let files: ConfigFiles
    private let changed: () -> Void
    private let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE | IN_ATTRIB
                              | IN_DELETE_SELF | IN_MOVE_SELF)

    /// What matters in one watched directory (keyed by its real path).
    private struct Interest: Equatable {
        var names: Set<String> = []
        /// Every drop-in name (`*.conf`) matters: the drop-in directory.
        var dropIns = false
    }
    private var interests: [String: Interest] = [:]

    package init?(files: ConfigFiles, queue: Queue, changed: @escaping () -> Void) {
        guard let inotify = InotifyWatcher(queue: queue) else { return nil }
        self.inotify = inotify
        self.files = files
        self.changed = changed
        rewatch()
        if interests.isEmpty {
            logInfo("not watching \(files.directory): its directory cannot be watched; edits there need a restart")
        }
        // Weak, as InotifyWatcher's own handler: this may go while its events are read.
        inotify.onEvent = { [weak self] directory, name, eventMask in self?.handle(directory, name, eventMask) }
        inotify.onOverflow = { [weak self] in self?.handle("", "", UInt32(IN_Q_OVERFLOW)) }
    }

    /// Handles the events queued now; returns how many events about the configuration
    /// were handled so far. A reader compares the counts before and after reading:
    /// equal, nothing changed under it.
    package func catchUp() -> UInt64 {
        inotify.drain()
        return eventCount
    }

    private func handle(_ directory: String, _ name: String, _ eventMask: UInt32) {
        // Events were lost: anything may have changed.
        if eventMask & UInt32(IN_Q_OVERFLOW) != 0 {
            eventCount += 1
            writes += 1
            beingWritten = []
            rewatch()
            return changed()
        }
        guard let interest = interests[directory] else { return }  // a watch just given up
        if !name.isEmpty {  // else the directory itself went, moved or changed
            guard interest.names.contains(name) || (interest.dropIns && ConfigFiles.isDropInName(name)) else { return }
            let path = directory + "/" + name
            if eventMask & UInt32(IN_CREATE) != 0, eventMask & UInt32(IN_ISDIR) == 0,
               let st = Files.linkStatus(path), (st.st_mode & S_IFMT) == S_IFREG, st.st_nlink == 1 {
                beingWritten.insert(path)
                writes += 1
            } else if eventMask & UInt32(IN_CLOSE_WRITE | IN_MOVED_FROM | IN_DELETE) != 0 {
                beingWritten.remove(path)
                if eventMask & UInt32(IN_CLOSE_WRITE) != 0 { writes += 1 }
            }
        }
        eventCount += 1
        rewatch()
        changed()
    }

    /// Works out from the file system what to watch now, and watches just that.
    ///
    /// A step of the way made while the watches were being added (`mkdir -p` of a
    /// parent and its child, a config directory and its file) sends its event to no
    /// watch: so the file system is looked at again once they are in place, until
    /// what is wanted stays the same (bounded: a path changing faster is caught by
    /// the events of the watches set by then).
    private func rewatch() {
        for _ in 0..<8 {
            let wanted = wantedWatches()
            for directory in interests.keys where wanted[directory] == nil { inotify.unwatch(directory) }
            beingWritten = beingWritten.filter { wanted[Files.directoryName($0)] != nil }
            interests = [:]
            for (directory, interest) in wanted where inotify.watch(directory, mask: mask) {
                interests[directory] = interest
            }
            if wantedWatches() == wanted { return }
        }
    }

    /// What to watch: each directory on the way to every part of the configuration,
    /// with the names in it that matter.
    private func wantedWatches() -> [String: Interest] {
        var wanted: [String: Interest] = [:]
        /// Each directory resolved once per look: the drop-ins share theirs, and
        /// realpath(3) costs a readlink per part of the path (thousands of drop-ins).
        var resolved: [String: String?] = [:]
        func realPath(_ directory: String) -> String? {
            if let known = resolved[directory] { return known }
            let real = Files.realPath(directory)
            resolved[directory] = real
            return real
        }
        /// `path`'s directory, for its name; then the same for each link on the way
        /// from `path` to what it finally names.
        func follow(_ path: String) {
            var path = path
            for _ in 0..<16 {
                if let parent = realPath(Files.directoryName(path)) {
                    wanted[parent, default: Interest()].names.insert(Files.baseName(path))
                } else if let (ancestor, next) = Files.nearestExistingAncestor(of: path),
                          let real = Files.realPath(ancestor) {
                    // The way to `path` is gone (a parent removed, to be made again):
                    // wait for the next step down, as for plugin directories.
                    wanted[real, default: Interest()].names.insert(next)
                    return
                }
                guard Files.isSymbolicLink(path), let target = Files.readLink(path) else { return }
                path = target.hasPrefix("/") ? target : Files.directoryName(path) + "/" + target
            }
        }
        follow(files.directory)
        if let directory = Files.realPath(files.directory) {
            wanted[directory, default: Interest()].names.formUnion([
                Files.baseName(files.mainFile), Files.baseName(files.dropInDirectory),
            ])
        }
        follow(files.mainFile)
        follow(files.dropInDirectory)
        if let dropIns = Files.realPath(files.dropInDirectory), Files.isDirectory(dropIns) {
            wanted[dropIns, default: Interest()].dropIns = true
            // Every drop-in name in it matters already; only a link leads elsewhere.
            for name in Files.symbolicLinks(in: dropIns) where ConfigFiles.isDropInName(name) {
                follow(dropIns + "/" + name)
            }
        }
        return wanted
    }
}
