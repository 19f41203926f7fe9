// permissions-bench core: the clients. A blocking caller for round-trip latency,
// pipelined callers on their own queues for throughput, and signal subscribers for
// fan-out. The same client code serves permissionsd, the floor and the peer, so
// whatever the client costs is in every figure alike.
import DBusKit
import Foundation
import PermissionsTestSupport
import Synchronization
import SystemPrimitives

/// Round trips on one connection, in microseconds: `warmup` unmeasured calls to each
/// target, then `calls` measured calls to each, in rounds of `roundSize` that rotate
/// the order so that drift (other load on the machine) hits every target alike.
func coreLatency(_ connection: Connection, _ targets: [CallTarget], warmup: Int, calls: Int,
                 roundSize: Int) -> [[Double]] {
    coreLatency(targets.map { (connection, $0) }, warmup: warmup, calls: calls, roundSize: roundSize)
}

/// The same, each target called on its own connection (the scale section's two
/// daemons, each on a bus of its own).
func coreLatency(_ targets: [(Connection, CallTarget)], warmup: Int, calls: Int, roundSize: Int) -> [[Double]] {
    for (connection, target) in targets {
        for _ in 0..<warmup { busCall(connection, target.message()) }
    }
    var samples = [[Double]](repeating: [], count: targets.count)
    for i in samples.indices { samples[i].reserveCapacity(calls) }
    var round = 0
    var done = 0
    while done < calls {
        let n = min(roundSize, calls - done)
        for k in 0..<targets.count {
            let index = (k + round) % targets.count
            let (connection, target) = targets[index]
            for _ in 0..<n {
                let message = target.message()
                let t0 = monotonicNanoseconds()
                busCall(connection, message)
                let t1 = monotonicNanoseconds()
                samples[index].append(Double(t1 - t0) / 1000)
            }
        }
        done += n
        round += 1
    }
    return samples
}

// MARK: Throughput

/// Shared switch for the pipelined callers.
final class CoreLoadControl: Sendable {
    let running = Atomic<Bool>(false)
}

/// One connection on its own serial queue keeping `inFlight` calls outstanding: each
/// reply sends the next call while `control.running` holds.
///
/// `@unchecked Sendable`: `target` and the connection are touched only on `queue`;
/// the counters are atomics.
final class CoreLoadClient: @unchecked Sendable {
    let queue: Queue
    let connection: Connection
    let control: CoreLoadControl
    let group: Group
    let completed = Atomic<Int>(0)
    let failed = Atomic<Int>(0)
    private var target: CallTarget?
    /// This client's index (its writer number) and calls built so far (queue only).
    private let index: Int
    private var built = 0

    init(address: String, index: Int, control: CoreLoadControl, group: Group) {
        queue = Queue(label: "core.load.\(index)")
        self.index = index
        self.control = control
        self.group = group
        let q = queue
        let opened: Result<Connection, BusError> = q.sync {
            do throws(BusError) { return .success(try Connection.open(.address(address), queue: q)) } catch {
                return .failure(error)
            }
        }
        guard case .success(let c) = opened else { fail("cannot connect a load client to the bus") }
        connection = c
    }

    /// Starts `inFlight` chains of calls to `target` (control.running must be true).
    func start(_ target: CallTarget, inFlight: Int) {
        for _ in 0..<inFlight { group.enter() }
        queue.async {
            self.target = target
            for _ in 0..<inFlight { self.send() }
        }
    }

    private func send() {
        guard let target else { return }
        built += 1
        connection.call(target.message(writer: index, n: built), timeoutMilliseconds: 60_000) { [self] result in
            if case .failure = result { failed.wrappingAdd(1, ordering: .relaxed) } else {
                completed.wrappingAdd(1, ordering: .relaxed)
            }
            if control.running.load(ordering: .relaxed) { send() } else { group.leave() }
        }
    }

    func close() { queue.sync { connection.close() } }
}

/// A pool of pipelined callers.
final class CoreLoadPool {
    let clients: [CoreLoadClient]
    let control = CoreLoadControl()
    let group = Group()

    init(address: String, connections: Int) {
        var list: [CoreLoadClient] = []
        for i in 0..<connections {
            list.append(CoreLoadClient(address: address, index: i, control: control, group: group))
        }
        clients = list
    }

    var completed: Int { clients.reduce(0) { $0 + $1.completed.load(ordering: .relaxed) } }
    var failed: Int { clients.reduce(0) { $0 + $1.failed.load(ordering: .relaxed) } }

    /// Runs `target` for `seconds` after `settle` seconds; returns (calls per second
    /// in the measured window, every call completed from start to drain).
    func run(_ target: CallTarget, inFlight: Int, seconds: Double, settle: Double) -> (Double, Int) {
        let before = completed
        control.running.store(true, ordering: .relaxed)
        for c in clients { c.start(target, inFlight: inFlight) }
        if settle > 0 { sleepSeconds(settle) }
        let c0 = completed
        let t0 = monotonicNanoseconds()
        sleepSeconds(seconds)  // the measuring window, not a synchronisation
        let c1 = completed
        let t1 = monotonicNanoseconds()
        control.running.store(false, ordering: .relaxed)
        guard group.wait(timeout: .now() + 60) == .success else { fail("\(target.label): calls did not drain") }
        if failed > 0 { fail("\(target.label): \(failed) calls failed") }
        return (Double(c1 - c0) / (Double(t1 - t0) / 1e9), completed - before)
    }

    /// Runs `target` until at least `total` calls have completed; returns how many did.
    func runUntil(_ target: CallTarget, inFlight: Int, total: Int) -> Int {
        let before = completed
        control.running.store(true, ordering: .relaxed)
        for c in clients { c.start(target, inFlight: inFlight) }
        let deadline = monotonicNanoseconds() + 600 * 1_000_000_000
        while completed - before < total {
            if monotonicNanoseconds() > deadline { fail("\(target.label): \(total) calls took more than 10 minutes") }
            sleepSeconds(0.005)
        }
        control.running.store(false, ordering: .relaxed)
        guard group.wait(timeout: .now() + 60) == .success else { fail("\(target.label): calls did not drain") }
        if failed > 0 { fail("\(target.label): \(failed) calls failed") }
        return completed - before
    }

    func close() { for c in clients { c.close() } }
}

// MARK: Fan-out

/// Counts the subscribers that got the signal of the current trigger and keeps the
/// times of the first and the last one. `@unchecked Sendable`: state under `lock`.
final class CoreFanoutCollector: @unchecked Sendable {
    private let lock = NSLock()
    private let done = Semaphore(value: 0)
    private var kind = -1
    private var expected = 0
    private var arrived = 0
    private var first: UInt64 = 0
    private var last: UInt64 = 0
    private(set) var strays = 0

    func expect(kind: Int, subscribers: Int) {
        lock.withLock {
            self.kind = kind
            expected = subscribers
            arrived = 0
            first = 0
            last = 0
        }
    }

    func arrived(kind: Int, at: UInt64) {
        let complete: Bool = lock.withLock {
            guard kind == self.kind, arrived < expected else {
                strays += 1
                return false
            }
            arrived += 1
            first = first == 0 ? at : min(first, at)
            last = max(last, at)
            return arrived == expected
        }
        if complete { done.signal() }
    }

    /// The times the first and the last subscriber got the signal, or nil after `seconds`.
    func wait(seconds: Double) -> (first: UInt64, last: UInt64)? {
        guard done.wait(timeout: .now() + seconds) == .success else { return nil }
        return lock.withLock { (first, last) }
    }

    var arrivedCount: Int { lock.withLock { arrived } }
}

/// One subscriber connection on its own queue, listening to permissionsd and both
/// floors (DBusKit's and C's) alike, in one of two ways:
/// - broadcast: match rules for the daemon's broadcast StatusChanged of everyone-level
///   changes (app "") and each floor's broadcast Tick(app), the floors by their unique
///   names (they send the same signal, and a match on a well-known name would let
///   DBusKit hand one floor's Tick to the other's handler too);
/// - unicast: Subscribe on all three (the daemon's per-user stream, each floor's list),
///   and match rules for the signals addressed to this connection alone from their
///   unique names: the daemon's StatusChanged on its Subscription path, each floor's Tick.
final class CoreSubscriber: @unchecked Sendable {
    static let daemonKind = 0
    /// The DBusKit floor (floor-service).
    static let floorKind = 1
    /// The C floor (Benchmarks/floor/floor.c).
    static let cFloorKind = 2
    enum Mode {
        case broadcast(floor: String, cFloor: String)
        case unicast(daemon: String, floor: String, cFloor: String)
    }
    let queue: Queue
    let connection: Connection

    init(address: String, index: Int, app: String, mode: Mode, collector: CoreFanoutCollector) {
        queue = Queue(label: "core.sub.\(index)")
        let q = queue
        let opened: Result<Connection, BusError> = q.sync {
            do throws(BusError) {
                let c = try Connection.open(.address(address), queue: q)
                let daemonMatch: SignalMatch
                let floorMatch: SignalMatch
                let cFloorMatch: SignalMatch
                switch mode {
                case .broadcast(let floor, let cFloor):
                    // Everyone-level changes carry the app "" (every app).
                    daemonMatch = SignalMatch(sender: "org.example.Permissions", path: "/org/example/Permissions",
                                              interface: "org.example.Permissions", member: "StatusChanged", arg0: "")
                    floorMatch = SignalMatch(sender: floor, path: coreFloorPath, interface: coreFloorInterface,
                                             member: "Tick", arg0: app)
                    cFloorMatch = SignalMatch(sender: cFloor, path: coreFloorPath, interface: coreFloorInterface,
                                              member: "Tick", arg0: app)
                case .unicast(let daemon, let floor, let cFloor):
                    daemonMatch = .unicast(to: c.uniqueName, sender: daemon, path: "/org/example/Permissions/Subscription",
                                           interface: "org.example.Permissions", member: "StatusChanged")
                    floorMatch = .unicast(to: c.uniqueName, sender: floor, path: coreFloorPath,
                                          interface: coreFloorInterface, member: "Tick")
                    cFloorMatch = .unicast(to: c.uniqueName, sender: cFloor, path: coreFloorPath,
                                           interface: coreFloorInterface, member: "Tick")
                }
                c.subscribe(daemonMatch) { _ in
                    collector.arrived(kind: CoreSubscriber.daemonKind, at: monotonicNanoseconds())
                }
                c.subscribe(floorMatch) { _ in
                    collector.arrived(kind: CoreSubscriber.floorKind, at: monotonicNanoseconds())
                }
                c.subscribe(cFloorMatch) { _ in
                    collector.arrived(kind: CoreSubscriber.cFloorKind, at: monotonicNanoseconds())
                }
                return .success(c)
            } catch {
                return .failure(error)
            }
        }
        guard case .success(let c) = opened else { fail("cannot connect a subscriber to the bus") }
        connection = c
    }

    /// Unicast mode: Subscribe on permissionsd (its caller's own user's stream) and on
    /// both floors; `group` is left once all three have answered.
    func subscribe(group: Group) {
        let c = connection
        for (destination, path, interface, arguments) in [
            ("org.example.Permissions", "/org/example/Permissions", "org.example.Permissions",
             [DBusValue.vardict([])]),
            (coreFloorBusName, coreFloorPath, coreFloorInterface, []),
            (coreCFloorBusName, coreFloorPath, coreFloorInterface, []),
        ] {
            group.enter()
            queue.async {
                let m = try! Message.methodCall(destination: destination, path: path, interface: interface,
                                                member: "Subscribe")
                try! m.append(arguments)
                c.call(m) { result in
                    if case .failure(let error) = result { fail("Subscribe to \(destination) failed: \(error)") }
                    group.leave()
                }
            }
        }
    }

    func close() { queue.sync { connection.close() } }
}
