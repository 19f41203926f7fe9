// permissions-bench core: permissionsd against the floor and the peer, side by side
// on one private bus in one run.
//
// - the floor: Benchmarks/floor/floor.c, built with cc at the start of the run, a
//   single-threaded service in C directly on libdbus (Status(s) -> s, GetStatus's
//   shape, answered with a constant; Peer.Ping answered by libdbus itself; Emit(s)
//   emits a plain signal Tick(s), EmitEach(s) sends it to each subscriber): the
//   physical limit, which the limits judge "vs floor" against;
// - the DBusKit floor: `permissions-bench floor-service`, the same service on DBusKit
//   (Status(s) on DBusKit's fast path, Peer.Ping through its router), reported beside
//   the C floor in every section that has one: what our own framework costs;
// - the peer: xdg-permission-store (Debian's xdg-desktop-portal), Lookup of an entry
//   set with SetPermission first;
// - permissionsd of the same build, with every plugin of that build (location,
//   notifications, pipewire, bluetooth; PipeWire and BlueZ are absent here, so their
//   permissions read "unsupported", and the system bus is the private bus).
//
// Sections, in the order they run: start-up, idle RSS and scale (100 000 stored
// decisions), and stores (up to 1 000 000 decisions over 1 000 users), each by
// starting the processes repeatedly (the scale section's GetStatus on the two
// stores' daemons side by side, CoreScale.swift); then, on long-lived instances, caller
// identity (bus calls per GetStatus, seen by dbus-monitor), GetStatus latency,
// throughput, writes, signal fan-out (to 1 000 subscribers), the memory of 10 000
// Subscribe streams and a request's round trip through an agent (CoreGrowth.swift),
// following 1 to 50 users' PipeWire (CoreUsers.swift, a daemon of its own), and
// RSS over 1 000 000 GetStatus.
// Each prints a table; every measurement is also one JSON line; the targets of the
// issue close the run.
import DBusKit
import Foundation
import PermissionsTestSupport
import SystemPrimitives

struct CoreOptions {
    var calls = 20_000
    var warmup = 2_000
    /// Calls per target in a row before the next target's turn: small, so that a
    /// burst of other load on the machine falls on every target alike (the tail
    /// percentiles are compared, and the load of a shared machine comes in bursts).
    var roundSize = 50
    var seconds = 2.0
    /// Throughput windows per target and connection count, interleaved (see roundSize).
    var rounds = 10
    var connections = [1, 8, 64]
    var inFlight = 4
    var subscribers = [1, 10, 100, 1000]
    var triggers = 200
    var triggersLarge = 100
    /// Triggers from 1000 subscribers on.
    var triggersHuge = 30
    /// Subscribe streams held open at once for the memory per stream (CoreGrowth).
    var streams = 10_000
    /// Request -> Ask -> answer round trips (CoreGrowth).
    var requests = 2_000
    var startups = 10
    var decisions = 100_000
    /// Pairs of daemons (empty store, big store) whose GetStatus the scale section
    /// times side by side (CoreScale.swift): many, because each daemon's p50 depends
    /// on where its threads land, by up to half from one start to the next.
    var scaleStarts = 40
    var scaleCalls = 400
    var scaleWarmup = 100
    var rssCalls = 1_000_000
    /// The store sizes of the stores section (each over 1 and over 1 000 users).
    var userStores = [0, 100_000, 1_000_000]
    var keep = false
    /// --smoke: the smallest run of every section, to show the bench works (CI), not to measure.
    var smoke = false
    static let allSections = ["startup", "stores", "identity", "latency", "throughput", "writes", "fanout", "streams",
                              "request", "users", "rss"]
    var sections = Set(allSections)
    /// Extra environment for permissionsd (experiments: MALLOC_ARENA_MAX=2, …).
    var daemonEnvironment: [String: String] = [:]

    static let usage = """
        usage: permissions-bench core [--quick] [--smoke] [--calls N] [--warmup N] [--seconds S] [--connections 1,8,64]
                                      [--in-flight K] [--subscribers 1,10,100] [--triggers N] [--startups N]
                                      [--decisions N] [--scale-starts N] [--streams N] [--requests N] [--rss-calls N] [--keep]
                                      [--sections L]
          --quick          a few seconds: fewer calls, shorter windows, fewer starts (figures are rougher)
          --smoke          the smallest run of every section, to check that the bench works (no figures)
          --calls N        measured GetStatus/Ping/Lookup round trips per target (default 20000)
          --warmup N       unmeasured round trips per target first (default 2000)
          --seconds S      throughput window per target and connection count (default 2)
          --connections L  connection counts for throughput (default 1,8,64)
          --in-flight K    calls outstanding per connection (default 4)
          --subscribers L  subscriber counts for fan-out (default 1,10,100,1000)
          --triggers N     signals per subscriber count (default 200; half that from 100 subscribers, 30 from 1000)
          --startups N     measured starts of each process (default 10)
          --decisions N    stored decisions for the scale section (default 100000)
          --scale-starts N pairs of daemons (empty and big store) whose GetStatus the scale section
                           times side by side (default 40)
          --streams N      Subscribe streams held open at once for the memory per stream (default 10000)
          --requests N     Request -> agent Ask -> answer round trips (default 2000)
          --rss-calls N    GetStatus calls before the last RSS reading (default 1000000)
          --keep           keep the temporary directory (logs, stores)
          --sections L     run only these of startup (with scale), stores, identity, latency, throughput,
                           writes, fanout, streams, request, users (root only), rss
          --daemon-env K=V extra environment for permissionsd (repeatable), for experiments
        """

    init(_ arguments: [String]) {
        var rest = arguments[...]
        func value(_ option: String) -> String {
            guard let v = rest.popFirst() else { Self.usageError("\(option) needs a value") }
            return v
        }
        func int(_ option: String, min: Int = 1) -> Int {
            let v = value(option)
            guard let n = Int(v), n >= min else { Self.usageError("\(option): not a number >= \(min): \(v)") }
            return n
        }
        func list(_ option: String) -> [Int] {
            let v = value(option)
            let items = v.split(separator: ",").compactMap { Int($0) }.filter { $0 > 0 }
            guard !items.isEmpty else { Self.usageError("\(option): expected a list like 1,8,64: \(v)") }
            return items
        }
        while let option = rest.popFirst() {
            switch option {
            case "--quick":
                calls = 2_000; warmup = 300; seconds = 0.3; rounds = 1
                triggers = 20; triggersLarge = 10; triggersHuge = 5; startups = 3; scaleStarts = 12; scaleCalls = 300
                scaleWarmup = 100
                rssCalls = 60_000; streams = 2_000; requests = 300
            case "--smoke":
                smoke = true
                calls = 100; warmup = 20; seconds = 0.05; rounds = 1; connections = [1, 4]; subscribers = [1, 4]
                triggers = 3; triggersLarge = 3; triggersHuge = 3; startups = 1; scaleStarts = 1; decisions = 1_000
                scaleCalls = 20
                scaleWarmup = 10; rssCalls = 2_000; streams = 20; requests = 10
                userStores = [0, 1_000]
            case "--calls": calls = int(option)
            case "--warmup": warmup = int(option, min: 0)
            case "--seconds":
                let v = value(option)
                guard let s = Double(v), s > 0 else { Self.usageError("--seconds: not a positive number: \(v)") }
                seconds = s
            case "--connections": connections = list(option)
            case "--in-flight": inFlight = int(option)
            case "--subscribers": subscribers = list(option)
            case "--triggers":
                triggers = int(option); triggersLarge = max(1, triggers / 2); triggersHuge = max(1, triggers / 7)
            case "--streams": streams = int(option)
            case "--requests": requests = int(option)
            case "--startups": startups = int(option)
            case "--decisions": decisions = int(option)
            case "--scale-starts": scaleStarts = int(option)
            case "--rss-calls": rssCalls = int(option, min: 0)
            case "--keep": keep = true
            case "--daemon-env":
                let v = value(option)
                guard let eq = v.firstIndex(of: "="), eq != v.startIndex else { Self.usageError("--daemon-env: expected K=V: \(v)") }
                daemonEnvironment[String(v[..<eq])] = String(v[v.index(after: eq)...])
            case "--sections":
                let v = value(option).split(separator: ",").map(String.init)
                guard !v.isEmpty, v.allSatisfy(Self.allSections.contains) else { Self.usageError("--sections: \(v)") }
                sections = Set(v)
            case "-h", "--help":
                print(Self.usage)
                exit(0)
            default: Self.usageError("unknown option \(option)")
            }
        }
        roundSize = min(roundSize, calls)
        if seconds < 1 { rounds = 1 }
    }

    static func usageError(_ message: String) -> Never {
        fail("\(message)\n\(usage)", code: 2)
    }
}

func runCoreBench(_ arguments: [String]) {
    let bench = CoreBench(CoreOptions(arguments))
    bench.run()
}

/// The app id the fan-out triggers change a decision for (and the subscribers' arg0).
let coreFanoutApp = "org.example.BenchApp"

final class CoreBench {
    let options: CoreOptions
    let report = Report()
    let root: String
    var bus: TestBus!
    var names: CoreNameWatcher!
    var client: Connection!
    private var floor: Child!
    /// The C floor (Benchmarks/floor/floor.c), built into the run directory.
    var cFloor: Child!
    private var peer: Child?
    var daemon: Child?
    /// GetStatus calls answered by the long-lived daemon, for the RSS-over-calls figure.
    var daemonCalls = 0
    /// The bench's own app id, as the daemon identifies it.
    var appID = ""
    private var daemonLogs = 0
    private let started = monotonicNanoseconds()

    init(_ options: CoreOptions) {
        self.options = options
        root = makeRunDirectory(keep: options.keep)
        // Ctrl-C or SIGTERM: stop the children and remove the directory, then exit.
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = SignalSource(signal: number, queue: signalQueue)
            source.setEventHandler { fail("interrupted", code: 130) }
            source.resume()
            signalSources.append(source)
        }
    }

    private var signalSources: [SignalSource] = []
    private let signalQueue = Queue(label: "bench.signals")

    func run() {
        setUp()
        print("permissions-bench core: one private bus (\(bus.address)); \(ProcessInfo.processInfo.activeProcessorCount) cores; "
              + "binaries from \(binDir)"
              + (options.daemonEnvironment.isEmpty ? "" : "; permissionsd environment "
                 + options.daemonEnvironment.map { "\($0.key)=\($0.value)" }.sorted().joined(separator: " ")))
        fflush(nil)
        let run = options.sections
        var timings: [String] = []
        func section(_ name: String, _ body: () -> Void) {
            guard name == "setup" || run.contains(name) else { return }
            let t0 = monotonicNanoseconds()
            body()
            timings.append(name + String(format: " %.1f s", Double(monotonicNanoseconds() - t0) / 1e9))
        }
        section("startup") { startupAndScale() }
        section("stores") { storesOverUsers() }
        section("setup") { startLongLived() }
        section("identity") { identityCheck() }
        section("latency") { latency() }
        section("throughput") { throughput() }
        section("writes") { writes() }
        section("fanout") { fanout() }
        section("streams") { streamMemory() }
        section("request") { requestRoundTrip() }
        section("users") { followedUsers() }
        section("rss") { rssOverCalls() }
        report.printVerdicts(smoke: options.smoke)
        print(String(format: "total time %.1f s", Double(monotonicNanoseconds() - started) / 1e9) + " (" + timings.joined(separator: ", ") + ")")
        if options.keep { print("kept \(root)") }
        fflush(nil)
        tearDown()
    }

    // MARK: Processes

    private func setUp() {
        let fm = FileManager.default
        for dir in ["run", "config", "state-main", "state-empty", "state-big", "peer-data", "logs"] {
            do { try fm.createDirectory(atPath: root + "/" + dir, withIntermediateDirectories: true) } catch {
                fail("cannot create \(root)/\(dir): \(error)")
            }
        }
        chmod(root + "/run", 0o700)
        let config = "[location]\nenabled=true\nmax-accuracy=exact\n\n[notifications]\nenabled=true\n"
        try? config.write(toFile: root + "/config/permissions.conf", atomically: true, encoding: .utf8)
        for p in ["permissionsd", "libpermissions-location.so", "libpermissions-notifications.so",
                  "libpermissions-pipewire.so", "libpermissions-bluetooth.so"]
        where !fm.fileExists(atPath: binDir + "/" + p) {
            fail("\(binDir)/\(p) is missing: build the whole package (swift build -c release)")
        }
        guard fm.isExecutableFile(atPath: "/usr/libexec/xdg-permission-store") else {
            fail("/usr/libexec/xdg-permission-store is missing: apt-get install xdg-desktop-portal")
        }
        // Room for the streams section's subscribers, each a connection of the bench's user.
        bus = startBus(connections: options.streams + 512)
        names = CoreNameWatcher(address: bus.address)
        let mark = names.mark
        floor = SpawnSpec(selfExecutable, ["floor-service", "--address", bus.address], name: "floor",
                              log: root + "/logs/floor.log").spawn().0
        guard names.wait(from: mark, name: coreFloorBusName, owned: true, seconds: 10) != nil else {
            fail("the floor service did not take its name; see \(root)/logs/floor.log")
        }
        let cFloorPath = buildCFloor()
        let cMark = names.mark
        cFloor = SpawnSpec(cFloorPath, ["--address", bus.address, "--name", coreCFloorBusName], name: "floor-c",
                           log: root + "/logs/floor-c.log").spawn().0
        guard names.wait(from: cMark, name: coreCFloorBusName, owned: true, seconds: 10) != nil else {
            fail("the C floor did not take its name; see \(root)/logs/floor-c.log")
        }
        client = openBlocking(bus.address)
    }

    /// Builds Benchmarks/floor/floor.c into the run directory, as the tests build their
    /// C tools: cc with libdbus's flags from pkg-config.
    private func buildCFloor() -> String {
        let source = packageRoot + "/Benchmarks/floor/floor.c"
        let output = root + "/floor-c"
        do {
            let flags = try PermissionsTestSupport.run("/usr/bin/pkg-config", ["--cflags", "--libs", "dbus-1"])
            guard flags.status == 0 else { fail("pkg-config dbus-1: \(flags.stderr)") }
            let cc = try PermissionsTestSupport.run("/usr/bin/cc", ["-O2", "-Wall", "-Werror", "-o", output, source]
                                                    + flags.stdout.split(whereSeparator: \.isWhitespace).map(String.init))
            guard cc.status == 0 else { fail("cc \(source): \(cc.stderr)") }
        } catch {
            fail("cannot build the C floor: \(error)")
        }
        return output
    }

    private func tearDown() {
        client.close()
        names.close()
        peer?.kill()
        daemon?.kill()
        floor.kill()
        cFloor.kill()
        bus.kill()
        Children.shared.killAll()
    }

    /// permissionsd on the bus at `address` (the bench's bus unless given).
    func daemonSpec(state: String, address: String? = nil) -> SpawnSpec {
        daemonLogs += 1
        let address = address ?? bus.address
        return SpawnSpec(binDir + "/permissionsd",
                             ["--address", address, "--config-dir", root + "/config", "--state-dir", root + "/" + state,
                              "--plugin-dir", binDir],
                             environment: options.daemonEnvironment.merging(
                                ["DBUS_SYSTEM_BUS_ADDRESS": address, "DBUS_SESSION_BUS_ADDRESS": address,
                                 "XDG_RUNTIME_DIR": root + "/run"]) { $1 },
                             removing: ["PIPEWIRE_", "DBUS_STARTER_"], log: root + "/logs/permissionsd-\(daemonLogs).log")
    }

    private func peerSpec() -> SpawnSpec {
        SpawnSpec("/usr/libexec/xdg-permission-store", [],
                      environment: ["DBUS_SESSION_BUS_ADDRESS": bus.address, "XDG_DATA_HOME": root + "/peer-data",
                                    "XDG_RUNTIME_DIR": root + "/run"],
                      log: root + "/logs/xdg-permission-store.log")
    }

    /// Starts a process and waits until it owns `name` (as `watcher` sees it, the
    /// bench's bus's by default); returns it with the time from just before
    /// posix_spawn to the NameOwnerChanged, in milliseconds.
    func start(_ spec: SpawnSpec, owning name: String, watching watcher: CoreNameWatcher? = nil) -> (Child, Double) {
        let names = watcher ?? names!
        let mark = names.mark
        let (child, t0) = spec.spawn()
        for _ in 0..<60 {
            if let event = names.wait(from: mark, name: name, owned: true, seconds: 0.5) {
                return (child, Double(event.at - t0) / 1e6)
            }
            if !child.isRunning { break }
        }
        fail("\(spec.name) did not take \(name); see its log under \(root)/logs (run with --keep)")
    }

    /// SIGKILL, and wait until the bus has released the name.
    func stop(_ child: Child, owning name: String, watching watcher: CoreNameWatcher? = nil) {
        let names = watcher ?? names!
        let mark = names.mark
        child.kill()
        guard names.wait(from: mark, name: name, owned: false, seconds: 10) != nil else {
            fail("\(name) was not released after \(child.name) was killed")
        }
    }

    // MARK: Small calls

    func call(_ destination: String, _ path: String, _ interface: String, _ member: String,
                      _ arguments: [DBusValue] = []) -> [DBusValue] {
        let message = CallTarget(member, destination: destination, path: path, interface: interface, member: member,
                                     arguments).message()
        return busCall(client, message).arguments()
    }

    func daemonCall(_ member: String, _ arguments: [DBusValue] = []) -> [DBusValue] {
        call("org.example.Permissions", "/org/example/Permissions", "org.example.Permissions", member, arguments)
    }

    /// (name, state) of every plugin, from the Plugins property.
    private func plugins() -> [(String, String)] {
        let value = call("org.example.Permissions", "/org/example/Permissions", "org.freedesktop.DBus.Properties", "Get",
                         [.string("org.example.Permissions"), .string("Plugins")]).first
        return (value?.arrayElements ?? []).compactMap { element in
            guard case .structure(let fields) = element, fields.count >= 3 else { return nil }
            return (fields[0].stringValue ?? "?", fields[2].stringValue ?? "?")
        }
    }

    /// The plugins of the running daemon; fails the bench unless every plugin file of
    /// the build is loaded (the figures are "with every plugin loaded").
    @discardableResult
    private func checkPlugins() -> [(String, String)] {
        let pluginList = plugins()
        let files = ((try? FileManager.default.contentsOfDirectory(atPath: binDir)) ?? [])
            .filter { $0.hasPrefix("libpermissions-") && $0.hasSuffix(".so") }.sorted()
        let loaded = pluginList.filter { $0.1 == "loaded" }
        guard loaded.count == files.count else {
            let log = (try? String(contentsOfFile: root + "/logs/permissionsd-\(daemonLogs).log", encoding: .utf8)) ?? ""
            fail("permissionsd loaded \(loaded.count) of the \(files.count) plugins in \(binDir) "
                     + "(\(pluginList.map { "\($0.0): \($0.1)" }.joined(separator: ", "))); its log:\n\(log)")
        }
        return pluginList
    }

    // MARK: Start-up, idle RSS, scale

    private func startupAndScale() {
        let n = options.startups
        // Unmeasured starts: the page cache, the bench's app id, the plugins, and the
        // big store's schema, made by the daemon itself before it is filled.
        var (d, _) = start(daemonSpec(state: "state-empty"), owning: "org.example.Permissions")
        let pluginList = checkPlugins()
        let details = daemonCall("GetDetails", [.string("location")]).first?.stringKeyedEntries ?? []
        appID = details.first { $0.0 == "app-id" }?.1.stringValue ?? ""
        stop(d, owning: "org.example.Permissions")
        guard !appID.isEmpty else { fail("GetDetails gave no app-id") }
        (d, _) = start(daemonSpec(state: "state-big"), owning: "org.example.Permissions")
        stop(d, owning: "org.example.Permissions")
        let t0 = monotonicNanoseconds()
        fillStore(root + "/state-big/decisions.sqlite", count: options.decisions, ownApp: appID)
        let fillSeconds = Double(monotonicNanoseconds() - t0) / 1e9
        (d, _) = start(daemonSpec(state: "state-big"), owning: "org.example.Permissions")
        stop(d, owning: "org.example.Permissions")
        let (p, _) = start(peerSpec(), owning: corePeerBusName)
        stop(p, owning: corePeerBusName)

        var startup: [String: [Double]] = [:]
        var rss: [String: [(rss: Int, anon: Int, file: Int)]] = [:]
        var threads: [String: Int] = [:]
        let variants = ["empty", "big", "peer"]
        for i in 0..<n {
            for k in 0..<variants.count {
                let variant = variants[(k + i) % variants.count]
                if variant == "peer" {
                    let (child, ms) = start(peerSpec(), owning: corePeerBusName)
                    startup[variant, default: []].append(ms)
                    if let m = child.memory { rss[variant, default: []].append(m) }
                    threads[variant] = child.threads
                    stop(child, owning: corePeerBusName)
                    continue
                }
                let (child, ms) = start(daemonSpec(state: variant == "empty" ? "state-empty" : "state-big"),
                                        owning: "org.example.Permissions")
                startup[variant, default: []].append(ms)
                if let m = child.memory { rss[variant, default: []].append(m) }
                threads[variant] = child.threads
                stop(child, owning: "org.example.Permissions")
            }
        }
        // Idle: one more start of each, read after a second (as `memory` does), when
        // start-up's threads, buffers and code have gone; the starts above are
        // read right when the name is owned.
        var settled: [String: (rss: Int, anon: Int, file: Int)] = [:]
        for variant in ["empty", "peer"] {
            let name = variant == "peer" ? corePeerBusName : "org.example.Permissions"
            let (child, _) = start(variant == "peer" ? peerSpec() : daemonSpec(state: "state-empty"), owning: name)
            sleepSeconds(1)  // idle: a measuring pause, not a synchronisation
            settled[variant] = child.memory
            stop(child, owning: name)
        }
        // Start-up and idle RSS.
        let s = startup.mapValues { Samples($0) }
        func medianKiB(_ v: String, _ key: KeyPath<(rss: Int, anon: Int, file: Int), Int>) -> Int {
            let values = (rss[v] ?? []).map { $0[keyPath: key] }.sorted()
            return values.isEmpty ? 0 : values[values.count / 2]
        }
        let floorMemory = floor.memory
        let cFloorMemory = cFloor.memory
        var table = Table("Start-up: process start -> bus name owned (\(n) starts each); RSS then, and idle (+1 s)",
                              columns: ["measurement", "permissionsd", "C floor", "DBusKit floor", "xdg-permission-store",
                                        "vs peer", "target", "met"])
        let startupMedian = s["empty"]!.p50
        let startupTarget = report.check(.startupVsPeer, ratio(startupMedian, s["peer"]!.p50))
        table.add(["start-up median (ms)", format(startupMedian), "-", "-", format(s["peer"]!.p50),
                   ratioText(ratio(startupMedian, s["peer"]!.p50)), startupTarget.wanted,
                   startupTarget.metText])
        table.add(["start-up max (ms)", format(s["empty"]!.max), "-", "-", format(s["peer"]!.max), "", "", ""])
        let idle = mebibytes(settled["empty"]?.rss ?? 0)
        let peerIdle = mebibytes(settled["peer"]?.rss ?? 0)
        let rssTarget = report.check(.idleRSS, idle)
        table.add(["idle RSS (MiB), +1 s", format(idle), cFloorMemory.map { format(mebibytes($0.rss)) } ?? "-",
                   floorMemory.map { format(mebibytes($0.rss)) } ?? "-", format(peerIdle),
                   ratioText(ratio(idle, peerIdle)), rssTarget.wanted, rssTarget.metText])
        table.add(["RSS when the name is owned (MiB)", format(mebibytes(medianKiB("empty", \.rss))), "-", "-",
                   format(mebibytes(medianKiB("peer", \.rss))), "", "", ""])
        table.add(["  anonymous (MiB), +1 s", format(mebibytes(settled["empty"]?.anon ?? 0)),
                   cFloorMemory.map { format(mebibytes($0.anon)) } ?? "-",
                   floorMemory.map { format(mebibytes($0.anon)) } ?? "-", format(mebibytes(settled["peer"]?.anon ?? 0)),
                   "", "", ""])
        table.add(["  file-backed (MiB), +1 s", format(mebibytes(settled["empty"]?.file ?? 0)),
                   cFloorMemory.map { format(mebibytes($0.file)) } ?? "-",
                   floorMemory.map { format(mebibytes($0.file)) } ?? "-", format(mebibytes(settled["peer"]?.file ?? 0)),
                   "", "", ""])
        table.add(["threads after start-up", "\(threads["empty"] ?? 0)", "\(cFloor.threads)", "\(floor.threads)", "\(threads["peer"] ?? 0)",
                   "", "", ""])
        table.print()
        print("plugins: " + pluginList.map { "\($0.0) (\($0.1))" }.joined(separator: ", ")
              + "; the DBusKit floor is this bench's own binary (it links Foundation), the C floor links libdbus alone")
        printJSONLine("startup", [
            ("runs", .int(n)), ("median_ms", .num(startupMedian)), ("max_ms", .num(s["empty"]!.max)),
            ("min_ms", .num(s["empty"]!.min)),
            ("peer_median_ms", .num(s["peer"]!.p50)), ("peer_max_ms", .num(s["peer"]!.max)),
            ("ratio_peer", .num(ratio(startupMedian, s["peer"]!.p50))),
            ("plugins", .strings(pluginList.map { "\($0.0):\($0.1)" })),
            ("target_ratio_peer", .num(startupTarget.limit.value)), ("met", .bool(startupTarget.met)),
        ])
        printJSONLine("idle_rss", [
            ("rss_kib", .int(settled["empty"]?.rss ?? 0)), ("anon_kib", .int(settled["empty"]?.anon ?? 0)),
            ("file_kib", .int(settled["empty"]?.file ?? 0)), ("threads", .int(threads["empty"] ?? 0)),
            ("name_owned_rss_kib", .int(medianKiB("empty", \.rss))),
            ("peer_rss_kib", .int(settled["peer"]?.rss ?? 0)), ("peer_anon_kib", .int(settled["peer"]?.anon ?? 0)),
            ("peer_name_owned_rss_kib", .int(medianKiB("peer", \.rss))),
            ("c_floor_rss_kib", .int(cFloorMemory?.rss ?? 0)), ("dbuskit_floor_rss_kib", .int(floorMemory?.rss ?? 0)),
            ("target_mib", .num(rssTarget.limit.value)), ("met", .bool(rssTarget.met)),
        ])

        // Scale.
        let l = scaleLatency(starts: options.scaleStarts).mapValues { Samples($0) }
        var scale = Table("Scale: \(options.decisions) stored decisions against an empty store (start-up: \(n) starts "
                              + "each; GetStatus: \(options.scaleStarts) starts of both stores' daemons side by side, "
                              + "called in turns, \(options.scaleCalls) calls per target and start)",
                              columns: ["measurement", "empty store", "\(options.decisions) decisions", "change",
                                        "target", "met"])
        let startupDelta = s["big"]!.p50 - s["empty"]!.p50
        let startupScale = report.check(.scaleStartup, startupDelta, detail: "\(options.decisions) decisions")
        scale.add(["start-up median (ms)", format(s["empty"]!.p50), format(s["big"]!.p50),
                   "+" + format(startupDelta) + " ms", startupScale.wanted, startupScale.metText])
        scale.add(["start-up max (ms)", format(s["empty"]!.max), format(s["big"]!.max), "", "", ""])
        scale.add(["RSS when the name is owned (MiB)", format(mebibytes(medianKiB("empty", \.rss))), format(mebibytes(medianKiB("big", \.rss))),
                   "+" + format(mebibytes(medianKiB("big", \.rss) - medianKiB("empty", \.rss))) + " MiB", "", ""])
        var scaleJSON: [(String, JSONValue)] = [
            ("decisions", .int(options.decisions)), ("fill_s", .num(fillSeconds)),
            ("startup_median_ms", .num(s["big"]!.p50)), ("startup_max_ms", .num(s["big"]!.max)),
            ("empty_startup_median_ms", .num(s["empty"]!.p50)), ("startup_delta_ms", .num(startupDelta)),
            ("rss_kib", .int(medianKiB("big", \.rss))), ("empty_rss_kib", .int(medianKiB("empty", \.rss))),
        ]
        for (permission, label, key) in [("location", "GetStatus p50 (µs), app with a decision", "decision"),
                                         ("notifications", "GetStatus p50 (µs), no decision", "no_decision")] {
            let empty = l["empty " + permission]!
            let big = l["big " + permission]!
            let change = (big.p50 - empty.p50) / empty.p50 * 100
            let t = report.check(key == "decision" ? .scaleWithDecision : .scaleNoDecision, abs(change),
                                 detail: "\(options.decisions) decisions")
            scale.add([label, format(empty.p50), format(big.p50), String(format: "%+.1f %%", change),
                       "|change| " + t.wanted, t.metText])
            scale.add(["  p99 (µs)", format(empty.p99), format(big.p99), "", "", ""])
            scaleJSON += [("\(key)_p50_us", .num(big.p50)), ("\(key)_p99_us", .num(big.p99)),
                          ("\(key)_empty_p50_us", .num(empty.p50)), ("\(key)_empty_p99_us", .num(empty.p99)),
                          ("\(key)_change_pct", .num(change, 2))]
        }
        scale.print()
        print("app with a decision: the bench itself (\(appID)) for location, stored among \(options.decisions - 1) "
              + "other apps' decisions; no decision: the same app for notifications. The store was filled in "
              + String(format: "%.2f s", fillSeconds) + " by /usr/bin/python3.")
        scaleJSON += [("startup_met", .bool(startupScale.met)), ("samples_per_target", .int(l["big location"]!.count))]
        printJSONLine("scale", scaleJSON)
    }

    /// Fills the daemon's own (schema-made) store with `count` decisions of the
    /// bench's user for location: `count - 1` distinct other apps and the bench's own app id.
    private func fillStore(_ path: String, count: Int, ownApp: String) {
        let script = """
            import sqlite3, sys, time
            path, count, own, uid = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
            db = sqlite3.connect(path)
            now = int(time.time() * 1e6)
            rows = ((uid, f"org.example.bench.App{i:07d}", "location", "authorized" if i % 2 else "denied", now,
                     "uid 0 (permissions-bench)") for i in range(count - 1))
            with db:
                db.executemany("INSERT OR REPLACE INTO user_decisions (uid, app_id, permission, decision, set_at, set_by) "
                               "VALUES (?, ?, ?, ?, ?, ?)", rows)
                db.execute("INSERT OR REPLACE INTO user_decisions (uid, app_id, permission, decision, set_at, set_by) "
                           "VALUES (?, ?, 'location', 'authorized', ?, 'uid 0 (permissions-bench)')", (uid, own, now))
            n = db.execute("SELECT count(*) FROM user_decisions").fetchone()[0]
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            db.close()
            print(n)
            """
        runFillScript(script, name: "fill-store", [path, String(count), ownApp, String(getuid())], rows: count)
    }

    /// Runs a store-filling Python script (its first argument the store), which
    /// prints the rows the store then holds; fails the bench unless that is `rows`.
    func runFillScript(_ script: String, name: String, _ arguments: [String], rows: Int) {
        let scriptPath = root + "/\(name).py"
        try? script.write(toFile: scriptPath, atomically: true, encoding: .utf8)
        let log = root + "/logs/\(name).log"
        let status = SpawnSpec("/usr/bin/python3", [scriptPath] + arguments, log: log).run()
        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        guard status == 0, Int(output.trimmingCharacters(in: .whitespacesAndNewlines)) == rows else {
            fail("filling the store failed (status \(status)): \(output)")
        }
    }

    // MARK: Long-lived instances

    private func startLongLived() {
        let (p, _) = start(peerSpec(), owning: corePeerBusName)
        peer = p
        _ = call(corePeerBusName, corePeerPath, corePeerBusName, "SetPermission",
                 [.string("bench"), .boolean(true), .string("camera"), .string("org.example.App"), .strings(["yes"])])
        let looked = call(corePeerBusName, corePeerPath, corePeerBusName, "Lookup", [.string("bench"), .string("camera")])
        guard looked.first?.stringKeyedEntries?.first?.0 == "org.example.App" else {
            fail("xdg-permission-store's Lookup did not return the entry just set: \(looked)")
        }
        let (d, _) = start(daemonSpec(state: "state-main"), owning: "org.example.Permissions")
        daemon = d
        idleMemory = d.memory
        checkPlugins()
        print("long-lived instances: permissionsd pid \(d.pid), xdg-permission-store pid \(p.pid), C floor pid \(cFloor.pid), DBusKit floor pid \(floor.pid), "
              + "dbus-daemon pid \(bus.processIdentifier ?? 0)")
        fflush(nil)
        let status = daemonCall("GetStatus", [.string("location")]).first?.stringValue
        daemonCalls += 1
        guard status == "not-determined" else { fail("GetStatus(location) gave \(status ?? "nothing")") }
    }

    private var idleMemory: (rss: Int, anon: Int, file: Int)?

    /// How many bus calls the daemon makes for a new connection's GetStatus calls:
    /// dbus-monitor watches the daemon's method calls to the bus while one fresh
    /// connection makes 1000 calls and a second one makes one (its arrival in the
    /// monitor's output marks the end of the first's).
    private func identityCheck() {
        let owner = call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner",
                         [.string("org.example.Permissions")]).first?.stringValue ?? ""
        let out = root + "/logs/monitor.log"
        let (monitor, _) = SpawnSpec("/usr/bin/dbus-monitor",
                                         ["--address", bus.address,
                                          try! MatchRule(["type": "method_call", "sender": owner,
                                                          "destination": "org.freedesktop.DBus"]).text],
                                         log: out).spawn()
        defer { monitor.kill() }
        func text() -> String { (try? String(contentsOfFile: out, encoding: .utf8)) ?? "" }
        func waitFor(_ needle: String) -> Bool {
            for _ in 0..<500 {
                if text().contains(needle) { return true }
                sleepSeconds(0.01)
            }
            return false
        }
        guard waitFor("member=NameLost") else { fail("dbus-monitor did not start; see \(out)") }
        let count = 1000
        let b = openBlocking(bus.address)
        let target = CallTarget.getStatus("location")
        for _ in 0..<count { busCall(b, target.message()) }
        let c = openBlocking(bus.address)
        busCall(c, target.message())
        daemonCalls += count + 1
        guard waitFor("string \"\(c.uniqueName)\"") else { fail("dbus-monitor did not see the second connection") }
        // The daemon's calls (each a "method call" line and its argument lines) before
        // the first one about the second connection.
        var calls: [String] = []
        for line in text().components(separatedBy: "\n") {
            if line.hasPrefix("method call") { calls.append(line) } else if !calls.isEmpty { calls[calls.count - 1] += "\n" + line }
        }
        let before = calls.prefix { !$0.contains("string \"\(c.uniqueName)\"") }
        let during = before.count
        let aboutB = before.filter { $0.contains("string \"\(b.uniqueName)\"") }.count
        b.close()
        c.close()
        let t = report.check(.identity, Double(during), detail: "\(count) calls")
        var table = Table("Caller identity: the daemon's method calls to the bus (dbus-monitor)",
                              columns: ["measurement", "value", "target", "met"])
        table.add(["bus calls for \(count) GetStatus on one new connection", "\(during)",
                   t.wanted + " (first call only)", t.metText])
        table.add(["  of them about that connection", "\(aboutB)", "", ""])
        table.print()
        printJSONLine("identity_bus_calls", [("getstatus_calls", .int(count)), ("bus_calls", .int(during)),
                                           ("about_caller", .int(aboutB)), ("met", .bool(t.met))])
    }

    // MARK: Latency

    private func latency() {
        // Index 0 permissionsd; 1 the C floor's Status(s) (the floor the limits judge by:
        // the same request and reply shape, libdbus alone); 2 the DBusKit floor's
        // Status(s) (what our framework costs, reported); 3 and 4 their Pings (no body:
        // references); 5 the peer.
        let targets = [CallTarget.getStatus("location"), CallTarget.cFloorStatus, CallTarget.floorStatus,
                       CallTarget.cFloorPing, CallTarget.floorPing, CallTarget.peerLookup]
        let pids = [daemon?.pid ?? 0, cFloor.pid, floor.pid, peer?.pid ?? 0, Int32(bus.processIdentifier ?? 0)]
        let cpuBefore = pids.map(cpuNanoseconds)
        let samples = coreLatency(client, targets, warmup: options.warmup, calls: options.calls,
                                  roundSize: options.roundSize)
        let cpu = zip(pids.map(cpuNanoseconds), cpuBefore).map { Double($0 - $1) / 1000 }
        daemonCalls += options.warmup + options.calls
        let (d, c, k, cg, kg, p) = (Samples(samples[0]), Samples(samples[1]), Samples(samples[2]),
                                    Samples(samples[3]), Samples(samples[4]), Samples(samples[5]))
        let rounds = (options.calls + options.roundSize - 1) / options.roundSize
        var table = Table("GetStatus latency: one connection, blocking round trips, \(options.calls) per target "
                              + "after \(options.warmup) warm-up, interleaved in \(rounds) rounds (µs); the limits "
                              + "judge against the C floor",
                              columns: ["measurement", "permissionsd", "C floor Status(s)", "DBusKit floor Status(s)",
                                        "C floor Ping", "DBusKit floor Ping", "peer Lookup", "vs C floor",
                                        "vs DBusKit floor", "vs peer", "target", "met"])
        let r50 = ratio(d.p50, c.p50)
        let r99 = ratio(d.p99, c.p99)
        let t50 = report.check(.latencyP50, r50)
        let t99 = report.check(.latencyP99, r99)
        func row(_ name: String, _ value: (Samples) -> Double, _ target: Verdict?) -> [String] {
            [name, format(value(d)), format(value(c)), format(value(k)), format(value(cg)), format(value(kg)),
             format(value(p)), ratioText(ratio(value(d), value(c))), ratioText(ratio(value(d), value(k))),
             ratioText(ratio(value(d), value(p))), target?.wanted ?? "", target?.metText ?? ""]
        }
        table.add(row("p50 (µs)", \.p50, t50))
        table.add(row("p99 (µs)", \.p99, t99))
        table.add(row("p99.9 (µs)", { $0.percentile(99.9) }, nil))
        table.add(row("max (µs)", \.max, nil))
        table.print()
        // Where a round trip's time goes: each process's CPU time (schedstat, every
        // thread) over the section, per call it served; each floor served two targets,
        // dbus-daemon routes every call and reply of all six.
        let served = Double(options.warmup + options.calls)
        let perCall = [cpu[0] / served, cpu[1] / (2 * served), cpu[2] / (2 * served), cpu[3] / served,
                       cpu[4] / (6 * served)]
        print("CPU per call (µs, on-CPU time of every thread / calls served): permissionsd "
              + "\(format(perCall[0])), C floor \(format(perCall[1])), DBusKit floor \(format(perCall[2])) "
              + "(each its Status and Ping calls alike), xdg-permission-store \(format(perCall[3])); "
              + "dbus-daemon \(format(perCall[4])) per call routed (call and reply)")
        printJSONLine("cpu_per_call", [("permissionsd_us", .num(perCall[0])), ("c_floor_us", .num(perCall[1])),
                                     ("dbuskit_floor_us", .num(perCall[2])), ("peer_us", .num(perCall[3])),
                                     ("dbus_daemon_us", .num(perCall[4]))])
        printJSONLine("getstatus_latency", [
            ("calls", .int(options.calls)), ("warmup", .int(options.warmup)), ("rounds", .int(rounds)),
            ("p50_us", .num(d.p50)), ("p99_us", .num(d.p99)), ("p999_us", .num(d.percentile(99.9))), ("max_us", .num(d.max)),
            ("c_floor_p50_us", .num(c.p50)), ("c_floor_p99_us", .num(c.p99)), ("c_floor_max_us", .num(c.max)),
            ("dbuskit_floor_p50_us", .num(k.p50)), ("dbuskit_floor_p99_us", .num(k.p99)),
            ("dbuskit_floor_max_us", .num(k.max)),
            ("c_ping_p50_us", .num(cg.p50)), ("c_ping_p99_us", .num(cg.p99)),
            ("dbuskit_ping_p50_us", .num(kg.p50)), ("dbuskit_ping_p99_us", .num(kg.p99)),
            ("peer_p50_us", .num(p.p50)), ("peer_p99_us", .num(p.p99)), ("peer_max_us", .num(p.max)),
            ("ratio_p50", .num(r50)), ("ratio_p99", .num(r99)),
            ("dbuskit_ratio_p50", .num(ratio(d.p50, k.p50))), ("dbuskit_ratio_p99", .num(ratio(d.p99, k.p99))),
            ("ping_ratio_p50", .num(ratio(d.p50, cg.p50))), ("ping_ratio_p99", .num(ratio(d.p99, cg.p99))),
            ("peer_ratio_p50", .num(ratio(d.p50, p.p50))), ("peer_ratio_p99", .num(ratio(d.p99, p.p99))),
            ("met_p50", .bool(t50.met)), ("met_p99", .bool(t99.met)),
        ])
    }

    // MARK: Throughput

    private func throughput() {
        // The same six as in latency(): permissionsd, C floor Status(s), DBusKit floor
        // Status(s), their Pings, peer.
        let targets = [CallTarget.getStatus("location"), CallTarget.cFloorStatus, CallTarget.floorStatus,
                       CallTarget.cFloorPing, CallTarget.floorPing, CallTarget.peerLookup]
        let k = options.inFlight
        var table = Table("Throughput: N connections, each on its own queue with \(k) calls in flight, "
                              + "\(format(options.seconds)) s per target and N in \(options.rounds) interleaved "
                              + "windows (calls/s); the limit judges against the C floor",
                              columns: ["connections", "permissionsd", "C floor Status(s)", "DBusKit floor Status(s)",
                                        "C floor Ping", "DBusKit floor Ping", "peer Lookup", "vs C floor",
                                        "vs DBusKit floor", "vs peer", "target", "met"])
        let window = options.seconds / Double(options.rounds)
        var lines: [[(String, JSONValue)]] = []
        for n in options.connections {
            let pool = CoreLoadPool(address: bus.address, connections: n)
            // Warm-up: first calls (the daemon identifies each new connection once).
            for t in targets {
                let (_, made) = pool.run(t, inFlight: k, seconds: min(0.1, window), settle: 0)
                if t === targets[0] { daemonCalls += made }
            }
            var totals = [Double](repeating: 0, count: targets.count)
            for r in 0..<options.rounds {
                for j in 0..<targets.count {
                    let index = (j + r) % targets.count
                    let (rate, made) = pool.run(targets[index], inFlight: k, seconds: window, settle: 0.02)
                    totals[index] += rate
                    if index == 0 { daemonCalls += made }
                }
            }
            pool.close()
            let rates = totals.map { $0 / Double(options.rounds) }
            let rc = ratio(rates[0], rates[1])
            let rk = ratio(rates[0], rates[2])
            let rp = ratio(rates[0], rates[5])
            var target = ""
            var met = ""
            var fields: [(String, JSONValue)] = [
                ("connections", .int(n)), ("in_flight", .int(k)), ("seconds", .num(options.seconds)),
                ("calls_per_s", .num(rates[0], 0)), ("c_floor_calls_per_s", .num(rates[1], 0)),
                ("dbuskit_floor_calls_per_s", .num(rates[2], 0)), ("c_ping_calls_per_s", .num(rates[3], 0)),
                ("dbuskit_ping_calls_per_s", .num(rates[4], 0)), ("peer_calls_per_s", .num(rates[5], 0)),
                ("ratio_floor", .num(rc)), ("ratio_dbuskit_floor", .num(rk)), ("ratio_ping", .num(ratio(rates[0], rates[3]))),
                ("ratio_peer", .num(rp)),
            ]
            if n == 64 {
                // Against the C floor only: all are bounded by dbus-daemon, and the
                // other ratios are printed beside it.
                let tf = report.check(.throughput, rc)
                target = "\(tf.wanted) C floor"
                met = tf.metText
                fields += [("met_floor", .bool(tf.met))]
            }
            table.add(["\(n)", format(rates[0]), format(rates[1]), format(rates[2]), format(rates[3]), format(rates[4]),
                       format(rates[5]), ratioText(rc), ratioText(rk), ratioText(rp), target, met])
            lines.append(fields)
        }
        table.print()
        for fields in lines { printJSONLine("throughput", fields) }
    }

    // MARK: Writes

    /// SetDecision throughput with durability, against xdg-permission-store's
    /// SetPermission: N writers, each a connection with one call in flight (a writer
    /// waits for its acknowledgment), each flipping its own entry so that every call
    /// is a write. permissionsd acknowledges after its commit (WAL, synchronous=FULL:
    /// fsync before the reply).
    private func writes() {
        let targets = [CallTarget.setDecision, CallTarget.peerSetPermission]
        var table = Table("Writes: N writers, each a connection with 1 call in flight, each flipping its own entry, "
                              + "\(format(options.seconds)) s per target and N in \(options.rounds) interleaved windows "
                              + "(writes/s)",
                              columns: ["writers", "SetDecision", "peer SetPermission", "vs peer"])
        let window = options.seconds / Double(options.rounds)
        var lines: [[(String, JSONValue)]] = []
        for n in options.connections {
            let pool = CoreLoadPool(address: bus.address, connections: n)
            for t in targets { _ = pool.run(t, inFlight: 1, seconds: min(0.1, window), settle: 0) }
            var totals = [Double](repeating: 0, count: targets.count)
            for r in 0..<options.rounds {
                for j in 0..<targets.count {
                    let index = (j + r) % targets.count
                    totals[index] += pool.run(targets[index], inFlight: 1, seconds: window, settle: 0.02).0
                }
            }
            pool.close()
            let rates = totals.map { $0 / Double(options.rounds) }
            let rp = ratio(rates[0], rates[1])
            table.add(["\(n)", format(rates[0]), format(rates[1]), ratioText(rp)])
            lines.append([("writers", .int(n)), ("seconds", .num(options.seconds)), ("writes_per_s", .num(rates[0], 0)),
                          ("peer_writes_per_s", .num(rates[1], 0)), ("ratio_peer", .num(rp))])
        }
        table.print()
        for fields in lines { printJSONLine("writes", fields) }
    }

    // MARK: Fan-out

    /// Fan-out, two ways, each against its own floor, in C (judged) and on DBusKit
    /// (reported), all three triggers taking turns:
    /// - broadcast: a trigger that writes nothing, a plugin publication: the bench
    ///   plays bluetoothd (BlueZBench's, on the bench's bus, which is the daemon's
    ///   system bus) and flips its adapter's Powered; the bluetooth plugin publishes
    ///   and the daemon broadcasts StatusChanged("", bluetooth, …), against the floor's
    ///   Emit -> one broadcast Tick;
    /// - unicast: SetDecision (committed with fsync, then one StatusChanged to each
    ///   subscriber of the caller's user), against the floor's EmitEach -> one unicast
    ///   Tick per subscriber. The commit is taken off per trigger: the first
    ///   subscriber hears the first signal one bus hop after the commit ended, as the
    ///   floor's first subscriber does one hop after EmitEach arrived, so "after the
    ///   commit" is (last - first arrival) + the floor's median (first arrival - trigger),
    ///   and the commit is the daemon's median (first arrival - trigger) less the floor's;
    ///   "the floor" there is the C floor.
    private func fanout() {
        let collector = CoreFanoutCollector()
        let daemonOwner = busOwner("org.example.Permissions")
        let floorOwner = busOwner(coreFloorBusName)
        let cFloorOwner = busOwner(coreCFloorBusName)
        var decisions = 0  // each SetDecision flips the stored decision, so each is a change
        var flips = 0  // adapter power changes
        let bluetoothd = BZBluetoothd(address: bus.address)
        defer { bluetoothd.close() }
        // The plugin follows org.bluez appearing: wait until it serves the adapter.
        let deadline = monotonicNanoseconds() + 20_000_000_000
        while daemonCall("GetStatus", [.string("bluetooth")]).first?.stringValue != "not-determined" {
            if monotonicNanoseconds() > deadline { fail("the bluetooth plugin did not follow the bench's bluetoothd") }
            sleepSeconds(0.01)
        }
        var table = Table("Signal fan-out: trigger sent -> the last of S subscribers has the signal (µs); broadcast: "
                              + "adapter Powered flipped -> StatusChanged vs floor Emit -> Tick; unicast: SetDecision -> "
                              + "StatusChanged, from the commit, vs floor EmitEach -> Tick; the limits judge against "
                              + "the C floor",
                              columns: ["kind", "subscribers", "permissionsd p50", "C floor p50", "DBusKit floor p50",
                                        "vs C floor", "vs DBusKit floor", "permissionsd p99", "C floor p99",
                                        "vs C floor", "commit p50", "with commit p50", "target", "met"])
        var lines: [[(String, JSONValue)]] = []
        for unicast in [false, true] {
            for s in options.subscribers {
                let mode: CoreSubscriber.Mode = unicast ? .unicast(daemon: daemonOwner, floor: floorOwner, cFloor: cFloorOwner)
                    : .broadcast(floor: floorOwner, cFloor: cFloorOwner)
                var subscribers: [CoreSubscriber] = []
                for i in 0..<s {
                    subscribers.append(CoreSubscriber(address: bus.address, index: i, app: coreFanoutApp, mode: mode,
                                                      collector: collector))
                }
                pingBus(subscribers.map(\.connection))
                if unicast {
                    let group = Group()
                    for sub in subscribers { sub.subscribe(group: group) }
                    guard group.wait(timeout: .now() + 30) == .success else { fail("Subscribe did not answer") }
                }
                let count = s >= 1000 ? options.triggersHuge : s >= 100 ? options.triggersLarge : options.triggers
                // By kind: permissionsd, the DBusKit floor, the C floor (CoreSubscriber's kinds).
                var total: [[Double]] = [[], [], []]
                var first: [[Double]] = [[], [], []]
                var spread: [[Double]] = [[], [], []]
                let warm = 5
                for i in 0..<(warm + count) {
                    for j in 0..<3 {
                        let kind = (i + j) % 3  // rotate which goes first
                        let label: String
                        collector.expect(kind: kind, subscribers: s)
                        let t0: UInt64
                        if kind == CoreSubscriber.floorKind || kind == CoreSubscriber.cFloorKind {
                            let c = kind == CoreSubscriber.cFloorKind
                            let target = unicast ? (c ? cFloorEachTrigger : floorEachTrigger)
                                : (c ? cFloorTrigger : floorTrigger)
                            label = target.label
                            let message = target.message()
                            t0 = monotonicNanoseconds()
                            busCall(client, message)
                        } else if unicast {
                            decisions += 1
                            let target = setDecisionTrigger(decisions)
                            label = target.label
                            let message = target.message()
                            t0 = monotonicNanoseconds()
                            busCall(client, message)
                        } else {
                            label = "PropertiesChanged(Powered)"
                            flips += 1
                            t0 = bluetoothd.setPowered(flips % 2 == 0)  // odd flips power off
                        }
                        guard let arrival = collector.wait(seconds: 10) else {
                            fail("\(label): only \(collector.arrivedCount) of \(s) subscribers got the signal "
                                     + "within 10 s")
                        }
                        if i >= warm {
                            total[kind].append(Double(arrival.last - t0) / 1000)
                            first[kind].append(Double(arrival.first - t0) / 1000)
                            spread[kind].append(Double(arrival.last - arrival.first) / 1000)
                        }
                    }
                }
                if unicast {
                    for name in [coreFloorBusName, coreCFloorBusName] {
                        _ = call(name, coreFloorPath, coreFloorInterface, "UnsubscribeAll")
                    }
                }
                for sub in subscribers { sub.close() }
                let floorHop = Samples(first[CoreSubscriber.cFloorKind]).p50
                let commit = unicast ? max(0, Samples(first[0]).p50 - floorHop) : 0
                let withCommit = Samples(total[0])
                let d = unicast ? Samples(spread[0].map { $0 + floorHop }) : withCommit
                let f = Samples(total[CoreSubscriber.cFloorKind])
                let k = Samples(total[CoreSubscriber.floorKind])
                let r50 = ratio(d.p50, f.p50)
                let r99 = ratio(d.p99, f.p99)
                let kindName = unicast ? "unicast" : "broadcast"
                var target = ""
                var met = ""
                var fields: [(String, JSONValue)] = [
                    ("kind", .string(kindName)), ("subscribers", .int(s)), ("triggers", .int(count)),
                    ("p50_us", .num(d.p50)), ("p99_us", .num(d.p99)), ("c_floor_p50_us", .num(f.p50)),
                    ("c_floor_p99_us", .num(f.p99)), ("ratio_p50", .num(r50)), ("ratio_p99", .num(r99)),
                    ("dbuskit_floor_p50_us", .num(k.p50)), ("dbuskit_floor_p99_us", .num(k.p99)),
                    ("dbuskit_ratio_p50", .num(ratio(d.p50, k.p50))), ("dbuskit_ratio_p99", .num(ratio(d.p99, k.p99))),
                    ("with_commit_p50_us", .num(withCommit.p50)), ("commit_p50_us", .num(commit)),
                    ("first_p50_us", .num(Samples(first[0]).p50)), ("c_floor_first_p50_us", .num(floorHop)),
                    ("dbuskit_floor_first_p50_us", .num(Samples(first[CoreSubscriber.floorKind]).p50)),
                    ("strays", .int(collector.strays)),
                ]
                if s == 100 {
                    let t = report.check(unicast ? .fanoutUnicast : .fanoutBroadcast, r50)
                    target = t.wanted
                    met = t.metText
                    fields.append(("met", .bool(t.met)))
                }
                table.add([kindName, "\(s)", format(d.p50), format(f.p50), format(k.p50), ratioText(r50),
                           ratioText(ratio(d.p50, k.p50)), format(d.p99), format(f.p99), ratioText(r99), unicast ? format(commit) : "-",
                           unicast ? format(withCommit.p50) : "-", target, met])
                lines.append(fields)
            }
        }
        table.print()
        print("unicast, from the commit: (last - first arrival) + the C floor's median (first arrival - EmitEach sent); "
              + "commit: the daemon's median (first arrival - SetDecision sent) less the C floor's")
        for fields in lines { printJSONLine("fanout", fields) }
        if collector.strays > 0 { print("note: \(collector.strays) signals arrived that no trigger asked for") }
    }

    func busOwner(_ name: String) -> String {
        guard let owner = call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner",
                               [.string(name)]).first?.stringValue else { fail("\(name) has no owner") }
        return owner
    }

    private func setDecisionTrigger(_ i: Int) -> CallTarget {
        CallTarget("SetDecision", destination: "org.example.Permissions", path: "/org/example/Permissions",
                       interface: "org.example.Permissions", member: "SetDecision",
                       [.string(coreFanoutApp), .string("location"), .string(i % 2 == 0 ? "authorized" : "denied")])
    }

    private let floorTrigger = CallTarget("Emit", destination: coreFloorBusName, path: coreFloorPath,
                                              interface: coreFloorInterface, member: "Emit", [.string(coreFanoutApp)])
    private let cFloorTrigger = CallTarget("C floor Emit", destination: coreCFloorBusName, path: coreFloorPath,
                                           interface: coreFloorInterface, member: "Emit", [.string(coreFanoutApp)])
    private let cFloorEachTrigger = CallTarget("C floor EmitEach", destination: coreCFloorBusName, path: coreFloorPath,
                                               interface: coreFloorInterface, member: "EmitEach",
                                               [.string(coreFanoutApp)])
    private let floorEachTrigger = CallTarget("EmitEach", destination: coreFloorBusName, path: coreFloorPath,
                                                  interface: coreFloorInterface, member: "EmitEach",
                                                  [.string(coreFanoutApp)])

    // MARK: RSS over calls

    private func rssOverCalls() {
        guard let daemon else { return }
        let warmCalls = daemonCalls
        let warm = daemon.memory
        let blastStart = monotonicNanoseconds()
        var blasted = 0
        if daemonCalls < options.rssCalls {
            let pool = CoreLoadPool(address: bus.address, connections: 8)
            blasted = pool.runUntil(CallTarget.getStatus("location"), inFlight: 16, total: options.rssCalls - daemonCalls)
            pool.close()
            daemonCalls += blasted
        }
        let blastSeconds = Double(monotonicNanoseconds() - blastStart) / 1e9
        let after = daemon.memory
        let idleKiB = idleMemory?.rss ?? 0
        let warmKiB = warm?.rss ?? 0
        let afterKiB = after?.rss ?? 0
        let growth = afterKiB - warmKiB
        let t = report.check(.rssGrowth, mebibytes(growth), detail: "from \(warmCalls) to \(daemonCalls) calls")
        var table = Table("RSS of the long-lived permissionsd over \(daemonCalls) GetStatus calls",
                              columns: ["point", "GetStatus calls", "VmRSS (MiB)", "RssAnon (MiB)", "RssFile (MiB)"])
        table.add(["idle, right after start-up", "0", format(mebibytes(idleKiB)), format(mebibytes(idleMemory?.anon ?? 0)),
                   format(mebibytes(idleMemory?.file ?? 0))])
        table.add(["after the other sections", "\(warmCalls)", format(mebibytes(warmKiB)),
                   format(mebibytes(warm?.anon ?? 0)), format(mebibytes(warm?.file ?? 0))])
        table.add(["after the top-up blast", "\(daemonCalls)", format(mebibytes(afterKiB)),
                   format(mebibytes(after?.anon ?? 0)), format(mebibytes(after?.file ?? 0))])
        table.print()
        let perCall = Double(growth * 1024) / Double(max(1, daemonCalls - warmCalls))
        print("growth over the last \(daemonCalls - warmCalls) calls: \(growth) KiB (\(String(format: "%.3f", perCall)) "
              + "bytes per call), limit \(t.wanted): \(t.met ? "met" : "MISSED"); since idle: \(afterKiB - idleKiB) KiB. "
              + "Top-up: \(blasted) calls on 8 connections (16 in flight each) in " + String(format: "%.1f s", blastSeconds)
              + "; the peer's RSS now: \(peer?.memory.map { "\($0.rss) KiB" } ?? "-")")
        printJSONLine("rss", [
            ("idle_kib", .int(idleKiB)), ("warm_calls", .int(warmCalls)), ("warm_kib", .int(warmKiB)),
            ("calls", .int(daemonCalls)), ("after_kib", .int(afterKiB)), ("growth_kib", .int(growth)),
            ("growth_since_idle_kib", .int(afterKiB - idleKiB)), ("bytes_per_call", .num(perCall)),
            ("after_anon_kib", .int(after?.anon ?? 0)), ("threads", .int(daemon.threads)),
            ("blast_calls", .int(blasted)), ("blast_s", .num(blastSeconds)), ("met", .bool(t.met)),
        ])
    }
}
