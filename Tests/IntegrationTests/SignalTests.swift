import Foundation
import Testing
import PermissionsTestSupport
import SystemPrimitives

/// StatusChanged: exactly one per real change of an effective status, none otherwise.
///
/// "Exactly one" is checked with a fence: after the change under test, the test
/// makes one more, unrelated change and waits for its signal. Signals from one
/// sender arrive in order, so every signal the first change caused has arrived by
/// then, and the list between the two is complete. An edit of the files is read on
/// a queue of its own, so a bus call made after it may be answered first: the test
/// waits for what the daemon announces of an edit (`announced`) before its fence.
@Suite struct SignalTests {
    let bus: TestBus
    let daemon: DaemonUnderTest
    let monitor: Monitor

    static let baseConfig = """
        [location]
        enabled=true

        [notifications]
        enabled=true
        """

    init() throws {
        bus = try TestBus()
        daemon = try DaemonUnderTest(bus: bus, config: Self.baseConfig)
        monitor = try Monitor(daemon)
    }

    private var fenceCount = 0
    /// Index in `monitor.statusChanges` just after the last fence's signal.
    private var afterLastFence = 0

    /// Makes a change of its own (a grant for a new app, on `permission`, which the
    /// test must keep available) and returns the StatusChanged lines that came
    /// after the previous fence and before this one.
    mutating func signalsBeforeFence(on permission: String = "notifications") throws -> [String] {
        fenceCount += 1
        let app = "org.example.Fence\(fenceCount)"
        let fence = statusLine(app: app, permission, "authorized")
        let r = try daemon.ctl("grant", app, permission)
        #expect(r.status == 0, "\(r.stderr)")
        try monitor.waitFor { $0 == fence }
        let all = monitor.statusChanges
        let fenceIndex = all.lastIndex(of: fence)!
        defer { afterLastFence = fenceIndex + 1 }
        return Array(all[afterLastFence..<fenceIndex])
    }

    /// Waits for the PropertiesChanged that says what an edit of the files did
    /// (`ConfigGeneration=N`, or `ConfigStatus=…` for a refused one).
    func announced(_ what: String) throws {
        try monitor.waitFor { $0.hasPrefix("PropertiesChanged") && $0.contains(what) }
    }

    @Test mutating func configSwitchOffAndOnSignalsOnceEach() throws {
        _ = try signalsBeforeFence()
        try daemon.writeConfig(Self.baseConfig.replacingOccurrences(of: "[location]\nenabled=true",
                                                                     with: "[location]\nenabled=false"))
        try announced("ConfigGeneration=2")
        var seen = try signalsBeforeFence()
        #expect(seen == [statusLine(app: "", "location", "disabled")])
        #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"disabled\"\n")

        try daemon.writeConfig(Self.baseConfig)
        try announced("ConfigGeneration=3")
        seen = try signalsBeforeFence()
        #expect(seen == [statusLine(app: "", "location", "not-determined")])
    }

    @Test mutating func noOpEditSignalsNothing() throws {
        _ = try signalsBeforeFence()
        try daemon.writeConfig(Self.baseConfig)  // the same content, rewritten
        try daemon.writeConfig(Self.baseConfig + "\n# only a comment changed\n")
        // A fence of files, read after them: the edits before it changed nothing.
        try daemon.writeConfig(Self.baseConfig.replacingOccurrences(
            of: "[location]\nenabled=true", with: "[location]\nenabled=true\ndeny=org.example.Visible"))
        try announced("ConfigGeneration=2")
        #expect(try signalsBeforeFence() == [statusLine(app: "org.example.Visible", "location", "restricted")])
    }

    @Test mutating func perAppLockSignalsThatAppOnly() throws {
        _ = try signalsBeforeFence()
        try daemon.writeConfig(Self.baseConfig.replacingOccurrences(
            of: "[location]\nenabled=true", with: "[location]\nenabled=true\ndeny=org.example.Locked\nallow=org.example.Forced"))
        try announced("ConfigGeneration=2")
        let seen = try signalsBeforeFence()
        #expect(Set(seen) == [statusLine(app: "org.example.Locked", "location", "restricted"),
                              statusLine(app: "org.example.Forced", "location", "authorized")])
        #expect(seen.count == 2)
        #expect(try daemon.call("GetStatusForApp", "ss", "org.example.Locked", "location").stdout == "s \"restricted\"\n")
    }

    @Test mutating func adminGrantSignalsOnceAndRepeatSignalsNothing() throws {
        _ = try signalsBeforeFence()
        #expect(try daemon.ctl("grant", "org.example.App", "location").status == 0)
        #expect(try signalsBeforeFence() == [statusLine(app: "org.example.App", "location", "authorized")])
        #expect(try daemon.ctl("grant", "org.example.App", "location").status == 0)
        #expect(try signalsBeforeFence() == [])
        #expect(try daemon.ctl("deny", "org.example.App", "location").status == 0)
        #expect(try signalsBeforeFence() == [statusLine(app: "org.example.App", "location", "denied")])
        #expect(try daemon.ctl("reset", "org.example.App").status == 0)
        #expect(try signalsBeforeFence() == [statusLine(app: "org.example.App", "location", "not-determined")])
    }

    @Test mutating func decisionHiddenByAdminLockSignalsNothing() throws {
        try daemon.writeConfig(Self.baseConfig.replacingOccurrences(
            of: "[location]\nenabled=true", with: "[location]\nenabled=true\ndeny=org.example.Locked"))
        try announced("ConfigGeneration=2")
        #expect(try signalsBeforeFence() == [statusLine(app: "org.example.Locked", "location", "restricted")])
        #expect(try daemon.ctl("grant", "org.example.Locked", "location").status == 0)
        #expect(try signalsBeforeFence() == [])
        #expect(try daemon.call("GetStatusForApp", "ss", "org.example.Locked", "location").stdout == "s \"restricted\"\n")
    }

    @Test mutating func malformedConfigKeepsTheLastGoodOne() throws {
        _ = try signalsBeforeFence()
        try daemon.writeConfig("[location]\nenabled=false\nthis line is junk\n")
        try announced("ConfigStatus=kept: ")
        #expect(try signalsBeforeFence() == [])
        #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"not-determined\"\n")
        let configFile = daemon.configDirectory + "/permissions.conf"
        #expect(daemon.log.contains("\(configFile):3: "), "log: \(daemon.log)")
        #expect(daemon.log.contains("keeping the last good configuration"))

        // A value the plugin rejects: reported with file, line and key.
        try daemon.writeConfig("[location]\nenabled=maybe\n")
        try announced("enabled=maybe")
        #expect(try signalsBeforeFence() == [])
        #expect(daemon.log.contains("\(configFile):2: [location] enabled=maybe: expected true or false"))
        #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"not-determined\"\n")
    }

    @Test mutating func dropInOverridesTheMainFile() throws {
        _ = try signalsBeforeFence()
        try FileManager.default.createDirectory(atPath: daemon.configDirectory + "/permissions.conf.d",
                                                withIntermediateDirectories: true)
        try daemon.writeConfig("[notifications]\nenabled=false\n", name: "permissions.conf.d/50-off.conf")
        try announced("ConfigGeneration=2")
        #expect(try signalsBeforeFence(on: "location") == [statusLine(app: "", "notifications", "disabled")])
        // A file gone applies once it has stayed away for the settle window: wait for it.
        try FileManager.default.removeItem(atPath: daemon.configDirectory + "/permissions.conf.d/50-off.conf")
        try monitor.waitFor { $0 == statusLine(app: "", "notifications", "not-determined") }
        #expect(try signalsBeforeFence(on: "location") == [statusLine(app: "", "notifications", "not-determined")])
    }
}
