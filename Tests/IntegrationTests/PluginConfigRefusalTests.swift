import Foundation
import Testing
import PermissionsTestSupport

/// A plugin that comes while the daemon runs and refuses the configuration in force
/// never serves: not on its defaults (its deny= would not be in force), not even for
/// a moment. It is unavailable, says why, and ConfigStatus shows it; once a
/// configuration it accepts is applied it loads, restricted from the first moment.
@Suite struct PluginConfigRefusalTests {
    typealias D = PluginDirectoryTests

    static func configStatus(_ daemon: DaemonUnderTest) throws -> String {
        try daemon.busctl(["get-property", "org.example.Permissions", "/org/example/Permissions",
                           "org.example.Permissions", "ConfigStatus"]).stdout
    }

    @Test func aHotLoadedPluginThatRefusesTheConfigurationNeverServes() throws {
        let library = try PlatformTests.buildExample()
        let hot = try makeTemporaryDirectory("hot-plugins")
        defer { D.removeTree(hot) }
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus, config: "[example-lan]\ndeny=/usr/bin/busctl\nenabled=bogus\n",
                                         pluginDirectories: [corePluginDirectory, hot])
        let monitor = try Monitor(daemon)
        #expect(try Self.configStatus(daemon) == "s \"ok\"\n")

        try PlatformTests.install(library, into: hot, as: D.plugin)
        let path = "\(hot)/\(D.plugin)"
        try daemon.waitForLog("plugin \(path): unavailable: rejected the configuration in force: ")
        #expect(try D.status(daemon) == "s \"unsupported\"\n")
        #expect(daemon.logLines(containing: "plugin \(path): unavailable: rejected the configuration in force").count == 1)
        #expect(daemon.logLines(containing: "example-lan 1.0 loaded").isEmpty, "\(daemon.log)")
        #expect(daemon.logLines(containing: "rejected the new configuration").isEmpty)
        #expect(try Self.configStatus(daemon).hasPrefix("s \"kept: "))
        // Unknown before, "unsupported" now: no app could have used it, nothing to tell.
        #expect(try D.signalsUntilFence(daemon, monitor, since: 0) == [])

        // A configuration it accepts: loaded, the deny in force from the first signal.
        let before = monitor.statusChanges.count
        try daemon.writeConfig(D.config)
        try monitor.waitFor { $0.hasPrefix("PropertiesChanged") && $0.contains("example-lan 1.0 loaded") }
        #expect(try D.status(daemon) == "s \"restricted\"\n")
        #expect(try Self.configStatus(daemon) == "s \"ok\"\n")
        #expect(try D.signalsUntilFence(daemon, monitor, since: before) == D.appeared)
    }
}
