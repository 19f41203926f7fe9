// For its link order only (Package.swift, "CLinkOrder").
internal import CLinkOrder
internal import CShims
internal import Glibc
internal import SystemPrimitives

/// Command-line options through glibc's `getopt_long`, shared by permissionsd and
/// permissionsctl so that both accept the same bus options the same way.
public struct OptionSpec: Sendable {
    public let name: String
    public let takesValue: Bool
    public init(_ name: String, takesValue: Bool = false) {
        self.name = name
        self.takesValue = takesValue
    }
}

public struct ParsedOptions: Sendable {
    /// Each option seen, in order (repeatable options appear several times).
    public var values: [(name: String, value: String?)] = []
    /// What follows the options.
    public var positional: [String] = []

    public init(values: [(name: String, value: String?)] = [], positional: [String] = []) {
        self.values = values
        self.positional = positional
    }

    public func has(_ name: String) -> Bool { values.contains { $0.name == name } }
    public func last(_ name: String) -> String? { values.last { $0.name == name }?.value }
    public func all(_ name: String) -> [String] { values.filter { $0.name == name }.compactMap(\.value) }
}

extension String {
    /// A value from the command line as a usage error quotes it: in quotes, with
    /// control characters as `\xNN` and a long one cut (`escapedForMessage`), so
    /// that an empty value, a space or a new line in it reads as what it is.
    public var quotedForUsage: String { "\"" + escapedForMessage + "\"" }
}

public struct UsageError: Error, CustomStringConvertible {
    public let description: String
    public init(description: String) { self.description = description }
}

/// Writes a line to standard error with one write(2) (Swift 6 will not touch the
/// C `stderr` global).
public func printError(_ line: String) {
    let text = line.hasSuffix("\n") ? line : line + "\n"
    text.utf8CString.withUnsafeBufferPointer { _ = write(2, $0.baseAddress, $0.count - 1) }
}

/// Answers --help (`usage`) and --version (`version`) the way every program of the
/// package does, on standard output, and exits 0; returns when neither was given.
/// An argument left after the options is a usage error.
public func answerHelpAndVersion(_ parsed: ParsedOptions, usage: String, version: () -> String) throws(UsageError) {
    if parsed.has("help") {
        print(usage, terminator: "")
        exit(0)
    }
    if parsed.has("version") {
        print(version())
        exit(0)
    }
    if let extra = parsed.positional.first {
        throw UsageError(description: "unexpected argument \(extra.quotedForUsage)")
    }
}

/// Parses `arguments` (argv without the program name). With `stopAtFirstPositional`
/// (getopt's "+"), options end at the first non-option, so a subcommand's own
/// arguments are left alone.
public func parseOptions(_ arguments: [String], specs: [OptionSpec], stopAtFirstPositional: Bool) throws(UsageError)
    -> ParsedOptions
{
    let argv = (["prog"] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    let names = specs.map { strdup($0.name) }
    defer { names.forEach { free($0) } }
    var long = specs.enumerated().map { i, spec in
        option(name: names[i], has_arg: spec.takesValue ? required_argument : no_argument, flag: nil,
               val: Int32(1000 + i))
    }
    long.append(option())
    var parsed = ParsedOptions()
    var argvCopy = argv
    cshims_reset_getopt()
    let shortOptions = stopAtFirstPositional ? "+:h" : ":h"
    while true {
        let c = getopt_long(Int32(argv.count - 1), &argvCopy, shortOptions, long, nil)
        if c == -1 { break }
        switch c {
        case Int32(UInt8(ascii: "h")):
            parsed.values.append(("help", nil))
        case 1000..<(1000 + Int32(specs.count)):
            let spec = specs[Int(c - 1000)]
            parsed.values.append((spec.name, spec.takesValue ? cshims_optarg().map { String(cString: $0) } : nil))
        case Int32(UInt8(ascii: ":")):
            let index = Int(cshims_optind()) - 1
            let name = argvCopy[index].map { String(cString: $0) } ?? ""
            throw UsageError(description: "option \(name.quotedForUsage) needs a value")
        default:
            let index = max(Int(cshims_optind()) - 1, 1)
            let name = argvCopy[index].map { String(cString: $0) } ?? ""
            throw UsageError(description: "unknown option \(name.quotedForUsage)")
        }
    }
    let first = Int(cshims_optind())
    if first < argv.count - 1 {
        parsed.positional = argvCopy[first..<(argv.count - 1)].compactMap { $0.map { String(cString: $0) } }
    }
    return parsed
}
