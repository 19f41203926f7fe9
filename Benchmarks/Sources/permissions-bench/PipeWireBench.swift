// permissions-bench pipewire: the time from a node appearing in (or leaving) the
// PipeWire registry to the StatusChanged a D-Bus subscriber receives.
//
// It starts its own dbus-daemon, a headless PipeWire (Tests/testenv's minimal
// config) and permissionsd with only the PipeWire plugin of this build. Then, per
// cycle, it creates a camera node through its own PipeWire connection, destroys
// it, and does the same with a microphone. Two starting points are reported:
// - registry: when the bench's own registry listener sees the global (or its
//   removal). PipeWire sends a global to every client in the same loop iteration,
//   so this stands for the moment the plugin could see it; but the bench's thread
//   competes for the same 2 cores, and when it runs late a sample can come out
//   below zero (the plugin was faster than the observer).
// - request: when the bench asked PipeWire to create (destroy) the node: an upper
//   bound that adds PipeWire's own work, never below zero.
// "Received" is when the bench's D-Bus connection dispatches StatusChanged. All
// are CLOCK_MONOTONIC in this process.
//
// Cycles are paced (--interval-ms, default 10 ms between cycles): a real device
// comes and goes a few times a day, and the plugin holds its publications to 500
// a second (after a burst of 100) to stay under the host's flood limit, so an
// unpaced loop would measure that throttle instead of the path.
import CPipeWire
import CPipeWireShims
import DBusKit
import Foundation
import PermissionsTestSupport
import SystemPrimitives

func runPipeWireBench(_ arguments: [String]) {
    var cycles = 200
    var intervalMilliseconds = 10
    var config = packageRoot + "/Tests/testenv/pipewire-test.conf"
    var rest = arguments[...]
    while let option = rest.popFirst() {
        switch (option, rest.first) {
        case ("--cycles", let value?) where Int(value).map({ $0 > 0 }) == true:
            cycles = Int(value)!
            rest.removeFirst()
        case ("--interval-ms", let value?) where Int(value).map({ $0 >= 0 }) == true:
            intervalMilliseconds = Int(value)!
            rest.removeFirst()
        case ("--smoke", _):
            cycles = 3
            intervalMilliseconds = 0
        case ("--pipewire-config", let value?):
            config = value
            rest.removeFirst()
        default:
            fail("usage: permissions-bench pipewire [--cycles N] [--interval-ms MS] [--pipewire-config FILE] [--smoke]",
                 code: 2)
        }
    }
    let world = BenchWorld(pipewireConfig: config)
    world.start()
    defer { world.tearDown() }

    let kinds: [(permission: String, camera: Bool)] = [("camera", true), ("microphone", false)]
    // One unmeasured cycle: the plugin has connected and the match rule is in force.
    for kind in kinds { _ = world.cycle(kind.permission, camera: kind.camera, label: "warmup") }
    var samples: [String: [Double]] = [:]
    for i in 0..<cycles {
        usleep(useconds_t(intervalMilliseconds * 1000))  // pacing, not synchronisation
        for kind in kinds {
            let times = world.cycle(kind.permission, camera: kind.camera, label: "\(i)")
            samples["\(kind.permission) appears, from registry", default: []].append(times.appearedToSignal)
            samples["\(kind.permission) appears, from request", default: []].append(times.requestedToSignal)
            samples["\(kind.permission) disappears, from registry", default: []].append(times.removedToSignal)
            samples["\(kind.permission) disappears, from request", default: []]
                .append(times.removalRequestedToSignal)
        }
    }
    let rows = kinds.flatMap { kind in
        ["appears", "disappears"].flatMap { event in
            ["registry", "request"].map { "\(kind.permission) \(event), from \($0)" }
        }
    }
    printTransitions(bench: "pipewire", title: "PipeWire node -> StatusChanged received, \(cycles) cycles "
                     + "\(intervalMilliseconds) ms apart (ms)",
                     fields: [("cycles", .int(cycles)), ("interval_ms", .int(intervalMilliseconds))],
                     rows.map { row in
                         // The JSON key of "camera appears, from registry" is "camera-appears-from-registry".
                         let key = row.replacingOccurrences(of: ", from ", with: "-from-")
                             .replacingOccurrences(of: " ", with: "-")
                         return Transition(label: row, key: key, samples: Samples(samples[row]!))
                     })
}

// MARK: What happened, when

/// Registry events and signals with their times, from two threads.
private enum PWEvent {
    case appeared(name: String, id: UInt32, at: UInt64)
    case removed(id: UInt32, at: UInt64)
    case signal(permission: String, status: String, at: UInt64)
}

private typealias BenchTimeline = Timeline<PWEvent>

private extension Timeline where Event == PWEvent {
    /// The first matching event from `from` on, within 5 s, or the bench fails
    /// (outside the timeline's lock).
    func first<T>(from: Int, _ what: String, _ match: (Event) -> T?) -> T {
        guard let found = first(from: from, timeout: 5, match) else { fail("no \(what) within 5 s") }
        return found
    }
}

// MARK: The bench's PipeWire client

/// A PipeWire connection on a thread loop of its own: it creates the fake devices
/// (owned by this client, so destroying the proxy removes the node) and stamps the
/// registry events.
///
/// Threads: the PipeWire objects are only used under the thread loop's lock
/// (callbacks run with it held) or after the thread has stopped; the callbacks
/// touch only `timeline`, which has a lock of its own.
private final class BenchPipeWire {
    let timeline: BenchTimeline
    private let threadLoop: OpaquePointer
    private let context: OpaquePointer
    private let core: OpaquePointer
    private let registry: OpaquePointer
    private let hook = UnsafeMutablePointer<spa_hook>.allocate(capacity: 1)
    private let events = UnsafeMutablePointer<pw_registry_events>.allocate(capacity: 1)

    init(runtimeDirectory: String, timeline: BenchTimeline) {
        self.timeline = timeline
        setenv("XDG_RUNTIME_DIR", runtimeDirectory, 1)
        unsetenv("PIPEWIRE_REMOTE")
        unsetenv("PIPEWIRE_RUNTIME_DIR")
        pw_init(nil, nil)
        threadLoop = pw_thread_loop_new("bench-pw", nil)!
        context = pw_context_new(pw_thread_loop_get_loop(threadLoop), nil, 0)!
        guard let core = pw_context_connect(context, nil, 0) else {
            fail("cannot connect to the bench's PipeWire: \(String(cString: strerror(errno)))")
        }
        self.core = core
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

// MARK: The processes and the cycle

/// dbus-daemon, PipeWire and permissionsd in a temporary directory, the bench's
/// PipeWire client and its D-Bus subscriber.
///
/// Used from the main thread only; the subscriber's handler (on `queue`) touches
/// only `timeline`, which has a lock of its own.
private final class BenchWorld {
    let pipewireConfig: String
    let root: String
    let timeline = BenchTimeline()
    private var daemon: Child?
    /// Killed last, after every process on it.
    private var bus: TestBus?
    private var pipewire: BenchPipeWire?
    private var connection: Connection?
    private let queue = DispatchQueue(label: "bench.dbus")

    init(pipewireConfig: String) {
        self.pipewireConfig = pipewireConfig
        root = makeRunDirectory()
    }

    func start() {
        guard FileManager.default.fileExists(atPath: pipewireConfig) else {
            fail("no PipeWire config at \(pipewireConfig) (--pipewire-config FILE)")
        }
        makeDaemonDirectories(root, plugin: "pipewire", extra: ["run"])
        let bus = startBus()
        self.bus = bus
        let busAddress = bus.address
        startPipeWire()
        pipewire = BenchPipeWire(runtimeDirectory: root + "/run", timeline: timeline)
        daemon = startDaemon(root: root, address: busAddress, environment: ["XDG_RUNTIME_DIR": root + "/run"])
        subscribe(busAddress)
    }

    /// Reads `fd` line by line on a thread of its own, for as long as it is open (a
    /// child blocked on a full pipe would skew the measurement); returns once a line
    /// contains `marker`, or fails the bench after 10 s.
    private func waitForLine(_ fd: Int32, containing marker: String, what: String) {
        let found = DispatchSemaphore(value: 0)
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

    /// PipeWire prints "Listening on" (protocol-native, info level) after listen(2).
    private func startPipeWire() {
        let err = ChildPipe()
        let spec = SpawnSpec("/usr/bin/pipewire", ["-c", pipewireConfig],
                             environment: ["XDG_RUNTIME_DIR": root + "/run", "PIPEWIRE_DEBUG": "2,mod.protocol-native:3"],
                             removing: ["PIPEWIRE_"])
        spec.stderrFD = err.write
        _ = spec.spawn()
        close(err.write)
        waitForLine(err.read, containing: "Listening on", what: "PipeWire")
    }

    /// Subscribes to StatusChanged and waits for a round trip to the bus, after
    /// which the match rule is in force.
    private func subscribe(_ address: String) {
        let timeline = timeline
        let connection: Connection = queue.sync {
            let c = openConnection(address, queue: queue)
            c.subscribe(SignalMatch(sender: "org.example.Permissions", path: "/org/example/Permissions",
                                    interface: "org.example.Permissions", member: "StatusChanged")) { message in
                let at = monotonicNanoseconds()
                let a = message.arguments().map { $0.stringValue ?? "" }
                guard a.count >= 3, a[0].isEmpty else { return }
                timeline.record(.signal(permission: a[1], status: a[2], at: at))
            }
            return c
        }
        self.connection = connection
        pingBus([connection])
    }

    /// The latencies of one device coming and going, in milliseconds.
    struct CycleTimes {
        var appearedToSignal, requestedToSignal, removedToSignal, removalRequestedToSignal: Double
    }

    /// One device coming and going.
    func cycle(_ permission: String, camera: Bool, label: String) -> CycleTimes {
        guard let pipewire else { fatalError("not started") }
        func ms(_ from: UInt64, _ to: UInt64) -> Double { Double(Int64(bitPattern: to &- from)) / 1e6 }
        let name = "bench-\(permission)-\(label)"
        var from = timeline.count
        let requested = monotonicNanoseconds()
        let proxy = pipewire.createNode(name, camera: camera)
        let (id, appeared) = timeline.first(from: from, "registry global for \(name)") { event -> (UInt32, UInt64)? in
            if case .appeared(name, let id, let at) = event { return (id, at) }
            return nil
        }
        let on = timeline.first(from: from, "StatusChanged \(permission) not-determined") { event -> UInt64? in
            if case .signal(permission, "not-determined", let at) = event { return at }
            return nil
        }
        from = timeline.count
        let removalRequested = monotonicNanoseconds()
        pipewire.destroyNode(proxy)
        let removed = timeline.first(from: from, "registry global_remove for \(name)") { event -> UInt64? in
            if case .removed(id, let at) = event { return at }
            return nil
        }
        let off = timeline.first(from: from, "StatusChanged \(permission) unsupported") { event -> UInt64? in
            if case .signal(permission, "unsupported", let at) = event { return at }
            return nil
        }
        return CycleTimes(appearedToSignal: ms(appeared, on), requestedToSignal: ms(requested, on),
                          removedToSignal: ms(removed, off), removalRequestedToSignal: ms(removalRequested, off))
    }

    func tearDown() {
        if let connection { queue.sync { connection.close() } }
        pipewire?.close()
        // permissionsd first, by SIGTERM: its plugin's fini runs; then the others.
        daemon?.kill(SIGTERM)
        Children.shared.killAll()
        bus?.kill()
        bus = nil
    }
}
