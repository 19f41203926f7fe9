package import Glibc
import SystemPrimitives

// Small file-system helpers over Glibc: the daemon does not link Foundation, to keep
// its start-up time and resident memory small.

package enum Files {
    package enum ReadError: Error, CustomStringConvertible {
        case system(Int32)
        case notRegular
        case tooLarge(Int)
        package var description: String {
            switch self {
            // The words alone: the configuration's status quotes them as they
            // always were ("cannot read: No such file or directory").
            case .system(let code): Errno(rawValue: code).text
            case .notRegular: "not a regular file"
            case .tooLarge(let limit): "larger than \(limit) bytes"
            }
        }
    }

    /// The whole file. Opened without blocking (a FIFO planted where a file should
    /// be must not hang the daemon) and refused unless it is a regular file of at
    /// most `limit` bytes: a file is never silently cut.
    package static func contents(_ path: String, limit: Int = 1 << 20) -> Result<[UInt8], ReadError> {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else { return .failure(.system(errno)) }
        defer { close(fd) }
        return contents(of: fd, limit: limit)
    }

    /// The whole of an opened file: refused unless it is a regular file of at most
    /// `limit` bytes (also if it grows past it while read), or when a read fails, so
    /// a caller never works on a cut or partial text. The descriptor stays open.
    package static func contents(of fd: Int32, limit: Int) -> Result<[UInt8], ReadError> {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return .failure(.system(errno)) }
        guard (st.st_mode & S_IFMT) == S_IFREG else { return .failure(.notRegular) }
        guard Int(st.st_size) <= limit else { return .failure(.tooLarge(limit)) }
        // Room for what fstat says and a little more (a file that grew, or /proc's,
        // whose size reads 0), grown as needed: no large buffer to clear for each of
        // thousands of small files.
        var data = [UInt8](repeating: 0, count: Swift.max(Int(st.st_size) + 1, 4096))
        var count = 0
        while true {
            if count == data.count { data.append(contentsOf: repeatElement(0, count: data.count)) }
            let n: Int
            let read = valueOrErrno {
                data.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, $0.count - count) }
            }
            switch read {
            case .success(let bytesRead): n = bytesRead
            case .failure(let error): return .failure(.system(error.rawValue))
            }
            if n == 0 { break }
            count += n
            if count > limit { return .failure(.tooLarge(limit)) }  // it grew meanwhile
        }
        data.removeSubrange(count...)
        return .success(data)
    }

    /// `contents`, or nil on any failure.
    package static func read(_ path: String, limit: Int = 1 << 20) -> [UInt8]? {
        try? contents(path, limit: limit).get()
    }

    /// Whether `path` exists (without opening it).
    package static func exists(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0
    }

    package static func readText(_ path: String, limit: Int = 1 << 20) -> String? {
        read(path, limit: limit).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Names in a directory (no "." or ".."), sorted; empty if unreadable.
    package static func list(_ directory: String) -> [String] {
        (try? listing(directory).get()) ?? []
    }

    /// Names in a directory (no "." or ".."), sorted, or why it could not be read
    /// whole: for callers to whom "no such name" must not be a guess.
    package static func listing(_ directory: String) -> Result<[String], ReadError> {
        guard let dir = opendir(directory) else { return .failure(.system(errno)) }
        defer { closedir(dir) }
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = readdir(dir) else {
                // NULL at the end and on an error; only an error sets errno.
                if errno != 0 { return .failure(.system(errno)) }
                return .success(names.sorted())
            }
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name != ".", name != ".." { names.append(name) }
        }
    }

    /// The names in a directory that are symbolic links, unsorted; empty if it cannot
    /// be read. From the directory itself (d_type), so that a directory of thousands
    /// of plain files costs no lstat for each; lstat where the file system does not say.
    package static func symbolicLinks(in directory: String) -> [String] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let type = Int(entry.pointee.d_type)
            guard type == DT_LNK || type == DT_UNKNOWN else { continue }
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if type == DT_LNK || isSymbolicLink(directory + "/" + name) { names.append(name) }
        }
        return names
    }

    package static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    /// `mkdir -p` with the given mode for created directories.
    package static func makeDirectories(_ path: String, mode: mode_t = 0o755) -> Bool {
        if isDirectory(path) { return true }
        var prefix = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            prefix += "/" + part
            if !isDirectory(prefix), mkdir(prefix, mode) != 0, errno != EEXIST { return false }
        }
        return true
    }

    /// For a path that does not exist (yet): its nearest ancestor that is a directory,
    /// and the name in it that leads on towards the path. Watching that directory for
    /// that name, and so on each step down, is how to wait for the path to appear.
    package static func nearestExistingAncestor(of path: String) -> (directory: String, next: String)? {
        var current = path
        while let slash = current.lastIndex(of: "/") {
            let next = baseName(current)
            current = slash == current.startIndex ? "/" : String(current[..<slash])
            if isDirectory(current) { return (current, next) }
            if current == "/" { return nil }
        }
        return isDirectory(".") ? (".", current) : nil
    }

    package static func readLink(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4097)
        let n = readlink(path, &buffer, 4096)
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The path with every symbolic link resolved, or nil if it does not exist.
    package static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// lstat: what the name itself is (a link is not followed).
    package static func linkStatus(_ path: String) -> stat? {
        var st = stat()
        return lstat(path, &st) == 0 ? st : nil
    }

    package static func isSymbolicLink(_ path: String) -> Bool {
        linkStatus(path).map { ($0.st_mode & S_IFMT) == S_IFLNK } ?? false
    }

    /// The directory part of a path ("/" for a file at the root, "." for a bare name).
    package static func directoryName(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// The last part of a path.
    package static func baseName(_ path: String) -> String {
        path.lastIndex(of: "/").map { String(path[path.index(after: $0)...]) } ?? path
    }

    /// Replaces `path` with `bytes` so that a crash leaves either the old file or the
    /// new one, never a mix: written to a temporary file in the same directory
    /// (created with `mode`), fsync'd, renamed over `path`, and the directory fsync'd.
    package static func writeAtomically(_ path: String, _ bytes: [UInt8], mode: mode_t = 0o600) -> Result<Void, ReadError> {
        var template = Array((path + ".XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { return .failure(.system(errno)) }
        let temporary = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        func fail(_ code: Int32) -> Result<Void, ReadError> {
            close(fd)
            unlink(temporary)
            return .failure(.system(code))
        }
        guard fchmod(fd, mode) == 0 else { return fail(errno) }
        if case .failure(let error) = writeAll(fd, bytes) { return fail(error.rawValue) }
        guard fsync(fd) == 0 else { return fail(errno) }
        close(fd)
        guard rename(temporary, path) == 0 else {
            let code = errno
            unlink(temporary)
            return .failure(.system(code))
        }
        let dir = open(directoryName(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 {
            fsync(dir)
            close(dir)
        }
        return .success(())
    }
}
