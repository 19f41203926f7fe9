// What the PipeWire benchmarks (pipewire, enforcement) share: a headless PipeWire
// of their own, and a client of it on a thread loop that stamps its registry's
// events on a timeline.
import CPipeWire
import CPipeWireShims
import Foundation
import PermissionsTestSupport
import SystemPrimitives

// MARK: Options

/// The options of the PipeWire benches: --cycles N (N > 0), --interval-ms MS (the
/// pause that paces the cycles), --pipewire-config FILE (Tests/testenv's minimal
/// config by default), --smoke (3 cycles, no pause, judged by nothing); -h/--help
/// prints `usage`, anything else fails the bench with it.
struct PipeWireOptions {
    var cycles: Int
    var intervalMilliseconds: Int
    var config = packageRoot + "/Tests/testenv/pipewire-test.conf"
    var smoke = false

    init(_ arguments: [String], cycles: Int, intervalMilliseconds: Int, usage: String) {
        (self.cycles, self.intervalMilliseconds) = (cycles, intervalMilliseconds)
        var rest = arguments[...]
        while let option = rest.popFirst() {
            switch (option, rest.first) {
            case ("--cycles", let value?) where Int(value).map({ $0 > 0 }) == true:
                self.cycles = Int(value)!
                rest.removeFirst()
            case ("--interval-ms", let value?) where Int(value).map({ $0 >= 0 }) == true:
                self.intervalMilliseconds = Int(value)!
                rest.removeFirst()
            case ("--smoke", _):
                (smoke, self.cycles, self.intervalMilliseconds) = (true, 3, 0)
            case ("--pipewire-config", let value?):
                config = value
                rest.removeFirst()
            case ("-h", _), ("--help", _):
                print(usage)
                exit(0)
            default:
                fail(usage, code: 2)
            }
        }
    }
}

// MARK: The processes

/// What a PipeWire bench runs on: in a fresh run directory, a private bus, a
/// headless PipeWire with its socket in run/, an unrestricted client of it
/// (`devices`, which makes the fake devices), and, once `startDaemon` is called,
/// permissionsd with only the build's PipeWire plugin, following that PipeWire as
/// the single user's (the one its environment names). Used from the main thread.
final class PipeWireRig {
    let root: String
    let bus: TestBus
    let devices: BenchPipeWire
    /// PipeWire's socket, and the XDG_RUNTIME_DIR permissionsd is given.
    let runtimeDirectory: String
    private var daemon: Child?

    init(config: String, timeline: PWTimeline) {
        root = makeRunDirectory()
        runtimeDirectory = root + "/run"
        makeDaemonDirectories(root, plugin: "pipewire", extra: ["run"])
        bus = startBus()
        startPipeWireDaemon(config: config, runtimeDirectory: runtimeDirectory)
        devices = BenchPipeWire(runtimeDirectory: runtimeDirectory, timeline: timeline)
    }

    /// Starts permissionsd and waits until it owns its name.
    func startPermissionsd() {
        daemon = startDaemon(root: root, address: bus.address, environment: ["XDG_RUNTIME_DIR": runtimeDirectory])
    }

    /// The client closed, permissionsd stopped by SIGTERM (its plugin's fini runs),
    /// then every other process, the bus last. The bench closes its own
    /// connections first.
    func tearDown() {
        devices.close()
        daemon?.kill(SIGTERM)
        Children.shared.killAll()
        bus.kill()
    }
}

// MARK: What happened, when

/// Registry events and signals with their times, from several threads.
enum PWEvent {
    case appeared(name: String, id: UInt32, at: UInt64)
    case removed(id: UInt32, at: UInt64)
    case signal(permission: String, status: String, at: UInt64)
}

typealias PWTimeline = Timeline<PWEvent>

extension Timeline where Event == PWEvent {
    /// The first matching event from `from` on, within 5 s, or the bench fails
    /// (outside the timeline's lock).
    func first<T>(from: Int, _ what: String, _ match: (Event) -> T?) -> T {
        guard let found = first(from: from, timeout: 5, match) else { fail("no \(what) within 5 s") }
        return found
    }
}

// MARK: The PipeWire daemon

/// Starts PipeWire with `config`, its socket in `runtimeDirectory`, and waits until
/// it listens: it prints "Listening on" (protocol-native, info level) after listen(2).
/// With `uid`, PipeWire runs as that user (setpriv), as a logged-in user's does.
@discardableResult
func startPipeWireDaemon(config: String, runtimeDirectory: String, uid: UInt32? = nil) -> Child {
    guard FileManager.default.fileExists(atPath: config) else {
        fail("no PipeWire config at \(config) (--pipewire-config FILE)")
    }
    let err = ChildPipe()
    let asUser = uid.map { ["--reuid=\($0)", "--regid=\($0)", "--clear-groups", "/usr/bin/pipewire"] } ?? []
    let spec = SpawnSpec(uid == nil ? "/usr/bin/pipewire" : "/usr/bin/setpriv", asUser + ["-c", config],
                         environment: ["XDG_RUNTIME_DIR": runtimeDirectory, "PIPEWIRE_DEBUG": "2,mod.protocol-native:3"],
                         removing: ["PIPEWIRE_"])
    spec.stderrFD = err.write
    let (child, _) = spec.spawn()
    close(err.write)
    waitForLine(err.read, containing: "Listening on", what: "PipeWire")
    return child
}

/// Reads `fd` line by line on a thread of its own, for as long as it is open (a
/// child blocked on a full pipe would skew the measurement); returns once a line
/// contains `marker`, or fails the bench after 10 s.
private func waitForLine(_ fd: Int32, containing marker: String, what: String) {
    let found = Semaphore(value: 0)
    Thread.detachNewThread {
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        var pending = Data()
        var signalled = false
        while case let chunk = handle.availableData, !chunk.isEmpty {
            guard !signalled else { continue }
            pending.append(chunk)
            while let nl = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: pending[pending.startIndex..<nl], as: UTF8.self)
                pending.removeSubrange(pending.startIndex...nl)
                if !signalled, line.contains(marker) {
                    signalled = true
                    found.signal()
                }
            }
        }
    }
    guard found.wait(timeout: .now() + 10) == .success else { fail("\(what) did not start") }
}

// MARK: A client

/// A PipeWire connection on a thread loop of its own, whose registry's events
/// (nodes appearing by name, any global going) are stamped on `timeline`; it can
/// create fake devices (owned by this client, so destroying the proxy removes the
/// node).
///
/// Threads: the PipeWire objects are only used under the thread loop's lock
/// (callbacks run with it held) or after the thread has stopped; the callbacks
/// touch only `timeline`, which has a lock of its own.
final class BenchPipeWire {
    let timeline: PWTimeline
    private let threadLoop: OpaquePointer
    private let context: OpaquePointer
    private let core: OpaquePointer
    private let registry: OpaquePointer
    private let hook = UnsafeMutablePointer<spa_hook>.allocate(capacity: 1)
    private let events = UnsafeMutablePointer<pw_registry_events>.allocate(capacity: 1)

    /// An unrestricted client of the PipeWire whose socket is in `runtimeDirectory`.
    convenience init(runtimeDirectory: String, timeline: PWTimeline) {
        setenv("XDG_RUNTIME_DIR", runtimeDirectory, 1)
        unsetenv("PIPEWIRE_REMOTE")
        unsetenv("PIPEWIRE_RUNTIME_DIR")
        self.init(name: "bench-pw", timeline: timeline) { context in
            guard let core = pw_context_connect(context, nil, 0) else {
                fail("cannot connect to the bench's PipeWire: \(String(cString: strerror(errno)))")
            }
            return core
        }
    }

    /// A client over `descriptor`, a socket already connected to a PipeWire (one
    /// OpenPipeWireRemote handed out): PipeWire owns it from now on, and closes it
    /// at the disconnect.
    convenience init(descriptor: Int32, timeline: PWTimeline) {
        self.init(name: "bench-app", timeline: timeline) { context in
            guard let core = pw_context_connect_fd(context, descriptor, nil, 0) else {
                fail("cannot connect over the descriptor: \(String(cString: strerror(errno)))")
            }
            return core
        }
    }

    private init(name: String, timeline: PWTimeline, connect: (OpaquePointer) -> OpaquePointer) {
        self.timeline = timeline
        pw_init(nil, nil)
        threadLoop = pw_thread_loop_new(name, nil)!
        context = pw_context_new(pw_thread_loop_get_loop(threadLoop), nil, 0)!
        core = connect(context)
        registry = pw_core_get_registry(core, UInt32(PW_VERSION_REGISTRY), 0)
        hook.initialize(to: spa_hook())
        var e = pw_registry_events()
        e.version = UInt32(PW_VERSION_REGISTRY_EVENTS)
        e.global = benchRegistryGlobal
        e.global_remove = benchRegistryGlobalRemove
        events.initialize(to: e)
        _ = cpw_registry_add_listener(registry, hook, events, Unmanaged.passUnretained(self).toOpaque())
        _ = pw_thread_loop_start(threadLoop)
    }

    /// Creates a camera (videotestsrc) or microphone (null audio sink) node; the
    /// proxy is its handle.
    func createNode(_ name: String, camera: Bool) -> OpaquePointer {
        let text = camera
            ? "factory.name=videotestsrc node.name=\(name) media.class=Video/Source"
            : "factory.name=support.null-audio-sink node.name=\(name) media.class=Audio/Source audio.position=[MONO]"
        pw_thread_loop_lock(threadLoop)
        defer { pw_thread_loop_unlock(threadLoop) }
        let props = pw_properties_new_string(text)!
        defer { pw_properties_free(props) }
        guard let proxy = pw_core_create_object(core, "adapter", cpw_type_interface_node(), UInt32(PW_VERSION_NODE),
                                                cpw_properties_dict(props), 0)
        else { fail("pw_core_create_object failed") }
        return OpaquePointer(proxy)
    }

    func destroyNode(_ proxy: OpaquePointer) {
        pw_thread_loop_lock(threadLoop)
        pw_proxy_destroy(proxy)
        pw_thread_loop_unlock(threadLoop)
    }

    func close() {
        pw_thread_loop_stop(threadLoop)
        spa_hook_remove(hook)
        pw_proxy_destroy(registry)
        pw_core_disconnect(core)
        pw_context_destroy(context)
        pw_thread_loop_destroy(threadLoop)
        hook.deallocate()
        events.deallocate()
    }
}

/// Plain global functions, not closures: PipeWire calls them on its own thread (S1).
private func benchRegistryGlobal(_ data: UnsafeMutableRawPointer?, _ id: UInt32, _ permissions: UInt32,
                                 _ type: UnsafePointer<CChar>?, _ version: UInt32, _ props: UnsafePointer<spa_dict>?) {
    let at = monotonicNanoseconds()
    guard let props, let name = spa_dict_lookup(props, PW_KEY_NODE_NAME) else { return }
    let bench = Unmanaged<BenchPipeWire>.fromOpaque(data!).takeUnretainedValue()
    bench.timeline.record(.appeared(name: String(cString: name), id: id, at: at))
}

private func benchRegistryGlobalRemove(_ data: UnsafeMutableRawPointer?, _ id: UInt32) {
    let at = monotonicNanoseconds()
    Unmanaged<BenchPipeWire>.fromOpaque(data!).takeUnretainedValue().timeline.record(.removed(id: id, at: at))
}
