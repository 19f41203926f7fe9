// permissions-bench config-edits: what configuration edits cost everyone else.
// permissionsd (every plugin of the build, as `core` starts it) runs on a
// configuration of many drop-ins (5 000 by default); another user (uid 65534, a
// process of its own: `other-user-caller`) calls GetStatus back to back the whole time,
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
    let dropIns: Int
    let intervalMilliseconds: Int
    /// --window, --rounds, --keep, --smoke.
    let windows: WindowOptions
    var window: Double { windows.window }
    var rounds: Int { windows.rounds }
    var keep: Bool { windows.keep }
    var smoke: Bool { windows.smoke }

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
        var dropIns = 5_000, interval = 200
        windows = WindowOptions(arguments, usage: Self.usage) { option, number in
            switch option {
            case "--quick": dropIns = 1_000
            case "--smoke": dropIns = 50; interval = 100
            case "--drop-ins": dropIns = Int(number())
            case "--interval-ms": interval = Int(number())
            default: return false
            }
            return true
        }
        (self.dropIns, intervalMilliseconds) = (dropIns, interval)
    }
}

func runConfigEditsBench(_ arguments: [String]) {
    ConfigEditsBench(ConfigEditsOptions(arguments)).run()
}

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
        for dir in ["run", "config/permissions.conf.d", "state", "logs"] {
            do { try fm.createDirectory(atPath: root + "/" + dir, withIntermediateDirectories: true) } catch {
                fail("cannot create \(root)/\(dir): \(error)")
            }
        }
        chmod(root + "/run", 0o700)
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
        let caller = OtherUserCaller(root: root, address: bus.address, seconds: windows + 120)
        print("permissions-bench config-edits: \(options.dropIns) drop-ins, an edit every \(options.intervalMilliseconds) ms "
              + "in edit windows; \(options.rounds) rounds of \(format(options.window)) s idle + "
              + "\(format(options.window)) s edits; GetStatus(location) back to back by uid \(otherUserUID); "
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
        let calls = caller.stop()
        let i = samples(calls, within: idle)
        let b = samples(calls, within: busy)
        let r50 = ratio(b.p50, i.p50)
        let r99 = ratio(b.p99, i.p99)
        let t = report.check(.configEdits, r99)
        var table = latencyTable("Configuration edits under load: GetStatus(location) by another user (µs), "
                                     + "\(options.dropIns) drop-ins, an edit every \(options.intervalMilliseconds) ms")
        table.add(latencyRow("idle", i))
        table.add(latencyRow("edits", b))
        table.add(ratioRow("edits vs idle", b, i, t))
        table.print()
        let appliedSamples = Samples(applied)
        print("\(editCount) edits, \(generations) configurations applied (edits made during a reading share the next); "
              + "the last edit of each window in force after " + applied.map { format($0) }.joined(separator: ", ")
              + " ms")
        printJSONLine("config_edits", [
            ("drop_ins", .int(options.dropIns)), ("interval_ms", .int(options.intervalMilliseconds)),
            ("rounds", .int(options.rounds)), ("window_s", .num(options.window)),
        ] + latencyFields("idle", i) + latencyFields("edit", b) + [
            ("ratio_p50", .num(r50)), ("ratio_p99", .num(r99)),
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
}
