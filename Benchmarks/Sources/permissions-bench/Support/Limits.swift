// The limits the benchmarks judge their figures by. They are read at run time from
// Benchmarks/limits.json ($PERMISSIONS_BENCH_LIMITS names another file), so that a
// limit is changed in one place, with its reason beside it, and not in the code
// that measures.
import Foundation
import PermissionsTestSupport

/// The limits the benchmarks check, by their name in limits.json. The file must
/// name each of these and nothing else (checked when it is read, so that even a
/// smoke run catches a limit the code and the file disagree on). Adding a limit:
/// an entry in limits.json, a case here, one `Report.check` where it is measured.
enum LimitName: String, CaseIterable {
    case startupVsPeer = "startup-vs-peer"
    case idleRSS = "idle-rss"
    case memoryIdleRSS = "memory-idle-rss"
    case memoryIdleUSS = "memory-idle-uss"
    case scaleStartup = "scale-startup-increase"
    case scaleWithDecision = "scale-getstatus-p50-change-with-decision"
    case scaleNoDecision = "scale-getstatus-p50-change-no-decision"
    case usersStartup1M = "stores-startup-1m-decisions"
    case usersRSS100k = "stores-rss-100k-decisions"
    case usersRSS1M = "stores-rss-1m-decisions"
    case identity = "identity-bus-calls"
    case latencyP50 = "getstatus-p50-vs-floor"
    case latencyP99 = "getstatus-p99-vs-floor"
    case throughput = "throughput-64-connections-vs-floor"
    case fanoutBroadcast = "fanout-broadcast-100-vs-floor"
    case fanoutUnicast = "fanout-unicast-100-vs-floor"
    case rssGrowth = "rss-growth-over-calls"
    case configEdits = "config-edits-p99-vs-idle"
    case requestHandles = "request-handles-p99-vs-idle"
    case enforcementRevoke = "enforcement-revoke-p99"
}

/// One entry of limits.json.
struct Limit: Decodable {
    enum Comparison: String, Decodable {
        case atMost = "at-most"
        case atLeast = "at-least"
        case below

        var symbol: String {
            switch self {
            case .atMost: "<="
            case .atLeast: ">="
            case .below: "<"
            }
        }
    }

    let name: String
    /// The subcommand that measures it.
    let bench: String
    /// What is measured, as the verdict table shows it.
    let title: String
    let comparison: Comparison
    let value: Double
    /// "x" for a ratio, else the unit of the figure (ms, MiB, %, calls).
    let unit: String
    /// What the figure is compared against ("none" for an absolute limit).
    let against: String
    let why: String

    /// A figure with this limit's unit: "1.07x", "14.2 ms".
    func text(_ v: Double) -> String { format(v) + (unit == "x" ? "x" : " " + unit) }
}

/// limits.json, read and checked once.
enum Limits {
    static let path: String = ProcessInfo.processInfo.environment["PERMISSIONS_BENCH_LIMITS"]
        ?? packageRoot + "/Benchmarks/limits.json"

    private struct File: Decodable {
        let limits: [Limit]
    }

    static let all: [LimitName: Limit] = {
        let file: File
        do {
            file = try JSONDecoder().decode(File.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            fail("cannot read the limits in \(path): \(error)")
        }
        var byName: [LimitName: Limit] = [:]
        for limit in file.limits {
            guard let name = LimitName(rawValue: limit.name) else {
                fail("\(path) names \"\(limit.name)\", which no benchmark measures (LimitName in Limits.swift)")
            }
            guard byName.updateValue(limit, forKey: name) == nil else { fail("\(path) names \"\(limit.name)\" twice") }
        }
        let missing = LimitName.allCases.filter { byName[$0] == nil }.map(\.rawValue)
        guard missing.isEmpty else { fail("\(path) lacks \(missing.joined(separator: ", "))") }
        return byName
    }()

    static subscript(_ name: LimitName) -> Limit { all[name]! }
}

/// A figure judged against its limit.
struct Verdict {
    let limit: Limit
    let measured: Double
    /// The sizes of this run, when the title alone does not say (e.g. "1000 calls").
    let detail: String?

    var met: Bool {
        guard measured.isFinite else { return false }
        switch limit.comparison {
        case .atMost: return measured <= limit.value
        case .atLeast: return measured >= limit.value
        case .below: return measured < limit.value
        }
    }

    var wanted: String { "\(limit.comparison.symbol) \(limit.text(limit.value))" }
    var metText: String { met ? "yes" : "NO" }
}

/// The verdicts of one run, printed at its end as a table and one JSON line.
final class Report {
    private(set) var verdicts: [Verdict] = []

    init() { _ = Limits.all }  // a file that does not fit the code fails the run before it measures

    @discardableResult
    func check(_ name: LimitName, _ measured: Double, detail: String? = nil) -> Verdict {
        let verdict = Verdict(limit: Limits[name], measured: measured, detail: detail)
        verdicts.append(verdict)
        return verdict
    }

    func printVerdicts(smoke: Bool = false) {
        var table = Table("Limits (\(Limits.path))" + (smoke ? "; a smoke run: too small to judge by" : ""),
                          columns: ["limit", "measured", "wanted", "against", "met"])
        for v in verdicts {
            table.add([v.limit.title + (v.detail.map { " (\($0))" } ?? ""), v.limit.text(v.measured), v.wanted,
                       v.limit.against, v.metText])
        }
        table.print()
        let met = verdicts.filter(\.met).count
        print("\(met) of \(verdicts.count) limits met")
        printJSONLine("targets", [("met", .int(met)), ("total", .int(verdicts.count)),
                                  ("missed", .strings(verdicts.filter { !$0.met }.map(\.limit.name))),
                                  ("smoke", .bool(smoke))])
    }
}
