internal import Glibc
internal import PermissionsModel
internal import PermissionsSupport
internal import SystemPrimitives

/// The script an interpreter runs, for kind `script`: the operand of its command
/// line (`ScriptArgument`), made canonical in the process's own view of the files.
///
/// Read only for a process whose executable is an interpreter (`Interpreters`) in
/// the host's mount namespace, with the host's root directory (no chroot): then a
/// path it names is a path of the host. A relative operand is taken from the
/// process's current directory (`/proc/PID/cwd`) as it is now; every symbolic link
/// is resolved, walking the process's root (`/proc/PID/root`), so that the path is
/// the host's even where the daemon's own mount namespace differs (a private
/// /tmp). The result must be a regular file and a valid app id; otherwise nil, and
/// the caller keeps the interpreter's id.
///
/// None of this is more than a claim: the command line is the process's own to
/// write (doc/threat-model.md).
extension IdentityReader {
    /// How much of /proc/PID/cmdline is read: the options and the operand come first.
    static let commandLineLimit = 16384

    func scriptPath(_ base: String, executable: String) -> String? {
        guard interpreters.matches(executable), hasHostRoot(base) else { return nil }
        let argv = Self.commandLine(base + "/cmdline", limit: Self.commandLineLimit)
        guard let operand = ScriptArgument.script(in: argv, family: Interpreters.family(of: executable)) else {
            return nil
        }
        var path = operand
        if !operand.hasPrefix("/") {
            guard let cwd = Files.readLink(base + "/cwd"), cwd.hasPrefix("/") else { return nil }
            path = cwd + "/" + operand
        }
        // An app id: printable ASCII, at most 255 bytes (resolve makes it absolute, without "." or "..").
        guard let canonical = Self.resolve(path, under: base + "/root"), Validate.isAppID(canonical) else { return nil }
        return canonical
    }

    /// Whether the process's root directory is the host process's (it is not in a chroot).
    func hasHostRoot(_ base: String) -> Bool {
        var own = stat(), host = stat()
        guard stat(base + "/root", &own) == 0, stat("\(procRoot)/\(hostPID)/root", &host) == 0 else { return false }
        return own.st_dev == host.st_dev && own.st_ino == host.st_ino
    }

    /// The NUL-terminated words at the start of a /proc/PID/cmdline, up to `limit`
    /// bytes; a word cut by the limit is left out.
    static func commandLine(_ path: String, limit: Int) -> [String] {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: limit)
        var count = 0
        while count < limit {
            let read = valueOrErrno {
                bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, limit - count) }
            }
            guard case .success(let n) = read, n > 0 else { break }
            count += n
        }
        var words = bytes[0..<count].split(separator: 0, omittingEmptySubsequences: false)
        words.removeLast()  // after the last NUL: empty, or a word the limit cut
        return words.map { String(decoding: $0, as: UTF8.self) }
    }

    /// `path` (absolute) with every ".", ".." and symbolic link resolved, as the
    /// directory `root` sees it: each prefix walked is one whose elements are no
    /// links, so the kernel follows none of them on its own (an absolute link's
    /// target would be taken from the daemon's root, not the process's). The last
    /// element must be a regular file. At most 40 links, as the kernel allows.
    static let kernelFileSystems: Set<String> = ["proc", "sys", "dev"]

    static func resolve(_ path: String, under root: String) -> String? {
        var pending = path.split(separator: "/").map(String.init)
        var resolved: [String] = []
        var links = 0
        while !pending.isEmpty {
            let element = pending.removeFirst()
            if element == "." { continue }
            if element == ".." {
                if !resolved.isEmpty { resolved.removeLast() }
                continue
            }
            let candidate = resolved + [element]
            // Kernel file systems hold no script files, and their magic links
            // (/proc/self, /dev/fd -> /proc/self/fd) would be read as the daemon's
            // own: a path through one is no script's.
            if candidate.count == 1, Self.kernelFileSystems.contains(element) { return nil }
            let full = root + "/" + candidate.joined(separator: "/")
            guard let st = Files.linkStatus(full) else { return nil }
            switch st.st_mode & S_IFMT {
            case S_IFLNK:
                links += 1
                guard links <= 40, let target = Files.readLink(full) else { return nil }
                if target.hasPrefix("/") { resolved = [] }
                pending = target.split(separator: "/").map(String.init) + pending
            case S_IFDIR:
                resolved = candidate
            case S_IFREG where pending.isEmpty:
                resolved = candidate
            default:
                return nil  // a file in the middle of the path, or a device, FIFO, socket
            }
        }
        guard !resolved.isEmpty, let last = Files.linkStatus(root + "/" + resolved.joined(separator: "/")),
              last.st_mode & S_IFMT == S_IFREG else { return nil }
        return "/" + resolved.joined(separator: "/")
    }
}
