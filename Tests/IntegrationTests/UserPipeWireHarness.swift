import Foundation
import Testing
import PermissionsTestSupport

// Each user's own PipeWire, as on a system with many users: a runtime root like
// /run/user (mode 0755, root's) holding ROOT/UID (mode 0700, the user's), and a
// private PipeWire started as that uid with ROOT/UID as its XDG_RUNTIME_DIR, so
// that its socket ROOT/UID/pipewire-0 is the user's, as logind and systemd make it.

/// A runtime root for users' runtime directories, removed with the object.
final class TestRuntimeRoot {
    let path: String
    private(set) var pipewires: [UInt32: UserPipeWire] = [:]

    init() throws {
        path = try makeTemporaryDirectory("user-runtime")
        guard chmod(path, 0o755) == 0 else { throw HarnessError(description: "chmod \(path) failed") }
    }

    /// ROOT/UID, 0700 and the user's: what logind makes at login.
    @discardableResult
    func makeUserDirectory(_ uid: UInt32) throws -> String {
        let dir = path + "/\(uid)"
        guard mkdir(dir, 0o700) == 0, chown(dir, uid, uid) == 0 else {
            throw HarnessError(description: "mkdir/chown \(dir): \(String(cString: strerror(errno)))")
        }
        return dir
    }

    /// The user logs out: their PipeWire stops and the directory goes.
    func removeUserDirectory(_ uid: UInt32) throws {
        pipewires[uid]?.kill()
        pipewires[uid] = nil
        try FileManager.default.removeItem(atPath: path + "/\(uid)")
    }

    /// Starts user `uid`'s PipeWire (making their directory if needed).
    @discardableResult
    func startPipeWire(_ uid: UInt32) throws -> UserPipeWire {
        if !FileManager.default.fileExists(atPath: path + "/\(uid)") { try makeUserDirectory(uid) }
        let pipewire = pipewires[uid] ?? UserPipeWire(uid: uid, runtimeDirectory: path + "/\(uid)")
        try pipewire.start()
        pipewires[uid] = pipewire
        return pipewire
    }

    deinit {
        for pipewire in pipewires.values { pipewire.kill() }
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// One user's PipeWire, running as that user; with `inside`, each of its commands
/// wrapped by it (run among a machine's processes: InstalledBus.inside).
final class UserPipeWire {
    let uid: UInt32
    let runtimeDirectory: String
    private let inside: ([String]) -> [String]
    private var process: Process?

    init(uid: UInt32, runtimeDirectory: String, inside: @escaping ([String]) -> [String] = { $0 }) {
        self.uid = uid
        self.runtimeDirectory = runtimeDirectory
        self.inside = inside
    }

    /// The user's environment for PipeWire and its tools.
    private var environment: [String: String] {
        var environment = environmentWithoutPipeWire()
        environment["XDG_RUNTIME_DIR"] = runtimeDirectory
        environment["HOME"] = runtimeDirectory
        return environment
    }

    /// `executable` run as the user: the whole command.
    private func asUser(_ executable: String) -> [String] {
        inside(["/usr/bin/setpriv", "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", executable])
    }

    /// Starts PipeWire as the user and returns once it listens (its own log line).
    func start() throws {
        precondition(process == nil, "PipeWire already running")
        process = try TestPipeWire.launch(asUser("/usr/bin/pipewire") + ["-c", TestPipeWire.config],
                                          environment: environment, what: "user \(uid)'s PipeWire listening")
    }

    /// The running PipeWire's process id (with `inside`, nsenter's).
    var pid: Int32? { process?.processIdentifier }

    /// SIGKILL, as a crash: the stale socket stays behind. To its process group
    /// (Process makes the child a group's leader, and setpriv and nsenter keep it):
    /// with `inside`, PipeWire is nsenter's child, which would outlive nsenter (its
    /// parent-death signal went with its change of user) and, holding what Process
    /// watches for the end, keep waitUntilExit waiting.
    func kill() {
        guard let process else { return }
        Glibc.kill(-process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        self.process = nil
    }

    func pwCli(_ arguments: [String]) throws {
        let command = asUser("/usr/bin/pw-cli") + arguments
        let r = try run(command[0], Array(command.dropFirst()), environment: environment)
        guard r.status == 0, r.stderr.isEmpty else {
            throw HarnessError(description: "pw-cli as \(uid) \(arguments.joined(separator: " ")): \(r.status) \(r.stderr)")
        }
    }

    /// `pw-cli ls TYPE` as the user (an unrestricted client): every object of the type.
    func list(_ type: String) throws -> String {
        let r = try run("/usr/bin/setpriv", asUser("/usr/bin/pw-cli") + ["ls", type], environment: environment)
        guard r.status == 0 else { throw HarnessError(description: "pw-cli ls \(type) as \(uid): \(r.stderr)") }
        return r.stdout
    }

    func addCamera(_ name: String) throws {
        try pwCli(["create-node", "adapter", "{ factory.name=videotestsrc node.name=\(name) "
                   + "node.description=\"Fake Camera \(name)\" media.class=Video/Source object.linger=true }"])
    }

    func addMicrophone(_ name: String) throws {
        try pwCli(["create-node", "adapter", "{ factory.name=support.null-audio-sink node.name=\(name) "
                   + "node.description=\"Fake Mic \(name)\" media.class=Audio/Source audio.position=[MONO] "
                   + "object.linger=true }"])
    }

    func removeNode(_ name: String) throws {
        try pwCli(["destroy", name])
    }

    /// pw-dump as the user: every object of their PipeWire, as pw-dump's JSON.
    func dump() throws -> [[String: Any]] {
        let r = try run("/usr/bin/setpriv", asUser("/usr/bin/pw-dump") + ["-N"], environment: environment)
        guard r.status == 0, let objects = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]]
        else { throw HarnessError(description: "pw-dump as \(uid): \(r.status) \(r.stderr)") }
        return objects
    }

    /// The id of the object of `type` ("Client", "Node", "Link") whose property
    /// `key` is `value`, from pw-dump (which writes numeric values as numbers).
    func objectID(_ type: String, _ key: String, _ value: String) throws -> UInt32 {
        let match = try dump().first { object in
            let props = (object["info"] as? [String: Any])?["props"] as? [String: Any]
            return object["type"] as? String == "PipeWire:Interface:" + type && props?[key].map { "\($0)" } == value
        }
        guard let id = match?["id"] as? Int else { throw HarnessError(description: "no \(type) with \(key)=\(value)") }
        return UInt32(id)
    }

    /// An app of the user's (Tests/testenv/pwremote) connected to this PipeWire by
    /// itself, with `access` as its pipewire.access (nil: none, so unrestricted).
    func app(access: String? = nil) throws -> RunningProgram {
        try RunningProgram(try PWRemoteTool.path(),
                           ["--socket", runtimeDirectory + "/pipewire-0"] + (access.map { ["--access", $0] } ?? []),
                           asUser: uid, environment: environment, collectingErrors: true)
    }

    /// Sets a client's permissions on one object (-1: its default) as a manager
    /// does (pw-cli permissions, bits in octal: R 0400, W 0200, X 0100, M 0010).
    func setPermissions(client: UInt32, object: Int64, _ octal: String) throws {
        try pwCli(["--", "permissions", "\(client)", "\(object)", octal])
    }

    deinit { kill() }
}
