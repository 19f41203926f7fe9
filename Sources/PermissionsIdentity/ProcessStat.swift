internal import PermissionsSupport

/// Fields of a process's `/proc/PID/stat`, read as bytes.
///
/// The command name (field 2) is in parentheses and may hold anything, spaces and
/// ")" included, so fields are counted from the last ")". Read byte by byte, not as
/// a String: a String's lastIndex(of:) and split(separator:) go Character by
/// Character through grapheme breaking, a quarter of a million instructions for
/// one line, and start-up reads the host's line three times, each caller's twice
/// (doc/performance.md, "Start-up's own work, counted").
enum ProcessStat {
    /// Field `number` (1-based, as proc(5) numbers them; 3 and on) of `path`, a
    /// stat file, as text; nil if the file cannot be read or has no such field.
    static func field(_ number: Int, of path: String) -> String? {
        precondition(number >= 3, "fields 1 and 2 are not counted from the command name's end")
        guard let bytes = Files.read(path, limit: 4096), let close = bytes.lastIndex(of: UInt8(ascii: ")")) else {
            return nil
        }
        let space = UInt8(ascii: " ")
        var index = 3
        var start = close + 1
        while start < bytes.endIndex {
            // Runs of spaces separate fields; none is empty.
            if bytes[start] == space {
                start += 1
                continue
            }
            let end = bytes[start...].firstIndex(of: space) ?? bytes.endIndex
            if index == number { return String(decoding: bytes[start..<end], as: UTF8.self) }
            index += 1
            start = end
        }
        return nil
    }
}
