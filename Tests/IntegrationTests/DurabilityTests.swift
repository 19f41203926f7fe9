import DBusKit
import Foundation
import Testing
import PermissionsTestSupport
import SystemPrimitives

/// Durability: an acknowledged decision survives `kill -9` of the daemon, and a
/// restart shows no decision that was never sent.
///
/// Budget in scripts/test (doc/testing.md): 20 cycles of 9 writes, then 10 cycles with
/// 4 writers killed mid-flight; about 15 s together on the 2-core VM.
/// PERMISSIONS_STRESS_CYCLES (scripts/stress --cycles) and PERMISSIONS_STRESS_WRITERS
/// (--writers) make the run longer.
@Suite(.serialized) struct DurabilityTests {
    static let permissions = ["location", "notifications"]

    /// What the test knows about one (app, permission): the last write the daemon
    /// acknowledged and the one it was sent but never answered.
    struct KeyRecord {
        /// nil: no decision (never set, or reset).
        var acknowledged: String?
        var inFlight: Write?
        /// Every decision any client sent for the key.
        var sent: Set<String> = []
    }

    enum Write: Equatable {
        case set(String)
        case reset

        var stored: String? {
            if case .set(let decision) = self { return decision }
            return nil
        }
    }

    /// Lost and phantom decisions in `stored` against `records`: a key whose stored
    /// value is neither its acknowledged one nor that of its write in flight is
    /// lost, unless no client ever sent that value, which makes it a phantom (so is
    /// any stored key nobody wrote).
    static func compare(_ stored: [String: String], _ records: [String: KeyRecord])
        -> (lost: [String], phantom: [String]) {
        var lost: [String] = [], phantom: [String] = []
        for (key, record) in records {
            let value = stored[key]
            let allowed = [record.acknowledged] + (record.inFlight.map { [$0.stored] } ?? [])
            if allowed.contains(value) { continue }
            if let value, !record.sent.contains(value) {
                phantom.append("\(key)=\(value) (never sent)")
            } else if let value, record.acknowledged == nil {
                phantom.append("\(key)=\(value) (reset acknowledged)")
            } else {
                lost.append("\(key): stored \(value ?? "nothing"), acknowledged \(record.acknowledged ?? "nothing")")
            }
        }
        for key in stored.keys where records[key] == nil { phantom.append("\(key)=\(stored[key]!) (never written)") }
        return (lost.sorted(), phantom.sorted())
    }

    /// Sequential writes, each acknowledged, then SIGKILL right after the last reply
    /// and a restart on the same state directory: the store must equal the model.
    @Test(.hangGuard) func acknowledgedDecisionsSurviveKill9() throws {
        let cycles = Knobs.cycles
        let seed = Knobs.seed
        var random = SeededRandom(seed: seed)
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus)
        let client = try BusClient(bus: bus)
        defer { client.close() }
        let apps = (0..<8).map { $0 % 2 == 0 ? "org.example.Durable\($0)" : "/usr/bin/durable-\($0)" }
        var records: [String: KeyRecord] = [:]
        var acknowledged = 0, totalLost = 0, totalPhantom = 0
        let started = Date()
        for cycle in 0..<cycles {
            for write in 0..<9 {
                let app = apps.randomElement(using: &random)!
                let permission = Self.permissions.randomElement(using: &random)!
                let key = app + " " + permission
                if random.chance(0.2) {
                    _ = try client.call("ResetDecisions", [.string(app), .strings([permission])]).get()
                    records[key, default: KeyRecord()].acknowledged = nil
                } else {
                    let decision = Bool.random(using: &random) ? "authorized" : "denied"
                    if write == 8 {
                        // The last write of a cycle through the real CLI, as an admin would.
                        let r = try daemon.ctl(decision == "authorized" ? "grant" : "deny", app, permission)
                        try #require(r.status == 0, "permissionsctl: \(r.stderr)")
                    } else {
                        _ = try client.call("SetDecision", [.string(app), .string(permission), .string(decision)]).get()
                    }
                    records[key, default: KeyRecord()].acknowledged = decision
                    records[key, default: KeyRecord()].sent.insert(decision)
                }
                acknowledged += 1
            }
            daemon.kill()
            try daemon.start()
            let stored = try client.storedDecisions()
            let (lost, phantom) = Self.compare(stored, records)
            totalLost += lost.count
            totalPhantom += phantom.count
            #expect(lost.isEmpty && phantom.isEmpty,
                    "seed \(seed), cycle \(cycle): lost \(lost), phantom \(phantom)")
        }
        reportFigures("durability", ["cycles": cycles, "acknowledged": acknowledged, "lost": totalLost,
                                     "phantom": totalPhantom, "seconds": String(format: "%.1f", -started.timeIntervalSinceNow),
                                     "seed": seed])
    }

    /// Several writers at once, each on keys of its own; the daemon is killed after
    /// a random number of acknowledgements, while writes are in flight. After the
    /// restart every acknowledged write is there; a write in flight may or may not
    /// be; nothing else is.
    @Test(.hangGuard) func writersKilledMidFlight() throws {
        let cycles = max(1, Knobs.cycles / 2)
        let writers = Knobs.writers
        let seed = Knobs.seed
        var random = SeededRandom(seed: seed ^ 0x5EED)
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus)
        let clients = try (0..<writers).map { try BusClient(bus: bus, label: "writer-\($0)") }
        let reader = try BusClient(bus: bus)
        defer { (clients + [reader]).forEach { $0.close() } }
        let records = Locked([String: KeyRecord]())
        var acknowledged = 0, inFlightAtKill = 0, inFlightApplied = 0, totalLost = 0, totalPhantom = 0
        let started = Date()
        for cycle in 0..<cycles {
            let threshold = Int.random(in: 5...60, using: &random)
            let acks = Locked(0)
            let reached = DispatchSemaphore(value: 0)
            let cycleSeed = random.next()
            // The writers: each its own keys, one call at a time, until a call fails.
            let finished = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                onThreads(writers) { w in
                    var random = SeededRandom(seed: cycleSeed, stream: w)
                    let client = clients[w]
                    for n in 0..<2000 {
                        let mine = records.withLock { $0.keys.filter { $0.hasPrefix("org.example.W\(w).") } }
                        let key: String
                        let write: Write
                        if mine.isEmpty || random.chance(0.4) {
                            key = "org.example.W\(w).C\(cycle).N\(n) " + Self.permissions.randomElement(using: &random)!
                            write = .set(Bool.random(using: &random) ? "authorized" : "denied")
                        } else {
                            key = mine.randomElement(using: &random)!
                            let current = records.withLock { $0[key]?.acknowledged }
                            write = random.chance(0.2) ? .reset
                                : .set(current == "authorized" ? "denied" : "authorized")
                        }
                        records.withLock { all in
                            all[key, default: KeyRecord()].inFlight = write
                            if let value = write.stored { all[key, default: KeyRecord()].sent.insert(value) }
                        }
                        let parts = key.split(separator: " ").map(String.init)
                        let result = switch write {
                        case .set(let decision):
                            client.call("SetDecision", [.string(parts[0]), .string(parts[1]), .string(decision)],
                                        timeoutMilliseconds: 10_000)
                        case .reset:
                            client.call("ResetDecisions", [.string(parts[0]), .strings([parts[1]])],
                                        timeoutMilliseconds: 10_000)
                        }
                        guard case .success = result else { return }  // the daemon is gone: stop
                        records.withLock { all in
                            all[key]!.acknowledged = write.stored
                            all[key]!.inFlight = nil
                        }
                        if acks.withLock({ $0 += 1; return $0 }) == threshold { reached.signal() }
                    }
                }
                reached.signal()  // in case the writers ran out of writes first
                finished.signal()
            }
            reached.wait()
            daemon.kill()
            finished.wait()  // each writer stops at its first failed call
            acknowledged += acks.withLock { $0 }
            try daemon.start()
            let stored = try reader.storedDecisions()
            let snapshot = records.withLock { $0 }
            let (lost, phantom) = Self.compare(stored, snapshot)
            let inFlight = snapshot.filter { $0.value.inFlight != nil }
            inFlightAtKill += inFlight.count
            inFlightApplied += inFlight.filter { key, r in
                r.inFlight?.stored != r.acknowledged && stored[key] == r.inFlight?.stored
            }.count
            totalLost += lost.count
            totalPhantom += phantom.count
            #expect(lost.isEmpty && phantom.isEmpty,
                    "seed \(seed), cycle \(cycle) (kill after \(threshold) acknowledgements): lost \(lost), phantom \(phantom)")
            // What is stored now is the truth the next cycle builds on.
            records.withLock { all in
                for key in all.keys {
                    all[key]!.acknowledged = stored[key]
                    all[key]!.inFlight = nil
                }
            }
        }
        reportFigures("durability-mid-flight", ["cycles": cycles, "writers": writers, "acknowledged": acknowledged,
                                                "in-flight-at-kill": inFlightAtKill, "in-flight-applied": inFlightApplied,
                                                "lost": totalLost, "phantom": totalPhantom,
                                                "seconds": String(format: "%.1f", -started.timeIntervalSinceNow),
                                                "seed": seed])
    }
}
