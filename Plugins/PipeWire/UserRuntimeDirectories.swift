internal import Glibc
internal import SystemPrimitives

/// Finds each user's PipeWire socket, ROOT/UID/pipewire-0, with inotify: a watch
/// on ROOT (users' runtime directories made and removed at login and logout) and
/// one on each ROOT/UID (the socket made and removed as PipeWire starts, stops and
/// restarts). Nothing is polled. The fd is read on one thread or queue only: the
/// watcher's loop thread (an io source of that loop), or, before there is a
/// watcher, PipeWireStart's wait queue.
///
/// Directories named other than by a uid in decimal are not users' and are skipped.
final class UserRuntimeDirectories {
    enum Event: Equatable {
        case userAppeared(UInt32)  // ROOT/UID exists (now watched)
        case userGone(UInt32)  // ROOT/UID was removed
        case socketAppeared(UInt32)  // ROOT/UID/pipewire-0 was made (PipeWire bound it)
        case rescan  // the kernel dropped events: start again from a listing
    }

    static let socketName = "pipewire-0"
    let root: String
    let fd: Int32
    private var rootWatch: Int32 = -1
    private var users: [Int32: UInt32] = [:]  // watch descriptor -> uid
    private var watches: [UInt32: Int32] = [:]  // uid -> watch descriptor

    /// nil with the errno when inotify or the watch on ROOT cannot be had.
    static func open(root: String) -> Result<UserRuntimeDirectories, Errno> {
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return .failure(.current) }
        let directories = UserRuntimeDirectories(root: root, fd: fd)
        let mask = UInt32(IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_ONLYDIR | IN_DONT_FOLLOW)
        directories.rootWatch = inotify_add_watch(fd, root, mask)
        guard directories.rootWatch >= 0 else {
            let code = errno
            Glibc.close(fd)
            return .failure(Errno(rawValue: code))
        }
        return .success(directories)
    }

    private init(root: String, fd: Int32) {
        self.root = root
        self.fd = fd
    }

    func close() { Glibc.close(fd) }

    /// The users' directories now, each watched (the watch is added before the
    /// listing is read, so a socket made meanwhile is seen by one or the other);
    /// a user watched before whose directory is no longer listed is gone (after an
    /// overflow, its removal may be among the events the kernel dropped).
    func scan() -> [Event] {
        guard let dir = opendir(root) else { return [] }
        defer { closedir(dir) }
        var events: [Event] = []
        var listed = Set<UInt32>()
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            guard let uid = Self.uid(name) else { continue }
            listed.insert(uid)
            events += watchUser(uid)
        }
        for uid in watches.keys.sorted() where !listed.contains(uid) { events += forget(uid) }
        return events
    }

    /// Reads what the kernel has queued, without blocking.
    func read() -> [Event] {
        var events: [Event] = []
        let size = 16 * 1024
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: MemoryLayout<inotify_event>.alignment)
        defer { buffer.deallocate() }
        while true {
            let n = Glibc.read(fd, buffer, size)
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { break }
            var offset = 0
            while offset + MemoryLayout<inotify_event>.size <= n {
                let event = buffer.load(fromByteOffset: offset, as: inotify_event.self)
                let nameStart = buffer + offset + MemoryLayout<inotify_event>.size
                let name = event.len > 0 ? String(cString: nameStart.assumingMemoryBound(to: CChar.self)) : ""
                events += handle(wd: event.wd, mask: event.mask, name: name)
                offset += MemoryLayout<inotify_event>.size + Int(event.len)
            }
        }
        return events
    }

    private func handle(wd: Int32, mask: UInt32, name: String) -> [Event] {
        if mask & UInt32(IN_Q_OVERFLOW) != 0 { return [.rescan] }
        if wd == rootWatch {
            guard let uid = Self.uid(name) else { return [] }
            if mask & UInt32(IN_CREATE | IN_MOVED_TO) != 0 { return watchUser(uid) }
            if mask & UInt32(IN_DELETE | IN_MOVED_FROM) != 0 { return forget(uid) }
            return []
        }
        guard let uid = users[wd] else { return [] }
        // The directory itself went (its watch is dropped with IN_IGNORED).
        if mask & UInt32(IN_IGNORED | IN_DELETE_SELF) != 0 { return forget(uid) }
        if name == Self.socketName, mask & UInt32(IN_CREATE | IN_MOVED_TO) != 0 { return [.socketAppeared(uid)] }
        return []
    }

    /// Watches ROOT/UID; if the socket is already there, says so.
    private func watchUser(_ uid: UInt32) -> [Event] {
        let path = "\(root)/\(uid)"
        let mask = UInt32(IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW)
        let wd = inotify_add_watch(fd, path, mask)
        guard wd >= 0 else { return [] }  // gone again, or not a directory
        if let old = watches[uid], old != wd { users[old] = nil }
        users[wd] = uid
        let known = watches[uid] != nil
        watches[uid] = wd
        var events: [Event] = known ? [] : [.userAppeared(uid)]
        if access(path + "/" + Self.socketName, F_OK) == 0 { events.append(.socketAppeared(uid)) }
        return events
    }

    private func forget(_ uid: UInt32) -> [Event] {
        guard let wd = watches.removeValue(forKey: uid) else { return [] }
        users[wd] = nil
        inotify_rm_watch(fd, wd)  // EINVAL if the kernel dropped it already: nothing to do
        return [.userGone(uid)]
    }

    /// The uid a directory name stands for: decimal digits only, no sign, no
    /// leading zero (the form logind uses), within a uid's range.
    static func uid(_ name: String) -> UInt32? {
        guard !name.isEmpty, name.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
              name == "0" || !name.hasPrefix("0") else { return nil }
        return UInt32(name)
    }
}
