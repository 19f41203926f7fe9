import DBusKit
import Foundation
import SystemPrimitives

// The stores section of `core`: a store of N decisions over 1 or over 1 000 users
// (0, 100 000 and 1 000 000 by default), of whom 10 are active. Each store is
// filled once, straight into SQLite (one transaction, /usr/bin/python3), then the
// daemon is started on it `startups` times: start-up to the name owned; then 10
// users made active (the bench's own GetStatus, and GetStatusForUser for 9 more
// uids: on this private bus the daemon's own uid may name any user), RSS read, and
// GetStatus p50 measured. The daemon reads a user's decisions when first needed,
// so start-up and RSS follow the active users, not the store.
extension CoreBench {
    /// uids of the filled stores' users: the bench's own first (it calls GetStatus),
    /// then 9 999 000 and up, which no real user has.
    private func userIDs(_ count: Int) -> [UInt32] {
        [getuid()] + (1..<max(count, 1)).map { 9_999_000 + UInt32($0) }
    }

    func storesOverUsers() {
        let getStatus = [CallTarget.getStatus("location")]
        if appID.isEmpty {  // as the startup section finds it, when it did not run
            let (d, _) = start(daemonSpec(state: "state-stores-id"), owning: "org.example.Permissions")
            let details = daemonCall("GetDetails", [.string("location")]).first?.stringKeyedEntries ?? []
            appID = details.first { $0.0 == "app-id" }?.1.stringValue ?? ""
            stop(d, owning: "org.example.Permissions")
            guard !appID.isEmpty else { fail("GetDetails gave no app-id") }
        }
        var stores: [(label: String, decisions: Int, users: Int, state: String)] = []
        for decisions in options.userStores {
            for users in decisions == 0 ? [1] : [1, 1_000] {
                let state = "state-stores-\(decisions)-\(users)"
                // The schema made by the daemon itself, then filled.
                let (d, _) = start(daemonSpec(state: state), owning: "org.example.Permissions")
                stop(d, owning: "org.example.Permissions")
                let t0 = monotonicNanoseconds()
                if decisions > 0 { fillUsersStore(root + "/\(state)/decisions.sqlite", decisions: decisions, users: userIDs(users)) }
                print(String(format: "stores: filled %d decisions over %d users in %.1f s", decisions, users,
                             Double(monotonicNanoseconds() - t0) / 1e9))
                stores.append(("\(decisions) / \(users)", decisions, users, state))
            }
        }
        var table = Table("Stores: N decisions over U users, 10 active (\(options.startups) starts each)",
                          columns: ["store (decisions / users)", "start-up median (ms)", "RSS, 10 active (MiB)",
                                    "GetStatus p50 (µs)", "target", "met"])
        for store in stores {
            var startups: [Double] = []
            var rss: [Int] = []
            var latency: [Double] = []
            for _ in 0..<options.startups {
                let (child, ms) = start(daemonSpec(state: store.state), owning: "org.example.Permissions")
                startups.append(ms)
                _ = daemonCall("GetStatus", [.string("location")])
                for uid in userIDs(min(store.users, 10)).dropFirst() {
                    _ = daemonCall("GetStatusForUser", [.uint32(uid), .string(appID), .string("location")])
                }
                if let m = child.memory { rss.append(m.rss) }
                latency += coreLatency(client, getStatus, warmup: options.scaleWarmup, calls: options.scaleCalls,
                                       roundSize: options.scaleCalls)[0]
                stop(child, owning: "org.example.Permissions")
            }
            let start = Samples(startups)
            let memory = mebibytes(rss.sorted()[rss.count / 2])
            let p50 = Samples(latency).p50
            var verdicts: [(String, String)] = []
            if store.users == 1_000, store.decisions == 1_000_000 {
                let t = report.check(.usersStartup1M, start.p50, detail: store.label)
                verdicts.append(("start-up " + t.wanted, t.metText))
            }
            if store.users == 1_000, store.decisions == 1_000_000 || store.decisions == 100_000 {
                let t = report.check(store.decisions == 100_000 ? .usersRSS100k : .usersRSS1M, memory, detail: store.label)
                verdicts.append(("RSS " + t.wanted, t.metText))
            }
            table.add([store.label, format(start.p50), format(memory), format(p50),
                       verdicts.map(\.0).joined(separator: "; "), verdicts.map(\.1).joined(separator: "; ")])
            printJSONLine("stores", [
                ("decisions", .int(store.decisions)), ("users", .int(store.users)), ("active", .int(min(store.users, 10))),
                ("startup_median_ms", .num(start.p50)), ("startup_max_ms", .num(start.max)),
                ("rss_kib", .int(rss.sorted()[rss.count / 2])), ("getstatus_p50_us", .num(p50)),
                ("getstatus_p99_us", .num(Samples(latency).p99)),
            ])
        }
        table.print()
    }

    /// Fills a store with `decisions` rows spread evenly over `users` (each user's
    /// apps numbered from 0, so that users share app ids as they do on a machine),
    /// location for all, the bench's own app among the first user's.
    private func fillUsersStore(_ path: String, decisions: Int, users: [UInt32]) {
        let script = """
            import sqlite3, sys, time
            path, count, own = sys.argv[1], int(sys.argv[2]), sys.argv[3]
            uids = [int(u) for u in sys.argv[4].split(",")]
            per = count // len(uids)
            db = sqlite3.connect(path)
            now = int(time.time() * 1e6)
            def rows():
                for k, uid in enumerate(uids):
                    n = per + (1 if k < count % len(uids) else 0)
                    for i in range(n - (1 if k == 0 else 0)):
                        yield (uid, f"org.example.bench.App{i:07d}", "location",
                               "authorized" if i % 2 else "denied", now, "uid 0 (permissions-bench)")
                yield (uids[0], own, "location", "denied", now, "uid 0 (permissions-bench)")
            with db:
                db.executemany("INSERT OR REPLACE INTO user_decisions (uid, app_id, permission, decision, set_at, set_by) "
                               "VALUES (?, ?, ?, ?, ?, ?)", rows())
            n = db.execute("SELECT count(*) FROM user_decisions").fetchone()[0]
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            db.close()
            print(n)
            """
        runFillScript(script, name: "fill-store-\(decisions)-\(users.count)",
                      [path, String(decisions), appID, users.map(String.init).joined(separator: ",")], rows: decisions)
    }
}
