package import PermissionsModel
internal import CPermissionsPlugin
internal import Glibc
internal import SystemPrimitives
internal import PermissionsSupport
internal import UserSockets

/// One plugin library: its descriptor, its private state, the `permissions_host`
/// struct handed to it, and what it last published.
///
/// Reading the file and plugin code (dlopen's constructors, the entry point, init,
/// configure, validate, fini) run only on `callQueue`, never on the daemon's queue,
/// so a plugin that blocks stalls itself, not the daemon: the host's watchdog then
/// gives up on it.
///
/// `@unchecked Sendable`: plugins call `log`/`publish` from any thread with
/// `host_data` pointing here. Those calls touch only `let` properties and `shared`,
/// which a Mutex guards. `file`, `state`, `host`, `handle`, `functions` and `started`
/// are touched only on `callQueue`; `info`, `latest` and `contentHash` only on the
/// daemon queue.
package final class LoadedPlugin: @unchecked Sendable {
    package let path: String
    package let name: String
    let callQueue: Queue
    let daemonQueue: Queue
    package internal(set) var info: PluginInfo {
        didSet { infoChanged?() }
    }
    /// Called (on the daemon queue) whenever `info` changes.
    var infoChanged: (() -> Void)?
    /// Snapshots published so far, by permission (daemon queue).
    package var latest: [String: Snapshot] = [:]
    /// Users' own snapshots published so far (publish_for_user), by permission and
    /// uid (daemon queue).
    package var latestForUser: [String: [UInt32: Snapshot]] = [:]
    /// The permissions it enforces through open_remote (ABI 1.3; daemon queue).
    package var enforced: Set<String> = []
    /// Called on the daemon queue when the plugin says a remote ended (remote_closed).
    var remoteClosed: ((LoadedPlugin, UInt64) -> Void)?

    /// The hash of the content it was loaded from (daemon queue).
    var contentHash: UInt64?
    /// Why it was given up before the daemon queue looked at its opening (its init,
    /// run ahead, misbehaved); applied then (daemon queue).
    var givenUpEarly: String?
    /// The stamp of the file `contentHash` was taken of, when it can be trusted.
    var fileStamp: FileStamp?

    // callQueue only
    /// What `read` read, until `open` maps it.
    private var file: PluginFile?
    var handle: UnsafeMutableRawPointer?
    /// The descriptor's functions, read once from it (the struct is the plugin's,
    /// of the size it declared: never copied whole).
    private var functions: (initialize: PluginInit, configure: PluginConfigure?, fini: PluginFini?,
                            validate: PluginConfigure?)?
    /// ABI 1.3's open_remote and remote_status, when the plugin has both (set in
    /// `open`, before init; read on callQueue, and by open_remote on its own queue
    /// through `shared.opener`).
    private var enforcement: (open: PluginOpenRemote, status: PluginRemoteStatus)?
    /// The open_remote calls under way: fini waits for them (they return in 1.5 s).
    let remoteCalls = Group()
    private var state: UnsafeMutableRawPointer?
    private var host: UnsafeMutablePointer<permissions_host>?
    /// init returned 0: fini is owed (callQueue only).
    private var started = false

    /// The permissions its descriptor declared, once `open` has read it; from any
    /// thread (`info` is the daemon queue's, and set there later).
    var declaredPermissions: Set<String> { shared.withLock { $0.declared } }

    /// What host calls from plugin threads share with the daemon.
    struct Shared {
        /// Permissions it declared (set once the descriptor was read).
        var declared: Set<String> = []
        /// No more host calls are accepted: fini ran, or the plugin was given up.
        var closed = false
        /// Why, when the plugin closed them itself by breaking the ABI.
        var closedBecause: String?
        /// Publications not yet applied, latest per permission and scope: a storm of
        /// them costs the daemon one apply per permission (and user), not one per
        /// publication.
        var pending: [PendingKey: Snapshot] = [:]
        var drainScheduled = false
        /// Flood detection: publications and log lines, each over its own second.
        var publications = OneSecondWindow()
        var logLines = OneSecondWindow()
        var suppressedLogs = 0
        /// During configure: the first error line it logged (.some(nil) until one comes).
        var configureReason: String??
        /// Remotes open_remote opened that have not ended (ABI 1.3).
        var remotes = Set<UInt64>()
        /// open_remote and the plugin's state, from init's success until host calls
        /// close: what an open_remote call may use.
        var opener: Opener?
        /// open_remote calls under way (those `remoteCalls` counts).
        var openCalls = 0
    }
    let shared = Locked(Shared())

    /// open_remote and the state init returned, for open_remote calls.
    /// `@unchecked Sendable`: the state is the plugin's opaque pointer, never
    /// dereferenced by the host; the ABI lets the host pass it to open_remote from
    /// its own threads (the header's THREADS and ENFORCEMENT), and fini, which
    /// frees it, waits for every such call (`remoteCalls`).
    struct Opener: @unchecked Sendable {
        let open: PluginOpenRemote
        let state: UnsafeMutableRawPointer?
    }
    /// Called on the daemon queue with the publications that arrived, each the
    /// latest of its permission and scope.
    var drain: ((LoadedPlugin, [Publication]) -> Void)?
    /// Called on the daemon queue when the plugin floods the host or breaks the ABI.
    var misbehaved: ((LoadedPlugin, String) -> Void)?

    static let maxPublicationsPerSecond = 1000
    static let maxLogLinesPerSecond = 50

    /// The host struct's `user_runtime_root` (see PluginHost.userRuntimeRoot).
    var userRuntimeRoot: String? { userSockets?.root }
    /// What connect_user_socket does; nil (and the field NULL) on a daemon that
    /// serves one user.
    let userSockets: UserSocketReach?
    /// Where its private copy is made (PluginHost.copyDirectory).
    let copyDirectory: String?

    init(path: String, name: String, daemonQueue: Queue, userSockets: UserSocketReach? = nil,
         copyDirectory: String? = nil) {
        self.path = path
        self.name = name
        self.daemonQueue = daemonQueue
        self.userSockets = userSockets
        self.copyDirectory = copyDirectory
        self.callQueue = Queue(label: "plugin.\(name)")
        self.info = PluginInfo(name: name, version: "", state: .loading, permissions: [], file: path)
    }

    // MARK: Plugin calls (on callQueue)

    /// Reads and checks the file (PluginFile): its content hash and stamp, or why
    /// not. The bytes are kept for `open`. `known`: the serving copy's, from this path.
    func read(known: (stamp: FileStamp, hash: UInt64)?) -> Result<(hash: UInt64, stamp: FileStamp?), PluginFile.Failure> {
        let slash = path.lastIndex(of: "/")!
        switch PluginFile.read(directory: String(path[..<slash]), name: String(path[path.index(after: slash)...]),
                               known: known, copyDirectory: copyDirectory) {
        case .failure(let failure): return .failure(failure)
        case .success(let file):
            self.file = file
            return .success((file.hash, file.stamp))
        }
    }

    /// Lets go of what `read` read, when it is not to be opened (its content is the
    /// copy already serving, or one refused before): a plugin file is megabytes.
    func discardRead() {
        file = nil
    }

    /// dlopen of what `read` read, the entry point and the descriptor's own checks.
    /// Returns the reason for rejecting the file, or nil.
    func open() -> String? {
        guard let file, let copy = file.copy else { return "not read" }
        self.file = nil  // mapped or refused: the copy is not needed here any more
        let handle: UnsafeMutableRawPointer
        switch Self.load(copy) {
        case .refused(let reason): return reason
        case .loaded(let loaded, let origin):
            handle = loaded
            logDebug("plugin \(path): mapped from \(origin)")
        }
        self.handle = handle
        guard let symbol = dlsym(handle, PERMISSIONS_PLUGIN_ENTRY) else {
            return "no entry symbol \(PERMISSIONS_PLUGIN_ENTRY)"
        }
        let entry = unsafeBitCast(symbol, to: permissions_plugin_entry_fn.self)
        guard let descriptor = entry() else { return "the entry point returned NULL" }
        // The first two fields only, until the size says the rest is there.
        let head = UnsafeRawPointer(descriptor)
        let version = head.loadUnaligned(as: UInt32.self)
        let size = head.loadUnaligned(fromByteOffset: 4, as: UInt32.self)
        guard version == PERMISSIONS_PLUGIN_ABI_VERSION else {
            return "ABI version \(version), this daemon supports \(PERMISSIONS_PLUGIN_ABI_VERSION)"
        }
        guard Int(size) >= V1Size.plugin else {
            return "descriptor of \(size) bytes is smaller than ABI 1's \(V1Size.plugin)"
        }
        // The v1 fields, and the later ones the declared size covers: a newer plugin's
        // appended fields mean nothing to this host.
        let d = PluginStruct<permissions_plugin>(base: head, size: Int(size))
        let declaredName = d[v1: \.name].map { String(cString: $0) } ?? ""
        guard declaredName == name else {
            return "it calls itself \"\(declaredName.escapedForMessage)\", the file name says \"\(name)\""
        }
        var permissions: [String] = []
        if var cursor = d[v1: \.permissions] {
            while let p = cursor.pointee {
                guard permissions.count < 256 else { return "more than 256 permissions" }
                permissions.append(String(cString: p))
                cursor += 1
            }
        }
        if let bad = permissions.first(where: { !Validate.isPermissionName($0) || Validate.reservedSections.contains($0) }) {
            return "invalid permission name \"\(bad.escapedForMessage)\""
        }
        guard let initialize = d[v1: \.`init`] else { return "the descriptor has no init function" }
        // ABI 1.1: only when the descriptor's size covers it.
        functions = (initialize, d[v1: \.configure], d[v1: \.fini], d[\.validate] ?? nil)
        // ABI 1.3: enforced permissions count only with both calls, and only its own.
        var enforced: Set<String> = []
        if let open = d[\.open_remote] ?? nil, let status = d[\.remote_status] ?? nil,
           var cursor = d[\.enforced] ?? nil {
            while let p = cursor.pointee, enforced.count < 256 {
                let name = String(cString: p)
                if permissions.contains(name) { enforced.insert(name) }
                cursor += 1
            }
            if !enforced.isEmpty { enforcement = (open, status) }
        }
        let pluginVersion = d[v1: \.version].map { String(cString: $0) } ?? ""
        let declared = permissions
        shared.withLock { $0.declared = Set(declared) }
        daemonQueue.async { [self, enforced] in
            info.version = pluginVersion
            info.permissions = declared
            self.enforced = enforced
        }
        return nil
    }

    /// Maps the private copy as a library (PrivateCopy: an unnamed file on a disk,
    /// or a sealed memfd), so that what was checked and hashed is what runs, and
    /// every load is a fresh object (its own copy of the code and static data, even
    /// for a file loaded before or a hard link to one).
    ///
    /// glibc finds an object it has loaded before by the name given to dlopen, and a
    /// library is never unloaded, so each name must be new: the copy stays open for
    /// the daemon's life, which keeps its number, and "/proc/self/fd/N", from being
    /// used again. One descriptor per library loaded, like the mapping itself.
    ///
    /// A copy on a disk that cannot be mapped is tried again from memory: a rule the
    /// daemon cannot see (a security module's, for files in the state directory)
    /// may forbid mapping it executable. A library that cannot be loaded at all is
    /// told by the second dlopen.
    static func load(_ copy: PrivateCopy) -> Mapping {
        guard let handle = dlopen("/proc/self/fd/\(copy.fd)", RTLD_NOW | RTLD_LOCAL) else {
            // Nothing was loaded under its name: the copy closes when dropped.
            let reason = "not a loadable library (\(dlerror().map { String(cString: $0) } ?? "dlopen failed"))"
            if copy.medium != .memory, let again = copy.inMemory() { return load(again) }
            return .refused(reason)
        }
        _ = copy.keep()
        return .loaded(handle, copy.origin)
    }

    enum Mapping {
        /// The library's handle, and where the copy it was mapped from lives (for the log).
        case loaded(UnsafeMutableRawPointer, String)
        case refused(String)
    }

    /// Calls init with a fresh host struct. The struct holds a reference to this
    /// object that is never released, like the library is never unloaded: a plugin
    /// thread that calls the host after fini must find it and be told -ESHUTDOWN.
    func start() -> Int32 {
        let host = UnsafeMutablePointer<permissions_host>.allocate(capacity: 1)
        host.initialize(to: permissions_host(
            abi_version: PERMISSIONS_PLUGIN_ABI_VERSION,
            struct_size: UInt32(MemoryLayout<permissions_host>.size),
            host_data: Unmanaged.passRetained(self).toOpaque(),
            log: hostLog,
            publish: hostPublish,
            // Never freed, like the struct itself: the plugin may keep the pointer until fini.
            user_runtime_root: userRuntimeRoot.map { UnsafePointer(strdup($0)!) },
            publish_for_user: hostPublishForUser,
            remote_closed: hostRemoteClosed,
            connect_user_socket: userSockets == nil ? nil : hostConnectUserSocket))
        self.host = host
        var newState: UnsafeMutableRawPointer? = nil
        let rc = functions!.initialize(host, &newState)
        state = newState
        started = rc == 0
        if started, let open = enforcement?.open {
            let opener = Opener(open: open, state: newState)
            shared.withLock { if !$0.closed { $0.opener = opener } }
        }
        return rc
    }

    static let outsideABI = "it published a snapshot outside the ABI"
    static let flooded = "it published more than \(maxPublicationsPerSecond) snapshots in a second"

    /// Host calls are closed: fini ran, or it was given up (any thread).
    var hostCallsClosed: Bool { shared.withLock { $0.closed } }

    /// Why it stopped taking host calls, when it broke the ABI (any thread).
    var closedBecause: String? { shared.withLock { $0.closedBecause } }

    /// init returned 0, fini has not run, and the plugin was not given up: it may
    /// be called (callQueue only; AheadCall).
    var takesCalls: Bool { started && !hostCallsClosed }

    /// configure, with the first error line the plugin logged during the call (its
    /// reason for a rejection, "FILE:LINE: …" by the ABI's convention).
    func configure(_ config: [ConfigEntry]) -> (rc: Int32, reason: String?) {
        shared.withLock { $0.configureReason = .some(nil) }
        let rc = callConfigure(config)
        let reason = shared.withLock { s -> String? in
            defer { s.configureReason = nil }
            return s.configureReason ?? nil
        }
        return (rc, reason)
    }

    private func callConfigure(_ config: [ConfigEntry]) -> Int32 {
        guard let configure = functions?.configure else { return 0 }
        return withConfig(config, problems: nil) { configure(state, $0) }
    }

    /// The problems the plugin's validate reports for `config`, which it does not
    /// apply; none for a plugin without validate (its configure checks) or not started.
    func validate(_ config: [ConfigEntry]) -> [String] {
        guard let validate = functions?.validate, started else { return [] }
        let problems = ProblemList()
        let rc = withConfig(config, problems: problems) { validate(state, $0) }
        let reported = problems.lines.withLock { $0 }
        if !reported.isEmpty { return reported }
        return rc == 0 ? [] : ["plugin \(name) rejected the configuration (\(errnoName(-rc)))"]
    }

    /// Lends `config`'s entries for this plugin (the sections named like it or one of
    /// its permissions) as a `permissions_config` for the length of `body`.
    private func withConfig(_ config: [ConfigEntry], problems: ProblemList?,
                            _ body: (UnsafePointer<permissions_config>) -> Int32) -> Int32 {
        let declared = shared.withLock { $0.declared }
        let relevant = config.filter { $0.section == name || declared.contains($0.section) }
        // Keep the C strings alive for the length of the call.
        let strings: [[UnsafeMutablePointer<CChar>]] = relevant.map { entry in
            [entry.section, entry.key, entry.value, entry.origin].map { (text: String) in strdup(text)! }
        }
        defer { strings.joined().forEach { free($0) } }
        let entries = strings.map { s in
            permissions_config_entry(section: UnsafePointer(s[0]), key: UnsafePointer(s[1]),
                                     value: UnsafePointer(s[2]), origin: UnsafePointer(s[3]))
        }
        return entries.withUnsafeBufferPointer { buffer in
            withExtendedLifetime(problems) {
                var c = permissions_config(abi_version: PERMISSIONS_PLUGIN_ABI_VERSION,
                                           struct_size: UInt32(MemoryLayout<permissions_config>.size),
                                           n_entries: UInt32(buffer.count), entries: buffer.baseAddress,
                                           problem_data: problems.map { Unmanaged.passUnretained($0).toOpaque() },
                                           problem: problems == nil ? nil : hostProblem)
                return body(&c)
            }
        }
    }

    /// open_remote (ABI 1.3), off callQueue (PluginHost.openRemote): a descriptor the caller owns, or a
    /// negative errno (-ENOTSUP from a plugin that enforces nothing, -ESHUTDOWN once
    /// it is stopping). fini waits for the calls under way (`remoteCalls`).
    func openRemote(id: UInt64, uid: UInt32, pid: UInt32, app: String, permission: String) -> Int32 {
        // Known before the call (the plugin may end it from its own thread at once),
        // and counted, both under the lock that closing takes: no call starts after.
        let entered = shared.withLock { s -> Opener?? in
            guard !s.closed, let opener = s.opener else { return .none }
            guard s.remotes.insert(id).inserted else { return .some(nil) }
            remoteCalls.enter()
            s.openCalls += 1
            return .some(opener)
        }
        guard let entered else { return -ENOTSUP }
        guard let opener = entered else { return -EEXIST }
        defer {
            shared.withLock { $0.openCalls -= 1 }
            remoteCalls.leave()
        }
        let fd = app.withCString { appPointer in
            permission.withCString { permissionPointer in
                var remote = permissions_remote(abi_version: PERMISSIONS_PLUGIN_ABI_VERSION,
                                                struct_size: UInt32(MemoryLayout<permissions_remote>.size),
                                                id: id, uid: uid, pid: pid, app_id: appPointer,
                                                permission: permissionPointer)
                return opener.open(opener.state, &remote)
            }
        }
        if fd < 0 { shared.withLock { _ = $0.remotes.remove(id) } }
        return fd
    }

    /// remote_status (ABI 1.3): remote `id`'s status is now `status`.
    func remoteStatus(id: UInt64, status: String) {
        guard let call = enforcement?.status, started else { return }
        status.withCString { call(state, id, $0) }
    }

    /// A plugin thread says remote `id` ended: handed to the daemon queue, unless
    /// host calls are closed (the host forgets a stopped plugin's remotes itself).
    func closeRemote(_ id: UInt64) {
        guard shared.withLock({ $0.closed ? false : $0.remotes.remove(id) != nil }) else { return }
        daemonQueue.async { [self] in remoteClosed?(self, id) }
    }

    /// How long a stop waits for the open_remote calls under way before it gives
    /// up on fini (the header's ENFORCEMENT): the stops at shutdown allow this on
    /// top of fini's own deadline when a call is under way (PluginHost.stopAll).
    static let openRemoteWaitSeconds = 2

    /// Whether an open_remote call is under way (any thread).
    var openRemoteCallsUnderWay: Bool { shared.withLock { $0.openCalls > 0 } }

    /// fini, after which the plugin must not call the host (and is ignored if it does).
    /// Returns false when fini was owed and not called: an open_remote still ran
    /// `openRemoteWaitSeconds` after the stop began. The header promises fini only
    /// once every open_remote has returned (fini frees what they use), so the
    /// plugin is left as it is, with whatever it handed out still connected (see
    /// PluginHost.retire).
    @discardableResult
    func stop() -> Bool {
        closeHostCalls()
        guard started else { return true }
        started = false
        // No open_remote starts any more; the host waits for those under way.
        if remoteCalls.wait(timeout: .now() + .seconds(Self.openRemoteWaitSeconds)) == .timedOut {
            Log.shared.log(.error, "plugin \(name): an open_remote still runs 2 s after its stop began; "
                           + "fini is not called, so that it frees nothing that call uses")
            return false
        }
        functions?.fini?(state)
        return true
    }

    /// Remotes it opened that have not ended (any thread).
    var openRemoteCount: Int { shared.withLock { $0.remotes.count } }

    /// From now on, host calls are ignored.
    /// Remotes still open end with it: nothing will narrow them any more (the
    /// plugin's fini disconnects them).
    func closeHostCalls() {
        let remotes = shared.withLock { s -> Set<UInt64> in
            s.closed = true
            s.pending = [:]
            s.opener = nil
            defer { s.remotes = [] }
            return s.remotes
        }
        if !remotes.isEmpty {
            daemonQueue.async { [self] in remotes.sorted().forEach { remoteClosed?(self, $0) } }
        }
    }

    // MARK: Host calls (any thread)

    /// Checks and copies a publication and queues it for the daemon.
    ///
    /// Copying reads the plugin's memory and takes as long as that does, so it is
    /// done outside the lock; whether the copy is taken is then decided once, under
    /// the lock, against `closed` as it is then. A publication that loses a race
    /// with `closeHostCalls` (fini, or the plugin given up) is refused with
    /// -ESHUTDOWN, never queued after the queue was emptied for good.
    /// `uid` nil: the machine-wide snapshot (publish); else that user's own
    /// (publish_for_user).
    func publish(_ s: UnsafePointer<permissions_snapshot>, uid: UInt32? = nil) -> Int32 {
        // Not needed for correctness: spares a closed plugin's publications the copy.
        guard let declared = shared.withLock({ $0.closed ? nil : $0.declared }) else { return -ESHUTDOWN }
        let copy = SnapshotReader.read(s, declared: declared, plugin: name)
        enum Outcome { case queued(scheduleDrain: Bool), closed, outsideABI, flooded }
        let outcome = shared.withLock { shared -> Outcome in
            if shared.closed { return .closed }
            guard let copy else {
                // Values outside the ABI: a plugin that sends them cannot be trusted with more.
                shared.closed = true
                shared.closedBecause = Self.outsideABI
                return .outsideABI
            }
            if shared.publications.count() > Self.maxPublicationsPerSecond {
                shared.closed = true
                shared.closedBecause = Self.flooded
                return .flooded
            }
            shared.pending[PendingKey(permission: copy.permission, uid: uid)] = copy
            defer { shared.drainScheduled = true }
            return .queued(scheduleDrain: !shared.drainScheduled)
        }
        switch outcome {
        case .closed:
            return -ESHUTDOWN
        case .outsideABI:
            daemonQueue.async { [self] in misbehaved?(self, Self.outsideABI) }
            return -EINVAL
        case .flooded:
            daemonQueue.async { [self] in
                misbehaved?(self, Self.flooded)
            }
            return -EBUSY
        case .queued(let scheduleDrain):
            if scheduleDrain {
                daemonQueue.async { [self] in
                    let batch = shared.withLock { s -> [Publication] in
                        defer {
                            s.pending = [:]
                            s.drainScheduled = false
                        }
                        return s.pending.map { Publication($0.value, scope: $0.key.uid.map { .user($0) } ?? .machine) }
                    }
                    if !batch.isEmpty { drain?(self, batch) }
                }
            }
            return 0
        }
    }

    /// connect_user_socket: -ESHUTDOWN once host calls are closed, as for publish.
    func connectUserSocket(uid: UInt32, name: String) -> Int32 {
        guard let userSockets else { return -ENOSYS }
        guard !shared.withLock({ $0.closed }) else { return -ESHUTDOWN }
        return userSockets.connect(uid: uid, name: name)
    }

    /// Logs a plugin's line, at most `maxLogLinesPerSecond` a second.
    func log(_ priority: Int32, _ message: String) {
        let (allowed, suppressed) = shared.withLock { s -> (Bool, Int) in
            if s.closed { return (false, 0) }  // after fini, or given up: ignored, as the header says
            guard s.logLines.count() <= Self.maxLogLinesPerSecond else {
                s.suppressedLogs += 1
                return (false, 0)
            }
            defer { s.suppressedLogs = 0 }
            return (true, s.suppressedLogs)
        }
        guard allowed else { return }
        if suppressed > 0 { Log.shared.log(.warning, "plugin \(name): \(suppressed) log lines suppressed (more than \(Self.maxLogLinesPerSecond) a second)") }
        if priority <= 3 {
            shared.withLock { s in if case .some(nil) = s.configureReason { s.configureReason = .some(message) } }
        }
        let level = Log.Priority(rawValue: min(max(priority, 3), 7)) ?? .info
        Log.shared.log(level, "plugin \(name): \(message.escapedForLog)")
    }
}

/// Counts events in the current one-second window (the window restarts with the
/// first event after a second has passed). Used under a lock.
struct OneSecondWindow {
    private var start: UInt64 = 0
    private var events = 0

    /// Records one event now; returns how many the window holds with it. The
    /// clock is read here, under the caller's lock, so windows never go backwards.
    mutating func count() -> Int {
        let now = monotonicNanoseconds()
        if now &- start > 1_000_000_000 {
            start = now
            events = 0
        }
        events += 1
        return events
    }
}

typealias PluginInit = @convention(c) (UnsafePointer<permissions_host>?,
                                       UnsafeMutablePointer<UnsafeMutableRawPointer?>?) -> Int32
typealias PluginConfigure = @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<permissions_config>?) -> Int32
typealias PluginFini = @convention(c) (UnsafeMutableRawPointer?) -> Void
typealias PluginOpenRemote = @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<permissions_remote>?) -> Int32
typealias PluginRemoteStatus = @convention(c) (UnsafeMutableRawPointer?, UInt64, UnsafePointer<CChar>?) -> Void

// The host functions of `struct permissions_host`. Plain functions so that they
// carry no actor isolation: plugins call them from their own threads.

private func plugin(_ data: UnsafeMutableRawPointer?) -> LoadedPlugin? {
    data.map { Unmanaged<LoadedPlugin>.fromOpaque($0).takeUnretainedValue() }
}

func hostLog(_ data: UnsafeMutableRawPointer?, _ priority: Int32, _ message: UnsafePointer<CChar>?) {
    guard let p = plugin(data), let message else { return }
    p.log(priority, String(cString: message))
}

/// What a plugin's validate reports, copied during the call. Locked: a plugin may
/// report from a thread of its own while validate runs.
final class ProblemList: Sendable {
    static let limit = 100
    let lines = Locked<[String]>([])
}

func hostProblem(_ data: UnsafeMutableRawPointer?, _ message: UnsafePointer<CChar>?) {
    guard let data, let message else { return }
    let list = Unmanaged<ProblemList>.fromOpaque(data).takeUnretainedValue()
    let line = String(cString: message)
    list.lines.withLock { if $0.count < ProblemList.limit { $0.append(line) } }
}

func hostPublish(_ data: UnsafeMutableRawPointer?, _ snapshot: UnsafePointer<permissions_snapshot>?) -> Int32 {
    guard let p = plugin(data), let snapshot else { return -EINVAL }
    return p.publish(snapshot)
}

func hostPublishForUser(_ data: UnsafeMutableRawPointer?, _ uid: UInt32,
                        _ snapshot: UnsafePointer<permissions_snapshot>?) -> Int32 {
    guard let p = plugin(data), let snapshot else { return -EINVAL }
    return p.publish(snapshot, uid: uid)
}

func hostRemoteClosed(_ data: UnsafeMutableRawPointer?, _ id: UInt64) {
    plugin(data)?.closeRemote(id)
}

func hostConnectUserSocket(_ data: UnsafeMutableRawPointer?, _ uid: UInt32, _ name: UnsafePointer<CChar>?) -> Int32 {
    guard let p = plugin(data), let name else { return -EINVAL }
    return p.connectUserSocket(uid: uid, name: String(cString: name))
}

/// One pending publication's place: a permission, machine-wide (uid nil) or one user's.
struct PendingKey: Hashable {
    let permission: String
    let uid: UInt32?
}
