package import PermissionsModel
internal import CGLib
internal import Glibc
internal import PermissionsSupport
internal import SystemPrimitives

/// The daemon's configuration: `permissions.conf` in the config directory, then the
/// drop-ins `permissions.conf.d/*.conf` in name order, a later file overriding a key
/// of an earlier one. Keyfile syntax (GLib's parser), the style of geoclue.conf:
///
///     [location]
///     enabled=true
///     max-accuracy=city
///     allow=org.gnome.Maps;/usr/bin/gnome-weather
///     deny=/usr/bin/untrusted
///
/// Each `[section]` names a permission or a plugin; the host hands each plugin the
/// sections that are its own.
package struct ConfigFiles: Sendable {
    package let directory: String

    package init(directory: String) { self.directory = directory }

    package var mainFile: String { directory + "/permissions.conf" }
    package var dropInDirectory: String { directory + "/permissions.conf.d" }

    package struct ParseError: Error, CustomStringConvertible {
        package let file: String
        package let line: Int?
        package let reason: String
        /// The file went between listing the directory and opening it.
        var vanished = false
        package var description: String { "\(file)\(line.map { ":\($0)" } ?? ""): \(reason)" }
    }

    /// What the configuration directory holds at one moment: the files that make up
    /// the configuration, and their merged entries or the first problem.
    package struct Reading: Sendable {
        package var files: [String]
        package var entries: Result<[ConfigEntry], ParseError>
        /// A drop-in directory that exists but cannot be listed: which of its files
        /// are there is not known (none of them counts as gone).
        package var unlisted: String?
    }

    /// The files that make up the configuration now, in the order they apply.
    package var files: [String] { listing().files }

    /// The files that make up the configuration now, and the first name that exists
    /// but cannot be looked at. Only a name that does not exist (ENOENT on lstat)
    /// is absent: a dangling symbolic link, a loop of links, a directory that cannot
    /// be opened are the administrator's and are errors, never "no configuration".
    func listing() -> (files: [String], problem: ParseError?, unlisted: String?) {
        var result: [String] = []
        var problem: ParseError?
        if Self.exists(mainFile, &problem) { result.append(mainFile) }
        guard Self.exists(dropInDirectory, &problem) else { return (result, problem, nil) }
        switch Files.listing(dropInDirectory) {
        case .success(let names):
            for name in names where Self.isDropInName(name) { result.append(dropInDirectory + "/" + name) }
            return (result, problem, nil)
        case .failure(let error):
            let why = ParseError(file: dropInDirectory, line: nil, reason: "cannot read the directory: \(error)")
            return (result, problem ?? why, dropInDirectory)
        }
    }

    /// Whether the name exists (lstat: a link counts, wherever it points); a failure
    /// other than ENOENT is recorded as the problem (the name may well be there).
    private static func exists(_ path: String, _ problem: inout ParseError?) -> Bool {
        var st = stat()
        if lstat(path, &st) == 0 { return true }
        let code = errno
        if code != ENOENT, problem == nil {
            problem = ParseError(file: path, line: nil, reason: "cannot look at it: \(Files.ReadError.system(code))")
        }
        return false
    }

    /// Whether a name in the drop-in directory is a drop-in (hidden files and editor
    /// leftovers such as `x.conf~` are not).
    static func isDropInName(_ name: String) -> Bool {
        name.hasSuffix(".conf") && !name.hasPrefix(".")
    }

    /// Reads and merges every file. Throws for the first malformed one, so the caller
    /// keeps its last good configuration.
    package func load() throws(ParseError) -> [ConfigEntry] {
        try read().entries.get()
    }

    /// Reads and merges every file; the entries are the first malformed file's error
    /// instead, so that the caller keeps its last good configuration. A file whose
    /// name goes between listing and reading counts as absent (an editor's save is
    /// under way: the caller waits for it to come back); a name that stays but cannot
    /// be read (a dangling link, EACCES, ELOOP) is an error.
    package func read() -> Reading {
        var present: [String] = []
        var parsed: [[ConfigEntry]] = []
        let listed = listing()
        var failure = listed.problem
        for file in listed.files {
            do {
                parsed.append(try Self.parse(file))
            } catch let error where error.vanished && Files.linkStatus(file) == nil {
                // The name itself went (not a link left dangling): an editor's save.
                continue
            } catch {
                present.append(file)
                if failure == nil { failure = error }
                continue
            }
            present.append(file)
        }
        if let failure { return Reading(files: present, entries: .failure(failure), unlisted: listed.unlisted) }
        return Reading(files: present, entries: .success(Self.merged(parsed)), unlisted: listed.unlisted)
    }

    /// The files' entries in the order they apply, merged: a later file's key
    /// overrides an earlier one's, in the earlier one's place.
    static func merged(_ files: [[ConfigEntry]]) -> [ConfigEntry] {
        var merged: [ConfigKey: ConfigEntry] = [:]
        var order: [ConfigKey] = []
        for entry in files.joined() {
            let id = ConfigKey(section: entry.section, key: entry.key)
            if merged[id] == nil { order.append(id) }
            merged[id] = entry
        }
        return order.map { merged[$0]! }
    }

    /// What a configuration says: the value of each key, wherever it was written
    /// (origins and order do not change what applies). Made where the files are
    /// read, so that the serving queue only compares two of them.
    package struct Settings: Equatable, Sendable {
        private let values: [ConfigKey: String]

        package init(_ entries: [ConfigEntry]) {
            values = Dictionary(entries.map { (ConfigKey(section: $0.section, key: $0.key), $0.value) }) { $1 }
        }
    }

    /// Whether two configurations say the same (`Settings`).
    package static func sameSettings(_ a: [ConfigEntry], _ b: [ConfigEntry]) -> Bool {
        Settings(a) == Settings(b)
    }

    /// One file through GLib's keyfile parser. A UTF-8 byte order mark (Windows
    /// editors write one) is dropped first; it sits on line 1, so line numbers stay.
    /// Values come trimmed of leading and trailing spaces and tabs (GLib keeps
    /// trailing ones: "enabled=false " would otherwise not read as false).
    static func parse(_ path: String) throws(ParseError) -> [ConfigEntry] {
        var bytes: [UInt8]
        switch Files.contents(path) {
        case .success(let data): bytes = data
        case .failure(let error):
            var problem = ParseError(file: path, line: nil, reason: "cannot read: \(error)")
            if case .system(ENOENT) = error { problem.vanished = true }
            throw problem
        }
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }
        let keyFile = g_key_file_new()
        defer { g_key_file_free(keyFile) }
        var error: UnsafeMutablePointer<GError>? = nil
        let ok = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) {
                g_key_file_load_from_data(keyFile, $0.baseAddress, gsize($0.count), G_KEY_FILE_NONE, &error)
            }
        }
        if ok == 0 {
            let reason = error.map { String(cString: $0.pointee.message) } ?? "cannot parse"
            g_error_free(error)
            let text = String(decoding: bytes, as: UTF8.self)
            throw ParseError(file: path, line: Self.lineQuoted(in: reason, text: text), reason: reason)
        }
        let lines = Self.keyLines(bytes)
        var entries: [ConfigEntry] = []
        var groupCount: gsize = 0
        guard let groups = g_key_file_get_groups(keyFile, &groupCount) else { return [] }
        defer { g_strfreev(groups) }
        for g in 0..<Int(groupCount) {
            guard let groupPtr = groups[g] else { continue }
            let section = String(cString: groupPtr)
            var keyCount: gsize = 0
            guard let keys = g_key_file_get_keys(keyFile, groupPtr, &keyCount, nil) else { continue }
            defer { g_strfreev(keys) }
            for k in 0..<Int(keyCount) {
                guard let keyPtr = keys[k] else { continue }
                let key = String(cString: keyPtr)
                var valueError: UnsafeMutablePointer<GError>? = nil
                let valuePtr = g_key_file_get_string(keyFile, groupPtr, keyPtr, &valueError)
                // GLib may return a value *and* an error (a bad escape): an error either way.
                if let valueError {
                    let reason = String(cString: valueError.pointee.message)
                    g_error_free(valueError)
                    g_free(valuePtr)
                    throw ParseError(file: path, line: lines[ConfigKey(section: section, key: key)], reason: "[\(section)] \(key): \(reason)")
                }
                guard let valuePtr else { continue }
                let value = String(cString: valuePtr).trimmed
                g_free(valuePtr)
                let line = lines[ConfigKey(section: section, key: key)].map { ":\($0)" } ?? ""
                entries.append(ConfigEntry(section: section, key: key, value: value, origin: path + line))
            }
        }
        return entries
    }

    /// Entries as keyfile text (through GLib, so that its parser reads back the same
    /// values), under a comment.
    static func render(_ entries: [ConfigEntry], comment: String) -> [UInt8] {
        let keyFile = g_key_file_new()
        defer { g_key_file_free(keyFile) }
        for entry in entries { g_key_file_set_string(keyFile, entry.section, entry.key, entry.value) }
        var length: gsize = 0
        guard let data = g_key_file_to_data(keyFile, &length, nil) else { return [] }
        defer { g_free(data) }
        // The comment's lines, each as "# line", byte by byte: split and joined as
        // Strings, they cost a quarter of a million instructions of every start
        // (doc/performance.md, "Start-up's own work, counted").
        let newline = UInt8(ascii: "\n")
        var bytes = Array("# ".utf8)
        for byte in comment.utf8 {
            bytes.append(byte)
            if byte == newline { bytes += "# ".utf8 }
        }
        bytes += [newline, newline]
        return bytes + UnsafeRawBufferPointer(start: data, count: Int(length))
    }

    /// GLib gives no line numbers. Most of its parse errors quote the offending line
    /// (“…”); the others name a key or a group, or complain about the first line.
    static func lineQuoted(in reason: String, text: String) -> Int? {
        let lines = splitLines(text)
        func first(_ predicate: (Substring) -> Bool) -> Int? { lines.firstIndex(where: predicate).map { $0 + 1 } }
        if let open = reason.firstIndex(of: "“"), let close = reason[open...].dropFirst().firstIndex(of: "”") {
            let quoted = reason[reason.index(after: open)..<close]
            return first { $0 == quoted }
        }
        if let r = reason.firstOccurrence(of: "Invalid key name: ") {
            let key = reason[r.upperBound...]
            return first { line in line.firstIndex(of: "=").map { line[..<$0].trimmed == key } ?? false }
        }
        if let r = reason.firstOccurrence(of: "Invalid group name: ") {
            let group = reason[r.upperBound...]
            return first { $0.trimmed == "[" + group + "]" }
        }
        if reason.containsText("does not start with a group") {
            return first { let t = $0.trimmed; return !t.isEmpty && !t.hasPrefix("#") }
        }
        return nil
    }

    /// Lines of a file, for LF and CRLF endings alike (Swift reads "\r\n" as one Character).
    static func splitLines(_ text: String) -> [Substring] {
        text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
    }

    /// Line numbers of "key=" lines per section, for the entries' origins and error
    /// messages (GLib keeps no line numbers). The last occurrence wins, as in GLib.
    /// Over the bytes, as GLib reads them: lines end at LF, a CR before it is not
    /// part of the line, and only spaces and tabs are trimmed. (Swift's Characters
    /// gave the same answers at a tenth of the speed, which thousands of drop-ins
    /// notice.)
    static func keyLines(_ bytes: [UInt8]) -> [ConfigKey: Int] {
        var result: [ConfigKey: Int] = [:]
        var section = ""
        var number = 0
        func isBlank(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        var lineStart = 0
        while lineStart <= bytes.count {
            let newline = bytes[lineStart...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
            var end = newline
            if end > lineStart, bytes[end - 1] == UInt8(ascii: "\r") { end -= 1 }
            number += 1
            var start = lineStart
            while start < end, isBlank(bytes[start]) { start += 1 }
            lineStart = newline + 1
            guard start < end else { continue }
            let line = bytes[start..<end]
            if line.first == UInt8(ascii: "["), let close = line.firstIndex(of: UInt8(ascii: "]")) {
                section = String(decoding: bytes[(start + 1)..<close], as: UTF8.self)
            } else if line.first != UInt8(ascii: "#"), var keyEnd = line.firstIndex(of: UInt8(ascii: "=")) {
                while keyEnd > start, isBlank(bytes[keyEnd - 1]) { keyEnd -= 1 }
                result[ConfigKey(section: section, key: String(decoding: bytes[start..<keyEnd], as: UTF8.self))] = number
            }
        }
        return result
    }
}

/// A key of the configuration: a key in its [section].
struct ConfigKey: Hashable {
    let section: String
    let key: String
}
