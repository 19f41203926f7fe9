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
import DBusKit
import Foundation
import PermissionsTestSupport
import SystemPrimitives

func runPipeWireBench(_ arguments: [String]) {
    let options = PipeWireOptions(arguments, cycles: 200, intervalMilliseconds: 10, usage: "usage: permissions-bench "
                                  + "pipewire [--cycles N] [--interval-ms MS] [--pipewire-config FILE] [--smoke]")
    let (cycles, intervalMilliseconds) = (options.cycles, options.intervalMilliseconds)
    let world = BenchWorld(pipewireConfig: options.config)
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

// MARK: The processes and the cycle

/// dbus-daemon, PipeWire and permissionsd in a temporary directory, the bench's
/// PipeWire client and its D-Bus subscriber.
///
/// Used from the main thread only; the subscriber's handler (on `queue`) touches
/// only `timeline`, which has a lock of its own.
private final class BenchWorld {
    let pipewireConfig: String
    let timeline = PWTimeline()
    private var rig: PipeWireRig?
    private var pipewire: BenchPipeWire? { rig?.devices }
    private var connection: Connection?
    private let queue = Queue(label: "bench.dbus")

    init(pipewireConfig: String) {
        self.pipewireConfig = pipewireConfig
    }

    func start() {
        let rig = PipeWireRig(config: pipewireConfig, timeline: timeline)
        self.rig = rig
        rig.startPermissionsd()
        subscribe(rig.bus.address)
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
        rig?.tearDown()
    }
}
