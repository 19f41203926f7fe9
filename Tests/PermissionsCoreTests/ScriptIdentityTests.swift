import Foundation
import Testing
@testable import PermissionsIdentity

/// Which executables are interpreters ([identity] interpreters=), and the word of
/// their command line that is the script.
@Suite("Interpreters and their command lines")
struct ScriptArgumentTests {
    @Test("an entry matches the resolved executable", arguments: [
        ("python3", "/usr/bin/python3.11", true),
        ("python3", "/usr/bin/python3", true),
        ("python", "/usr/bin/python3.11", true),
        ("perl", "/usr/bin/perl5.36.0", true),
        ("ksh", "/usr/bin/ksh93", true),
        ("sh", "/usr/bin/sh", true),
        ("python3", "/usr/bin/python3-config", false),
        ("python3", "/usr/bin/python3.11-dbg", false),
        ("python3", "/usr/bin/python", false),
        ("sh", "/usr/bin/bash", false),
        ("sh", "/usr/bin/ssh", false),
        ("sh", "/usr/bin/shred", false),
        ("node", "/usr/bin/nodejs", false),
        ("/opt/py/bin/python", "/opt/py/bin/python", true),
        ("/opt/py/bin/python", "/usr/bin/python", false),
        ("/usr/bin/python3", "/usr/bin/python3.11", false),
    ])
    func matching(entry: String, executable: String, matches: Bool) {
        #expect(Interpreters([entry]).matches(executable) == matches)
    }

    @Test func defaultListCoversDebiansInterpreters() {
        let defaults = Interpreters()
        for executable in ["/usr/bin/python3.11", "/usr/bin/perl", "/usr/bin/ruby3.1", "/usr/bin/nodejs", "/usr/bin/dash",
                           "/usr/bin/bash", "/usr/bin/zsh", "/usr/bin/ksh93", "/usr/bin/mksh"] {
            #expect(defaults.matches(executable), "\(executable)")
        }
        for executable in ["/usr/bin/busctl", "/usr/bin/gdbus", "/usr/bin/env", "/usr/lib/firefox-esr/firefox-esr"] {
            #expect(!defaults.matches(executable), "\(executable)")
        }
        #expect(!Interpreters([]).matches("/usr/bin/python3.11"))
    }

    @Test("the language from the file name", arguments: [
        ("/usr/bin/python3.11", ScriptArgument.Family.python), ("/usr/bin/pypy3", .python),
        ("/usr/bin/perl5.36.0", .perl), ("/usr/bin/ruby3.1", .ruby), ("/usr/bin/nodejs", .node),
        ("/usr/bin/dash", .shell), ("/usr/bin/ksh93", .shell), ("/usr/bin/tclsh8.6", .other),
    ])
    func family(executable: String, family: ScriptArgument.Family) {
        #expect(Interpreters.family(of: executable) == family)
    }

    @Test("the script among the options", arguments: [
        // Python
        (ScriptArgument.Family.python, ["python3", "script.py", "-c", "x"], "script.py"),
        (.python, ["python3", "-u", "-B", "script.py"], "script.py"),
        (.python, ["python3", "-uBO", "/usr/share/x/tool.py", "--flag"], "/usr/share/x/tool.py"),
        (.python, ["python3", "-W", "error", "script.py"], "script.py"),
        (.python, ["python3", "-Werror", "script.py"], "script.py"),
        (.python, ["python3", "-X", "dev", "-i", "script.py"], "script.py"),
        (.python, ["python3", "-bX", "utf8", "script.py"], "script.py"),
        (.python, ["python3", "--check-hash-based-pycs", "always", "s.py"], "s.py"),
        (.python, ["python3", "--check-hash-based-pycs=never", "s.py"], "s.py"),
        (.python, ["python3", "--", "-odd-name.py"], "-odd-name.py"),
        (.python, ["python3", "-c", "import x", "script.py"], nil),
        (.python, ["python3", "-Sc", "import x"], nil),
        (.python, ["python3", "-m", "http.server"], nil),
        (.python, ["python3", "-"], nil),
        (.python, ["python3", "--", "-"], nil),
        (.python, ["python3"], nil),
        (.python, ["python3", "-u"], nil),
        (.python, ["python3", "-W"], nil),
        (.python, ["python3", "--version"], nil),
        (.python, ["python3", "--unknown-option", "script.py"], nil),
        (.python, ["python3", "-Z", "script.py"], nil),
        (.python, ["python3", ""], nil),
        // Perl
        (.perl, ["perl", "-w", "tool.pl"], "tool.pl"),
        (.perl, ["perl", "-T", "-I", "lib", "tool.pl"], "tool.pl"),
        (.perl, ["perl", "-Ilib", "-Mstrict", "tool.pl"], "tool.pl"),
        (.perl, ["perl", "-l0", "-i.bak", "tool.pl"], "tool.pl"),
        (.perl, ["perl", "-0777n", "tool.pl"], "tool.pl"),
        (.perl, ["perl", "-0x1FFw", "tool.pl"], "tool.pl"),
        (.perl, ["perl", "-lne", "print", "file"], nil),
        (.perl, ["perl", "-e", "print 1"], nil),
        (.perl, ["perl", "-S", "tool.pl"], nil),
        (.perl, ["perl", "-"], nil),
        // Ruby
        (.ruby, ["ruby", "-w", "app.rb"], "app.rb"),
        (.ruby, ["ruby", "-r", "json", "-Ilib", "app.rb"], "app.rb"),
        (.ruby, ["ruby", "--disable-gems", "--encoding", "UTF-8", "app.rb"], "app.rb"),
        (.ruby, ["ruby", "--enable=frozen-string-literal", "-W0", "app.rb"], "app.rb"),
        (.ruby, ["ruby", "-e", "puts 1"], nil),
        (.ruby, ["ruby", "-C", "/tmp", "app.rb"], nil),
        // Node
        (.node, ["node", "server.js"], "server.js"),
        (.node, ["node", "--inspect", "--no-warnings", "server.js"], "server.js"),
        (.node, ["node", "-r", "dotenv/config", "--max-old-space-size=4096", "server.js"], "server.js"),
        (.node, ["node", "--require", "ts-node/register", "app.ts"], "app.ts"),
        (.node, ["node", "-e", "1"], nil),
        (.node, ["node", "-p", "1"], nil),
        (.node, ["node", "--test", "a.test.js"], nil),
        (.node, ["node", "--some-new-option", "server.js"], nil),
        // Shells
        (.shell, ["sh", "script.sh"], "script.sh"),
        (.shell, ["/bin/bash", "-e", "-u", "script.sh", "arg"], "script.sh"),
        (.shell, ["bash", "-o", "pipefail", "+x", "script.sh"], "script.sh"),
        (.shell, ["bash", "+o", "posix", "script.sh"], "script.sh"),
        (.shell, ["bash", "--norc", "--rcfile", "x", "script.sh"], "script.sh"),
        (.shell, ["sh", "-", "script.sh"], "script.sh"),
        (.shell, ["sh", "--", "script.sh"], "script.sh"),
        (.shell, ["sh", "-c", "echo hi", "script.sh"], nil),
        (.shell, ["sh", "-ec", "echo hi"], nil),
        (.shell, ["sh", "-s", "arg"], nil),
        (.shell, ["-bash"], nil),
        (.shell, ["bash", "-i"], nil),
        (.shell, ["sh", "-"], nil),
        // An interpreter of no known language: only a first word that is no option.
        (.other, ["tclsh", "prog.tcl"], "prog.tcl"),
        (.other, ["tclsh", "-encoding", "utf-8", "prog.tcl"], nil),
    ] as [(ScriptArgument.Family, [String], String?)])
    func operand(family: ScriptArgument.Family, argv: [String], script: String?) {
        #expect(ScriptArgument.script(in: argv, family: family) == script)
    }
}

/// Kind `script` from a stand-in /proc tree: the interpreter's command line, its
/// current directory and root, and the files its root holds.
@Suite("App identity: scripts")
struct ScriptIdentityTests {
    let root: TempDirectory
    let reader: IdentityReader

    init() throws {
        root = try TempDirectory()
        reader = IdentityReader(procRoot: root.url("proc"))
        // The host's root (PID 1's) and the files in it.
        try root.symlink("proc/1/root", to: root.url("fs"))
        try root.write("fs/home/u/bin/tool.py", "#!/usr/bin/python3\n")
        try root.write("fs/usr/share/app/main.py", "print(1)\n")
        try root.symlink("fs/home/u/bin/relative-link.py", to: "tool.py")
        try root.symlink("fs/home/u/bin/absolute-link.py", to: "/usr/share/app/main.py")
        try root.symlink("fs/home/u/share", to: "/usr/share")
    }

    /// A stand-in interpreter process: in the host's mount namespace, with the host's
    /// root, executable `exe`, command line `argv` and current directory `cwd` (a
    /// path of the stand-in root).
    private func process(_ pid: Int, exe: String = "/usr/bin/python3.11", argv: [String], cwd: String = "/home/u",
                         root processRoot: String = "fs", cgroup: String? = nil) throws {
        try root.write("proc/\(pid)/stat", IdentityReaderTests.statLine(pid: pid, startTime: 4711))
        try FileManager.default.createDirectory(atPath: root.url("proc/1/ns"), withIntermediateDirectories: true)
        if (try? FileManager.default.destinationOfSymbolicLink(atPath: root.url("proc/1/ns/mnt"))) == nil {
            try root.symlink("proc/1/ns/mnt", to: TempDirectory.hostMountNamespace)
        }
        try root.symlink("proc/\(pid)/ns/mnt", to: TempDirectory.hostMountNamespace)
        try root.symlink("proc/\(pid)/exe", to: exe)
        try root.symlink("proc/\(pid)/cwd", to: cwd)
        try root.symlink("proc/\(pid)/root", to: root.url(processRoot))
        try root.write("proc/\(pid)/cmdline", bytes: argv.flatMap { Array($0.utf8) + [0] })
        if let cgroup { try root.write("proc/\(pid)/cgroup", cgroup) }
    }

    private func identity(_ pid: Int, with reader: IdentityReader? = nil) throws -> AppIdentity {
        try (reader ?? self.reader).identify(pid: UInt32(pid), uid: 1000).get()
    }

    @Test func relativeScriptFromTheCurrentDirectory() throws {
        try process(20, argv: ["python3", "bin/tool.py", "--flag"])
        #expect(try identity(20) == AppIdentity(appID: "/home/u/bin/tool.py", kind: .script, uid: 1000, pid: 20,
                                                interpreter: "/usr/bin/python3.11"))
    }

    @Test func absoluteScriptAsTheKernelRunsAShebang() throws {
        // #!/usr/bin/python3 -u: the kernel runs "/usr/bin/python3 -u /home/u/bin/tool.py".
        try process(21, argv: ["/usr/bin/python3", "-u", "/home/u/bin/tool.py"], cwd: "/")
        let found = try identity(21)
        #expect(found.appID == "/home/u/bin/tool.py")
        #expect(found.kind == .script)
    }

    @Test("links and dot-dot are resolved in the process's root", arguments: [
        ("bin/relative-link.py", "/home/u/bin/tool.py"),
        ("bin/absolute-link.py", "/usr/share/app/main.py"),
        ("share/app/main.py", "/usr/share/app/main.py"),
        ("./bin/../bin/./tool.py", "/home/u/bin/tool.py"),
        // ".." after a link is the parent of its target, as the kernel walks it.
        ("../../home/u/share/../share/app/main.py", "/usr/share/app/main.py"),
    ])
    func canonicalPath(operand: String, appID: String) throws {
        try process(22, argv: ["python3", operand])
        #expect(try identity(22).appID == appID)
    }

    @Test("no script file: the interpreter's id", arguments: [
        ["python3", "-c", "import dbus"],
        ["python3", "-m", "tool"],
        ["python3", "-"],
        ["python3"],
        ["python3", "bin/missing.py"],
        ["python3", "bin"],                      // a directory
        ["python3", "bin/tool.py/x"],            // a file in the middle
        ["python3", "/dev/null"],                // not a regular file
        ["python3", "--made-up", "bin/tool.py"], // an option not known
    ])
    func fallsBackToTheInterpreter(argv: [String]) throws {
        try FileManager.default.createDirectory(atPath: root.url("fs/dev"), withIntermediateDirectories: true)
        #expect(mkfifo(root.url("fs/dev/null"), 0o600) == 0)
        try process(23, argv: argv)
        #expect(try identity(23) == AppIdentity(appID: "/usr/bin/python3.11", kind: .executable, uid: 1000, pid: 23))
    }

    @Test func aPathThatIsNoValidAppIDFallsBack() throws {
        let long = String(repeating: "d", count: 250)
        try root.write("fs/home/u/\(long)/x.py", "")
        try root.write("fs/home/u/caf\u{e9}.py", "")
        for operand in ["\(long)/x.py", "caf\u{e9}.py"] {
            try? FileManager.default.removeItem(atPath: root.url("proc/24"))
            try process(24, argv: ["python3", operand])
            #expect(try identity(24).kind == .executable, "\(operand)")
        }
    }

    /// /proc/self, /dev/fd and the like are magic links the daemon would read as its
    /// own (its open files' paths as a caller's app id): no script is in a kernel
    /// file system, so such an operand is the interpreter's.
    @Test(arguments: ["/proc/self/fd/7", "/dev/fd/7", "/dev/stdin", "/sys/x.py", "home/u/../../proc/1/x.py"])
    func aPathThroughAKernelFileSystemFallsBack(operand: String) throws {
        try root.write("fs/proc/self/fd/7", "")  // would resolve, were it looked at
        try root.write("fs/proc/1/x.py", "")
        try root.write("fs/sys/x.py", "")
        try root.symlink("fs/dev/fd", to: "/proc/self/fd")
        try root.symlink("fs/dev/stdin", to: "/proc/self/fd/7")
        try root.symlink("fs/home/u/to-proc.py", to: "/proc/self/fd/7")
        try process(28, argv: ["python3", operand], cwd: "/")
        #expect(try identity(28).kind == .executable, "\(operand)")
        try? FileManager.default.removeItem(atPath: root.url("proc/29"))
        try process(29, argv: ["python3", "to-proc.py"])
        #expect(try identity(29).kind == .executable)
    }

    @Test func aLinkLoopFallsBack() throws {
        try root.symlink("fs/home/u/loop-a", to: "loop-b")
        try root.symlink("fs/home/u/loop-b", to: "loop-a")
        try process(25, argv: ["python3", "loop-a"])
        #expect(try identity(25).kind == .executable)
    }

    @Test func notAnInterpreter() throws {
        try process(26, exe: "/usr/bin/busctl", argv: ["busctl", "bin/tool.py"])
        #expect(try identity(26) == AppIdentity(appID: "/usr/bin/busctl", kind: .executable, uid: 1000, pid: 26))
        var none = reader
        none.interpreters = Interpreters([])
        try process(27, argv: ["python3", "bin/tool.py"])
        #expect(try identity(27, with: none).kind == .executable)
        var onlyPerl = reader
        onlyPerl.interpreters = Interpreters(["perl"])
        #expect(try identity(27, with: onlyPerl).appID == "/usr/bin/python3.11")
        #expect(try identity(27).appID == "/home/u/bin/tool.py")
    }

    @Test func aChrootedInterpreterKeepsItsOwnID() throws {
        // Its "/home/u/bin/tool.py" is a file of its own root, not the host's path.
        try root.write("jail/home/u/bin/tool.py", "")
        try process(28, argv: ["python3", "/home/u/bin/tool.py"], root: "jail")
        #expect(try identity(28).kind == .executable)
    }

    @Test func anotherMountNamespaceStaysUnverified() throws {
        try process(29, argv: ["python3", "bin/tool.py"])
        try FileManager.default.removeItem(atPath: root.url("proc/29/ns/mnt"))
        try root.symlink("proc/29/ns/mnt", to: "mnt:[4026532999]")
        let found = try identity(29)
        #expect(found.kind == .unverified)
        #expect(found.appID == "unverified:/usr/bin/python3.11")
    }

    @Test func anAppScopeWinsOverTheScript() throws {
        try process(30, argv: ["python3", "bin/tool.py"], cgroup:
            "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.example.Tool-5.scope\n")
        #expect(try identity(30) == AppIdentity(appID: "org.example.Tool", kind: .systemdUnit, uid: 1000, pid: 30))
    }

    @Test func commandLineWordsCutByTheLimitAreLeftOut() throws {
        try root.write("cmdline", bytes: Array("python3\0tool.py\0arg".utf8))
        #expect(IdentityReader.commandLine(root.url("cmdline"), limit: 100) == ["python3", "tool.py"])
        try root.write("cmdline", bytes: Array("python3\0tool.py\0".utf8))
        #expect(IdentityReader.commandLine(root.url("cmdline"), limit: 12) == ["python3"])
        #expect(IdentityReader.commandLine(root.url("cmdline"), limit: 16) == ["python3", "tool.py"])
        #expect(IdentityReader.commandLine(root.url("no-such-file"), limit: 16) == [])
    }
}
