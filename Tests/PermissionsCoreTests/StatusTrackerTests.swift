import Testing
@testable import PermissionsModel
@testable import PermissionsStore
@testable import PermissionsService

/// A plugin host stand-in: the snapshot each declared permission has now.
private final class FakeSource: SnapshotSource {
    var current: [String: Snapshot] = [:]
    var declaredPermissions: Set<String> { Set(current.keys) }
    func snapshot(for permission: String) -> Snapshot? { current[permission] }
}

/// The tracker's writes as calls that return: over `InMemoryDecisionStore`, whose
/// `commit` gives the outcome before it returns, the completion has run by then.
private extension StatusTracker {
    func setDecision(uid: UInt32, app: String, permission: String, decision: Decision, setBy: String,
                     expiresAt: Int64? = nil) throws {
        try outcome { setDecision(uid: uid, app: app, permission: permission, decision: decision, setBy: setBy,
                                  expiresAt: expiresAt, done: $0) }
    }

    func resetDecisions(uid: UInt32?, app: String, names: [String]) throws -> Int {
        try outcome { resetDecisions(uid: uid, app: app, names: names, done: $0) }
    }

    func assign(app: String, names: [String], to uid: UInt32) throws -> Int {
        try outcome { assign(app: app, names: names, to: uid, done: $0) }
    }

    func removeExpired(now: Int64) -> Bool {
        var removed: Bool?
        removeExpired(now: now) { removed = $0 }
        #expect(removed != nil, "the in-memory store gave no outcome before returning")
        return removed ?? false
    }
}

private struct NoOutcome: Error {}

private func outcome<T>(_ start: (@escaping (Result<T, any Error>) -> Void) -> Void) throws -> T {
    var result: Result<T, any Error>?
    start { result = $0 }
    guard let result else {
        Issue.record("the in-memory store gave no outcome before returning")
        throw NoOutcome()
    }
    return try result.get()
}

/// A tracker over an in-memory store and a fake source, with every StatusChanged
/// it emits written down as "app permission status" (`signals`), and with its
/// audience, "everyone: …" or "uid N: …" (`heard`).
private final class Fixture {
    let store = InMemoryDecisionStore()
    let source = FakeSource()
    var signals: [String] = []
    var heard: [String] = []
    lazy var tracker = StatusTracker(store: store, source: source) { [unowned self] audience, app, permission, status in
        self.signals.append("\(app) \(permission) \(status.rawValue)")
        switch audience {
        case .everyone: self.heard.append("everyone: \(app) \(permission) \(status.rawValue)")
        case .user(let uid): self.heard.append("uid \(uid): \(app) \(permission) \(status.rawValue)")
        case .script(let uid): self.heard.append("uid \(uid) script: \(app) \(permission) \(status.rawValue)")
        }
    }

    /// The plugin publishes `snapshot`; returns the signals that caused.
    @discardableResult
    func publish(_ snapshot: Snapshot) -> [String] {
        source.current[snapshot.permission] = snapshot
        return take { tracker.refresh(snapshot.permission) }
    }

    func take(_ body: () throws -> Void) rethrows -> [String] {
        signals = []
        heard = []
        try body()
        defer { signals = [] }
        return signals
    }
}

private func camera(_ service: ServiceState = .available, _ policies: [String: Policy] = [:],
                    devices: [[Snapshot.KeyValue]] = []) -> Snapshot {
    Snapshot(permission: "camera", service: service, policies: policies, devices: devices)
}

@Suite("StatusTracker: precedence")
struct StatusTrackerPrecedenceTests {
    @Test("the status combines snapshot, stored decision and session grant by the rule",
          arguments: PrecedenceTests.services, PrecedenceTests.policies)
    func combination(service: ServiceState, policy: Policy) throws {
        for decision in PrecedenceTests.decisions {
            let f = Fixture()
            f.publish(camera(service, ["app.A": policy]))
            if let decision { try f.store.set(DecisionKey(uid: testUID, "app.A", "camera"), decision: decision, setBy: "test") }
            #expect(f.tracker.status(uid: testUID, app: "app.A", permission: "camera")
                    == PrecedenceTests.rule(service, policy, decision),
                    "service \(service), policy \(policy), decision \(String(describing: decision))")
        }
    }

    @Test("a session grant counts as authorized, and a stored decision wins over it")
    func sessionGrant() throws {
        let f = Fixture()
        f.publish(camera())
        f.tracker.grantSession(uid: testUID, app: "app.A", permission: "camera", to: [":1.5"])
        #expect(f.tracker.status(uid: testUID, app: "app.A", permission: "camera") == .authorized)
        try f.store.set(DecisionKey(uid: testUID, "app.A", "camera"), decision: .denied, setBy: "test")
        #expect(f.tracker.status(uid: testUID, app: "app.A", permission: "camera") == .denied)
    }

    @Test("plugins win a name clash with the configuration; a declared name alone is known")
    func declared() {
        let f = Fixture()
        f.publish(camera(.disabled))
        f.tracker.setDeclared(["camera": camera(.available),
                               "scanner": Snapshot(permission: "scanner", service: .available)])
        #expect(f.tracker.status(uid: testUID, app: "app.A", permission: "camera") == .disabled)
        #expect(f.tracker.status(uid: testUID, app: "app.A", permission: "scanner") == .notDetermined)
        #expect(f.tracker.permissions == ["camera", "scanner"])
        #expect(!f.tracker.isKnown("microphone"))
        // Undeclared: one signal, and the name is unknown.
        #expect(f.take { f.tracker.setDeclared(["camera": camera(.available)]) } == [" scanner unsupported"])
        #expect(!f.tracker.isKnown("scanner"))
    }
}

@Suite("StatusTracker: one signal per real change")
struct StatusTrackerSignalTests {
    @Test("a first publication is one service-level signal; the same one again is none")
    func firstPublication() {
        let f = Fixture()
        #expect(f.publish(camera()) == [" camera not-determined"])
        #expect(f.publish(camera()) == [])
    }

    @Test("a policy change signals that app only")
    func policyChange() {
        let f = Fixture()
        f.publish(camera(.available, ["app.B": .allow]))
        #expect(f.publish(camera(.available, ["app.A": .restricted, "app.B": .allow])) == ["app.A camera restricted"])
        #expect(f.publish(camera(.available, ["app.B": .allow])) == ["app.A camera not-determined"])
    }

    @Test("a service going disabled is one signal, not one more per app with a policy")
    func serviceLevel() {
        let f = Fixture()
        f.publish(camera(.available, ["app.A": .restricted, "app.B": .allow]))
        #expect(f.publish(camera(.disabled, ["app.A": .restricted, "app.B": .allow])) == [" camera disabled"])
        // Back: one service-level signal again; apps with an entry of their own re-read
        // (the interface XML, StatusChanged).
        #expect(f.publish(camera(.available, ["app.A": .restricted, "app.B": .allow])) == [" camera not-determined"])
        #expect(f.tracker.status(uid: testUID, app: "app.A", permission: "camera") == .restricted)
        // The service and an app's policy change at once: the service-level signal
        // has told that app too.
        #expect(f.publish(camera(.unsupported, ["app.A": .allow, "app.B": .allow])) == [" camera unsupported"])
    }

    @Test("a change that changes no app's status sends nothing, but is what clients now see")
    func noStatusChange() throws {
        let f = Fixture()
        f.publish(camera())
        try f.store.set(DecisionKey(uid: testUID, "app.A", "camera"), decision: .authorized, setBy: "test")
        f.tracker.users = { [testUID] }
        // Everyone without a decision of their own is told; the user who had allowed is not.
        #expect(f.publish(camera(.available, ["app.A": .allow])) == ["app.A camera authorized"])
        #expect(f.heard == ["everyone: app.A camera authorized"])
        let withDevice = camera(.available, ["app.A": .allow], devices: [[.init("name", "Webcam")]])
        #expect(f.publish(withDevice) == [])
        #expect(f.tracker.snapshot("camera") == withDevice)
    }

    @Test("quiet (start-up) takes the snapshot without a signal")
    func quiet() {
        let f = Fixture()
        f.tracker.quiet = true
        #expect(f.publish(camera(.available, ["app.A": .restricted])) == [])
        #expect(f.tracker.status(uid: testUID, app: "app.A", permission: "camera") == .restricted)
    }

    @Test("held changes are applied, with their signals, on release only")
    func held() {
        let f = Fixture()
        f.publish(camera())
        f.tracker.holdChanges()
        #expect(f.publish(camera(.disabled)) == [])
        #expect(f.tracker.status(uid: testUID, app: "app.A", permission: "camera") == .notDetermined)
        #expect(f.take { f.tracker.releaseChanges() } == [" camera disabled"])
        #expect(f.tracker.status(uid: testUID, app: "app.A", permission: "camera") == .disabled)
    }

    @Test("no configuration at start: available reads disabled, with one signal")
    func disabledForLackOfConfiguration() {
        let f = Fixture()
        f.publish(camera())
        #expect(f.take { f.tracker.disabledForLackOfConfiguration = true } == [" camera disabled"])
        #expect(f.take { f.tracker.disabledForLackOfConfiguration = true } == [])
    }
}

@Suite("StatusTracker: decisions and session grants")
struct StatusTrackerDecisionTests {
    @Test("a session grant ends when the last of its owners leaves, with one signal")
    func grantEndsWithLastOwner() {
        let f = Fixture()
        f.publish(camera())
        f.tracker.grantSession(uid: testUID, app: "app.A", permission: "camera", to: [":1.5", ":1.6"])
        #expect(f.take { f.tracker.ownerLeft(":1.5") } == [])
        #expect(f.tracker.status(uid: testUID, app: "app.A", permission: "camera") == .authorized)
        #expect(f.take { f.tracker.ownerLeft(":1.6") } == ["app.A camera not-determined"])
        #expect(!f.tracker.hasSessionGrant(DecisionKey(uid: testUID, "app.A", "camera")))
    }

    @Test("SetDecision ends a session grant, and a reset does not bring it back")
    func setDecisionEndsGrant() throws {
        let f = Fixture()
        f.publish(camera())
        f.tracker.grantSession(uid: testUID, app: "app.A", permission: "camera", to: [":1.5"])
        #expect(try f.take { try f.tracker.setDecision(uid: testUID, app: "app.A", permission: "camera", decision: .denied,
                                                       setBy: "test") } == ["app.A camera denied"])
        #expect(try f.take { try f.tracker.setDecision(uid: testUID, app: "app.A", permission: "camera", decision: .denied,
                                                       setBy: "test") } == [])
        var removed = 0
        #expect(try f.take { removed = try f.tracker.resetDecisions(uid: testUID, app: "app.A", names: []) }
                == ["app.A camera not-determined"])
        #expect(removed == 1)
        #expect(f.tracker.status(uid: testUID, app: "app.A", permission: "camera") == .notDetermined)
    }

    @Test("ResetDecisions ends session grants too, counting only stored rows")
    func resetEndsGrant() throws {
        let f = Fixture()
        f.publish(camera())
        f.tracker.grantSession(uid: testUID, app: "app.A", permission: "camera", to: [":1.5"])
        f.tracker.grantSession(uid: testUID, app: "app.B", permission: "camera", to: [":1.7"])
        var removed = -1
        #expect(try f.take { removed = try f.tracker.resetDecisions(uid: testUID, app: "app.A", names: ["camera"]) }
                == ["app.A camera not-determined"])
        #expect(removed == 0)
        #expect(f.tracker.status(uid: testUID, app: "app.B", permission: "camera") == .authorized)
    }

    @Test("a store that cannot write: SetDecision and ResetDecisions throw and change nothing")
    func storageFailed() throws {
        let f = Fixture()
        f.publish(camera())
        #expect(f.take { f.tracker.grantSession(uid: testUID, app: "app.A", permission: "camera", to: [":1.5"]) }
                == ["app.A camera authorized"])
        f.store.failWrites = true
        #expect(throws: InMemoryDecisionStore.WriteFailed.self) {
            try f.tracker.setDecision(uid: testUID, app: "app.A", permission: "camera", decision: .denied, setBy: "test")
        }
        #expect(throws: InMemoryDecisionStore.WriteFailed.self) {
            _ = try f.tracker.resetDecisions(uid: testUID, app: "app.A", names: [])
        }
        #expect(f.signals == [])
        #expect(f.tracker.hasSessionGrant(DecisionKey(uid: testUID, "app.A", "camera")))
        #expect(f.tracker.status(uid: testUID, app: "app.A", permission: "camera") == .authorized)
        #expect(f.store.list().isEmpty)
    }
}

@Suite("StatusTracker: expiry")
struct StatusTrackerExpiryTests {
    @Test("an expired decision is removed with one signal; one not yet due stays")
    func expires() throws {
        let f = Fixture()
        f.publish(camera())
        let now = currentMicroseconds()
        try f.store.set(DecisionKey(uid: testUID, "app.A", "camera"), decision: .denied, setBy: "test",
                        expiresAt: now + 60_000_000)
        try f.store.set(DecisionKey(uid: testUID, "app.B", "camera"), decision: .denied, setBy: "test",
                        expiresAt: now + 120_000_000)
        #expect(f.tracker.status(uid: testUID, app: "app.A", permission: "camera") == .denied)
        var done = false
        #expect(f.take { done = f.tracker.removeExpired(now: now + 90_000_000) } == ["app.A camera not-determined"])
        #expect(done)
        #expect(f.store.list().map(\.appID) == ["app.B"])
        #expect(f.store.nextExpiry() == now + 120_000_000)
    }

    @Test("an expiry that changes no status (an admin allow) sends nothing")
    func expiresUnderPolicy() throws {
        let f = Fixture()
        f.publish(camera(.available, ["app.A": .allow]))
        let now = currentMicroseconds()
        try f.store.set(DecisionKey(uid: testUID, "app.A", "camera"), decision: .authorized, setBy: "test", expiresAt: now)
        var done = false
        #expect(f.take { done = f.tracker.removeExpired(now: now) } == [])
        #expect(done)
        #expect(f.store.list().isEmpty)
    }

    @Test("a removal that fails is reported, keeps the row and sends nothing")
    func removalFails() throws {
        let f = Fixture()
        f.publish(camera())
        let now = currentMicroseconds()
        try f.store.set(DecisionKey(uid: testUID, "app.A", "camera"), decision: .denied, setBy: "test", expiresAt: now)
        f.store.failWrites = true
        var done = true
        #expect(f.take { done = f.tracker.removeExpired(now: now) } == [])
        #expect(!done)
        #expect(f.store.list().count == 1)
    }
}

@Suite("StatusTracker: users")
struct StatusTrackerUserTests {
    @Test("one user's decision is that user's alone, and told to that user only")
    func decisionsArePerUser() throws {
        let f = Fixture()
        f.publish(camera())
        f.tracker.users = { [1, 2] }
        _ = try f.take { try f.tracker.setDecision(uid: 1, app: "app.A", permission: "camera", decision: .authorized, setBy: "t") }
        #expect(f.heard == ["uid 1: app.A camera authorized"])
        #expect(f.tracker.status(uid: 1, app: "app.A", permission: "camera") == .authorized)
        #expect(f.tracker.status(uid: 2, app: "app.A", permission: "camera") == .notDetermined)
        #expect(f.tracker.status(.everyone, app: "app.A", permission: "camera") == .notDetermined)
        _ = f.take { f.tracker.grantSession(uid: 2, app: "app.B", permission: "camera", to: [":1.9"]) }
        #expect(f.heard == ["uid 2: app.B camera authorized"])
        #expect(f.tracker.status(uid: 1, app: "app.B", permission: "camera") == .notDetermined)
    }

    @Test("an everyone-level change is told to everyone and to each user as it applies to them")
    func policyChangePerUser() throws {
        let f = Fixture()
        f.publish(camera())
        f.tracker.users = { [1, 2] }
        try f.store.set(DecisionKey(uid: 1, "app.A", "camera"), decision: .denied, setBy: "t")
        _ = f.publish(camera(.available, ["app.A": .allow]))
        #expect(f.heard == ["everyone: app.A camera authorized", "uid 1: app.A camera authorized",
                            "uid 2: app.A camera authorized"])
        _ = f.publish(camera(.available, [:]))
        #expect(f.heard == ["everyone: app.A camera not-determined", "uid 1: app.A camera denied",
                            "uid 2: app.A camera not-determined"])
        _ = f.publish(camera(.disabled, [:]))
        #expect(f.heard == ["everyone:  camera disabled", "uid 1:  camera disabled", "uid 2:  camera disabled"])
    }

    @Test("an unassigned deny holds for every user, over their own grant; an unassigned grant for nobody")
    func unassignedRows() throws {
        let f = Fixture()
        f.publish(camera())
        f.tracker.users = { [1, 2] }
        try f.store.set(DecisionKey(uid: nil, "app.A", "camera"), decision: .denied, setBy: "old")
        try f.store.set(DecisionKey(uid: nil, "app.B", "camera"), decision: .authorized, setBy: "old")
        try f.store.set(DecisionKey(uid: 1, "app.A", "camera"), decision: .authorized, setBy: "t")
        for uid: UInt32 in [1, 2] {
            #expect(f.tracker.status(uid: uid, app: "app.A", permission: "camera") == .denied)
            #expect(f.tracker.status(uid: uid, app: "app.B", permission: "camera") == .notDetermined)
        }
        #expect(f.tracker.status(.everyone, app: "app.A", permission: "camera") == .denied)
        // Resetting the unassigned deny ends it for everyone; user 1's own grant shows.
        var removed = 0
        _ = try f.take { removed = try f.tracker.resetDecisions(uid: nil, app: "app.A", names: []) }
        #expect(removed == 1)
        #expect(f.heard == ["everyone: app.A camera not-determined", "uid 1: app.A camera authorized",
                            "uid 2: app.A camera not-determined"])
        // Assigning the unassigned grant gives it to user 2 only.
        var assigned = 0
        _ = try f.take { assigned = try f.tracker.assign(app: "app.B", names: [], to: 2) }
        #expect(assigned == 1)
        #expect(f.heard == ["uid 2: app.B camera authorized"])
        #expect(f.tracker.status(uid: 1, app: "app.B", permission: "camera") == .notDetermined)
    }
}

@Suite("StatusTracker: scripts")
struct StatusTrackerScriptTests {
    @Test("a script's view: an admin deny counts, an allow does not; the user's decision does")
    func scriptView() throws {
        let f = Fixture()
        f.publish(camera(.available, ["/home/u/allowed.py": .allow, "/home/u/denied.py": .restricted]))
        #expect(f.tracker.status(.script(1), app: "/home/u/allowed.py", permission: "camera") == .notDetermined)
        #expect(f.tracker.status(.user(1), app: "/home/u/allowed.py", permission: "camera") == .authorized)
        #expect(f.tracker.status(.script(1), app: "/home/u/denied.py", permission: "camera") == .restricted)
        try f.store.set(DecisionKey(uid: 1, "/home/u/allowed.py", "camera"), decision: .denied, setBy: "t")
        try f.store.set(DecisionKey(uid: 1, "/home/u/denied.py", "camera"), decision: .authorized, setBy: "t")
        #expect(f.tracker.status(.script(1), app: "/home/u/allowed.py", permission: "camera") == .denied)
        #expect(f.tracker.status(.script(1), app: "/home/u/denied.py", permission: "camera") == .restricted)
        #expect(f.tracker.status(.script(2), app: "/home/u/allowed.py", permission: "camera") == .notDetermined)
    }

    /// Where the views differ (an allow= naming the path), each hears its own
    /// changes: a decision under an allow changes nothing for an executable of that
    /// path, but is the script's status; the allow coming changes nothing for it.
    @Test("a user with a script's subscription hears the changes of the script's view too")
    func scriptSignals() throws {
        let f = Fixture()
        f.publish(camera())
        f.tracker.users = { [1] }
        f.tracker.scriptUsers = { [1] }
        let app = "/home/u/tool.py"
        _ = f.publish(camera(.available, [app: .allow]))
        #expect(f.heard == ["everyone: \(app) camera authorized", "uid 1: \(app) camera authorized"])
        _ = try f.take { try f.tracker.setDecision(uid: 1, app: app, permission: "camera", decision: .denied, setBy: "t") }
        #expect(f.heard == ["uid 1 script: \(app) camera denied"])
        _ = f.take { f.tracker.grantSession(uid: 1, app: "/home/u/other.py", permission: "camera", to: [":1.9"]) }
        #expect(f.heard == ["uid 1: /home/u/other.py camera authorized", "uid 1 script: /home/u/other.py camera authorized"])
        _ = f.publish(camera(.available, [app: .restricted]))
        #expect(f.heard == ["everyone: \(app) camera restricted", "uid 1: \(app) camera restricted",
                            "uid 1 script: \(app) camera restricted"])
        _ = f.publish(camera(.disabled, [:]))
        #expect(f.heard == ["everyone:  camera disabled", "uid 1:  camera disabled", "uid 1 script:  camera disabled"])
        // Without a script's subscription, nobody computes that view.
        f.tracker.scriptUsers = { [] }
        _ = f.publish(camera(.available, [app: .allow]))
        _ = try f.take { try f.tracker.setDecision(uid: 1, app: app, permission: "camera", decision: .authorized, setBy: "t") }
        #expect(f.heard == [])
    }
}
