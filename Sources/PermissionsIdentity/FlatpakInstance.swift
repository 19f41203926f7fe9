internal import Glibc
internal import PermissionsSupport

/// Whether a .flatpak-info is the one flatpak set up, the check xdg-desktop-portal
/// relies on: `[Instance] instance-id` names a directory
/// `$XDG_RUNTIME_DIR/.flatpak/<id>/` of the caller's uid holding bwrap's
/// `bwrapinfo.json`, whose `child-pid` (the sandbox's first process, as the host
/// numbers it) is the caller or one of its ancestors.
///
/// Why another user cannot fake it: the directory looked at is
/// `<runtimeRoot>/<caller uid>/`, which must be owned by that uid and writable by no
/// one else (logind makes it 0700), and every element below it must be owned by
/// that uid and no symbolic link. A process of user B, whatever user namespace or
/// chroot it makes, keeps uid B on the host: it can write only under B's own
/// runtime directory, and a forged instance there vouches only for B's own
/// processes. It cannot reach into A's directory, nor make itself a descendant of
/// A's sandbox. (Within one user nothing stops an unsandboxed process from writing
/// its own instance: the same stance as the portal's; doc/threat-model.md.)
extension IdentityReader {
    /// nil when the instance vouches for process `pid` of `uid`; else why not.
    func verifyFlatpakInstance(_ instanceID: String?, pid: UInt32, uid: UInt32) -> String? {
        guard let instanceID else { return ".flatpak-info names no [Instance] instance-id" }
        guard Self.isPathElement(instanceID) else { return ".flatpak-info names a bad instance-id \"\(instanceID)\"" }
        let file = "\(runtimeRoot)/\(uid)/.flatpak/\(instanceID)/bwrapinfo.json"
        guard let text = readOwnedFile(["\(runtimeRoot)/\(uid)", ".flatpak", instanceID, "bwrapinfo.json"], uid: uid) else {
            return "flatpak instance \"\(instanceID)\" has no bwrapinfo.json of uid \(uid) (\(file))"
        }
        guard let child = Self.childPID(text), child > 0 else { return "\(file) names no child-pid" }
        guard isAncestorOrSelf(child, of: pid) else {
            return "process \(pid) is not in flatpak instance \"\(instanceID)\" (child-pid \(child))"
        }
        return nil
    }

    /// One element of a path: no "/", not "." or "..", printable ASCII.
    static func isPathElement(_ s: String) -> Bool {
        let bytes = Array(s.utf8)
        return !bytes.isEmpty && bytes.count <= 255 && s != "." && s != ".."
            && bytes.allSatisfy { $0 > 0x20 && $0 < 0x7f && $0 != UInt8(ascii: "/") }
    }

    /// Opens `elements` one below the other, never following a link, each owned by
    /// `uid` and writable by no one else, and reads the last one (a regular file).
    func readOwnedFile(_ elements: [String], uid: UInt32) -> String? {
        var dir = open(elements[0], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard dir >= 0 else { return nil }
        defer { if dir >= 0 { close(dir) } }
        func owned(_ fd: Int32, _ type: mode_t) -> Bool {
            var st = stat()
            return fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == type && st.st_uid == uid && (st.st_mode & 0o022) == 0
        }
        guard owned(dir, S_IFDIR) else { return nil }
        for element in elements.dropFirst().dropLast() {
            let next = openat(dir, element, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard next >= 0 else { return nil }
            close(dir)
            dir = next
            guard owned(dir, S_IFDIR) else { return nil }
        }
        // O_NONBLOCK: a FIFO there must not block the reader in open().
        let fd = openat(dir, elements.last!, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        guard owned(fd, S_IFREG), case .success(let data) = Files.contents(of: fd, limit: 65536) else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    /// The number after `"child-pid":` in bwrap's info (a flat JSON object of
    /// integers that bwrap writes itself).
    static func childPID(_ json: String) -> UInt32? {
        let bytes = Array(json.utf8), key = Array("\"child-pid\"".utf8)
        guard bytes.count >= key.count,
              let start = (0...(bytes.count - key.count)).first(where: { bytes[$0..<($0 + key.count)].elementsEqual(key) })
        else { return nil }
        let blank: Set<UInt8> = [0x20, 0x09, 0x0a, 0x0d]
        var i = start + key.count
        while i < bytes.count, blank.contains(bytes[i]) { i += 1 }
        guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { return nil }
        i += 1
        while i < bytes.count, blank.contains(bytes[i]) { i += 1 }
        let digits = bytes[i...].prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        return UInt32(String(decoding: digits, as: UTF8.self))
    }

    /// Whether `ancestor` is `pid` or one of its parents (field 4 of /proc/PID/stat),
    /// at most 64 generations up. Every process of a bwrap sandbox descends from its
    /// child-pid: it is the init of the sandbox's PID namespace, which inherits the
    /// orphans.
    func isAncestorOrSelf(_ ancestor: UInt32, of pid: UInt32) -> Bool {
        var current = pid
        for _ in 0..<64 {
            if current == ancestor { return true }
            guard current > 1, let parent = parentPID(current) else { return false }
            current = parent
        }
        return false
    }

    func parentPID(_ pid: UInt32) -> UInt32? {
        ProcessStat.field(4, of: "\(procRoot)/\(pid)/stat").flatMap { UInt32($0) }
    }
}
