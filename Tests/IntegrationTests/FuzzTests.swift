import DBusKit
import Foundation
import Testing
import PermissionsTestSupport
import SystemPrimitives

/// Random method calls to every method of every interface the daemon exports
/// (org.example.Permissions, Properties, Introspectable, Peer, as its own
/// Introspect lists them), plus members and interfaces it does not have, with
/// random signatures, values and argument counts, from 4 connections at once.
///
/// Counted, each must be 0: crashes (the daemon process gone), hangs (no reply
/// within 10 s), and bad replies: a method return for a call whose arguments do not
/// match the method's signature in the introspection XML, or whose own signature
/// is not the method's output; an error other than the service's named errors and
/// the standard D-Bus ones, or other than InvalidArgs for a known method called
/// with the wrong signature. Afterwards the daemon's fd count is back to where it
/// was before the run, and its RSS after the run is within `rssBoundKiB` (2 MiB) of
/// its RSS after a warm-up (the first tenth of the calls, with the same mix). glibc
/// keeps freed memory, so the start is no baseline; and even after a warm-up, with
/// its default settings, RSS steps up and down by 10 to 20 MiB between samples of
/// the same run (measured: the 1 MiB strings raise its mmap threshold, and freed
/// heap stays mapped below a live block), which would hide a leak of that size. So
/// the daemon under test runs with `mallocEnvironment`, under which RSS stayed
/// within 0.6 MiB over 16 000 calls.
///
/// Budget in scripts/test (doc/testing.md): 4 000 calls, about 15 s on the 2-core VM;
/// PERMISSIONS_STRESS_FUZZ_CALLS (scripts/stress --fuzz-calls) changes it.
@Suite(.serialized) struct FuzzTests {
    static let rssBoundKiB = 2 * 1024
    /// glibc settings for the daemon under test, so that its RSS shows the memory it
    /// holds rather than what glibc keeps: blocks from 128 KiB up are mapped and
    /// unmapped on free (a fixed threshold stops glibc from raising it after the first
    /// 1 MiB string), free memory at the top of a heap is returned from 128 KiB, and
    /// two arenas at most, so that threads do not each keep their own free lists.
    static let mallocEnvironment = ["MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072",
                                    "MALLOC_ARENA_MAX": "2"]
    /// Parts of the measured run, each from new connections, with an RSS sample after each.
    static let segments = 8
    static let hangDeadlineMilliseconds: Int32 = 10_000
    static let connections = 4

    static let namedErrors: Set<String> = Set(
        ["UnknownPermission", "InvalidArgument", "NotAuthorized", "UnknownCaller", "StorageFailed", "Cancelled",
         "LimitExceeded", "NotSupported", "Unavailable"]
            .map { "org.example.Permissions.Error." + $0 }
        + ["InvalidArgs", "UnknownMethod", "UnknownInterface", "UnknownProperty", "UnknownObject", "PropertyReadOnly"]
            .map { "org.freedesktop.DBus.Error." + $0 })

    struct Target {
        let interface: String?
        let member: String
        /// The methods the call may reach, as the introspection XML declares them:
        /// none for a member it lacks, several for a name without an interface that
        /// two interfaces declare (GetAll).
        let methods: [IntrospectedMethod]
    }

    /// Everything a target list needs: the declared methods, then members and
    /// interfaces that do not exist, and calls without an interface.
    static func targets(_ methods: [IntrospectedMethod]) -> [Target] {
        methods.map { Target(interface: $0.interface, member: $0.name, methods: [$0]) }
            // Without an interface the object finds the member itself.
            + methods.map { m in Target(interface: nil, member: m.name, methods: methods.filter { $0.name == m.name }) }
            + [Target(interface: "org.example.Permissions", member: "NoSuchMethod", methods: []),
               Target(interface: "org.example.Nope", member: "GetStatus", methods: []),
               Target(interface: "org.freedesktop.DBus.Properties", member: "Frob", methods: []),
               Target(interface: "org.freedesktop.DBus.Peer", member: "Frob", methods: []),
               Target(interface: "org.freedesktop.DBus.Introspectable", member: "Frob", methods: []),
               Target(interface: nil, member: "NoSuchMethod", methods: [])]
    }

    /// What came back for one call, judged.
    enum Verdict: Equatable {
        case ok
        case hang
        /// `kind` names the fault for a tally (method and what went wrong), `example` one instance.
        case bad(kind: String, example: String)
    }

    static func judge(_ target: Target, path: String, sent: Message, result: Result<Message, BusError>) -> Verdict {
        let exported = path == "/org/example/Permissions"
        // Introspect answers on every path (it lists child nodes); Peer is libdbus's, on every path.
        let pathless = target.interface == "org.freedesktop.DBus.Peer" || target.member == "Introspect"
        let known = exported || pathless ? target.methods : []
        let matching = known.filter { $0.input == sent.signature }
        let name = "\(target.interface ?? "(no interface)").\(target.member)"
        func bad(_ kind: String, _ example: String) -> Verdict {
            .bad(kind: "\(name): \(kind)", example: "\(describe(target, path, sent)) \(example)")
        }
        switch result {
        case .success(let reply):
            guard !known.isEmpty else {
                return bad("a return where none is declared", "returned \"\(reply.signature)\"")
            }
            guard !matching.isEmpty else {
                return bad("a return for arguments it does not take (\(known.map { "'\($0.input)'" }.joined(separator: " or ")))",
                           "returned \"\(reply.signature)\"")
            }
            guard matching.contains(where: { $0.output == reply.signature }) else {
                return bad("a return of an undeclared type", "returned \"\(reply.signature)\"; declared "
                           + matching.map { "'\($0.output)'" }.joined(separator: " or "))
            }
            return .ok
        case .failure(let error):
            if error.name == BusError.noReply { return .hang }
            guard namedErrors.contains(error.name) else {
                return bad("error \(error.name)", "answered \(error.name): \(error.message.prefix(200))")
            }
            // Without an interface, "no such method" is a fair answer too (Peer is served only with one).
            let refusals = target.interface == nil ? [BusError.invalidArgs, BusError.unknownMethod] : [BusError.invalidArgs]
            if !known.isEmpty, matching.isEmpty, !refusals.contains(error.name) {
                return bad("\(error.name), not InvalidArgs, for arguments it does not take",
                           "answered \(error.name): \(error.message.prefix(200))")
            }
            return .ok
        }
    }

    static func describe(_ target: Target, _ path: String, _ message: Message) -> String {
        "\(target.interface ?? "(no interface)").\(target.member) at \(path) with '\(message.signature.prefix(60))'"
    }

    @Test(.hangGuard) func randomCallsToEveryMethod() throws {
        let total = Knobs.fuzzCalls
        let seed = Knobs.seed
        let bus = try TestBus()
        // A short agent timeout: a fuzzing connection registered as the agent answers
        // every Ask with an error at once, but this bounds any other case.
        let daemon = try DaemonUnderTest(bus: bus, config: """
            [location]
            enabled=true
            [notifications]
            enabled=true
            [service]
            agent-timeout=3
            """, environment: Self.mallocEnvironment)
        let pid = try #require(daemon.pid)
        let probe = try BusClient(bus: bus, label: "fuzz-probe")
        defer { probe.close() }
        let xml = try probe.send(try Message.methodCall(destination: "org.example.Permissions",
                                                        path: "/org/example/Permissions",
                                                        interface: "org.freedesktop.DBus.Introspectable",
                                                        member: "Introspect")).get().arguments().first?.stringValue ?? ""
        let methods = IntrospectedMethod.parse(xml)
        let interfaces = Set(methods.map(\.interface))
        try #require(interfaces == ["org.example.Permissions", "org.freedesktop.DBus.Properties",
                                    "org.freedesktop.DBus.Introspectable", "org.freedesktop.DBus.Peer"],
                     "interfaces in the introspection: \(interfaces)")
        let targets = Self.targets(methods)
        _ = try probe.call("GetStatus", [.string("location")]).get()
        let fdBaseline = ProcessFigures.fileDescriptors(pid)

        let counts = Locked([String: Int]())
        let badReplies = Locked([String: (count: Int, example: String)]())
        let warmupCalls = max(total / 10, 100)
        let segment = max(total - warmupCalls, 0) / Self.segments
        var rssSamples: [Int] = []
        let started = Date()
        // A warm-up, then the measured run in segments with the same mix, each from
        // new connections; RSS is sampled after the warm-up and after each segment.
        for (phase, calls) in [(0, warmupCalls)] + (1...Self.segments).map({ ($0, segment) }) {
            let fuzzers = try (0..<Self.connections).map { try BusClient(bus: bus, label: "fuzzer-\($0)") }
            onThreads(Self.connections) { index in
                var values = FuzzValues(seed: seed, stream: phase * 100 + index)
                let client = fuzzers[index]
                for _ in 0..<(calls / Self.connections) {
                    let target = values.pick(targets)
                    let path = values.chance(0.9) ? "/org/example/Permissions" : values.objectPath()
                    let signature = target.methods.first?.input ?? values.pick(["", "s", "ss", "sa{sv}"])
                    let arguments = values.arguments(for: signature)
                    let message: Message
                    do {
                        message = try Message.methodCall(destination: "org.example.Permissions", path: path,
                                                         interface: target.interface, member: target.member)
                        try message.append(arguments)
                    } catch {
                        counts.withLock { $0["unsendable", default: 0] += 1 }  // beyond the wire format's limits
                        continue
                    }
                    let result = client.send(message, timeoutMilliseconds: Self.hangDeadlineMilliseconds)
                    switch Self.judge(target, path: path, sent: message, result: result) {
                    case .ok:
                        counts.withLock { $0["calls", default: 0] += 1 }
                    case .hang:
                        counts.withLock { $0["calls", default: 0] += 1; $0["hangs", default: 0] += 1 }
                        let kind = "no reply within 10 s: \(target.interface ?? "(no interface)").\(target.member)"
                        badReplies.withLock { $0[kind, default: (0, Self.describe(target, path, message))].count += 1 }
                    case .bad(let kind, let example):
                        counts.withLock { $0["calls", default: 0] += 1; $0["bad", default: 0] += 1 }
                        badReplies.withLock { $0[kind, default: (0, example)].count += 1 }
                    }
                    if case .failure(let e) = result { counts.withLock { $0[e.name, default: 0] += 1 } }
                }
            }
            for fuzzer in fuzzers { fuzzer.close() }
            rssSamples.append(ProcessFigures.residentKiB(pid))
        }
        let seconds = -started.timeIntervalSinceNow
        let crashed = !daemon.isRunning
        let rssGrowth = rssSamples.last! - rssSamples.first!

        // The fuzzers have left the bus; once the daemon has heard so, its fd count is
        // back. Each check follows a round trip through the daemon.
        var fdAfter = -1
        let deadline = Date().addingTimeInterval(5)
        repeat {
            _ = probe.call("GetStatus", [.string("location")])
            fdAfter = ProcessFigures.fileDescriptors(pid)
        } while fdAfter != fdBaseline && Date() < deadline && !crashed

        let figures = counts.withLock { $0 }
        let context = "seed \(seed), \(total) calls"
        let tally = badReplies.withLock { $0 }.sorted { $0.key < $1.key }
            .map { "\($0.value.count) x \($0.key)\n    e.g. \($0.value.example)" }
        #expect(!crashed, "\(context): the daemon crashed; log:\n\(daemon.log.suffix(3000))")
        #expect(figures["hangs", default: 0] == 0,
                "\(context): hangs:\n\(tally.filter { $0.contains("no reply") }.joined(separator: "\n"))")
        #expect(figures["bad", default: 0] == 0,
                "\(context): \(figures["bad", default: 0]) bad replies:\n\(tally.filter { !$0.contains("no reply") }.joined(separator: "\n"))")
        #expect(fdAfter == fdBaseline, "\(context): \(fdAfter) fds open after the run, \(fdBaseline) before")
        // Under a sanitizer (scripts/stress --sanitize) RSS measures its bookkeeping
        // (ASan keeps freed memory in quarantine, up to 256 MiB), not the daemon's.
        let sanitizer = ProcessInfo.processInfo.environment["PERMISSIONS_SANITIZER"]
        if let sanitizer {
            print("reliability fuzz: the RSS bound is not checked under the \(sanitizer) sanitizer")
        } else {
            #expect(rssGrowth < Self.rssBoundKiB,
                    "\(context): RSS grew by \(rssGrowth) KiB after the warm-up; samples \(rssSamples)")
        }
        let errorFigures = figures.filter { $0.key.contains(".") }.sorted { $0.key < $1.key }
            .map { "\($0.key.split(separator: ".").last!):\($0.value)" }.joined(separator: ",")
        reportFigures("fuzz", ["calls": figures["calls", default: 0], "unsendable": figures["unsendable", default: 0],
                               "crashes": crashed ? 1 : 0, "hangs": figures["hangs", default: 0],
                               "bad-replies": figures["bad", default: 0], "fd-before": fdBaseline, "fd-after": fdAfter,
                               "rss-after-warmup-kib": rssSamples.first!, "rss-end-kib": rssSamples.last!,
                               "rss-growth-kib": rssGrowth,
                               "rss-bound-kib": sanitizer.map { "not-checked-under-\($0)-sanitizer" } ?? "\(Self.rssBoundKiB)",
                               "rss-peak-kib": rssSamples.max()!,
                               "errors": errorFigures, "seconds": String(format: "%.1f", seconds), "seed": seed])
    }
}

extension FuzzTests {
    /// A message is decoded only as far as the method needs: one whose arguments do
    /// not fit (here 2 million bytes as `ay`, 2 MiB on the wire, for GetStatus(s))
    /// costs the daemon about its own size, not a decoded value per element. Any
    /// app may send it; the bus allows messages of up to 128 MiB.
    ///
    /// Found by the fuzz run: DBusKit decodes every argument into a `DBusValue`
    /// (a heap box each) before it checks the signature, so 30 MB of `ay` took the
    /// daemon to 1.2 GiB of RSS, kept afterwards, and 5 s during which it answered
    /// nobody. The budget here: peak RSS (VmHWM) up by less than 32 MiB.
    @Test(.hangGuard) func aHugeMessageOfTheWrongTypeCostsLittle() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, environment: Self.mallocEnvironment)
        let pid = try #require(daemon.pid)
        let client = try BusClient(bus: bus)
        defer { client.close() }
        _ = try client.call("GetStatus", [.string("location")]).get()
        let peakBefore = ProcessFigures.peakResidentKiB(pid)

        let big = try Message.methodCall(destination: "org.example.Permissions", path: "/org/example/Permissions",
                                         interface: "org.example.Permissions", member: "GetStatus")
        try big.append(.array(elementSignature: "y", [DBusValue](repeating: .byte(0), count: 2_000_000)))
        // A call after it on the same connection is answered after it: its round
        // trip includes the time the daemon spent on the big one.
        let started = Date()
        let refused = client.send(big, timeoutMilliseconds: 60_000)
        let status = client.call("GetStatus", [.string("location")], timeoutMilliseconds: 60_000)
        let seconds = -started.timeIntervalSinceNow
        let peakAfter = ProcessFigures.peakResidentKiB(pid)

        if case .failure(let error) = refused {
            #expect(error.name == BusError.invalidArgs, "\(error)")
        } else {
            Issue.record("GetStatus(ay) was answered with a return")
        }
        #expect(try status.get().first?.stringValue == "not-determined")
        #expect(daemon.isRunning)
        #expect(peakAfter - peakBefore < 32 * 1024,
                "one 2 MiB message raised the daemon's peak RSS from \(peakBefore) KiB to \(peakAfter) KiB")
        reportFigures("huge-message", ["elements": 2_000_000, "peak-rss-before-kib": peakBefore,
                                       "peak-rss-after-kib": peakAfter, "peak-growth-kib": peakAfter - peakBefore,
                                       "bound-kib": 32 * 1024, "seconds": String(format: "%.2f", seconds)])
    }
}

/// A method as an introspection XML declares it.
struct IntrospectedMethod: Equatable {
    let interface: String
    let name: String
    /// The in arguments' types, concatenated.
    let input: String
    let output: String

    /// The methods of every interface in `xml` (comments, signals and properties
    /// skipped). A small reader for the XML our own daemon writes, not a general one.
    static func parse(_ xml: String) -> [IntrospectedMethod] {
        var text = xml
        while let start = text.range(of: "<!--"), let end = text.range(of: "-->", range: start.upperBound..<text.endIndex) {
            text.removeSubrange(start.lowerBound..<end.upperBound)
        }
        func attribute(_ name: String, in tag: Substring) -> String? {
            guard let start = tag.range(of: " \(name)=\"") else { return nil }
            let rest = tag[start.upperBound...]
            return rest.firstIndex(of: "\"").map { String(rest[..<$0]) }
        }
        var methods: [IntrospectedMethod] = []
        var interface = ""
        var method: (name: String, input: String, output: String)?
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "<"), let close = rest[open...].firstIndex(of: ">") {
            let tag = rest[open...close]
            rest = rest[rest.index(after: close)...]
            if tag.hasPrefix("<interface ") {
                interface = attribute("name", in: tag) ?? ""
            } else if tag.hasPrefix("<method ") {
                method = (attribute("name", in: tag) ?? "", "", "")
                if tag.hasSuffix("/>") {
                    methods.append(IntrospectedMethod(interface: interface, name: method!.name, input: "", output: ""))
                    method = nil
                }
            } else if tag.hasPrefix("<arg "), method != nil {
                let type = attribute("type", in: tag) ?? ""
                if attribute("direction", in: tag) == "out" { method!.output += type } else { method!.input += type }
            } else if tag.hasPrefix("</method"), let m = method {
                methods.append(IntrospectedMethod(interface: interface, name: m.name, input: m.input, output: m.output))
                method = nil
            }
        }
        return methods
    }
}
