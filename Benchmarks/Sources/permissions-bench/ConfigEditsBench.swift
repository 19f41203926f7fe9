// permissions-bench config-edits: what configuration edits cost everyone else.
// permissionsd (every plugin of the build, as `core` starts it) runs on a
// configuration of many drop-ins (5 000 by default); another user (uid 65534, a
// process of its own: `config-caller`) calls GetStatus back to back the whole time,
// while the bench, as the administrator, alternates idle windows with windows in
// which it edits one drop-in every 200 ms (written beside it and renamed into
// place, as editors save). Each call falls in the window it started in; the p50 and
// p99 of the two kinds of window are compared.
//
// An edit window lasts until the daemon serves its last edit (its deny= reads
// "restricted", asked every 2 ms by the bench), so that the last edit's work is in
// it and in no idle window; the time from that last edit to then, and the
// configurations applied during the window (ConfigGeneration), are reported too.
import DBusKit
import Foundation
import PermissionsTestSupport
import SystemPrimitives

struct ConfigEditsOptions {
    var dropIns = 5_000
    var intervalMilliseconds = 200
    var window = 4.0
    var rounds = 3
    var keep = false
    /// --smoke: the smallest run, to show the bench works (CI), not to measure.
    var smoke = false

    static let usage = """
        usage: permissions-bench config-edits [--quick] [--smoke] [--drop-ins N] [--interval-ms N] [--window S] [--rounds N] [--keep]
          --quick          a few seconds: 1 000 drop-ins, one round of 1 s windows (figures are rougher)
          --smoke          50 drop-ins, one round of 0.3 s windows, to check that the bench works (no figures)
          --drop-ins N     drop-in files in permissions.conf.d (default 5000)
          --interval-ms N  time between two edits in an edit window (default 200)
          --window S       length of each idle and each edit window (default 4)
          --rounds N       idle window + edit window pairs, interleaved (default 3)
          --keep           keep the temporary directory (logs, configuration)
        """

    init(_ arguments: [String]) {
        var rest = arguments[...]
        func number(_ option: String) -> Double {
            guard let v = rest.popFirst(), let n = Double(v), n > 0 else { Self.usageError("\(option) needs a positive number") }
            return n
        }
        while let option = rest.popFirst() {
            switch option {
            case "--quick": dropIns = 1_000; window = 1; rounds = 1
            case "--smoke": smoke = true; dropIns = 50; window = 0.3; rounds = 1; intervalMilliseconds = 100
            case "--drop-ins": dropIns = Int(number(option))
            case "--interval-ms": intervalMilliseconds = Int(number(option))
            case "--window": window = number(option)
            case "--rounds": rounds = Int(number(option))
            case "--keep": keep = true
            case "-h", "--help":
                print(Self.usage)
                exit(0)
            default: Self.usageError("unknown option \(option)")
            }
        }
    }

    static func usageError(_ message: String) -> Never {
        fail("\(message)\n\(usage)", code: 2)
    }
}

func runConfigEditsBench(_ arguments: [String]) {
    ConfigEditsBench(ConfigEditsOptions(arguments)).run()
}

/// The uid of the other user, whose calls are measured.
private let configCallerUID = 65534

final class ConfigEditsBench {
    let options: ConfigEditsOptions
    let root: String
    private let report = Report()
    private var edits = 0

    init(_ options: ConfigEditsOptions) {
        self.options = options
        root = makeRunDirectory(keep: options.keep)
    }

    private var dropInDirectory: String { root + "/config/permissions.conf.d" }
    /// The drop-in the edits rewrite: one in the middle, so that files after it still
    /// override it (nothing here does).
    private var editedFile: String { dropInDirectory + "/\(Self.name(options.dropIns / 2))" }

    private static func name(_ i: Int) -> String { String(format: "%05d.conf", i) }

    private func write(_ text: String, to path: String) {
        guard (try? text.write(toFile: path, atomically: false, encoding: .utf8)) != nil else {
            fail("cannot write \(path)")
        }
    }

    func run() {
        let t0 = monotonicNanoseconds()
        let fm = FileManager.default
        for dir in ["run", "config/permissions.conf.d", "state", "logs", "caller"] {
            do { try fm.createDirectory(atPath: root + "/" + dir, withIntermediateDirectories: true) } catch {
                fail("cannot create \(root)/\(dir): \(error)")
            }
        }
        // The caller runs as another user: it must reach its own directory.
        chmod(root, 0o755)
        chmod(root + "/run", 0o700)
        chown(root + "/caller", uid_t(configCallerUID), gid_t(configCallerUID))
        write("[location]\nenabled=true\nmax-accuracy=exact\n\n[notifications]\nenabled=true\n",
              to: root + "/config/permissions.conf")
        for i in 0..<options.dropIns {
            write("# drop-in \(i) of \(options.dropIns)\n[location]\nenabled=true\n", to: dropInDirectory + "/" + Self.name(i))
        }
        write("[notifications]\ndeny=org.example.Edit0\n", to: editedFile)

        let bus = startBus()
        let names = CoreNameWatcher(address: bus.address)
        let mark = names.mark
        let (daemon, spawned) = SpawnSpec(
            binDir + "/permissionsd",
            ["--address", bus.address, "--config-dir", root + "/config", "--state-dir", root + "/state",
             "--plugin-dir", binDir],
            environment: ["DBUS_SYSTEM_BUS_ADDRESS": bus.address, "DBUS_SESSION_BUS_ADDRESS": bus.address,
                          "XDG_RUNTIME_DIR": root + "/run"],
            removing: ["PIPEWIRE_", "DBUS_STARTER_"], log: root + "/logs/permissionsd.log").spawn()
        guard let owned = names.wait(from: mark, name: "org.example.Permissions", owned: true, seconds: 60) else {
            fail("permissionsd did not take its name; see \(root)/logs/permissionsd.log (run with --keep)")
        }
        let startup = Double(owned.at - spawned) / 1e6
        let client = openBlocking(bus.address)
        guard status(client, app: "org.example.Edit0") == "restricted" else {
            fail("the edited drop-in is not in force at start-up; see \(root)/logs/permissionsd.log")
        }

        // The other user, measuring from now until the last window has ended.
        let windows = Double(2 * options.rounds) * options.window
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else { fail("pipe failed") }
        let samplesFile = root + "/caller/samples"
        let callerSpec = SpawnSpec("/usr/bin/setpriv",
                                       ["--reuid=\(configCallerUID)", "--regid=\(configCallerUID)", "--clear-groups",
                                        selfExecutable, "config-caller", "--address", bus.address,
                                        "--seconds", String(windows + 120), "--out", samplesFile,
                                        "--stop", root + "/caller/stop"],
                                       name: "config-caller", log: root + "/logs/caller.log")
        callerSpec.stdoutFD = pipeFDs[1]
        let (caller, _) = callerSpec.spawn()
        close(pipeFDs[1])
        guard readChildLine(pipeFDs[0], seconds: 30) == "ready" else {
            fail("the caller did not start measuring; see \(root)/logs/caller.log (run with --keep)")
        }
        print("permissions-bench config-edits: \(options.dropIns) drop-ins, an edit every \(options.intervalMilliseconds) ms "
              + "in edit windows; \(options.rounds) rounds of \(format(options.window)) s idle + "
              + "\(format(options.window)) s edits; GetStatus(location) back to back by uid \(configCallerUID); "
              + "\(ProcessInfo.processInfo.activeProcessorCount) cores; binaries from \(binDir); "
              + "permissionsd took its name after " + String(format: "%.0f ms", startup))
        fflush(nil)

        var idle: [(UInt64, UInt64)] = []
        var busy: [(UInt64, UInt64)] = []
        var applied: [Double] = []
        var generations = 0
        var editCount = 0
        for _ in 0..<options.rounds {
            let idleStart = monotonicNanoseconds()
            sleepSeconds(options.window)  // the window itself: the caller measures meanwhile
            idle.append((idleStart, monotonicNanoseconds()))

            let before = generation(client)
            let busyStart = monotonicNanoseconds()
            let end = busyStart + UInt64(options.window * 1e9)
            var next = busyStart
            var lastEdit: UInt64 = 0
            while true {
                edits += 1
                editCount += 1
                let temporary = dropInDirectory + "/.edit.tmp"
                write("[notifications]\ndeny=org.example.Edit\(edits)\n", to: temporary)
                lastEdit = monotonicNanoseconds()
                guard rename(temporary, editedFile) == 0 else { fail("rename onto \(editedFile) failed") }
                next += UInt64(options.intervalMilliseconds) * 1_000_000
                guard next < end else { break }
                let now = monotonicNanoseconds()
                if next > now { sleepSeconds(Double(next - now) / 1e9) }  // the pace of the edits
            }
            // The window lasts until the last edit is served (its reading and its
            // switch are in it), which the bench asks every 2 ms meanwhile.
            let deadline = monotonicNanoseconds() + 60_000_000_000
            while status(client, app: "org.example.Edit\(edits)") != "restricted" {
                if monotonicNanoseconds() > deadline { fail("the last edit was not applied within 60 s") }
                sleepSeconds(0.002)
            }
            let served = monotonicNanoseconds()
            busy.append((busyStart, served))
            applied.append(Double(served - lastEdit) / 1e6)
            generations += generation(client) - before
        }
        // Stopped by a file it looks for, so that it writes every sample it has.
        write("", to: root + "/caller/stop")
        let stopDeadline = monotonicNanoseconds() + 10_000_000_000
        while caller.isRunning {
            if monotonicNanoseconds() > stopDeadline { fail("the caller did not stop within 10 s") }
            sleepSeconds(0.01)
        }
        let samples = readSamples(samplesFile)
        func within(_ windows: [(UInt64, UInt64)]) -> Samples {
            Samples(samples.filter { s in windows.contains { s.0 >= $0.0 && s.0 < $0.1 } }.map { Double($0.1) / 1000 })
        }
        let i = within(idle)
        let b = within(busy)
        let r50 = ratio(b.p50, i.p50)
        let r99 = ratio(b.p99, i.p99)
        let t = report.check(.configEdits, r99)
        var table = Table("Configuration edits under load: GetStatus(location) by another user (µs), "
                              + "\(options.dropIns) drop-ins, an edit every \(options.intervalMilliseconds) ms",
                              columns: ["window", "calls", "p50", "p99", "max", "target", "met"])
        table.add(["idle", "\(i.count)", format(i.p50), format(i.p99), format(i.max), "", ""])
        table.add(["edits", "\(b.count)", format(b.p50), format(b.p99), format(b.max), "", ""])
        table.add(["edits vs idle", "", ratioText(r50), ratioText(r99), ratioText(ratio(b.max, i.max)),
                   "p99 " + t.wanted, t.metText])
        table.print()
        let appliedSamples = Samples(applied)
        print("\(editCount) edits, \(generations) configurations applied (edits made during a reading share the next); "
              + "the last edit of each window in force after " + applied.map { format($0) }.joined(separator: ", ")
              + " ms")
        printJSONLine("config_edits", [
            ("drop_ins", .int(options.dropIns)), ("interval_ms", .int(options.intervalMilliseconds)),
            ("rounds", .int(options.rounds)), ("window_s", .num(options.window)),
            ("idle_calls", .int(i.count)), ("idle_p50_us", .num(i.p50)), ("idle_p99_us", .num(i.p99)),
            ("idle_max_us", .num(i.max)),
            ("edit_calls", .int(b.count)), ("edit_p50_us", .num(b.p50)), ("edit_p99_us", .num(b.p99)),
            ("edit_max_us", .num(b.max)), ("ratio_p50", .num(r50)), ("ratio_p99", .num(r99)),
            ("edits", .int(editCount)), ("generations", .int(generations)),
            ("last_edit_applied_ms", .strings(applied.map { format($0) })),
            ("last_edit_applied_max_ms", .num(appliedSamples.max)), ("startup_ms", .num(startup)),
            ("met", .bool(t.met)),
        ])
        report.printVerdicts(smoke: options.smoke)
        print(String(format: "total time %.1f s", Double(monotonicNanoseconds() - t0) / 1e9))
        if options.keep { print("kept \(root)") }
        fflush(nil)
        client.close()
        names.close()
        daemon.kill()
        bus.kill()
        Children.shared.killAll()
    }

    /// GetStatusForApp(app, notifications) from the bench's own connection.
    private func status(_ client: Connection, app: String) -> String {
        let target = CallTarget("GetStatusForApp", destination: "org.example.Permissions",
                                    path: "/org/example/Permissions", interface: "org.example.Permissions",
                                    member: "GetStatusForApp", [.string(app), .string("notifications")])
        return busCall(client, target.message()).arguments().first?.stringValue ?? ""
    }

    private func generation(_ client: Connection) -> Int {
        let target = CallTarget("Get", destination: "org.example.Permissions", path: "/org/example/Permissions",
                                    interface: "org.freedesktop.DBus.Properties", member: "Get",
                                    [.string("org.example.Permissions"), .string("ConfigGeneration")])
        guard case .variant(let value)? = busCall(client, target.message()).arguments().first,
              let generation = value.uint32Value else { fail("ConfigGeneration is not a uint32") }
        return Int(generation)
    }

    /// The caller's samples: (start, duration) in nanoseconds, one call a line.
    private func readSamples(_ path: String) -> [(UInt64, UInt64)] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            fail("the caller wrote no samples to \(path); see \(root)/logs/caller.log (run with --keep)")
        }
        return text.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ")
            guard parts.count == 2, let start = UInt64(parts[0]), let duration = UInt64(parts[1]) else { return nil }
            return (start, duration)
        }
    }
}

/// `config-caller --address A --seconds S --out FILE --stop FILE`: started by
/// `config-edits` as another user. Calls GetStatus(location) back to back; says
/// "ready" on stdout after a warm-up, then keeps "START DURATION" (CLOCK_MONOTONIC
/// nanoseconds) for each call, until S seconds have passed or the stop file exists
/// (looked for every 100 calls), and writes them to the out file.
func runConfigCaller(_ arguments: [String]) {
    var address = "", out = "", stop = "", seconds = 60.0
    var rest = arguments[...]
    while let option = rest.popFirst(), let value = rest.popFirst() {
        switch option {
        case "--address": address = value
        case "--out": out = value
        case "--stop": stop = value
        case "--seconds": seconds = Double(value) ?? seconds
        default: fail("config-caller: unknown option \(option)")
        }
    }
    guard !address.isEmpty, !out.isEmpty, !stop.isEmpty else { fail("config-caller: --address, --out and --stop are needed") }
    let connection = openBlocking(address)
    let target = CallTarget.getStatus("location")
    for _ in 0..<500 { busCall(connection, target.message()) }
    print("ready")
    fflush(nil)
    let end = monotonicNanoseconds() + UInt64(seconds * 1e9)
    var samples: [(UInt64, UInt64)] = []
    samples.reserveCapacity(1 << 20)
    while monotonicNanoseconds() < end, samples.count % 100 != 0 || access(stop, F_OK) != 0 {
        let message = target.message()
        let t0 = monotonicNanoseconds()
        busCall(connection, message)
        samples.append((t0, monotonicNanoseconds() - t0))
    }
    let text = samples.map { "\($0.0) \($0.1)\n" }.joined()
    guard FileManager.default.createFile(atPath: out, contents: text.data(using: .utf8)) else {
        fail("config-caller: cannot write \(out)")
    }
    exit(0)
}
