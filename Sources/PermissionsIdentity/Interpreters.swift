internal import PermissionsSupport

/// The executables that run scripts ([identity] interpreters=): a caller whose
/// executable is one of them is identified by the script it runs (kind `script`,
/// `ScriptPath.swift`), not by the interpreter, which every script of it shares.
///
/// An entry without a slash is a name: it matches an executable whose file name is
/// the name, or the name followed by a version of digits and dots (`python3`
/// matches `python3` and `python3.11`, `perl` matches `perl5.36.0`, `ksh` matches
/// `ksh93`). An entry with a slash is an absolute path and matches that executable
/// only. Either is matched against the executable as the kernel names it
/// (`/proc/PID/exe`, every link resolved): `/usr/bin/python3` is the link, the
/// executable is `/usr/bin/python3.11`, which the name `python3` matches.
package struct Interpreters: Sendable, Equatable {
    /// The list without [identity] interpreters=: the usual script languages and the
    /// shells (`node` is `nodejs` on Debian, `ksh` is `ksh93`).
    package static let defaultEntries = ["python3", "python", "perl", "ruby", "node", "nodejs",
                                         "sh", "bash", "dash", "zsh", "ksh", "mksh"]

    package var entries: [String]

    package init(_ entries: [String] = Interpreters.defaultEntries) { self.entries = entries }

    /// Whether `executable` (a resolved absolute path) is one of the interpreters.
    package func matches(_ executable: String) -> Bool {
        let name = Files.baseName(executable)
        return entries.contains { entry in
            entry.contains("/") ? entry == executable : Self.isVersioned(name, of: entry)
        }
    }

    /// `name` is `base`, or `base` followed by a version: digits and dots, with a digit.
    static func isVersioned(_ name: String, of base: String) -> Bool {
        guard name.hasPrefix(base) else { return false }
        let version = name.utf8.dropFirst(base.utf8.count)
        return version.allSatisfy { isDigit($0) || $0 == UInt8(ascii: ".") }
            && (version.isEmpty || version.contains(where: isDigit))
    }

    /// Which language's command line an interpreter takes, from its file name
    /// without the version (`python3.11` → python): how its options are read.
    static func family(of executable: String) -> ScriptArgument.Family {
        var name = Substring(Files.baseName(executable))
        while let last = name.utf8.last, isDigit(last) || last == UInt8(ascii: ".") { name = name.dropLast() }
        switch name {
        case "python", "pypy": return .python
        case "perl": return .perl
        case "ruby": return .ruby
        case "node", "nodejs": return .node
        case "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "posh": return .shell
        default: return .other
        }
    }
}

private func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
