internal import Glibc

// Small file-system helpers over Glibc: the daemon does not link Foundation, to keep
// its start-up time and resident memory small.

enum Files {
    enum ReadError: Error, CustomStringConvertible {
        case system(Int32)
        case notRegular
        case tooLarge(Int)
        var description: String {
            switch self {
            case .system(let code): String(cString: strerror(code))
            case .notRegular: "not a regular file"
            case .tooLarge(let limit): "larger than \(limit) bytes"
            }
        }
    }

    /// The whole file. Opened without blocking (a FIFO planted where a file should
    /// be must not hang the daemon) and refused unless it is a regular file of at
    /// most `limit` bytes: a file is never silently cut.
    static func contents(_ path: String, limit: Int = 1 << 20) -> Result<[UInt8], ReadError> {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else { return .failure(.system(errno)) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return .failure(.system(errno)) }
        guard (st.st_mode & S_IFMT) == S_IFREG else { return .failure(.notRegular) }
        guard Int(st.st_size) <= limit else { return .failure(.tooLarge(limit)) }
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            if n < 0 { return .failure(.system(errno)) }
            if n == 0 { break }
            data.append(contentsOf: buffer[0..<n])
            if data.count > limit { return .failure(.tooLarge(limit)) }  // it grew meanwhile
        }
        return .success(data)
    }

    /// `contents`, or nil on any failure.
    static func read(_ path: String, limit: Int = 1 << 20) -> [UInt8]? {
        try? contents(path, limit: limit).get()
    }

    /// Whether `path` exists (without opening it).
    static func exists(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0
    }

    static func readText(_ path: String, limit: Int = 1 << 20) -> String? {
        read(path, limit: limit).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Names in a directory (no "." or ".."), sorted; empty if unreadable.
    static func list(_ directory: String) -> [String] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name != ".", name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    /// `mkdir -p` with the given mode for created directories.
    static func makeDirectories(_ path: String, mode: mode_t = 0o755) -> Bool {
        if isDirectory(path) { return true }
        var prefix = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            prefix += "/" + part
            if !isDirectory(prefix), mkdir(prefix, mode) != 0, errno != EEXIST { return false }
        }
        return true
    }

    static func readLink(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4097)
        let n = readlink(path, &buffer, 4096)
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
