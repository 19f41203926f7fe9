internal import PermissionsModel
internal import CGLib
internal import Glibc
internal import PermissionsSupport
internal import SystemPrimitives

/// Who a caller is, from its bus credentials.
package struct AppIdentity: Sendable, Equatable {
    package enum Kind: String, Sendable {
        /// From the sandbox's /.flatpak-info ([Application] name).
        case flatpak
        /// From the snap's AppArmor label (snap.<name>.<app>); the app id is "snap.<name>".
        case snap
        /// From a systemd app scope or service (XDG desktop spec naming).
        case systemdUnit = "systemd-unit"
        /// The caller's executable path, for a process in the host's mount namespace.
        case executable
        /// The path of the script an interpreter runs ([identity] interpreters=), read
        /// from its command line (ScriptPath.swift), for a process in the host's mount
        /// namespace. A convenience, not a boundary: any process of the user can put
        /// any path in its argv, so an admin's allow= never counts for it (deny= does).
        case script
        /// A process in a mount namespace of its own that is no recognised sandbox: its
        /// executable path names a file of that namespace, which may be any file it
        /// mounted there; or one whose executable has no links (deleted, or a memfd),
        /// whose path names no file. The app id is `unverified:<path>`, which `Validate.isAppID`
        /// refuses, so it never equals an id in `allow=`/`deny=`, an id a client can
        /// name in `SetDecision`, or a stored row of the real path.
        case unverified
    }

    /// What an unverified caller's app id starts with (before its executable path).
    package static let unverifiedPrefix = "unverified:"

    package var appID: String
    package var kind: Kind
    package var uid: UInt32
    package var pid: UInt32
    /// Why the caller is `unverified` (empty for every other kind): GetDiagnostics
    /// and `permissionsctl doctor` show it, since an admin cannot guess it.
    package var unverifiedReason = ""
    /// For a script: the interpreter's executable path (its id without the script).
    package var interpreter: String? = nil
}

/// Works out an app id from a process, reading `/proc` (or a stand-in tree for tests).
///
/// Order (doc/threat-model.md, "Who is the caller"): flatpak (`/proc/PID/root/.flatpak-info`, opened without
/// following a link); snap (AppArmor label `snap.<name>.<app>`, then the cgroup);
/// a systemd app scope or service named by the XDG desktop spec,
/// `app[-<launcher>]-<app id>-<random>.scope` or `app[-<launcher>]-<app id>[@<random>].service`;
/// then the executable path, or, for an interpreter, the script it runs. The first
/// kind that applies decides: a process that has a .flatpak-info with a bad name is
/// refused, never identified by a weaker kind; an app scope wins over a script.
///
/// Across users nothing can be borrowed (doc/threat-model.md):
/// - a .flatpak-info counts only with the instance flatpak set up for it, under the
///   caller's own runtime directory (`verifyFlatpakInstance`);
/// - an app scope or service counts only under the caller's own user manager,
///   `/user.slice/user-UID.slice/user@UID.service/`;
/// - the executable path counts only in the host's mount namespace (PID 1's, not the
///   daemon's, which a hardened unit makes private); elsewhere the caller is `unverified`.
///
/// PID reuse: the process's start time (/proc/PID/stat) is read before and after
/// the rest; if it changed, the PID now names another process and the caller is
/// refused. (The caller cache also checks that the connection still exists after
/// identification.)
package struct IdentityReader: Sendable {
    package var procRoot: String
    /// The process whose mount namespace is the host's (PID 1; tests name another
    /// where PID 1's cannot be read).
    package var hostPID: UInt32 = 1
    /// The host process's start time (/proc/PID/stat) when it was named, pinned by
    /// `pinHost`: a PID is reused once its process exits, and whoever gets it (any
    /// user, in a mount namespace of their own) must not become the host. Unpinned
    /// (nil), only the owner check below holds.
    package var hostStartTime: String?
    /// Where the users' runtime directories are (`/run/user/UID`).
    package var runtimeRoot = "/run/user"
    /// The executables whose callers are identified by their script ([identity] interpreters=).
    package var interpreters = Interpreters()
    /// Runs between the two reads of the start time; a seam for tests that replace
    /// the process in the middle of identification.
    var betweenReads: (@Sendable () -> Void)?

    package init(procRoot: String = "/proc") { self.procRoot = procRoot }

    package enum Failure: Error, Equatable {
        /// The process is gone, or its entries cannot be read.
        case unreadable(String)
        /// What it claims as an app id is not one.
        case invalid(String)
    }

    package func identify(pid: UInt32, uid: UInt32) -> Result<AppIdentity, Failure> {
        let base = "\(procRoot)/\(pid)"
        guard let started = startTime(base) else { return .failure(.unreadable("cannot read \(base)/stat")) }
        let result = identifyUnchecked(base: base, pid: pid, uid: uid)
        betweenReads?()
        guard startTime(base) == started else {
            return .failure(.unreadable("process \(pid) was replaced while it was being identified"))
        }
        return result
    }

    private func identifyUnchecked(base: String, pid: UInt32, uid: UInt32) -> Result<AppIdentity, Failure> {
        func found(_ id: String, _ kind: AppIdentity.Kind) -> Result<AppIdentity, Failure> {
            // Names from a sandbox or a unit are app names, never paths.
            guard Validate.isAppID(id), !id.hasPrefix("/") else { return .failure(.invalid(id)) }
            return .success(AppIdentity(appID: id, kind: kind, uid: uid, pid: pid))
        }
        switch flatpakInfo(base) {
        case .absent: break
        case .refused(let why): return .failure(.unreadable(why))
        case .present(let text):
            guard let name = Self.flatpakValue(text, "Application", "name") else {
                return .failure(.invalid("no [Application] name in .flatpak-info"))
            }
            // A .flatpak-info is a file anyone can put in a root of their own
            // (chroot in a user namespace): refused unless flatpak's own instance vouches.
            if Validate.isAppID(name), !name.hasPrefix("/"),
               let why = verifyFlatpakInstance(Self.flatpakValue(text, "Instance", "instance-id"), pid: pid, uid: uid) {
                return .failure(.unreadable(why))
            }
            return found(name, .flatpak)
        }
        let cgroup = Files.readText(base + "/cgroup", limit: 65536)
        if let label = Files.readText(base + "/attr/current", limit: 4096), let snap = Self.snapName(fromLabel: label) {
            return found("snap." + snap, .snap)
        }
        if let cgroup, let unit = Self.unitName(fromCgroup: cgroup, uid: uid) {
            if let snap = Self.snapName(fromUnit: unit) { return found("snap." + snap, .snap) }
            if let appID = Self.appID(fromUnit: unit) { return found(appID, .systemdUnit) }
        }
        guard var exe = Files.readLink(base + "/exe") else {
            return .failure(.unreadable("cannot read \(base)/exe"))
        }
        // An executable with no links names no file: one unlinked since it started,
        // which the kernel marks " (deleted)" (a package update, a program that
        // removed itself), or one that never had a name (a memfd, "/memfd:NAME
        // (deleted)"). Its path now names another file or none, so it tells nothing
        // of the app: the caller is unverified, under the path without the mark. A
        // file merely *named* "… (deleted)" has links, and keeps its name.
        let unlinked = linkCount(base + "/exe") == 0
        if unlinked, exe.hasSuffix(" (deleted)") { exe.removeLast(" (deleted)".count) }
        guard Validate.isAppID(exe), exe.hasPrefix("/") else { return .failure(.invalid(exe)) }
        if unlinked {
            return .success(AppIdentity(appID: AppIdentity.unverifiedPrefix + exe, kind: .unverified, uid: uid, pid: pid,
                                        unverifiedReason: "its executable has no name in any file system "
                                            + "(a memfd, or deleted since it started)"))
        }
        if let elsewhere = notInHostMountNamespace(base) {
            return .success(AppIdentity(appID: AppIdentity.unverifiedPrefix + exe, kind: .unverified, uid: uid, pid: pid,
                                        unverifiedReason: elsewhere))
        }
        if let script = scriptPath(base, executable: exe) {
            return .success(AppIdentity(appID: script, kind: .script, uid: uid, pid: pid, interpreter: exe))
        }
        return .success(AppIdentity(appID: exe, kind: .executable, uid: uid, pid: pid))
    }

    /// Whether the process shares the host's mount namespace, so that its executable
    /// path names the host's file. Fails closed: a namespace that cannot be read
    /// (either side) is not the host's.
    func inHostMountNamespace(_ base: String) -> Bool { notInHostMountNamespace(base) == nil }

    /// Why the process is not taken to be in the host's mount namespace, in words for
    /// an admin; nil when it is.
    func notInHostMountNamespace(_ base: String) -> String? {
        let host: String
        switch hostNamespace() {
        case .success(let link): host = link
        case .failure(let problem): return problem.text
        }
        guard let own = Files.readLink(base + "/ns/mnt") else {
            return "its mount namespace cannot be read (\(base)/ns/mnt: \(errnoName(errno)))"
        }
        return own == host ? nil : "its mount namespace (\(own)) is not the host's (PID \(hostPID)'s, \(host))"
    }

    /// The host's mount namespace cannot be read, or nil when it can: a container's
    /// PID 1 of another user, or a /proc mounted with hidepid. Every caller is then
    /// `unverified`; the daemon logs it at start-up and doctor reports it.
    package func hostNamespaceProblem() -> String? {
        if case .failure(let problem) = hostNamespace() { return problem.text }
        return nil
    }

    struct HostProblem: Error { let text: String }

    /// The host's mount namespace (its /proc link), if the host process can be
    /// trusted to be the one named: still the same process (its start time, when
    /// pinned), and root's or the daemon's own (a process of another user is no
    /// host, whatever its PID).
    func hostNamespace() -> Result<String, HostProblem> {
        let base = "\(procRoot)/\(hostPID)"
        guard let link = Files.readLink(base + "/ns/mnt") else {
            return .failure(HostProblem(text: Self.hostNamespaceUnreadable(hostPID: hostPID, errno: errno)))
        }
        var st = stat()
        guard stat(base, &st) == 0, st.st_uid == 0 || st.st_uid == getuid() else {
            return .failure(HostProblem(text: "the host's process (PID \(hostPID)) belongs to another user (uid "
                                        + "\(st.st_uid)), so no caller's executable path can be trusted; name root's "
                                        + "process or the daemon itself (--host-pid self)"))
        }
        if let pinned = hostStartTime, startTime(base) != pinned {
            return .failure(HostProblem(text: "the host's process (PID \(hostPID)) has exited since it was named, and "
                                        + "its PID may be another process's now, so no caller's executable path can be "
                                        + "trusted; restart the daemon with a live host process, or use --host-pid self"))
        }
        return .success(link)
    }

    /// Pins the host process named now (its start time), so that a process that later
    /// gets its PID is not taken for it.
    package mutating func pinHost() {
        hostStartTime = startTime("\(procRoot)/\(hostPID)")
    }

    static func hostNamespaceUnreadable(hostPID: UInt32, errno code: Int32) -> String {
        "the host's mount namespace cannot be read (/proc/\(hostPID)/ns/mnt: \(errnoName(code))), so no caller's "
            + "executable path can be trusted; in a container whose apps share the daemon's mount namespace, "
            + "set [identity] host-pid=self in the configuration (or run permissionsd --host-pid self)"
    }

    /// st_nlink of what a /proc/PID/exe link points at (the running file itself).
    func linkCount(_ path: String) -> Int? {
        var st = stat()
        return stat(path, &st) == 0 ? Int(st.st_nlink) : nil
    }

    /// Field 22 of /proc/PID/stat (start time in clock ticks since boot).
    func startTime(_ base: String) -> String? {
        ProcessStat.field(22, of: base + "/stat")
    }

    enum FlatpakInfo { case absent, present(String), refused(String) }

    /// Reads <root>/.flatpak-info through the process's own root directory, refusing
    /// a symbolic link (which could point out of the sandbox at a file the app chose).
    func flatpakInfo(_ base: String) -> FlatpakInfo {
        let root = open(base + "/root", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        // Only "no such process entry" may count as not sandboxed: a root we may not
        // open could hide a .flatpak-info, and must not pass for a host app.
        guard root >= 0 else {
            return errno == ENOENT ? .absent : .refused("cannot open the process's root: \(errnoName(errno))")
        }
        defer { close(root) }
        // O_NONBLOCK: a FIFO planted there must not block the daemon in open().
        let fd = openat(root, ".flatpak-info", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else {
            return errno == ENOENT ? .absent : .refused("cannot open .flatpak-info: \(errnoName(errno))")
        }
        defer { close(fd) }
        switch Files.contents(of: fd, limit: 65536) {
        case .success(let data): return .present(String(decoding: data, as: UTF8.self))
        case .failure(.notRegular): return .refused(".flatpak-info is not a file")
        case .failure(let error): return .refused("cannot read .flatpak-info: \(error)")
        }
    }

    /// A value of a .flatpak-info (`[Application] name=`, `[Instance] instance-id=`),
    /// through GLib's keyfile parser.
    static func flatpakValue(_ text: String, _ group: String, _ key: String) -> String? {
        let keyFile = g_key_file_new()
        defer { g_key_file_free(keyFile) }
        let loaded = text.withCString { g_key_file_load_from_data(keyFile, $0, gsize(strlen($0)), G_KEY_FILE_NONE, nil) }
        guard loaded != 0, let value = g_key_file_get_string(keyFile, group, key, nil) else { return nil }
        defer { g_free(value) }
        return String(cString: value)
    }

    /// The snap name in an AppArmor label "snap.<name>.<app> (enforce)".
    static func snapName(fromLabel label: String) -> String? {
        let profile = label.split(separator: " ").first.map(String.init) ?? ""
        let parts = profile.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count >= 3, parts[0] == "snap", !parts[1].isEmpty else { return nil }
        return String(parts[1])
    }

    /// The snap name in a unit "snap.<name>.<app>-<uuid>.scope".
    static func snapName(fromUnit unit: String) -> String? {
        guard unit.hasPrefix("snap."), unit.hasSuffix(".scope") else { return nil }
        let parts = unit.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count >= 4, !parts[1].isEmpty else { return nil }
        return String(parts[1])
    }

    /// The last path element of the unified (`0::`) cgroup line, when the cgroup is
    /// under the user manager of `uid`: only that manager (running as `uid`) names
    /// units there, whereas root, or anyone a subtree was delegated to, can make a
    /// cgroup called `app-gnome-org.victim.App-1.scope` anywhere else.
    static func unitName(fromCgroup text: String, uid: UInt32) -> String? {
        let manager = "/user.slice/user-\(uid).slice/user@\(uid).service/"
        for line in text.split(separator: "\n") where line.hasPrefix("0::") {
            let path = line.dropFirst(3)
            guard path.hasPrefix(manager) else { return nil }
            return path.split(separator: "/").last.map(String.init)
        }
        return nil
    }

    /// The app id in a systemd unit name that follows the XDG desktop spec, unescaped
    /// (`\x2d` is "-"); nil for any other unit.
    static func appID(fromUnit unit: String) -> String? {
        guard unit.hasPrefix("app-") else { return nil }
        var body = Substring(unit.dropFirst(4))
        if body.hasSuffix(".scope") {
            body = body.dropLast(6)
            guard let dash = body.lastIndex(of: "-") else { return nil }   // "-<random>"
            body = body[..<dash]
        } else if body.hasSuffix(".service") {
            body = body.dropLast(8)
            if let at = body.firstIndex(of: "@") { body = body[..<at] }
        } else {
            return nil
        }
        // An optional "<launcher>-" prefix; the app id's own dashes are escaped.
        if let dash = body.firstIndex(of: "-") { body = body[body.index(after: dash)...] }
        guard !body.isEmpty else { return nil }
        return unescape(String(body))
    }

    /// systemd's unit name escaping: `\xNN` for a byte.
    static func unescape(_ s: String) -> String {
        // Lenient: a backslash that begins no escape stands for itself.
        String(decoding: HexEscapes.decode(Array(s.utf8), strict: false) ?? Array(s.utf8), as: UTF8.self)
    }
}
