// permissions-bench core: how the cost grows with the work, each figure beside its
// floor in the same run (the C floor, Benchmarks/floor/floor.c):
// - streams: the memory one open Subscribe stream costs the daemon, with thousands
//   open at once, against the C floor's Subscribe (a name in a list);
// - request: Request -> the agent's Ask -> its answer -> the reply, with an agent
//   that answers at once, against two round trips to the C floor (the least a
//   request that asks someone else can cost: the app's call and the agent's).
// The fan-out to 1 000 subscribers is the fan-out section's largest count.
import DBusKit
import Foundation
import PermissionsTestSupport
import SystemPrimitives

extension CoreBench {
    // MARK: Streams

    /// Opens `options.streams` connections, each with a Subscribe stream on the
    /// daemon and a subscription on the C floor, and reads both processes' memory
    /// before, with all of them open, and once they have all left.
    func streamMemory() {
        guard let daemon else { return }
        let n = options.streams
        raiseDescriptorLimit(to: n + 1024)
        let daemonBefore = daemon.memory
        let floorBefore = cFloor.memory
        let threadsBefore = daemon.threads
        let subscribe = CallTarget("Subscribe", destination: "org.example.Permissions", path: "/org/example/Permissions",
                                   interface: "org.example.Permissions", member: "Subscribe", [.vardict([])])
        let floorSubscribe = CallTarget("C floor Subscribe", destination: coreCFloorBusName, path: coreFloorPath,
                                        interface: coreFloorInterface, member: "Subscribe", [])
        let t0 = monotonicNanoseconds()
        var connections: [Connection] = []
        connections.reserveCapacity(n)
        for _ in 0..<n {
            let c = openBlocking(bus.address)
            busCall(c, subscribe.message())
            busCall(c, floorSubscribe.message())
            connections.append(c)
        }
        let openSeconds = Double(monotonicNanoseconds() - t0) / 1e9
        // Every Subscribe was answered: the daemon holds every stream now.
        let daemonOpen = daemon.memory
        let floorOpen = cFloor.memory
        let threadsOpen = daemon.threads
        let descriptors = daemon.descriptors
        let owner = busOwner("org.example.Permissions")
        for c in connections { c.close() }
        connections.removeAll()
        _ = call(coreCFloorBusName, coreFloorPath, coreFloorInterface, "UnsubscribeAll")
        // The daemon has let them go once it answers a call sent after they left
        // (it takes NameOwnerChanged in order); its memory is read then.
        _ = daemonCall("GetStatus", [.string("location")])
        daemonCalls += 1
        guard busOwner("org.example.Permissions") == owner else { fail("permissionsd restarted during the streams section") }
        let daemonClosed = daemon.memory

        func perStream(_ before: (rss: Int, anon: Int, file: Int)?, _ after: (rss: Int, anon: Int, file: Int)?) -> Double {
            Double(((after?.rss ?? 0) - (before?.rss ?? 0)) * 1024) / Double(n)
        }
        let d = perStream(daemonBefore, daemonOpen)
        let f = perStream(floorBefore, floorOpen)
        var table = Table("Subscribe streams: \(n) connections, each with a stream open (VmRSS)",
                          columns: ["process", "before (MiB)", "open (MiB)", "bytes per stream", "after they left (MiB)",
                                    "threads before/open"])
        table.add(["permissionsd", format(mebibytes(daemonBefore?.rss ?? 0)), format(mebibytes(daemonOpen?.rss ?? 0)),
                   String(format: "%.0f", d), format(mebibytes(daemonClosed?.rss ?? 0)), "\(threadsBefore)/\(threadsOpen)"])
        table.add(["C floor (a name in a list)", format(mebibytes(floorBefore?.rss ?? 0)),
                   format(mebibytes(floorOpen?.rss ?? 0)), String(format: "%.0f", f), "-", "1/1"])
        table.print()
        print(String(format: "opened and subscribed in %.1f s; permissionsd held %d descriptors with them open",
                     openSeconds, descriptors))
        printJSONLine("streams", [
            ("streams", .int(n)), ("rss_before_kib", .int(daemonBefore?.rss ?? 0)),
            ("rss_open_kib", .int(daemonOpen?.rss ?? 0)), ("rss_after_kib", .int(daemonClosed?.rss ?? 0)),
            ("bytes_per_stream", .num(d)), ("c_floor_bytes_per_stream", .num(f)),
            ("threads_before", .int(threadsBefore)), ("threads_open", .int(threadsOpen)),
            ("descriptors_open", .int(descriptors)), ("open_s", .num(openSeconds)),
        ])
    }

    // MARK: Request round trip

    /// Request(location) with an agent of the bench's user that answers "allow-once"
    /// at once (so that each request prompts again: nothing is stored), against two
    /// C floor Status round trips back to back, in alternating rounds.
    func requestRoundTrip() {
        let agent = BenchAgent(address: bus.address, answer: "allow-once")
        defer { agent.close() }
        let request = CallTarget("Request", destination: "org.example.Permissions", path: "/org/example/Permissions",
                                 interface: "org.example.Permissions", member: "Request",
                                 [.string("location"), .vardict([])])
        let floor = CallTarget.cFloorStatus
        // One warm-up request shows the agent answers: allow-once is "authorized".
        let first = busCall(client, request.message()).arguments().first?.stringValue
        guard first == "authorized" else { fail("Request with an agent answering allow-once gave \(first ?? "nothing")") }
        var samples: [[Double]] = [[], []]
        let n = options.requests
        let round = min(50, n)
        var done = 0
        while done < n {
            let k = min(round, n - done)
            for which in (done / round % 2 == 0 ? [0, 1] : [1, 0]) {
                for _ in 0..<k {
                    if which == 0 {
                        let message = request.message()
                        let t0 = monotonicNanoseconds()
                        busCall(client, message)
                        samples[0].append(Double(monotonicNanoseconds() - t0) / 1000)
                    } else {
                        let (a, b) = (floor.message(), floor.message())
                        let t0 = monotonicNanoseconds()
                        busCall(client, a)
                        busCall(client, b)
                        samples[1].append(Double(monotonicNanoseconds() - t0) / 1000)
                    }
                }
            }
            done += k
        }
        let d = Samples(samples[0])
        let f = Samples(samples[1])
        var table = Table("Request -> agent Ask -> answer -> reply (µs), an agent that answers at once, against two C floor "
                          + "round trips", columns: ["figure", "permissionsd", "C floor x2", "vs C floor"])
        table.add(["p50", format(d.p50), format(f.p50), ratioText(ratio(d.p50, f.p50))])
        table.add(["p99", format(d.p99), format(f.p99), ratioText(ratio(d.p99, f.p99))])
        table.print()
        printJSONLine("request_round_trip", [
            ("requests", .int(n)), ("p50_us", .num(d.p50)), ("p99_us", .num(d.p99)),
            ("c_floor_two_round_trips_p50_us", .num(f.p50)), ("c_floor_two_round_trips_p99_us", .num(f.p99)),
            ("ratio_p50", .num(ratio(d.p50, f.p50))), ("ratio_p99", .num(ratio(d.p99, f.p99))),
        ])
    }
}

/// Lets this process open `wanted` descriptors, up to the hard limit (one bus
/// connection is one descriptor).
func raiseDescriptorLimit(to wanted: Int) {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
    let target = min(rlim_t(wanted), limit.rlim_max)
    guard limit.rlim_cur < target else { return }
    limit.rlim_cur = target
    _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
}
