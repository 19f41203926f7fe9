import Foundation
import Testing
import PermissionsTestSupport

/// The configuration is read away from the serving queue (ConfigReader): while a
/// reading is held, other callers are answered from the configuration in force;
/// once it goes on, the new configuration applies, with each signal it implies
/// once; edits made while it was held make one more reading, not one each; and a
/// held reading does not hold a stop.
///
/// A reading is held with the daemon's config gate (debug builds): with
/// PERMISSIONS_DEBUG_CONFIG_GATE naming a Unix socket this test listens on, each
/// reading after start-up's connects to it (which is how the test knows a reading
/// waits) and waits until the test writes a byte. The daemon logs each reading
/// ("reading N of the configuration: …"), which is how the test counts them.
@Suite(.serialized) struct ConfigReadingTests {
    static let config = "[location]\nenabled=true\n[notifications]\nenabled=true\n"

    private func daemonWithAGate() throws -> (DaemonUnderTest, TestGateSocket) {
        try TestGateSocket.daemon(config: Self.config, variable: "PERMISSIONS_DEBUG_CONFIG_GATE")
    }

    private func status(_ daemon: DaemonUnderTest, _ app: String) throws -> String {
        let r = try daemon.call("GetStatusForApp", "ss", app, "location")
        #expect(r.status == 0, "\(r.stderr)")
        return r.stdout
    }

    private func generation(_ daemon: DaemonUnderTest) throws -> String {
        let r = try daemon.busctl(["get-property", "org.example.Permissions", "/org/example/Permissions",
                                   "org.example.Permissions", "ConfigGeneration"])
        #expect(r.status == 0, "\(r.stderr)")
        return r.stdout
    }

    /// The readings the daemon logged so far (start-up's is the first).
    private func readings(_ daemon: DaemonUnderTest) -> Int {
        daemon.logLines(containing: " of the configuration: ").count
    }

    /// Writes permissions.conf whole and renames it into place: one event for the
    /// daemon (Foundation's atomic write renames before it closes, which is two).
    private func save(_ daemon: DaemonUnderTest, _ text: String) throws {
        let temporary = daemon.configDirectory + "/.edit"
        guard FileManager.default.createFile(atPath: temporary, contents: Data(text.utf8)),
              rename(temporary, daemon.configDirectory + "/permissions.conf") == 0 else {
            throw HarnessError(description: "cannot save permissions.conf: errno \(errno)")
        }
    }

    private func deny(_ apps: String...) -> String {
        "[location]\nenabled=true\ndeny=\(apps.joined(separator: ";"))\n[notifications]\nenabled=true\n"
    }

    @Test(.hangGuard) func callersAreAnsweredWhileAReadingIsHeldAndEditsMeanwhileMakeOneMore() throws {
        let (daemon, gate) = try daemonWithAGate()
        defer { daemon.stop() }
        let monitor = try Monitor(daemon)
        #expect(try generation(daemon) == "u 1\n")
        #expect(readings(daemon) == 1)

        // An edit: its reading waits at the gate.
        try save(daemon, deny("org.example.A"))
        try gate.waitForArrival("the edit's reading")
        // Meanwhile every caller is answered, from the configuration in force.
        #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"not-determined\"\n")
        #expect(try status(daemon, "org.example.A") == "s \"not-determined\"\n")
        #expect(try generation(daemon) == "u 1\n")

        // Three more edits while it is held, the last one the one that stays.
        try save(daemon, deny("org.example.B"))
        try save(daemon, deny("org.example.C"))
        try save(daemon, deny("org.example.D"))
        #expect(try status(daemon, "org.example.D") == "s \"not-determined\"\n")

        // Let go: the files changed under that reading, so it is not used, and the
        // three edits make one more reading, which is held in turn.
        try gate.release()
        try gate.waitForArrival("the reading after the edits")
        #expect(daemon.logLines(containing: "the configuration changed during reading 2; reading it again").count == 1)
        #expect(daemon.logLines(containing: "reading 3 of the configuration waits at the test gate").count == 1)
        #expect(try generation(daemon) == "u 1\n")
        #expect(try status(daemon, "org.example.D") == "s \"not-determined\"\n")

        // Let go: the last edit applies, as one configuration, with one signal.
        try gate.release()
        try monitor.waitFor { $0.hasPrefix("PropertiesChanged") && $0.contains("ConfigGeneration=2") }
        #expect(try status(daemon, "org.example.D") == "s \"restricted\"\n")
        for app in ["org.example.A", "org.example.B", "org.example.C"] {
            #expect(try status(daemon, app) == "s \"not-determined\"\n", "\(app)")
        }
        #expect(readings(daemon) == 3)
        // Had each edit scheduled a reading of its own, the next would have followed
        // at once, to wait at the gate (and say so) long before the signal came here.
        #expect(daemon.logLines(containing: "reading 4 ").isEmpty)

        // A last edit, a fence: the next reading at the gate is its own, the fourth;
        // nothing else was read meanwhile.
        try save(daemon, deny("org.example.D", "org.example.E"))
        try gate.waitForArrival("the fence's reading")
        #expect(daemon.logLines(containing: "reading 4 of the configuration waits at the test gate").count == 1)
        #expect(readings(daemon) == 3)
        try gate.release()
        let fence = statusLine(app: "org.example.E", "location", "restricted")
        try monitor.waitFor { $0 == fence }
        #expect(monitor.statusChanges == [statusLine(app: "org.example.D", "location", "restricted"), fence])
        #expect(readings(daemon) == 4)
        #expect(try generation(daemon) == "u 3\n")
    }

    /// Edits that come faster than a reading (here: one during each, and a reading
    /// that takes 600 ms, as on a slow disk) do not keep the configuration out for
    /// ever: once every reading has seen a change for 500 ms, the last is used.
    @Test(.hangGuard) func editsFasterThanAReadingStillApply() throws {
        let (daemon, gate) = try daemonWithAGate()
        defer { daemon.stop() }
        let monitor = try Monitor(daemon)
        try save(daemon, deny("org.example.A"))
        try gate.waitForArrival("the first edit's reading")
        try save(daemon, deny("org.example.B"))
        try gate.release()
        try gate.waitForArrival("the second reading")
        let since = Date()  // about when the first reading saw the change under it
        #expect(daemon.logLines(containing: "the configuration changed during reading 2; reading it again").count == 1)
        try save(daemon, deny("org.example.C"))
        Thread.sleep(forTimeInterval: 0.6)  // the slow reading itself, not a wait for an event
        try gate.release()
        try monitor.waitFor { $0.hasPrefix("PropertiesChanged") && $0.contains("ConfigGeneration=2") }
        #expect(Date().timeIntervalSince(since) >= 0.5)
        #expect(daemon.logLines(containing: "the configuration kept changing while it was read, for 500 ms; "
                                + "using reading 3 as it found the files, and reading them again").count == 1)
        #expect(try status(daemon, "org.example.C") == "s \"restricted\"\n")
        #expect(monitor.statusChanges == [statusLine(app: "org.example.C", "location", "restricted")])
        // The change under it made one more reading, which finds what is in force.
        try gate.waitForArrival("the reading after")
        try gate.release()
        try daemon.waitForLog("reading 4 of the configuration: ")
        #expect(try generation(daemon) == "u 2\n")
    }

    /// The same with files written in place (opened, truncated, written): a reading
    /// may have caught one half-written, so however long the edits go on, a reading
    /// that saw one is never used.
    @Test(.hangGuard) func aReadingDuringAnEditInPlaceIsNeverUsed() throws {
        let (daemon, gate) = try daemonWithAGate()
        defer { daemon.stop() }
        let monitor = try Monitor(daemon)
        let file = daemon.configDirectory + "/permissions.conf"
        func writeInPlace(_ text: String) throws {
            guard let handle = FileHandle(forUpdatingAtPath: file) else { throw HarnessError(description: "open \(file)") }
            try handle.truncate(atOffset: 0)
            try handle.write(contentsOf: Data(text.utf8))
            try handle.close()
        }
        try writeInPlace(deny("org.example.A"))
        try gate.waitForArrival("the first edit's reading")
        try writeInPlace(deny("org.example.B"))
        try gate.release()
        try gate.waitForArrival("the second reading")
        try writeInPlace(deny("org.example.C"))
        Thread.sleep(forTimeInterval: 0.6)  // the slow reading itself, not a wait for an event
        try gate.release()
        // Not used: one more reading, which nothing changes under.
        try gate.waitForArrival("the third reading")
        #expect(daemon.logLines(containing: "the configuration changed during reading 3; reading it again").count == 1)
        #expect(try generation(daemon) == "u 1\n")
        try gate.release()
        try monitor.waitFor { $0.hasPrefix("PropertiesChanged") && $0.contains("ConfigGeneration=2") }
        #expect(daemon.logLines(containing: "kept changing").isEmpty)
        #expect(monitor.statusChanges == [statusLine(app: "org.example.C", "location", "restricted")])
    }

    /// A reading that does not end (a hung disk, here a gate never opened) holds
    /// neither the callers nor a stop.
    @Test(.hangGuard) func aHeldReadingDoesNotHoldTheStop() throws {
        let (daemon, gate) = try daemonWithAGate()
        defer { daemon.stop() }
        try save(daemon, deny("org.example.A"))
        try gate.waitForArrival("the edit's reading")
        #expect(try daemon.call("GetStatus", "s", "location").stdout == "s \"not-determined\"\n")
        #expect(daemon.terminate(timeout: 10) == DaemonUnderTest.Ending(reason: .exit, status: 0))
        gate.abandon()
    }
}
