import Testing
@testable import PermissionsModel
@testable import PermissionsConfig

/// `CoreConfig.split`: the daemon's own keys ([service] agent-timeout, [<permission>]
/// no-agent) taken out of the configuration before the rest goes to the plugins.
@Suite("Core configuration keys")
struct CoreConfigTests {
    private static func entry(_ section: String, _ key: String, _ value: String, line: Int = 1) -> ConfigEntry {
        ConfigEntry(section: section, key: key, value: value, origin: "permissions.conf:\(line)")
    }

    /// A previous configuration different from the defaults in every field.
    private static var previous: CoreConfig {
        var core = CoreConfig()
        core.agentTimeoutSeconds = 45
        core.noAgent = ["location": .denied, "camera": .authorized]
        return core
    }

    @Test func defaults() {
        let core = CoreConfig()
        #expect(core.agentTimeoutSeconds == 120)
        #expect(core.noAgent.isEmpty)
        let (split, rest) = CoreConfig.split([], previous: CoreConfig())
        #expect(split == CoreConfig())
        #expect(rest.isEmpty)
    }

    @Test("a valid agent-timeout is taken", arguments: [("30", 30), ("1", 1), ("3600", 3600), ("120", 120)])
    func validAgentTimeout(value: String, seconds: Int) {
        let (core, rest) = CoreConfig.split([Self.entry("service", "agent-timeout", value)], previous: Self.previous)
        #expect(core.agentTimeoutSeconds == seconds)
        #expect(rest.isEmpty)
    }

    @Test("a bad agent-timeout keeps the previous one", arguments: [
        "0", "3601", "-5", "100000000000000000000", "abc", "", "30s", " 30", "1.5", "two minutes",
    ])
    func badAgentTimeout(value: String) {
        let (core, rest) = CoreConfig.split([Self.entry("service", "agent-timeout", value)], previous: Self.previous)
        #expect(core.agentTimeoutSeconds == 45)
        // The bad key is the daemon's: it is not passed on to a plugin either.
        #expect(rest.isEmpty)
    }

    @Test func badAgentTimeoutKeepsTheDefaultWhenThereWasNoPreviousOne() {
        let (core, _) = CoreConfig.split([Self.entry("service", "agent-timeout", "0")], previous: CoreConfig())
        #expect(core.agentTimeoutSeconds == 120)
    }

    @Test func laterAgentTimeoutOverridesEarlierOne() {
        let entries = [Self.entry("service", "agent-timeout", "30", line: 2),
                       Self.entry("service", "agent-timeout", "60", line: 9)]
        #expect(CoreConfig.split(entries, previous: Self.previous).0.agentTimeoutSeconds == 60)
    }

    @Test func agentTimeoutRemovedFromTheConfigGoesBackToTheDefault() {
        let (core, _) = CoreConfig.split([Self.entry("location", "enabled", "true")], previous: Self.previous)
        #expect(core.agentTimeoutSeconds == 120)
    }

    @Test("a valid no-agent is taken for its section", arguments: [
        ("not-determined", Status.notDetermined), ("denied", .denied), ("authorized", .authorized),
    ])
    func validNoAgent(value: String, status: Status) {
        let (core, rest) = CoreConfig.split([Self.entry("notifications", "no-agent", value)], previous: CoreConfig())
        #expect(core.noAgent == ["notifications": status])
        #expect(rest.isEmpty)
    }

    @Test func noAgentPerSection() {
        let entries = [Self.entry("location", "no-agent", "authorized"),
                       Self.entry("camera", "no-agent", "denied"),
                       Self.entry("microphone", "no-agent", "not-determined")]
        let (core, rest) = CoreConfig.split(entries, previous: Self.previous)
        #expect(core.noAgent == ["location": .authorized, "camera": .denied, "microphone": .notDetermined])
        #expect(rest.isEmpty)
    }

    @Test("a bad no-agent keeps the previous value", arguments: [
        "restricted", "disabled", "unsupported", "yes", "", "Denied", "denied ", "notdetermined",
    ])
    func badNoAgent(value: String) {
        let entries = [Self.entry("location", "no-agent", value), Self.entry("notifications", "no-agent", value)]
        let (core, rest) = CoreConfig.split(entries, previous: Self.previous)
        // location had "denied" before: kept; notifications had nothing: stays unset.
        #expect(core.noAgent == ["location": .denied])
        #expect(rest.isEmpty)
    }

    @Test func noAgentRemovedFromTheConfigIsForgotten() {
        // Previous had location and camera; the new configuration names only camera.
        let (core, _) = CoreConfig.split([Self.entry("camera", "no-agent", "denied")], previous: Self.previous)
        #expect(core.noAgent == ["camera": .denied])
    }

    @Test func theDaemonsKeysAreTakenOutAndEveryOtherEntryKeptInOrder() {
        let entries = [
            Self.entry("location", "enabled", "true", line: 2),
            Self.entry("location", "no-agent", "denied", line: 3),
            Self.entry("service", "agent-timeout", "90", line: 5),
            Self.entry("notifications", "deny", "org.example.Spammy", line: 8),
            Self.entry("location", "allow", "org.gnome.Maps", line: 4),
            Self.entry("camera", "no-agent", "bogus", line: 11),
            Self.entry("service", "agent-timeout", "0", line: 12),
            Self.entry("notifications", "enabled", "false", line: 9),
            Self.entry("location", "max-accuracy", "city", line: 1),
            Self.entry("notifications", "no-agent", "authorized", line: 10),
            Self.entry("location", "enabled", "false", line: 20),
        ]
        let (core, rest) = CoreConfig.split(entries, previous: Self.previous)
        #expect(core.agentTimeoutSeconds == 90)
        #expect(core.noAgent == ["location": .denied, "notifications": .authorized, "camera": .authorized])
        #expect(rest == [
            Self.entry("location", "enabled", "true", line: 2),
            Self.entry("notifications", "deny", "org.example.Spammy", line: 8),
            Self.entry("location", "allow", "org.gnome.Maps", line: 4),
            Self.entry("notifications", "enabled", "false", line: 9),
            Self.entry("location", "max-accuracy", "city", line: 1),
            Self.entry("location", "enabled", "false", line: 20),
        ])
    }

    @Test func keysThatOnlyLookAlikeArePassedOn() {
        // Same key in another case, or another key with the same prefix: a plugin's business.
        let entries = [Self.entry("location", "No-Agent", "denied"), Self.entry("location", "no-agent-x", "denied"),
                       Self.entry("location", "agent-timeout", "30"), Self.entry("Service", "agent-timeout", "30")]
        let (core, rest) = CoreConfig.split(entries, previous: CoreConfig())
        #expect(core == CoreConfig())
        #expect(rest == entries)
    }

    // MARK: [identity] interpreters=

    @Test("interpreters= is a list of names and absolute paths; absent is the default, empty is none", arguments: [
        ("python3;perl", ["python3", "perl"] as [String]?),
        (" python3 ; /opt/py/bin/python3.12 ;", ["python3", "/opt/py/bin/python3.12"]),
        ("", []),
        ("tclsh8.6;g++-wrapper", ["tclsh8.6", "g++-wrapper"]),
    ])
    func interpreters(value: String, expected: [String]?) {
        var rejected: [String] = []
        let (core, rest) = CoreConfig.split([Self.entry("identity", "interpreters", value)], previous: Self.previous,
                                            reject: { rejected.append($0) })
        #expect(core.interpreters == expected)
        #expect(rejected.isEmpty)
        #expect(rest.isEmpty)
        #expect(CoreConfig.split([], previous: core).0.interpreters == nil)
    }

    @Test("a bad interpreter entry is rejected, naming it, and the previous list is kept", arguments: [
        "python3;bin/python3", "-x", ".hidden", "/usr/bin/../bin/python3", "python 3", "/usr//bin/python3",
    ])
    func badInterpreter(value: String) {
        var previous = Self.previous
        previous.interpreters = ["perl"]
        var rejected: [String] = []
        let (core, _) = CoreConfig.split([Self.entry("identity", "interpreters", value, line: 4)], previous: previous,
                                         reject: { rejected.append($0) })
        #expect(core.interpreters == ["perl"])
        #expect(rejected.count == 1)
        #expect(rejected.first?.hasPrefix("permissions.conf:4: [identity] interpreters: invalid interpreter \"") == true)
    }

    @Test func identityIsNoPermissionName() {
        var rejected: [String] = []
        _ = CoreConfig.split([Self.entry("permissions", "declare", "identity")], previous: CoreConfig(),
                             reject: { rejected.append($0) })
        #expect(rejected == ["permissions.conf:1: [permissions] declare: invalid permission name \"identity\""])
    }

    // MARK: the call limits ([service] outgoing-calls= and the rest, see CallLimits)

    private static var limitKeys: [(String, WritableKeyPath<CallLimits, Int>)] {
        [("outgoing-calls", \.outgoingCalls), ("outgoing-calls-per-user", \.outgoingCallsPerUser),
         ("pending-calls-per-connection", \.pendingCallsPerConnection), ("pending-calls-per-user", \.pendingCallsPerUser)]
    }

    @Test func callLimitDefaults() {
        let limits = CoreConfig().callLimits
        #expect(limits.outgoingCalls == 96)
        #expect(limits.outgoingCallsPerUser == 16)
        #expect(limits.pendingCallsPerConnection == 64)
        #expect(limits.pendingCallsPerUser == 512)
        // Below what a stock system bus lets the daemon's one connection wait for (128).
        #expect(limits.outgoingCalls < 128)
    }

    @Test("a valid call limit is taken", arguments: ["1", "7", "100000"])
    func validCallLimit(value: String) {
        for (key, path) in Self.limitKeys {
            let (core, rest) = CoreConfig.split([Self.entry("service", key, value)], previous: Self.previous)
            #expect(core.callLimits[keyPath: path] == Int(value), "\(key)")
            #expect(rest.isEmpty)
        }
    }

    @Test("a bad call limit keeps the previous one and is refused", arguments: ["0", "100001", "-1", "", "ten", "8 "])
    func badCallLimit(value: String) {
        var previous = Self.previous
        for (_, path) in Self.limitKeys { previous.callLimits[keyPath: path] = 5 }
        for (key, path) in Self.limitKeys {
            var rejected: [String] = []
            let (core, rest) = CoreConfig.split([Self.entry("service", key, value)], previous: previous,
                                                reject: { rejected.append($0) })
            #expect(core.callLimits[keyPath: path] == 5, "\(key)")
            #expect(rest.isEmpty)
            #expect(rejected == ["permissions.conf:1: [service] \(key)=\(value): expected 1..100000 calls"], "\(rejected)")
        }
    }

    @Test func laterCallLimitOverridesEarlierOneAndAbsentOnesTakeTheDefault() {
        let entries = [Self.entry("service", "outgoing-calls-per-user", "4", line: 2),
                       Self.entry("service", "outgoing-calls-per-user", "8", line: 9)]
        let (core, _) = CoreConfig.split(entries, previous: Self.previous)
        var expected = CallLimits()
        expected.outgoingCallsPerUser = 8
        #expect(core.callLimits == expected)
    }
}
