// permissions-bench enforcement: the time from a decision to the camera's node
// leaving (or coming back to) the registry of an app's enforced PipeWire
// connection (OpenPipeWireRemote).
//
// It starts its own dbus-daemon, a headless PipeWire (Tests/testenv's minimal
// config) with a fake camera node, and permissionsd with only the PipeWire plugin
// of this build, following that PipeWire as the single user's (the PipeWire its
// environment names, as the pipewire bench's does). The bench process is the app:
// it asks GetDiagnostics for its app id, grants itself the camera (SetDecision),
// calls OpenPipeWireRemote("camera", {}) and connects over the descriptor on a
// PipeWire thread loop of its own, following that connection's registry. Then, per
// cycle:
// - revoke: from just before it sends SetDecision(own app id, camera, denied) to
//   when its registry's global_remove for the camera node arrives;
// - regrant: from just before SetDecision(…, authorized) to when the camera's
//   global comes back.
// Both include the SetDecision call's store commit (SQLite, synchronous=FULL: an
// fsync of the WAL in the run's directory under $TMPDIR): the service changes the
// status, and tells the plugin, only once the decision is on disk. Two more rows
// per direction split that: the SetDecision round trip (sent to reply received),
// and from the reply to the registry event. The plugin is told before the reply is
// sent, so the second can be below zero (the registry event came first). All times
// are CLOCK_MONOTONIC in this process; the registry events are stamped on
// PipeWire's thread, the calls on the main thread.
//
// Cycles are paced (--interval-ms between decisions, default 20 ms): decisions
// come from people, a few a day, and an unpaced loop would measure the queues
// filling behind each other.
import DBusKit
import Foundation
import PermissionsTestSupport
import SystemPrimitives

private let enforcementUsage = """
    usage: permissions-bench enforcement [--cycles N] [--interval-ms MS] [--pipewire-config FILE] [--smoke]
      --cycles N         deny/grant cycles measured (default 200; --smoke: 3, judged by nothing)
      --interval-ms MS   pause before each decision (default 20; --smoke: 0)
    """

func runEnforcementBench(_ arguments: [String]) {
    let options = PipeWireOptions(arguments, cycles: 200, intervalMilliseconds: 20, usage: enforcementUsage)
    let (cycles, intervalMilliseconds) = (options.cycles, options.intervalMilliseconds)
    let report = Report()  // limits.json checked before anything starts
    let world = EnforcementWorld(pipewireConfig: options.config)
    world.start()
    defer { world.tearDown() }

    // Unmeasured cycles: the paths paged in, the store's WAL past its first writes.
    for _ in 0..<3 {
        _ = world.transition(to: "denied")
        _ = world.transition(to: "authorized")
    }
    var revoke: [EnforcementWorld.Times] = []
    var regrant: [EnforcementWorld.Times] = []
    for _ in 0..<cycles {
        sleepSeconds(Double(intervalMilliseconds) / 1000)  // pacing, not synchronisation
        revoke.append(world.transition(to: "denied"))
        sleepSeconds(Double(intervalMilliseconds) / 1000)
        regrant.append(world.transition(to: "authorized"))
    }
    let revokeTotal = Samples(revoke.map(\.total))
    printTransitions(bench: "enforcement", title: "Enforcement: SetDecision of the app's camera -> its PipeWire "
                     + "registry, \(cycles) cycles, \(intervalMilliseconds) ms between decisions (ms)",
                     fields: [("cycles", .int(cycles)), ("interval_ms", .int(intervalMilliseconds))], [
        Transition(label: "deny -> camera gone (global_remove)", key: "revoke", samples: revokeTotal),
        Transition(label: "deny: SetDecision round trip", key: "revoke-call", samples: Samples(revoke.map(\.call))),
        Transition(label: "deny: reply -> camera gone", key: "revoke-after-reply",
                   samples: Samples(revoke.map(\.afterReply))),
        Transition(label: "grant -> camera back (global)", key: "regrant", samples: Samples(regrant.map(\.total))),
        Transition(label: "grant: SetDecision round trip", key: "regrant-call",
                   samples: Samples(regrant.map(\.call))),
        Transition(label: "grant: reply -> camera back", key: "regrant-after-reply",
                   samples: Samples(regrant.map(\.afterReply))),
    ])
    report.check(.enforcementRevoke, revokeTotal.p99, detail: "\(cycles) cycles")
    report.printVerdicts(smoke: options.smoke)
}

/// dbus-daemon, PipeWire with a camera, and permissionsd in a temporary
/// directory; the bench's D-Bus connection and its enforced PipeWire connection.
/// Used from the main thread only.
private final class EnforcementWorld {
    static let cameraName = "bench-camera"
    let pipewireConfig: String
    private var rig: PipeWireRig?
    /// The app's connection, over OpenPipeWireRemote's descriptor.
    private var app: BenchPipeWire?
    private var connection: Connection?
    private var appID = ""
    /// The camera node's global id (the same in every client's registry).
    private var camera: UInt32 = 0

    init(pipewireConfig: String) {
        self.pipewireConfig = pipewireConfig
    }

    func start() {
        // The camera, made by the rig's unrestricted client (it lives as long as that does).
        let rig = PipeWireRig(config: pipewireConfig, timeline: PWTimeline())
        self.rig = rig
        let devices = rig.devices
        _ = devices.createNode(Self.cameraName, camera: true)
        _ = devices.timeline.first(from: 0, "the camera in the bench's registry") { event -> UInt32? in
            if case .appeared(Self.cameraName, let id, _) = event { return id }
            return nil
        }
        rig.startPermissionsd()
        let connection = openBlocking(rig.bus.address)
        self.connection = connection
        let diagnostics = busCall(connection, call("GetDiagnostics")).arguments().first?.stringKeyedEntries ?? []
        guard let id = diagnostics.first(where: { $0.0 == "app-id" })?.1.stringValue, !id.isEmpty else {
            fail("GetDiagnostics gave no app-id")
        }
        appID = id
        // The plugin has seen the camera once the status is no longer "unsupported".
        waitForStatus { $0 != "unsupported" }
        busCall(connection, call("SetDecision", [.string(appID), .string("camera"), .string("authorized")]))
        waitForStatus { $0 == "authorized" }
        open()
    }

    /// Polls GetStatus(camera) every 10 ms until `done` accepts it, 10 s at most.
    private func waitForStatus(_ done: (String) -> Bool) {
        guard let connection else { fatalError("not started") }
        let deadline = monotonicNanoseconds() + 10_000_000_000
        var status = ""
        while monotonicNanoseconds() < deadline {
            status = busCall(connection, call("GetStatus", [.string("camera")])).arguments().first?.stringValue ?? ""
            if done(status) { return }
            sleepSeconds(0.01)
        }
        let log = rig.flatMap { try? String(contentsOfFile: $0.root + "/permissionsd.log", encoding: .utf8) } ?? ""
        fail("the camera's status stayed \"\(status)\" for 10 s; permissionsd's log:\n\(log)")
    }

    /// OpenPipeWireRemote("camera", {}), connected on a thread loop of the bench's
    /// own, and the camera in its registry.
    private func open() {
        guard let connection else { fatalError("not started") }
        let reply = busCall(connection, call("OpenPipeWireRemote", [.string("camera"), .vardict([])]))
        guard case .unixFD(let descriptor)? = reply.arguments().first else {
            fail("OpenPipeWireRemote answered without a descriptor")
        }
        // PipeWire closes the descriptor it is given; the message's own is closed with it.
        let fd = descriptor.duplicate()
        guard fd >= 0 else { fail("cannot duplicate the remote's descriptor: \(String(cString: strerror(errno)))") }
        let app = BenchPipeWire(descriptor: fd, timeline: PWTimeline())
        self.app = app
        camera = app.timeline.first(from: 0, "the camera in the app's registry") { event -> UInt32? in
            if case .appeared(Self.cameraName, let id, _) = event { return id }
            return nil
        }
    }

    private func call(_ member: String, _ arguments: [DBusValue] = []) -> Message {
        CallTarget(member, destination: "org.example.Permissions", path: "/org/example/Permissions",
                   interface: "org.example.Permissions", member: member, arguments).message()
    }

    /// One decision's times, in milliseconds: from the call to the registry event,
    /// the call's round trip, and from its reply to the event.
    struct Times {
        var total, call, afterReply: Double
    }

    /// Stores `decision` ("denied" or "authorized") for the app's camera and waits
    /// for the camera to go from (come back to) the app's registry.
    func transition(to decision: String) -> Times {
        guard let connection, let app else { fatalError("not started") }
        func ms(_ from: UInt64, _ to: UInt64) -> Double { Double(Int64(bitPattern: to &- from)) / 1e6 }
        let message = call("SetDecision", [.string(appID), .string("camera"), .string(decision)])
        let camera = camera
        let from = app.timeline.count
        let sent = monotonicNanoseconds()
        busCall(connection, message)
        let replied = monotonicNanoseconds()
        let seen: UInt64
        if decision == "authorized" {
            seen = app.timeline.first(from: from, "the camera back in the app's registry") { event -> UInt64? in
                if case .appeared(_, camera, let at) = event { return at }
                return nil
            }
        } else {
            seen = app.timeline.first(from: from, "the camera gone from the app's registry") { event -> UInt64? in
                if case .removed(camera, let at) = event { return at }
                return nil
            }
        }
        return Times(total: ms(sent, seen), call: ms(sent, replied), afterReply: ms(replied, seen))
    }

    func tearDown() {
        app?.close()
        connection?.close()
        rig?.tearDown()
    }
}
