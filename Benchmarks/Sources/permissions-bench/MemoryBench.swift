// permissions-bench memory: where permissionsd's idle memory is. Starts permissionsd
// (every plugin of the build, as `core` does) and xdg-permission-store on a private
// bus, waits until each owns its name and then a moment for start-up to settle
// (1 s), and prints for each RSS, PSS and USS (its private pages: what stopping it would
// free) from /proc/PID/smaps_rollup, and the largest mappings by resident size
// from /proc/PID/smaps, grouped by file (anonymous ones by their kind).
import Foundation
import PermissionsTestSupport

func runMemoryBench(_ arguments: [String]) {
    var top = 25
    var environment: [String: String] = [:]
    var settle = 1.0
    var rest = arguments[...]
    while let option = rest.popFirst() {
        switch option {
        case "--top":
            guard let v = rest.popFirst(), let n = Int(v), n > 0 else { fail("--top needs a number") }
            top = n
        case "--smoke":
            settle = 0.1  // shows the bench works (CI); the figures need the full second
        case "--daemon-env":
            guard let v = rest.popFirst(), let eq = v.firstIndex(of: "="), eq != v.startIndex else {
                fail("--daemon-env: expected K=V")
            }
            environment[String(v[..<eq])] = String(v[v.index(after: eq)...])
        default:
            fail("usage: permissions-bench memory [--top N] [--daemon-env K=V] [--smoke]", code: 2)
        }
    }
    let report = Report()  // limits.json checked before anything starts
    let root = makeRunDirectory()
    for dir in ["run", "config", "state", "peer-data", "logs"] {
        try? FileManager.default.createDirectory(atPath: root + "/" + dir, withIntermediateDirectories: true)
    }
    chmod(root + "/run", 0o700)
    try? "[location]\nenabled=true\nmax-accuracy=exact\n\n[notifications]\nenabled=true\n"
        .write(toFile: root + "/config/permissions.conf", atomically: true, encoding: .utf8)
    let bus = startBus()
    let names = CoreNameWatcher(address: bus.address)
    func start(_ spec: SpawnSpec, owning name: String) -> Child {
        let mark = names.mark
        let (child, _) = spec.spawn()
        guard names.wait(from: mark, name: name, owned: true, seconds: 20) != nil else {
            fail("\(spec.name) did not take \(name); see \(root)/logs")
        }
        return child
    }
    let daemon = start(SpawnSpec(binDir + "/permissionsd",
                                     ["--address", bus.address, "--config-dir", root + "/config",
                                      "--state-dir", root + "/state", "--plugin-dir", binDir],
                                     environment: environment.merging(
                                        ["DBUS_SYSTEM_BUS_ADDRESS": bus.address, "DBUS_SESSION_BUS_ADDRESS": bus.address,
                                         "XDG_RUNTIME_DIR": root + "/run"]) { $1 },
                                     removing: ["PIPEWIRE_", "DBUS_STARTER_"], log: root + "/logs/permissionsd.log"),
                       owning: "org.example.Permissions")
    let atStart = MemoryRollup(pid: daemon.pid)
    let peer = start(SpawnSpec("/usr/libexec/xdg-permission-store", [],
                                   environment: ["DBUS_SESSION_BUS_ADDRESS": bus.address,
                                                 "XDG_DATA_HOME": root + "/peer-data", "XDG_RUNTIME_DIR": root + "/run"],
                                   log: root + "/logs/xdg-permission-store.log"),
                     owning: corePeerBusName)
    sleepSeconds(settle)  // idle: let start-up's threads and timers settle (a measuring pause, not a synchronisation)
    print("permissions-bench memory: idle, right after start-up (+1 s); binaries from \(binDir)"
          + (environment.isEmpty ? "" : "; permissionsd environment "
             + environment.map { "\($0.key)=\($0.value)" }.sorted().joined(separator: " ")))
    var table = Table("Idle memory (MiB): RSS, PSS, USS (private clean + private dirty), anonymous, threads",
                          columns: ["process", "RSS", "PSS", "USS", "anonymous", "file-backed", "threads"])
    var json: [(String, JSONValue)] = []
    for (label, child) in [("permissionsd", daemon), ("xdg-permission-store", peer)] {
        let r = MemoryRollup(pid: child.pid)
        table.add([label, format(mebibytes(r.rss)), format(mebibytes(r.pss)), format(mebibytes(r.uss)),
                   format(mebibytes(r.anonymous)), format(mebibytes(r.rss - r.anonymous)), "\(child.threads)"])
        if label == "permissionsd" {
            report.check(.memoryIdleRSS, mebibytes(r.rss))
            report.check(.memoryIdleUSS, mebibytes(r.uss))
        }
        let key = label == "permissionsd" ? "" : "peer_"
        json += [("\(key)rss_kib", .int(r.rss)), ("\(key)pss_kib", .int(r.pss)), ("\(key)uss_kib", .int(r.uss)),
                 ("\(key)anon_kib", .int(r.anonymous))]
    }
    table.print()
    print("permissionsd right when it owned its name: RSS \(format(mebibytes(atStart.rss))) MiB, USS "
          + "\(format(mebibytes(atStart.uss))) MiB, anonymous \(format(mebibytes(atStart.anonymous))) MiB "
          + "(start-up's threads and its second read of the plugin files still about)")
    json += [("at_start_rss_kib", .int(atStart.rss)), ("at_start_uss_kib", .int(atStart.uss))]
    var mappings = Table("permissionsd's largest mappings by resident size (KiB), grouped by file",
                             columns: ["mapping", "RSS", "private", "anonymous"])
    let groups = memoryMappings(pid: daemon.pid)
    for g in groups.prefix(top) {
        mappings.add([g.name, "\(g.rss)", "\(g.privateKiB)", "\(g.anonymous)"])
    }
    let others = groups.dropFirst(top)
    let othersRSS = others.reduce(0) { $0 + $1.rss }
    let othersPrivate = others.reduce(0) { $0 + $1.privateKiB }
    let othersAnonymous = others.reduce(0) { $0 + $1.anonymous }
    mappings.add(["(\(others.count) others)", "\(othersRSS)", "\(othersPrivate)", "\(othersAnonymous)"])
    mappings.print()
    json.append(("mappings", .strings(groups.prefix(top).map { "\($0.name)=\($0.rss)" })))
    printJSONLine("memory", json)
    report.printVerdicts(smoke: settle < 1)
    daemon.kill()
    peer.kill()
    names.close()
    bus.kill()
    Children.shared.killAll()
}

/// /proc/PID/smaps_rollup, in KiB.
struct MemoryRollup {
    var rss = 0, pss = 0, uss = 0, anonymous = 0

    init(pid: pid_t) {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8) else { return }
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ", omittingEmptySubsequences: true)
            guard parts.count >= 2, let kib = Int(parts[1]) else { continue }
            switch parts[0] {
            case "Rss:": rss = kib
            case "Pss:": pss = kib
            case "Private_Clean:", "Private_Dirty:": uss += kib
            case "Anonymous:": anonymous = kib
            default: break
            }
        }
    }
}

/// One file's (or one kind of anonymous memory's) mappings, summed.
struct MemoryGroup {
    var name: String
    var rss = 0
    var privateKiB = 0
    var anonymous = 0
}

/// /proc/PID/smaps grouped by path ([heap], [stack], anonymous as "[anon]"; the
/// plugins' private copies, unnamed files "DIR/#INODE (deleted)" or memfds
/// "/memfd:NAME (deleted)", as one group each), largest RSS first.
func memoryMappings(pid: pid_t) -> [MemoryGroup] {
    // Read to the end: /proc files report size 0, and a read sized from stat stops short.
    guard let data = FileHandle(forReadingAtPath: "/proc/\(pid)/smaps")?.readDataToEndOfFile() else { return [] }
    let text = String(decoding: data, as: UTF8.self)
    var groups: [String: MemoryGroup] = [:]
    var current = ""
    for line in text.split(separator: "\n") {
        let parts = line.split(separator: " ", omittingEmptySubsequences: true)
        guard let first = parts.first else { continue }
        if first.contains("-"), first.first?.isHexDigit == true, parts.count >= 5 {
            // A mapping's header: range perms offset dev inode [path]
            current = parts.count >= 6 ? parts[5...].joined(separator: " ") : "[anon]"
            if current.hasSuffix(" (deleted)") {
                if current.hasPrefix("/memfd:libpermissions-") {
                    current = "[the plugins' private copies, in memory (memfd)]"
                } else if current.split(separator: "/").last?.hasPrefix("#") == true {
                    current = "[the plugins' private copies, unnamed files on the disk]"
                }
            }
            if groups[current] == nil { groups[current] = MemoryGroup(name: current) }
            continue
        }
        guard parts.count >= 2, let kib = Int(parts[1]) else { continue }
        switch first {
        case "Rss:": groups[current]?.rss += kib
        case "Private_Clean:", "Private_Dirty:": groups[current]?.privateKiB += kib
        case "Anonymous:": groups[current]?.anonymous += kib
        default: break
        }
    }
    return groups.values.filter { $0.rss > 0 }.sorted { ($0.rss, $0.name) > ($1.rss, $1.name) }
}
