// The other user of `config-edits` and `request-handles`: a process of its own,
// as uid 65534, that calls GetStatus(location) back to back while the bench does
// something to the daemon, and keeps the start and duration of each call, so that
// the bench can count each call in the window it started in.
import Foundation
import PermissionsTestSupport
import SystemPrimitives

/// The uid of the other user, whose calls are measured.
let otherUserUID = 65534

/// `other-user-caller`, started as uid 65534 and measuring from `init` on until `stop`.
final class OtherUserCaller {
    private let root: String
    private let child: Child
    /// Its stdout, kept open while it runs (it may still write to it).
    private let output: Int32
    private var directory: String { root + "/caller" }

    /// Starts the caller on `address` (its files in root/caller, its log in
    /// root/logs/caller.log) for `seconds` at most, and waits until it says it
    /// measures (after its warm-up).
    init(root: String, address: String, seconds: Double) {
        self.root = root
        for dir in [root + "/caller", root + "/logs"] {
            do { try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true) } catch {
                fail("cannot create \(dir): \(error)")
            }
        }
        // The caller runs as another user: it must reach its own directory.
        chmod(root, 0o755)
        chown(root + "/caller", uid_t(otherUserUID), gid_t(otherUserUID))
        let ready = ChildPipe()
        let spec = SpawnSpec("/usr/bin/setpriv",
                             ["--reuid=\(otherUserUID)", "--regid=\(otherUserUID)", "--clear-groups",
                              selfExecutable, "other-user-caller", "--address", address,
                              "--seconds", String(seconds), "--out", root + "/caller/samples",
                              "--stop", root + "/caller/stop"],
                             name: "other-user-caller", log: root + "/logs/caller.log")
        spec.stdoutFD = ready.write
        child = spec.spawn().0
        close(ready.write)
        output = ready.read
        guard readChildLine(ready.read, seconds: 30) == "ready" else {
            fail("the other user's caller did not start measuring; see \(root)/logs/caller.log (run with --keep)")
        }
    }

    /// Stops it, by a file it looks for (so that it writes every sample it has), and
    /// returns its calls: (start, duration) in CLOCK_MONOTONIC nanoseconds.
    func stop() -> [(UInt64, UInt64)] {
        guard FileManager.default.createFile(atPath: directory + "/stop", contents: Data()) else {
            fail("cannot write \(directory)/stop")
        }
        let deadline = monotonicNanoseconds() + 10_000_000_000
        while child.isRunning {
            if monotonicNanoseconds() > deadline { fail("the other user's caller did not stop within 10 s") }
            sleepSeconds(0.01)
        }
        close(output)
        guard let text = try? String(contentsOfFile: directory + "/samples", encoding: .utf8) else {
            fail("the caller wrote no samples to \(directory)/samples; see \(root)/logs/caller.log (run with --keep)")
        }
        return text.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ")
            guard parts.count == 2, let start = UInt64(parts[0]), let duration = UInt64(parts[1]) else { return nil }
            return (start, duration)
        }
    }
}

/// The durations, in µs, of the calls that started within one of `windows` (start, end).
func samples(_ calls: [(UInt64, UInt64)], within windows: [(UInt64, UInt64)]) -> Samples {
    Samples(calls.filter { c in windows.contains { c.0 >= $0.0 && c.0 < $0.1 } }.map { Double($0.1) / 1000 })
}

/// `other-user-caller --address A --seconds S --out FILE --stop FILE`: started by
/// `OtherUserCaller` as another user. Calls GetStatus(location) back to back; says
/// "ready" on stdout after a warm-up, then keeps "START DURATION" (CLOCK_MONOTONIC
/// nanoseconds) for each call, until S seconds have passed or the stop file exists
/// (looked for every 100 calls), and writes them to the out file.
func runOtherUserCaller(_ arguments: [String]) {
    var address = "", out = "", stop = "", seconds = 60.0
    var rest = arguments[...]
    while let option = rest.popFirst(), let value = rest.popFirst() {
        switch option {
        case "--address": address = value
        case "--out": out = value
        case "--stop": stop = value
        case "--seconds": seconds = Double(value) ?? seconds
        default: fail("other-user-caller: unknown option \(option)")
        }
    }
    guard !address.isEmpty, !out.isEmpty, !stop.isEmpty else {
        fail("other-user-caller: --address, --out and --stop are needed")
    }
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
        fail("other-user-caller: cannot write \(out)")
    }
    exit(0)
}

/// The table of the other user's calls, a row per kind of window (`latencyRow`, `ratioRow`).
func latencyTable(_ title: String) -> Table {
    Table(title, columns: ["window", "calls", "p50", "p99", "max", "target", "met"])
}

/// The other user's calls in one kind of window: how many, p50, p99, max (µs).
func latencyRow(_ label: String, _ s: Samples) -> [String] {
    [label, "\(s.count)", format(s.p50), format(s.p99), format(s.max), "", ""]
}

/// `a` over `b`: p50, p99 and max, and the verdict on the p99 if it is judged.
func ratioRow(_ label: String, _ a: Samples, _ b: Samples, _ verdict: Verdict? = nil) -> [String] {
    [label, "", ratioText(ratio(a.p50, b.p50)), ratioText(ratio(a.p99, b.p99)), ratioText(ratio(a.max, b.max)),
     verdict.map { "p99 " + $0.wanted } ?? "", verdict?.metText ?? ""]
}

/// The JSON fields of one kind of window: PREFIX_calls, PREFIX_p50_us, PREFIX_p99_us, PREFIX_max_us.
func latencyFields(_ prefix: String, _ s: Samples) -> [(String, JSONValue)] {
    [(prefix + "_calls", .int(s.count)), (prefix + "_p50_us", .num(s.p50)), (prefix + "_p99_us", .num(s.p99)),
     (prefix + "_max_us", .num(s.max))]
}
