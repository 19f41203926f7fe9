/// Which word of an interpreter's command line names the script it runs: the
/// first operand after the interpreter's own options, read with each language's
/// option syntax (which options take the next word as their argument).
///
/// There is no script file, and the caller keeps the interpreter's id, when the
/// code comes from elsewhere (`-c` in Python and the shells, `-m` module, `-e` in
/// Perl, Ruby and Node, `-s`/`-i` in the shells), from standard input (`-`, or no
/// operand at all), when an option only prints something (`--version`), and when
/// an option is not in the table: it might take the next word, so the operand
/// cannot be told (conservative). For an interpreter of no known language (an
/// administrator's own entry), only a first word that is no option counts.
package enum ScriptArgument {
    package enum Family: Sendable {
        case python, perl, ruby, node, shell, other
    }

    /// The script operand of `argv` (argv[0] is the interpreter's own name), or nil.
    package static func script(in argv: [String], family: Family) -> String? {
        let syntax = Syntax.of(family)
        var index = 1
        while index < argv.count {
            let word = argv[index]
            let bytes = Array(word.utf8)
            if word == "--" { return operand(argv, index + 1) }
            if word == "-" { return syntax.dashEndsOptions ? operand(argv, index + 1) : nil }
            if word.hasPrefix("--") {
                guard let taken = syntax.long(word) else { return nil }
                index += taken
                continue
            }
            let isOption = bytes.count > 1
                && (bytes[0] == UInt8(ascii: "-") || (syntax.plusOptions && bytes[0] == UInt8(ascii: "+")))
            guard isOption else { return word.isEmpty ? nil : word }
            guard let taken = syntax.cluster(bytes) else { return nil }
            index += taken
        }
        return nil
    }

    /// The word after the end of the options: none, or "-" (standard input), is no script.
    private static func operand(_ argv: [String], _ index: Int) -> String? {
        guard index < argv.count, !argv[index].isEmpty, argv[index] != "-" else { return nil }
        return argv[index]
    }
}

/// One language's options, as far as finding the operand needs: which letters
/// take an argument, and where it is.
struct Syntax {
    /// Letters without an argument.
    var flags: Set<UInt8> = []
    /// Letters whose argument is the rest of the word or, when nothing follows, the next word.
    var withArgument: Set<UInt8> = []
    /// Letters whose (optional) argument is the rest of the word only.
    var attached: Set<UInt8> = []
    /// Letters followed by octal digits (or, for 0, x and hex digits), then more letters.
    var octal: Set<UInt8> = []
    /// Letters after which no script file runs (inline code, standard input, help).
    var noScript: Set<UInt8> = []
    /// Long options (with their "--"): without an argument, with one ("--name value"
    /// or "--name=value"), and those after which no script file runs.
    var longFlags: Set<String> = []
    var longFlagPrefixes: [String] = []
    var longWithArgument: Set<String> = []
    var longNoScript: Set<String> = []
    /// Any "--name=value" is one word, known or not (Node passes V8's options on).
    var anyLongWithValue = false
    /// A lone "-" ends the options (the shells) rather than naming standard input.
    var dashEndsOptions = false
    /// Options start with "+" too (the shells: "+x" turns x off).
    var plusOptions = false

    /// How many words the long option `word` takes up (1 or 2), or nil: no script, or not known.
    func long(_ word: String) -> Int? {
        let name = word.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? word
        let hasValue = name.utf8.count < word.utf8.count
        if longNoScript.contains(name) { return nil }
        if longWithArgument.contains(name) { return hasValue ? 1 : 2 }
        if longFlags.contains(name) || longFlagPrefixes.contains(where: name.hasPrefix) { return 1 }
        return hasValue && anyLongWithValue ? 1 : nil
    }

    /// How many words the cluster of letters `word` ("-uB", "-Wdefault", "-I") takes
    /// up (1 or 2), or nil: no script, or a letter not known.
    func cluster(_ word: [UInt8]) -> Int? {
        var i = 1
        while i < word.count {
            let letter = word[i]
            if noScript.contains(letter) { return nil }
            if flags.contains(letter) {
                i += 1
            } else if withArgument.contains(letter) {
                return i + 1 < word.count ? 1 : 2
            } else if attached.contains(letter) {
                return 1
            } else if octal.contains(letter) {
                i += 1
                if letter == UInt8(ascii: "0"), i < word.count, word[i] | 0x20 == UInt8(ascii: "x") {
                    i += 1
                    while i < word.count, isHexDigit(word[i]) { i += 1 }
                } else {
                    while i < word.count, (UInt8(ascii: "0")...UInt8(ascii: "7")).contains(word[i]) { i += 1 }
                }
            } else {
                return nil
            }
        }
        return 1
    }

    private func isHexDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte | 0x20)
    }

    static func of(_ family: ScriptArgument.Family) -> Syntax {
        switch family {
        case .python: python
        case .perl: perl
        case .ruby: ruby
        case .node: node
        case .shell: shell
        case .other: Syntax()
        }
    }

    /// python3(1): -c command, -m module, - (stdin); -W and -X take an argument.
    static let python = Syntax(
        flags: letters("bBdEiIOPqRsSuvx"), withArgument: letters("WX"), noScript: letters("cmhV?"),
        longWithArgument: ["--check-hash-based-pycs"],
        longNoScript: ["--help", "--version", "--help-env", "--help-xoptions", "--help-all"])

    /// perlrun(1): -e/-E code; -S looks the script up in PATH (not told here); -I
    /// takes the next word when nothing follows it; -C -d -D -F -i -m -M -x take
    /// the rest of the word; -0 and -l take digits.
    static let perl = Syntax(
        flags: letters("acfnpstTuUwWX"), withArgument: letters("I"), attached: letters("CdDFimMx"),
        octal: letters("0l"), noScript: letters("eEhvVS"))

    /// ruby(1): -e code; -C/-X change directory first and -S looks the script up in
    /// PATH (not told here); -E -I -r take an argument; -F -i -K -T -W -x the rest
    /// of the word.
    static let ruby = Syntax(
        flags: letters("acdlnpsvwy"), withArgument: letters("EIr"), attached: letters("FiKTWx"),
        octal: letters("0"), noScript: letters("eChSX"),
        longFlags: ["--verbose", "--yydebug", "--jit", "--yjit", "--rjit"],
        longFlagPrefixes: ["--enable-", "--disable-", "--jit-", "--yjit-", "--rjit-"],
        longWithArgument: ["--encoding", "--external-encoding", "--internal-encoding", "--enable", "--disable",
                           "--dump", "--backtrace-limit", "--crash-report", "--parser"],
        longNoScript: ["--help", "--version", "--copyright"])

    /// node(1): -e/--eval, -p/--print, -i (REPL), --test and --run run no given
    /// script; -r and -C take an argument; options are mostly long.
    static let node = Syntax(
        flags: letters("c"), withArgument: letters("rC"), noScript: letters("epihv"),
        longFlags: ["--abort-on-uncaught-exception", "--check", "--enable-source-maps", "--expose-gc",
                    "--experimental-vm-modules", "--experimental-modules", "--experimental-json-modules",
                    "--experimental-wasm-modules", "--experimental-import-meta-resolve",
                    "--experimental-detect-module", "--experimental-require-module", "--experimental-strip-types",
                    "--experimental-transform-types", "--experimental-permission", "--experimental-sqlite",
                    "--experimental-websocket", "--experimental-global-webcrypto", "--experimental-fetch",
                    "--experimental-top-level-await", "--experimental-worker", "--experimental-report",
                    "--frozen-intrinsics", "--harmony", "--insecure-http-parser", "--inspect", "--inspect-brk",
                    "--inspect-wait", "--pending-deprecation", "--preserve-symlinks", "--preserve-symlinks-main",
                    "--prof", "--cpu-prof", "--heap-prof", "--report-on-fatalerror", "--report-uncaught-exception",
                    "--report-on-signal", "--report-compact", "--throw-deprecation", "--trace-deprecation",
                    "--trace-warnings", "--trace-uncaught", "--trace-exit", "--trace-sigint", "--trace-sync-io",
                    "--use-strict", "--use-bundled-ca", "--use-openssl-ca", "--watch", "--watch-preserve-output",
                    "--zero-fill-buffers", "--force-fips", "--enable-fips"],
        longFlagPrefixes: ["--no-"],
        longWithArgument: ["--require", "--import", "--loader", "--experimental-loader", "--conditions",
                           "--env-file", "--env-file-if-exists", "--title", "--input-type", "--disable-warning",
                           "--dns-result-order", "--openssl-config", "--redirect-warnings", "--icu-data-dir",
                           "--unhandled-rejections", "--secure-heap", "--secure-heap-min", "--heapsnapshot-signal",
                           "--diagnostic-dir", "--report-dir", "--report-directory", "--report-filename",
                           "--report-signal", "--cpu-prof-dir", "--cpu-prof-name", "--heap-prof-dir",
                           "--heap-prof-name", "--inspect-port", "--debug-port", "--inspect-publish-uid",
                           "--experimental-policy", "--policy-integrity", "--experimental-specifier-resolution",
                           "--watch-path", "--max-http-header-size", "--trace-event-categories",
                           "--trace-event-file-pattern", "--allow-fs-read", "--allow-fs-write"],
        longNoScript: ["--eval", "--print", "--interactive", "--help", "--version", "--v8-options", "--test",
                       "--run", "--completion-bash"],
        anyLongWithValue: true)

    /// sh(1), bash(1), dash(1), zsh(1): -c command string, -s and -i read standard
    /// input; -o/-O (and +o/+O) take an option name; a lone "-" ends the options.
    static let shell = Syntax(
        flags: letters("abefhkmnptuvxBCDEHIPTVXlr"), withArgument: letters("oO"), noScript: letters("csi"),
        longFlags: ["--debugger", "--dump-po-strings", "--dump-strings", "--login", "--noediting", "--noprofile",
                    "--norc", "--posix", "--pretty-print", "--restricted", "--verbose", "--no-rcs"],
        longWithArgument: ["--init-file", "--rcfile"], longNoScript: ["--help", "--version"],
        dashEndsOptions: true, plusOptions: true)

    private static func letters(_ text: String) -> Set<UInt8> { Set(text.utf8) }
}
