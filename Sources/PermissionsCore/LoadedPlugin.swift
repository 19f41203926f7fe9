internal import PluginKit
internal import CPermissionsPlugin
internal import Glibc
import Dispatch
import Synchronization

/// One plugin library: its descriptor, its private state, the `permissions_host`
/// struct handed to it, and what it last published.
///
/// Plugin code (dlopen's constructors, the entry point, init, configure, fini) runs
/// only on `callQueue`, never on the daemon's queue, so a plugin that blocks stalls
/// itself, not the daemon: the host's watchdog then gives up on it.
///
/// `@unchecked Sendable`: plugins call `log`/`publish` from any thread with
/// `host_data` pointing here. Those calls touch only `let` properties and `shared`,
/// which a Mutex guards. `state`, `host`, `handle` and `functions` are touched only on
/// `callQueue`; `info` and `latest` only on the daemon queue.
public final class LoadedPlugin: @unchecked Sendable {
    public let path: String
    public let name: String
    let callQueue: DispatchQueue
    let daemonQueue: DispatchQueue
    public internal(set) var info: PluginInfo {
        didSet { infoChanged?() }
    }
    /// Called (on the daemon queue) whenever `info` changes.
    var infoChanged: (() -> Void)?
    /// Snapshots published so far, by permission (daemon queue).
    var latest: [String: Snapshot] = [:]

    // callQueue only
    var handle: UnsafeMutableRawPointer?
    /// The descriptor's functions, read once from it (the struct is the plugin's,
    /// of the size it declared: never copied whole).
    private var functions: (initialize: PluginInit, configure: PluginConfigure?, fini: PluginFini?)?
    private var state: UnsafeMutableRawPointer?
    private var host: UnsafeMutablePointer<permissions_host>?
    /// init returned 0: fini is owed (callQueue only).
    private var started = false

    /// What host calls from plugin threads share with the daemon.
    struct Shared {
        /// Permissions it declared (set once the descriptor was read).
        var declared: Set<String> = []
        /// No more host calls are accepted: fini ran, or the plugin was given up.
        var closed = false
        /// Publications not yet applied, latest per permission: a storm of them
        /// costs the daemon one apply per permission, not one per publication.
        var pending: [String: Snapshot] = [:]
        var drainScheduled = false
        /// Flood detection: publications and log lines, each over its own second.
        var publications = OneSecondWindow()
        var logLines = OneSecondWindow()
        var suppressedLogs = 0
        /// During configure: the first error line it logged (.some(nil) until one comes).
        var configureReason: String??
    }
    let shared = Mutex(Shared())
    /// Called on the daemon queue with the permissions whose publications arrived.
    var drain: ((LoadedPlugin, [Snapshot]) -> Void)?
    /// Called on the daemon queue when the plugin floods the host or breaks the ABI.
    var misbehaved: ((LoadedPlugin, String) -> Void)?

    static let maxPublicationsPerSecond = 1000
    static let maxLogLinesPerSecond = 50

    init(path: String, name: String, daemonQueue: DispatchQueue) {
        self.path = path
        self.name = name
        self.daemonQueue = daemonQueue
        self.callQueue = DispatchQueue(label: "plugin.\(name)")
        self.info = PluginInfo(name: name, version: "", state: .loading, permissions: [], file: path)
    }

    // MARK: Plugin calls (on callQueue)

    /// dlopen, the entry point and the descriptor's own checks. Returns the reason
    /// for rejecting the file, or nil.
    func open() -> String? {
        // dlopen() of a FIFO blocks inside glibc's loader lock, which would freeze every
        // thread of the daemon: check first, without blocking, that the file is a
        // regular one. (Only whoever may write the plugin directory could swap it
        // between the check and dlopen, and that is root in production.)
        var st = stat()
        guard stat(path, &st) == 0 else { return "cannot open: \(String(cString: strerror(errno)))" }
        guard (st.st_mode & S_IFMT) == S_IFREG else { return "not a regular file" }
        // glibc hands back an object it has loaded before from the same path, and
        // plugins are never unloaded: a file replaced at a path used before is
        // loaded from a private copy, so that its new code runs.
        let firstTime = loadedPaths.withLock { $0.insert(path).inserted }
        let loadPath = firstTime ? path : Self.privateCopy(of: path, name: name)
        guard let loadPath else { return "cannot copy the replaced file to load it: \(String(cString: strerror(errno)))" }
        defer {  // the mapping outlives the name
            if loadPath != path {
                unlink(loadPath)
                rmdir(String(loadPath[..<loadPath.lastIndex(of: "/")!]))
            }
        }
        guard let handle = dlopen(loadPath, RTLD_NOW | RTLD_LOCAL) else {
            return "not a loadable library (\(dlerror().map { String(cString: $0) } ?? "dlopen failed"))"
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
        // Only the v1 fields: a newer plugin's appended ones mean nothing to this host.
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
        functions = (initialize, d[v1: \.configure], d[v1: \.fini])
        let pluginVersion = d[v1: \.version].map { String(cString: $0) } ?? ""
        let declared = permissions
        shared.withLock { $0.declared = Set(declared) }
        daemonQueue.async { [self] in
            info.version = pluginVersion
            info.permissions = declared
        }
        return nil
    }

    /// A copy of `path` under a name never used before, in a private directory.
    static func privateCopy(of path: String, name: String) -> String? {
        var template = Array("/tmp/permissionsd-plugin.XXXXXX".utf8CString)
        guard let dir = mkdtemp(&template).map({ String(cString: $0) }) else { return nil }
        let copy = dir + "/libpermissions-\(name).so"
        guard case .success(let bytes) = Files.contents(path, limit: 256 << 20) else { rmdir(dir); return nil }
        let fd = Glibc.open(copy, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { rmdir(dir); return nil }
        defer { close(fd) }
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == bytes.count else { unlink(copy); rmdir(dir); return nil }
        return copy
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
            publish: hostPublish))
        self.host = host
        var newState: UnsafeMutableRawPointer? = nil
        let rc = functions!.initialize(host, &newState)
        state = newState
        started = rc == 0
        return rc
    }

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
            var c = permissions_config(abi_version: PERMISSIONS_PLUGIN_ABI_VERSION,
                                       struct_size: UInt32(MemoryLayout<permissions_config>.size),
                                       n_entries: UInt32(buffer.count), entries: buffer.baseAddress)
            return configure(state, &c)
        }
    }

    /// fini, after which the plugin must not call the host (and is ignored if it does).
    func stop() {
        closeHostCalls()
        guard started else { return }
        started = false
        functions?.fini?(state)
    }

    /// From now on, host calls are ignored.
    func closeHostCalls() {
        shared.withLock {
            $0.closed = true
            $0.pending = [:]
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
    func publish(_ s: UnsafePointer<permissions_snapshot>) -> Int32 {
        // Not needed for correctness: spares a closed plugin's publications the copy.
        guard let declared = shared.withLock({ $0.closed ? nil : $0.declared }) else { return -ESHUTDOWN }
        let copy = SnapshotReader.read(s, declared: declared, plugin: name)
        enum Outcome { case queued(scheduleDrain: Bool), closed, outsideABI, flooded }
        let outcome = shared.withLock { shared -> Outcome in
            if shared.closed { return .closed }
            guard let copy else {
                // Values outside the ABI: a plugin that sends them cannot be trusted with more.
                shared.closed = true
                return .outsideABI
            }
            if shared.publications.count() > Self.maxPublicationsPerSecond {
                shared.closed = true
                return .flooded
            }
            shared.pending[copy.permission] = copy
            defer { shared.drainScheduled = true }
            return .queued(scheduleDrain: !shared.drainScheduled)
        }
        switch outcome {
        case .closed:
            return -ESHUTDOWN
        case .outsideABI:
            daemonQueue.async { [self] in misbehaved?(self, "it published a snapshot outside the ABI") }
            return -EINVAL
        case .flooded:
            daemonQueue.async { [self] in
                misbehaved?(self, "it published more than \(Self.maxPublicationsPerSecond) snapshots in a second")
            }
            return -EBUSY
        case .queued(let scheduleDrain):
            if scheduleDrain {
                daemonQueue.async { [self] in
                    let batch = shared.withLock { s -> [Snapshot] in
                        defer {
                            s.pending = [:]
                            s.drainScheduled = false
                        }
                        return Array(s.pending.values)
                    }
                    if !batch.isEmpty { drain?(self, batch) }
                }
            }
            return 0
        }
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

/// Every plugin path dlopen has been given (see LoadedPlugin.open).
private let loadedPaths = Mutex(Set<String>())

func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

// The host functions of `struct permissions_host`. Plain functions so that they
// carry no actor isolation: plugins call them from their own threads.

private func plugin(_ data: UnsafeMutableRawPointer?) -> LoadedPlugin? {
    data.map { Unmanaged<LoadedPlugin>.fromOpaque($0).takeUnretainedValue() }
}

func hostLog(_ data: UnsafeMutableRawPointer?, _ priority: Int32, _ message: UnsafePointer<CChar>?) {
    guard let p = plugin(data), let message else { return }
    p.log(priority, String(cString: message))
}

func hostPublish(_ data: UnsafeMutableRawPointer?, _ snapshot: UnsafePointer<permissions_snapshot>?) -> Int32 {
    guard let p = plugin(data), let snapshot else { return -EINVAL }
    return p.publish(snapshot)
}
