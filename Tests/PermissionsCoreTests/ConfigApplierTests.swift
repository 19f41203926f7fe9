import Foundation
internal import SystemPrimitives
import Testing
@testable import PermissionsModel
@testable import PermissionsConfig
@testable import PermissionsDaemon

// ConfigApplier over fakes: plugins that answer as told, a service that records,
// a last good copy in memory. No bus, no plugin loaded, no file.

/// Plugins as the applier sees them, named by strings; each call written down.
private final class FakePlugins: ConfigurablePlugins {
    var plugins: [String] = []
    var declaredPermissions: Set<String> { Set(plugins) }
    /// What validateAll reports.
    var problems: [String] = []
    /// Plugins that refuse any configuration they are given, with their reason.
    var refusing: [String: String] = [:]
    var calls: [String] = []

    func validateAll(_ config: [ConfigEntry], completion: @escaping ([String]) -> Void) {
        calls.append("validate \(summary(config))")
        completion(problems)
    }

    func configure(_ config: [ConfigEntry], only: [String]?, done: @escaping ([PluginAnswer<String>]) -> Void) {
        let targets = only ?? plugins
        calls.append("configure \(summary(config)) on \(targets.joined(separator: ","))")
        done(targets.map { PluginAnswer(plugin: $0, rejection: refusing[$0]) })
    }

    func retryConfigurationRefusals() {}
}

/// The service's side, written down.
private final class FakeService: ConfiguredService {
    var declared: [String: Snapshot] = [:]
    var disabledForLackOfConfiguration = false
    var events: [String] = []
    var generation: UInt32 = 0
    var status = ""
    /// Signalled by each setConfigState: the end of every start and every reading tried.
    let stateSet = Semaphore(value: 0)

    func holdChanges() { events.append("hold") }
    func releaseChanges() { events.append("release") }
    func takeSettings(_ core: CoreConfig, hostPID: UInt32) { events.append("settings") }
    func setDeclared(_ new: [String: Snapshot]) { declared = new }
    func setConfigState(generation: UInt32, status: String) {
        self.generation = generation
        self.status = status
        stateSet.signal()
    }
}

/// `@unchecked Sendable`: `saved` is guarded by `lock` (written on the applier's
/// saving queue, read by the test).
private final class MemoryLastGood: LastGoodStore, @unchecked Sendable {
    let path = "memory"
    private let lock = NSLock()
    private var copy: [ConfigEntry]?
    private var savedCopies: [[ConfigEntry]] = []

    var saved: [[ConfigEntry]] { lock.withLock { savedCopies } }
    func load() -> Result<[ConfigEntry], ConfigFiles.ParseError>? { lock.withLock { copy.map { .success($0) } } }
    func save(_ entries: [ConfigEntry]) {
        lock.withLock {
            copy = entries
            savedCopies.append(entries)
        }
    }
    func holds(_ entries: [ConfigEntry]) -> Bool {
        func text(_ config: [ConfigEntry]?) -> [String]? { config.map { $0.map { "\($0.section)\n\($0.key)\n\($0.value)" } } }
        return lock.withLock { text(copy) == text(entries) }
    }
}

private func summary(_ config: [ConfigEntry]) -> String {
    config.map { "[\($0.section)] \($0.key)=\($0.value)" }.joined(separator: " ")
}

private func reading(_ number: Int, _ entries: [(String, String, String)]) -> ConfigReading {
    ConfigReading(entries: .success(entries.enumerated().map { index, entry in
        ConfigEntry(section: entry.0, key: entry.1, value: entry.2, origin: "test.conf:\(index + 1)")
    }), number: number)
}

/// An applier on a queue of its own, as the daemon's serving queue runs it.
///
/// `@unchecked Sendable`: the fakes and the applier are touched on `queue`, or by
/// the test through `queue.sync`.
private final class Harness: @unchecked Sendable {
    let queue = Queue(label: "config-applier-test")
    let plugins = FakePlugins()
    let service = FakeService()
    let lastGood = MemoryLastGood()
    lazy var applier = ConfigApplier(lastGood: lastGood, host: plugins, service: service, queue: queue)

    init(plugins names: [String]) {
        plugins.plugins = names
    }

    func start(_ reading: ConfigReading) {
        let started = Semaphore(value: 0)
        queue.async { self.applier.start(reading) { started.signal() } }
        #expect(started.wait(timeout: .now() + 5) == .success, "start did not finish")
        #expect(service.stateSet.wait(timeout: .now() + 5) == .success)
    }

    /// Offers a reading and waits until it has been tried.
    func offer(_ reading: ConfigReading) {
        queue.async { self.applier.offer(reading) }
        #expect(service.stateSet.wait(timeout: .now() + 5) == .success, "the reading was not tried")
    }

    func onQueue<T>(_ body: () -> T) -> T { queue.sync(execute: body) }
}

@Suite("ConfigApplier")
struct ConfigApplierTests {
    static let good = reading(1, [("camera", "enabled", "true"), ("location", "enabled", "true")])

    @Test func aRefusedValidationAppliesNothing() {
        let h = Harness(plugins: ["camera", "location"])
        h.start(Self.good)
        #expect(h.onQueue { (h.service.generation, h.service.status) } == (1, "ok"))
        let (callsBefore, eventsBefore) = h.onQueue { (h.plugins.calls.count, h.service.events) }

        h.onQueue { h.plugins.problems = ["test.conf:1: [camera] enabled=maybe: expected true or false"] }
        h.offer(reading(2, [("camera", "enabled", "maybe"), ("location", "enabled", "true")]))

        h.onQueue {
            // Validated, and no plugin configured; the service neither held nor changed.
            #expect(Array(h.plugins.calls.dropFirst(callsBefore))
                    == ["validate [camera] enabled=maybe [location] enabled=true"])
            #expect(h.service.events == eventsBefore)
            #expect(h.service.generation == 1)
            #expect(h.service.status == "kept: test.conf:1: [camera] enabled=maybe: expected true or false")
        }
        #expect(h.lastGood.saved.count == 1, "only start-up's configuration is kept")
    }

    @Test func aRefusedConfigureRollsBackOnlyThePluginsThatTookIt() {
        let h = Harness(plugins: ["camera", "location", "microphone"])
        h.start(Self.good)
        let callsBefore = h.onQueue { h.plugins.calls.count }
        h.onQueue {
            h.service.events = []
            h.plugins.refusing = ["location": "test.conf:2: [location] enabled=off: not now"]
        }

        h.offer(reading(2, [("camera", "enabled", "false"), ("location", "enabled", "off")]))

        h.onQueue {
            #expect(Array(h.plugins.calls.dropFirst(callsBefore)) == [
                "validate [camera] enabled=false [location] enabled=off",
                "configure [camera] enabled=false [location] enabled=off on camera,location,microphone",
                // The last good configuration, to those that took the new one, and only to them.
                "configure [camera] enabled=true [location] enabled=true on camera,microphone",
            ])
            // Changes were held while it was tried, and released with nothing new in force.
            #expect(h.service.events == ["hold", "release"])
            #expect(h.service.generation == 1)
            #expect(h.service.status == "kept: test.conf:2: [location] enabled=off: not now")
        }
        #expect(h.lastGood.saved.count == 1)
    }

    @Test func noConfigurationAndNoLastGoodCopyIsTheFailSafe() {
        let h = Harness(plugins: ["camera"])
        let unreadable = ConfigFiles.ParseError(file: "/etc/permissions/permissions.conf", line: 3,
                                                reason: "invalid key file")
        h.start(ConfigReading(entries: .failure(unreadable), number: 1))

        h.onQueue {
            #expect(h.service.disabledForLackOfConfiguration)
            #expect(h.plugins.calls.isEmpty, "nothing was given to the plugins")
            #expect(h.service.generation == 0)
            #expect(h.service.status == "degraded: /etc/permissions/permissions.conf:3: invalid key file; "
                    + "no last good configuration; every permission is disabled until a usable configuration arrives")
        }
        #expect(h.lastGood.saved.isEmpty)

        // A usable configuration ends it.
        h.offer(reading(2, [("camera", "enabled", "true")]))
        h.onQueue {
            #expect(!h.service.disabledForLackOfConfiguration)
            #expect((h.service.generation, h.service.status) == (1, "ok"))
        }
    }
}
