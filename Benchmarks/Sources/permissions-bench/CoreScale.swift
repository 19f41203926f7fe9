import DBusKit
import Foundation
import PermissionsTestSupport
import SystemPrimitives

// The scale section's GetStatus: the daemon on the empty store and the daemon on
// the big one (100 000 decisions of the bench's user), measured side by side.
//
// Why side by side. On these 2-core VMs one daemon's GetStatus p50 wanders between
// about 45 and 120 µs, in spells of a few hundred milliseconds, with what the
// machine did just before: after an idle pause it is fast for a while, under
// steady calls it is slower. (The guest's haltpoll idle governor and the host's
// scheduling are the likely causes; this bench does not tell them apart.) The big
// store's first call loads the user's 100 000 rows, 150 ms of CPU, and for the
// next 200 ms or so its calls were faster. Timed one store after the other, right
// after each start, the big store read 14 to 23 % faster than the empty one: the
// two were measured in different spells, not with different costs.
//
// So both daemons run at once, each on a bus of its own of the same kind (a second
// dbus-daemon; each owns org.example.Permissions on its bus), the bench's user is
// loaded in each by a first call, and they are called in turns of a few calls, so
// that whatever spell the machine is in falls on both alike. Which daemon starts
// first changes with each start, and which is on which bus every other start:
// every four starts hold each combination once.
extension CoreBench {
    /// Calls per target in a row before the next target's turn: short beside a
    /// spell (25 GetStatus take about 2 ms).
    private static let scaleRoundSize = 25

    /// GetStatus samples (µs) of each store's daemon, keyed "empty location",
    /// "empty notifications", "big location", "big notifications": `starts` pairs of
    /// daemons, `options.scaleCalls` calls per target each.
    func scaleLatency(starts: Int) -> [String: [Double]] {
        let second = startBus(connections: options.streams + 512)
        let secondNames = CoreNameWatcher(address: second.address)
        let secondClient = openBlocking(second.address)
        defer {
            secondClient.close()
            secondNames.close()
            second.kill()
        }
        let buses = [(bus.address, names!, client!), (second.address, secondNames, secondClient)]
        let permissions = ["location", "notifications"]
        var latency: [String: [Double]] = [:]
        for i in 0..<starts {
            let variants = i % 2 == 0 ? ["empty", "big"] : ["big", "empty"]
            var started: [(variant: String, child: Child, watcher: CoreNameWatcher, client: Connection)] = []
            for (k, variant) in variants.enumerated() {
                let (address, watcher, connection) = buses[(k + i / 2) % 2]
                let spec = daemonSpec(state: variant == "empty" ? "state-empty" : "state-big", address: address)
                let (child, _) = start(spec, owning: "org.example.Permissions", watching: watcher)
                // The first call loads the bench's user (the big store's 100 000 rows).
                busCall(connection, CallTarget.getStatus("location").message())
                started.append((variant, child, watcher, connection))
            }
            let targets = started.flatMap { s in permissions.map { (s.client, CallTarget.getStatus($0)) } }
            let samples = coreLatency(targets, warmup: options.scaleWarmup, calls: options.scaleCalls,
                                      roundSize: Self.scaleRoundSize)
            for (k, s) in started.enumerated() {
                for (j, permission) in permissions.enumerated() {
                    latency[s.variant + " " + permission, default: []] += samples[k * permissions.count + j]
                }
                stop(s.child, owning: "org.example.Permissions", watching: s.watcher)
            }
        }
        return latency
    }
}
