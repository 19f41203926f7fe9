import Foundation
import Testing
import PermissionsTestSupport

/// What RealMachineTests run on: a machine in the shape of a real one. The
/// release build installed by scripts/install (one tree for the suite), a bus
/// with dbus's own system.conf policy and only the installed policy file and
/// polkit's beside it, the installed daemon started by D-Bus activation from the
/// installed activation file, the machine's real polkitd with the installed
/// actions and the administrator's rules file of doc/admin.md, and clients as
/// real non-root users (setpriv), on the system bus their environment names.
/// The bus is PID 1 of the machine's PID namespace, and the daemon, polkitd and
/// the clients are its processes (InstalledBus.inside): the daemon takes PID 1's
/// mount namespace for the host's, as it does on a machine.

/// An installed tree (Installing.installWithRealPaths).
struct InstalledTree: Sendable {
    let root: String
    let flags: [String]

    var daemon: String { root + "/usr/libexec/permissionsd" }
    var ctl: String { root + "/usr/bin/permissionsctl" }
    var busPolicy: String { root + "/dbus/system.d/org.example.Permissions.conf" }
    var activationDirectory: String { root + "/dbus/system-services" }
    var polkitActions: String { root + "/polkit/actions/org.example.Permissions.policy" }
    var stateDirectory: String { root + "/var/lib/permissions" }
    var daemonUnit: String { root + "/systemd/permissionsd.service" }
    var connectorService: String { root + "/systemd/permissionsd-connector.service" }
    var connectorSocket: String { root + "/systemd/permissionsd-connector.socket" }
}

/// One install for a whole suite (scripts/install takes seconds; the tests of a
/// suite only run the installed files): made before the suite's first test,
/// removed after its last, and `current` meanwhile. The suite must be
/// `.serialized`: its tests share the installed daemon's state directory (each
/// RealMachine empties it first).
struct SharedInstall: SuiteTrait, TestScoping {
    @TaskLocal static var current: InstalledTree?

    func provideScope(for test: Test, testCase: Test.Case?,
                      performing function: @Sendable () async throws -> Void) async throws {
        let (root, flags) = try Installing.installWithRealPaths()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try await Self.$current.withValue(InstalledTree(root: root, flags: flags)) { try await function() }
    }

    /// The suite's tree.
    static func tree() throws -> InstalledTree {
        try #require(current, "the suite needs the .sharedInstall trait")
    }
}

extension Trait where Self == SharedInstall {
    static var sharedInstall: Self { Self() }
}

/// The polkit rules example of doc/admin.md, as the tests use it: copied out of
/// the document, so that the example and what is tested cannot drift apart.
enum AdminGuide {
    static let path = packageRoot + "/doc/admin.md"
    static let section = "## polkit for users without a local session (SSH, headless)"
    /// The group the example names, for the reader to replace.
    static let groupPlaceholder = "permissions-users"

    /// The file name the section says to save the rules as, and its text (the
    /// section's first js block) with `group` for the placeholder.
    static func sshRules(group: String) throws -> (name: String, text: String) {
        let document = try String(contentsOfFile: path, encoding: .utf8)
        let start = try #require(document.range(of: "\n" + section + "\n"), "\(path) has no \(section)")
        let rest = document[start.upperBound...]
        let body = rest.range(of: "\n## ").map { rest[..<$0.lowerBound] } ?? rest
        let directory = "`/etc/polkit-1/rules.d/"
        let named = try #require(body.range(of: directory), "the section names no file in /etc/polkit-1/rules.d")
        let name = String(body[named.upperBound...].prefix { $0 != "`" })
        #expect(name.range(of: #"^[0-9]{2}-[a-z-]+\.rules$"#, options: .regularExpression) != nil, "\(name)")
        let open = try #require(body.range(of: "```js\n"), "the section has no js block")
        let close = try #require(body[open.upperBound...].range(of: "\n```"))
        let text = String(body[open.upperBound..<close.lowerBound]) + "\n"
        let quoted = "\"\(groupPlaceholder)\""
        #expect(text.components(separatedBy: quoted).count == 2, "the example names \(quoted) once: \(text)")
        return (name, text.replacingOccurrences(of: quoted, with: "\"\(group)\""))
    }
}

/// A bus, a polkitd and the installed daemon (once a call activates it) of one
/// test; the installed state directory starts empty. `busPolicy` (a policy
/// file's text) replaces the installed policy file, to show what a machine with
/// another one does; `polkitRules` (file name to text, in /etc/polkit-1/rules.d)
/// replaces the default, doc/admin.md's example for `coveredUser`'s group.
///
/// The test that shows a problem on a machine with the old policy file:
///
///     let machine = try RealMachine(try SharedInstall.tree(), busPolicy: RealMachine.policyWithoutAgentRule)
///     let agent = try machine.agent(as: RealMachine.coveredUser)
///     let doctor = try machine.ctl("doctor", as: RealMachine.coveredUser)
final class RealMachine {
    /// In the rules file's group (uid 1, daemon, whose group is daemon).
    static let coveredUser: UInt32 = 1
    /// Not in it (uid 2, bin).
    static let otherUser: UInt32 = 2

    /// The shipped policy file before it had a rule for the agent interface:
    /// calls to the service only. Under dbus's system.conf, every prompt the
    /// daemon sends an agent is refused with AccessDenied.
    static let policyWithoutAgentRule = """
        <?xml version="1.0"?>
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
                "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
                <policy user="root">
                        <allow own="org.example.Permissions"/>
                        <allow send_destination="org.example.Permissions"/>
                        <allow receive_sender="org.example.Permissions"/>
                </policy>
                <policy context="default">
                        <allow send_destination="org.example.Permissions"/>
                        <allow receive_sender="org.example.Permissions"/>
                </policy>
        </busconfig>
        """

    /// The name of a user's primary group (the rules file names a group).
    static func groupName(of uid: UInt32) throws -> String {
        let user = try #require(getpwuid(uid), "no user \(uid)")
        let group = try #require(getgrgid(user.pointee.pw_gid), "no group for uid \(uid)")
        return String(cString: group.pointee.gr_name)
    }

    /// Whether the user database puts `uid` in `group` (what polkit's isInGroup reads).
    static func isMember(_ uid: UInt32, of group: String) throws -> Bool {
        let user = try #require(getpwuid(uid), "no user \(uid)")
        let name = String(cString: user.pointee.pw_name)
        let found = try run("/usr/bin/id", ["-Gn", name]).stdout.split(whereSeparator: \.isWhitespace)
        return found.contains { $0 == group }
    }

    let tree: InstalledTree
    let bus: InstalledBus
    let polkit: RealPolkit
    private let scratch: String

    /// `privateRun`: the machine's /run is a tmpfs of its own (for users' runtime
    /// directories and the connector's socket), not the test runner's.
    /// `unitCapabilities`: the daemon has what its installed unit's
    /// CapabilityBoundingSet= leaves it (the bus that activates it is bounded so).
    init(_ tree: InstalledTree, busPolicy: String? = nil, polkitRules: [String: String]? = nil,
         privateRun: Bool = false, unitCapabilities: Bool = false) throws {
        self.tree = tree
        let leftOver = Self.daemons(of: tree)
        guard leftOver.isEmpty else {
            throw HarnessError(description: "an installed daemon of an earlier test still runs: \(leftOver)")
        }
        try? FileManager.default.removeItem(atPath: tree.stateDirectory)
        scratch = try makeTemporaryDirectory("real-machine")
        var policy = tree.busPolicy
        if let busPolicy {
            policy = scratch + "/org.example.Permissions.conf"
            try busPolicy.write(toFile: policy, atomically: true, encoding: .utf8)
        }
        bus = try InstalledBus(type: "system", policy: policy,
                               alsoIncluding: ["/usr/share/dbus-1/system.d/org.freedesktop.PolicyKit1.conf"],
                               services: tree.activationDirectory, ownPIDNamespace: true, privateRun: privateRun,
                               boundingSet: unitCapabilities ? try Self.boundingSet(of: tree.daemonUnit) : nil)
        let rules: [String: String]
        if let polkitRules {
            rules = polkitRules
        } else {
            let example = try AdminGuide.sshRules(group: try Self.groupName(of: Self.coveredUser))
            rules = [example.name: example.text]
        }
        let bus = bus  // (the closure may not capture self before init is done)
        polkit = try RealPolkit(busAddress: bus.address, actions: [tree.polkitActions], rules: rules,
                                inside: { bus.inside($0) })
    }

    deinit {
        // SIGTERM, as systemd would, and wait: the next test empties the state directory.
        for pid in Self.daemons(of: tree) { Installing.stop(pid) }
        try? FileManager.default.removeItem(atPath: scratch)
    }

    /// The processes running the tree's installed daemon (found in /proc by executable).
    static func daemons(of tree: InstalledTree) -> [Int32] { processes(running: tree.daemon) }

    /// The processes running `executable` (found in /proc).
    static func processes(running executable: String) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).filter {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\($0)/exe")) == executable
        }
    }

    /// The test runner's environment with this machine's bus as the system bus:
    /// the clients find it as they find the real one.
    var environment: [String: String] {
        ProcessInfo.processInfo.environment.merging(["DBUS_SYSTEM_BUS_ADDRESS": bus.address]) { $1 }
    }

    /// `command` run to its end on the machine, as root or as `uid`.
    func runInside(_ command: [String], as uid: UInt32? = nil) throws -> CommandResult {
        let full = bus.inside(command, asUser: uid)
        return try run(full[0], Array(full.dropFirst()), environment: environment)
    }

    /// The installed permissionsctl (on the system bus), as root or as `uid`.
    func ctl(_ arguments: String..., as uid: UInt32? = nil) throws -> CommandResult {
        try runInside([tree.ctl] + arguments, as: uid)
    }

    /// busctl on the system bus, as root or as `uid`.
    func busctl(_ arguments: [String], as uid: UInt32? = nil) throws -> CommandResult {
        try runInside(["/usr/bin/busctl", "--system"] + arguments, as: uid)
    }

    /// A call of the service's interface, through busctl.
    func call(_ member: String, _ signatureAndArguments: String..., as uid: UInt32? = nil) throws -> CommandResult {
        try busctl(["call", "org.example.Permissions", "/org/example/Permissions", "org.example.Permissions", member]
                   + signatureAndArguments, as: uid)
    }

    /// A call of the bus daemon's interface, through busctl.
    func busDriver(_ member: String, _ signatureAndArguments: String..., as uid: UInt32? = nil) throws -> CommandResult {
        try busctl(["call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", member]
                   + signatureAndArguments, as: uid)
    }

    /// A program that keeps running on the machine, as `uid`.
    func start(_ command: [String], as uid: UInt32) throws -> RunningProgram {
        let full = bus.inside(command, asUser: uid)
        return try RunningProgram(full[0], Array(full.dropFirst()), environment: environment)
    }

    /// A unit's CapabilityBoundingSet= as `setpriv --bounding-set` takes it
    /// ("CAP_SYS_PTRACE CAP_DAC_READ_SEARCH" is "-all,+sys_ptrace,+dac_read_search").
    static func boundingSet(of unit: String) throws -> String {
        let text = try String(contentsOfFile: unit, encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("CapabilityBoundingSet=") },
                                "\(unit): no CapabilityBoundingSet=")
        let capabilities = line.dropFirst("CapabilityBoundingSet=".count).split(separator: " ")
        return (["-all"] + capabilities.map { "+" + $0.dropFirst("CAP_".count).lowercased() }).joined(separator: ",")
    }

    /// ROOT/UID in the machine's /run/user, 0700 and the user's, as logind makes it
    /// at login (a machine made with `privateRun`).
    func makeUserRuntimeDirectory(_ uid: UInt32) throws -> String {
        let directory = "/run/user/\(uid)"
        for command in [["/bin/mkdir", "-p", "-m", "0755", "/run/user"], ["/bin/mkdir", "-m", "0700", directory],
                        ["/bin/chown", "\(uid):\(uid)", directory]] {
            let r = try runInside(command)
            try #require(r.status == 0, "\(command): \(r.stderr)")
        }
        return directory
    }

    /// The uid systemd's DynamicUser= gives the connector here (any free one in its range).
    static let connectorUser: UInt32 = 61184

    /// The installed connector, started on the machine as systemd would start it from
    /// its installed units: its socket (ListenSequentialPacket=, root's, SocketMode=)
    /// made first and passed on the first connection (systemd-socket-activate, fd 3,
    /// LISTEN_FDS and LISTEN_PID), ExecStart= run as a user of its own with
    /// CAP_DAC_OVERRIDE alone, in its bounding and ambient sets, and no new privileges.
    /// Returns once the socket listens; its lines are systemd-socket-activate's and
    /// then its own (standard error).
    func startConnectorAsSystemdWould() throws -> RunningProgram {
        func setting(_ key: String, in file: String) throws -> String {
            let text = try String(contentsOfFile: file, encoding: .utf8)
            let line = try #require(text.split(separator: "\n").first { $0.hasPrefix(key + "=") }, "\(file): no \(key)=")
            return String(line.dropFirst(key.count + 1))
        }
        let socket = try setting("ListenSequentialPacket", in: tree.connectorSocket)
        let mode = try setting("SocketMode", in: tree.connectorSocket)
        let execStart = try setting("ExecStart", in: tree.connectorService).split(separator: " ").map(String.init)
        let capabilities = try Self.boundingSet(of: tree.connectorService)
        let ambient = try setting("AmbientCapabilities", in: tree.connectorService)
        let dynamicUser = try setting("DynamicUser", in: tree.connectorService)
        let noNewPrivileges = try setting("NoNewPrivileges", in: tree.connectorService)
        #expect(capabilities == "-all,+dac_override" && ambient == "CAP_DAC_OVERRIDE" && dynamicUser == "yes"
                && noNewPrivileges == "yes")
        let user = Self.connectorUser
        let command = bus.inside(["/usr/bin/systemd-socket-activate", "--seqpacket", "--listen", socket, "--",
                                  "/usr/bin/setpriv", "--reuid=\(user)", "--regid=\(user)", "--clear-groups",
                                  "--inh-caps=\(capabilities)", "--ambient-caps=\(capabilities)",
                                  "--bounding-set=\(capabilities)", "--no-new-privs"] + execStart)
        let connector = try RunningProgram(command[0], Array(command.dropFirst()), environment: ["PATH": "/usr/bin:/bin"],
                                           collectingErrors: true)
        _ = try connector.errors!.next { $0.hasPrefix("Listening on \(socket)") }
        let chmod = try runInside(["/bin/chmod", mode, socket])
        try #require(chmod.status == 0, "\(chmod.stderr)")
        return connector
    }

    /// `permissionsctl agent` as `uid`, once it says it is registered.
    func agent(as uid: UInt32) throws -> RunningProgram {
        let agent = try start([tree.ctl, "agent"], as: uid)
        _ = try agent.lines.next { $0.hasPrefix("Agent registered at ") }
        return agent
    }

    /// `permissionsctl monitor` (a subscription of the caller's user) as `uid`, once it listens.
    /// Returns once it has subscribed: the service is started first (D-Bus
    /// activation), since the monitor itself waits for it without starting it, and a
    /// change made before its Subscribe reached the daemon would not be heard.
    func monitor(as uid: UInt32) throws -> RunningProgram {
        let started = try busDriver("StartServiceByName", "su", "org.example.Permissions", "0")
        try #require(started.status == 0, "StartServiceByName: \(started.stderr)\n\(bus.log)")
        let monitor = try start([tree.ctl, "monitor"], as: uid)
        // With the service there, its first line carries the subscription's serial.
        _ = try monitor.lines.next { $0.hasPrefix("Monitoring") && $0.contains("(serial ") }
        return monitor
    }

    /// `Request(permission)` as `uid` through busctl (the app is /usr/bin/busctl),
    /// waiting in the background for the prompt's answer; killing it ends busctl.
    func request(_ permission: String, as uid: UInt32) throws -> BackgroundCommand {
        let full = bus.inside(["/usr/bin/busctl", "--system", "--timeout=60", "call", "org.example.Permissions",
                               "/org/example/Permissions", "org.example.Permissions", "Request", "sa{sv}",
                               permission, "0"], asUser: uid)
        return try BackgroundCommand(full[0], Array(full.dropFirst()), environment: environment)
    }

    /// The unique name of `uid`'s one connection made by a program called `process`.
    func uniqueName(ofUser uid: UInt32, process: String) throws -> String {
        let user = String(cString: try #require(getpwuid(uid), "no user \(uid)").pointee.pw_name)
        let listed = try busctl(["list", "--json=short"])
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]],
                                "busctl list: \(listed.stdout) \(listed.stderr)")
        let found = rows.filter {
            $0["user"] as? String == user && $0["process"] as? String == process && ($0["name"] as? String)?.first == ":"
        }
        try #require(found.count == 1, "not one connection of \(process) as \(user): \(listed.stdout)")
        return try #require(found[0]["name"] as? String)
    }

    /// The executable of process `pid` of the machine.
    func executable(of pid: Int32) throws -> String {
        try runInside(["/usr/bin/readlink", "/proc/\(pid)/exe"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The uid and process id (the machine's) of the service's owner (once activated).
    func serviceOwner() throws -> (uid: UInt32, pid: Int32) {
        let uid = try busDriver("GetConnectionUnixUser", "s", "org.example.Permissions")
        let pid = try busDriver("GetConnectionUnixProcessID", "s", "org.example.Permissions")
        let parsed = (UInt32(uid.stdout.dropFirst(2).trimmingCharacters(in: .whitespacesAndNewlines)),
                      Int32(pid.stdout.dropFirst(2).trimmingCharacters(in: .whitespacesAndNewlines)))
        guard let u = parsed.0, let p = parsed.1 else {
            throw HarnessError(description: "the service has no owner: \(uid.stderr) \(pid.stderr)\n\(bus.log)")
        }
        return (u, p)
    }
}
