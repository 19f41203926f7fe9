internal import Glibc
internal import PermissionsModel
internal import PermissionsSupport

/// Which app ids a caller can have, so that an administrator's allow=/deny= entry
/// that no caller can ever have is told (`permissionsd --check-config`, the
/// daemon's log), not silently kept.
///
/// What each kind produces (AppIdentity.swift):
/// - flatpak: the `[Application] name`, a name of at least three elements
///   (`org.gnome.Maps`);
/// - snap: `snap.<name>`;
/// - systemd-unit: the app id in an XDG unit name, unescaped, which is whatever
///   name the launcher gave, as a rule the desktop file's (`firefox.desktop` →
///   `firefox`): any valid id that is no path, so no name is impossible;
/// - executable: an absolute path with every link resolved (`/proc/PID/exe`), of a
///   file the kernel runs itself: an ELF file (a script or a binfmt_misc format is
///   run through its interpreter, which is then the executable);
/// - script: an absolute path with every link resolved, of a regular file; never
///   matched by allow=.
///
/// So an entry is impossible only as a path: one that goes through a symbolic link
/// (`/usr/bin/python3`, `/bin/sh` where /bin is a link), one that names something
/// other than a regular file, and, in allow=, a file that is no ELF executable. A
/// path that does not exist (yet) may be installed later and is not told. The
/// files are those the checking process sees.
package enum AppIDReach {
    /// Why `id` (a valid app id) in `key` ("allow" or "deny") can never be a
    /// caller's, or does less than it seems to; nil when nothing is to be said.
    package static func problem(_ id: String, key: String, interpreters: Interpreters) -> String? {
        guard id.hasPrefix("/") else { return nil }
        guard let (existing, rest) = existingPrefix(of: id) else { return nil }
        let resolved = existing == "/" ? "/" + rest.joined(separator: "/")
            : ([existing] + rest).joined(separator: "/")
        if resolved != id {
            return "goes through a symbolic link (it resolves to \(resolved)); an app id is a path with every link "
                + "resolved, so this never matches: write \(resolved)"
        }
        guard rest.isEmpty, let st = Files.linkStatus(id) else { return nil }
        guard st.st_mode & S_IFMT == S_IFREG else {
            return "is not a regular file: no executable or script has this id, so this never matches"
        }
        if interpreters.matches(id) {
            return "is an interpreter ([identity] interpreters=): this is the id of the interpreter only when it "
                + "runs no script file (-c, -m, standard input); each script has an id of its own, its path"
        }
        if key == "allow", let magic = Files.firstBytes(of: id, count: 4), magic != [0x7f, 0x45, 0x4c, 0x46] {
            return "is not an ELF executable: the kernel runs it through an interpreter, so it is never an "
                + "executable's id, and allow= does not count for a script's id; this never matches (a user's own "
                + "grant does count for a script)"
        }
        return nil
    }

    /// The longest prefix of `path` that exists, links resolved, and the elements after it.
    private static func existingPrefix(of path: String) -> (String, [String])? {
        var elements = path.split(separator: "/").map(String.init)
        var rest: [String] = []
        while true {
            if let real = Files.realPath("/" + elements.joined(separator: "/")) { return (real, rest) }
            guard let last = elements.popLast() else { return nil }
            rest.insert(last, at: 0)
        }
    }
}

extension Files {
    /// The first `count` bytes of a file (fewer if it is shorter), or nil if it cannot be read.
    static func firstBytes(of path: String, count: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: count)
        let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, count) }
        return n < 0 ? nil : Array(bytes[0..<n])
    }
}
