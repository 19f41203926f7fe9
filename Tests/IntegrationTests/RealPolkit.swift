import Foundation
import PermissionsTestSupport

/// The machine's own polkitd (Debian's /usr/lib/polkit-1/polkitd) serving a test
/// bus, with the test's actions and rules. It starts as root and drops to the
/// polkitd user; it reads its actions from /usr/share/polkit-1/actions and its
/// rules from /etc/polkit-1/rules.d and /usr/share/polkit-1/rules.d, so it runs in
/// a mount namespace of its own (`unshare --mount --propagation private`) where
/// those three are bind mounts of this object's directories: the host's are never
/// read or touched. It reaches the bus through DBUS_SYSTEM_BUS_ADDRESS. `inside`
/// puts it among a machine's processes (InstalledBus.inside): polkit reads its
/// subjects' /proc/PID, which must be the PIDs the bus gives it.
///
/// Without logind (the test machines have none) a subject has no session: polkit
/// applies each action's `allow_any`, as it does for an SSH login.
final class RealPolkit {
    static let executable = "/usr/lib/polkit-1/polkitd"
    /// polkit's own default rules (the admin rule), shipped with polkitd: a real
    /// machine has them beside the administrator's.
    static let defaultRules = "/usr/share/polkit-1/rules.d/50-default.rules"

    let directory: String
    private let process = Process()
    /// polkitd's process id (here): `process`, or the child nsenter forked.
    private var daemonPID: Int32 = 0

    /// `actions`: .policy files to copy; `rules`: file name to text, for
    /// /etc/polkit-1/rules.d.
    init(busAddress: String, actions: [String], rules: [String: String],
         inside: ([String]) -> [String] = { $0 }) throws {
        directory = try makeTemporaryDirectory("real-polkit")
        let fm = FileManager.default
        // polkitd reads them as the polkitd user.
        for sub in ["actions", "etc-rules.d", "share-rules.d"] {
            try fm.createDirectory(atPath: directory + "/" + sub, withIntermediateDirectories: false,
                                   attributes: [.posixPermissions: 0o755])
        }
        for file in actions {
            let copy = directory + "/actions/" + URL(fileURLWithPath: file).lastPathComponent
            try fm.copyItem(atPath: file, toPath: copy)
            chmod(copy, 0o644)
        }
        for (name, text) in rules {
            try text.write(toFile: directory + "/etc-rules.d/" + name, atomically: true, encoding: .utf8)
            chmod(directory + "/etc-rules.d/" + name, 0o644)
        }
        if fm.fileExists(atPath: Self.defaultRules) {
            try fm.copyItem(atPath: Self.defaultRules, toPath: directory + "/share-rules.d/50-default.rules")
            chmod(directory + "/share-rules.d/50-default.rules", 0o644)
        }
        let command = inside(["/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
                              """
                              mount --bind "$1/actions" /usr/share/polkit-1/actions &&
                              mount --bind "$1/share-rules.d" /usr/share/polkit-1/rules.d &&
                              mount --bind "$1/etc-rules.d" /etc/polkit-1/rules.d &&
                              exec "$2"
                              """, "sh", directory, Self.executable])
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        process.environment = ProcessInfo.processInfo.environment.merging(["DBUS_SYSTEM_BUS_ADDRESS": busAddress]) { $1 }
        let log = directory + "/polkitd.log"
        _ = fm.createFile(atPath: log, contents: nil)
        process.standardOutput = FileHandle(forWritingAtPath: log)
        process.standardError = FileHandle(forWritingAtPath: log)
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // It owns its name once its rules are loaded.
        let waited = try run("/usr/bin/gdbus", ["wait", "--system", "--timeout", "20", "org.freedesktop.PolicyKit1"],
                             environment: process.environment)
        guard waited.status == 0, process.isRunning else {
            throw HarnessError(description: "polkitd did not come up: \(waited.stderr)\n\(self.log)")
        }
        // unshare, sh and polkitd are one process (each execs the next); nsenter forks it.
        daemonPID = Installing.children(of: process.processIdentifier).first ?? process.processIdentifier
    }

    /// What polkitd printed (its rules' polkit.log lines too).
    var log: String { (try? String(contentsOfFile: directory + "/polkitd.log", encoding: .utf8)) ?? "" }

    deinit {
        // Its mount namespace goes with it. (It runs as polkitd: a parent-death
        // signal would not survive that, so it is killed by its own id.)
        if daemonPID != 0 { kill(daemonPID, SIGKILL) }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
