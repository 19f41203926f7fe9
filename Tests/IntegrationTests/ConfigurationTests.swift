import Foundation
import Testing
import PermissionsTestSupport

/// The configuration as administrators really manage it (issue 11): editors that
/// rename before they write, symbolic links switched to a new generation, a BOM,
/// spaces around values, a configuration that cannot be read at start-up, and a
/// reload that applies all of a new configuration or none of it.
///
/// Counting: after each step the test waits for what the daemon announces
/// (ConfigGeneration / ConfigStatus in PropertiesChanged, or a StatusChanged), then
/// closes the step with a fence, a known change whose StatusChanged must be the next
/// one. Signals from one sender arrive in order, so the list between two fences is
/// complete.
@Suite struct ConfigurationTests {
    static let badApp = "org.bad.App"

    /// A daemon under test, a monitor, and the fences.
    final class Rig {
        let bus: TestBus
        let daemon: DaemonUnderTest
        private(set) var monitor: Monitor!
        private var afterLastFence = 0
        private var fences = 0
        private var configFenceApps: [String] = []

        /// Starts permissionsd with `config`; `setUp` runs before it starts.
        init(config: String, setUp: (DaemonUnderTest) throws -> Void = { _ in }) throws {
            bus = try TestBus()
            daemon = try DaemonUnderTest(bus: bus, config: config, start: false)
            try FileManager.default.createDirectory(atPath: daemon.configDirectory + "/permissions.conf.d",
                                                    withIntermediateDirectories: true)
            try setUp(daemon)
            try daemon.start()
            monitor = try Monitor(daemon)
        }

        var configFile: String { daemon.configDirectory + "/permissions.conf" }

        func restart() throws {
            daemon.stop()
            try daemon.start()
            monitor = try Monitor(daemon)
            afterLastFence = 0
        }

        // Reads.

        func status(_ permission: String, app: String? = nil) throws -> String {
            let r = try app.map { try daemon.call("GetStatusForApp", "ss", $0, permission) }
                ?? daemon.call("GetStatus", "s", permission)
            guard r.status == 0 else { throw HarnessError(description: "GetStatus \(permission): \(r.stderr)") }
            return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
                .replacingOccurrences(of: "s \"", with: "").replacingOccurrences(of: "\"", with: "")
        }

        /// A property of the service, as busctl prints it ("u 2", "s \"ok\"").
        func property(_ name: String) throws -> String {
            let r = try daemon.busctl(["get-property", "org.example.Permissions", "/org/example/Permissions",
                                       "org.example.Permissions", name])
            guard r.status == 0 else { throw HarnessError(description: "get-property \(name): \(r.stderr)") }
            return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        var generation: String { get throws { try property("ConfigGeneration") } }
        var configStatus: String { get throws { try property("ConfigStatus") } }

        /// Waits for the PropertiesChanged that announces configuration `generation`.
        @discardableResult
        func waitForGeneration(_ generation: Int) throws -> String {
            try monitor.waitFor { line in
                line.hasPrefix("PropertiesChanged") && line.split(separator: " ").contains("ConfigGeneration=\(generation)")
            }
        }

        /// Waits for a PropertiesChanged whose ConfigStatus starts with `prefix`; returns the status.
        func waitForConfigStatus(_ prefix: String) throws -> String {
            let line = try monitor.waitFor { $0.hasPrefix("PropertiesChanged") && $0.contains("ConfigStatus=\(prefix)") }
            return String(line[line.range(of: "ConfigStatus=")!.upperBound...])
        }

        // Fences.

        /// StatusChanged lines since the last fence, closed by a bus call: a grant for a
        /// new app on `permission` (which must be available to apps). Use it after waiting
        /// for what the daemon announced: a bus call is not ordered with file events.
        func signalsBeforeFence(on permission: String = "notifications") throws -> [String] {
            fences += 1
            let app = "org.example.Fence\(fences)"
            let r = try daemon.ctl("grant", app, permission)
            #expect(r.status == 0, "\(r.stderr)")
            return try lines(until: statusLine(app: app, permission, "authorized"))
        }

        /// The same, closed by a configuration change: one more app denied on
        /// `permission` in the drop-in 99-fence.conf (renamed into place). File events
        /// reach the daemon in order, so this fence comes after every earlier edit.
        func signalsBeforeConfigFence(on permission: String = "notifications") throws -> [String] {
            fences += 1
            let app = "org.example.Fence\(fences)"
            configFenceApps.append(app)
            try daemon.writeConfig("[\(permission)]\ndeny=\(configFenceApps.joined(separator: ";"))\n",
                                   name: "permissions.conf.d/99-fence.conf")
            return try lines(until: statusLine(app: app, permission, "restricted"))
        }

        private func lines(until fence: String) throws -> [String] {
            try monitor.waitFor { $0 == fence }
            let all = monitor.statusChanges
            let fenceIndex = all.lastIndex(of: fence)!
            defer { afterLastFence = fenceIndex + 1 }
            return Array(all[afterLastFence..<fenceIndex])
        }

        /// Runs a shell command line in `directory`, as an administrator would type it.
        func sh(_ script: String, in directory: String? = nil) throws {
            let r = try run("/bin/sh", ["-c", "cd \"$0\" && " + script, directory ?? daemon.configDirectory])
            #expect(r.status == 0, "\(script): \(r.stderr)")
        }
    }

    // MARK: 1. Editor save gap

    @Test func editorSavesThatRenameFirstApplyNothing() throws {
        let config = "[location]\ndeny=\(Self.badApp)\n"
        let rig = try Rig(config: config)
        #expect(try rig.status("location", app: Self.badApp) == "restricted")

        // Emacs: the old file renamed to file~, then the new one written.
        for _ in 1...20 {
            try rig.sh("mv permissions.conf permissions.conf~ && printf '%s' '\(config)' > permissions.conf")
        }
        #expect(try rig.status("location", app: Self.badApp) == "restricted")
        // Only the fence's own change applied: nothing between.
        #expect(try rig.signalsBeforeConfigFence() == [])
        #expect(try rig.generation == "u 2")  // 1 at start, 2 the fence
        #expect(try rig.configStatus == "s \"ok\"")
        #expect(try rig.status("location", app: Self.badApp) == "restricted")
        #expect(!rig.daemon.log.contains("gone for 500 ms"), "\(rig.daemon.log)")
    }

    @Test func aFileReallyDeletedAppliesAfterTheSettleWindow() throws {
        let rig = try Rig(config: "[location]\ndeny=\(Self.badApp)\n") { daemon in
            try "[notifications]\nenabled=false\n".write(toFile: daemon.configDirectory + "/permissions.conf.d/50-off.conf",
                                                      atomically: true, encoding: .utf8)
        }
        #expect(try rig.status("notifications") == "disabled")
        #expect(try rig.generation == "u 1")

        let removed = Date()
        try rig.sh("rm permissions.conf.d/50-off.conf")
        try rig.waitForGeneration(2)
        #expect(Date().timeIntervalSince(removed) >= 0.5)
        #expect(try rig.signalsBeforeFence(on: "location") == [statusLine(app: "", "notifications", "not-determined")])
        #expect(try rig.status("notifications") == "not-determined")
        #expect(try rig.status("location", app: Self.badApp) == "restricted")
        #expect(try rig.configStatus == "s \"ok\"")
        #expect(rig.daemon.log.contains(
            "\(rig.daemon.configDirectory)/permissions.conf.d/50-off.conf gone for 500 ms; applying the configuration without it"),
            "\(rig.daemon.log)")

        // permissions.conf itself, deleted for real: its deny goes too.
        try rig.sh("rm permissions.conf")
        try rig.waitForGeneration(3)
        #expect(try rig.signalsBeforeFence() == [statusLine(app: Self.badApp, "location", "not-determined")])
        #expect(try rig.status("location", app: Self.badApp) == "not-determined")
    }

    // MARK: 2. Symbolic links

    @Test func configDirectorySwitchedToANewGenerationIsFollowed() throws {
        var root = ""
        let rig = try Rig(config: "") { daemon in
            root = (daemon.configDirectory as NSString).deletingLastPathComponent
            for (generation, text) in [("gen1", "[location]\ndeny=\(Self.badApp)\n"),
                                       ("gen2", "[location]\ndeny=\(Self.badApp)\n[notifications]\nenabled=false\n")] {
                try FileManager.default.createDirectory(atPath: "\(root)/\(generation)/permissions.conf.d",
                                                        withIntermediateDirectories: true)
                try text.write(toFile: "\(root)/\(generation)/permissions.conf", atomically: true, encoding: .utf8)
            }
            try FileManager.default.removeItem(atPath: daemon.configDirectory)
            try FileManager.default.createSymbolicLink(atPath: daemon.configDirectory, withDestinationPath: "gen1")
        }
        #expect(try rig.status("location", app: Self.badApp) == "restricted")
        #expect(try rig.status("notifications") == "not-determined")

        // The NixOS / release-directory habit: a new link renamed over the old one.
        try rig.sh("ln -s gen2 tmp && mv -T tmp config", in: root)
        try rig.waitForGeneration(2)
        #expect(try rig.signalsBeforeFence(on: "location") == [statusLine(app: "", "notifications", "disabled")])
        #expect(try rig.status("notifications") == "disabled")

        // Edits in the new target are followed...
        try "[notifications]\nenabled=false\n".write(toFile: root + "/gen2/permissions.conf", atomically: true, encoding: .utf8)
        try rig.waitForGeneration(3)
        #expect(try rig.signalsBeforeFence(on: "location") == [statusLine(app: Self.badApp, "location", "not-determined")])
        #expect(try rig.status("location", app: Self.badApp) == "not-determined")

        // ... and the old generation no longer counts.
        try "[location]\nenabled=false\n".write(toFile: root + "/gen1/permissions.conf", atomically: true, encoding: .utf8)
        #expect(try rig.signalsBeforeConfigFence(on: "location") == [])
        #expect(try rig.generation == "u 4")
        #expect(try rig.status("location") == "not-determined")
    }

    @Test func filesThatAreSymbolicLinksAreFollowedWhenWrittenThrough() throws {
        var site = ""
        let rig = try Rig(config: "") { daemon in
            site = (daemon.configDirectory as NSString).deletingLastPathComponent + "/site"
            try FileManager.default.createDirectory(atPath: site, withIntermediateDirectories: true)
            try "".write(toFile: site + "/permissions.conf", atomically: true, encoding: .utf8)
            try "".write(toFile: site + "/extra.conf", atomically: true, encoding: .utf8)
            try FileManager.default.removeItem(atPath: daemon.configDirectory + "/permissions.conf")
            try FileManager.default.createSymbolicLink(atPath: daemon.configDirectory + "/permissions.conf",
                                                       withDestinationPath: "../site/permissions.conf")
            try FileManager.default.createSymbolicLink(atPath: daemon.configDirectory + "/permissions.conf.d/50-extra.conf",
                                                       withDestinationPath: site + "/extra.conf")
        }
        #expect(try rig.status("location", app: Self.badApp) == "not-determined")

        // Written through the link: the file changes elsewhere, not in the config directory.
        try rig.sh("printf '[location]\\ndeny=\(Self.badApp)\\n' > permissions.conf")
        try rig.waitForGeneration(2)
        #expect(try rig.signalsBeforeFence() == [statusLine(app: Self.badApp, "location", "restricted")])
        #expect(try rig.status("location", app: Self.badApp) == "restricted")

        // A drop-in that is a link: the same.
        try rig.sh("printf '[notifications]\\nenabled=false\\n' > permissions.conf.d/50-extra.conf")
        try rig.waitForGeneration(3)
        #expect(try rig.signalsBeforeFence(on: "location") == [statusLine(app: "", "notifications", "disabled")])

        // The target replaced by an editor that renames, in its own directory.
        try rig.sh("printf '[location]\\nenabled=true\\n' > .new && mv .new permissions.conf", in: site)
        try rig.waitForGeneration(4)
        #expect(try rig.signalsBeforeFence(on: "location") == [statusLine(app: Self.badApp, "location", "not-determined")])
        #expect(try rig.configStatus == "s \"ok\"")

        // A new drop-in that is a link (creating a link gives IN_CREATE only).
        try "[notifications]\nenabled=true\n".write(toFile: site + "/more.conf", atomically: true, encoding: .utf8)
        try rig.sh("ln -s ../../site/more.conf permissions.conf.d/70-more.conf")
        try rig.waitForGeneration(5)
        #expect(try rig.signalsBeforeFence(on: "location") == [statusLine(app: "", "notifications", "not-determined")])
    }

    // MARK: 3. A BOM, and a configuration that cannot be read at start-up

    static let bom: [UInt8] = [0xEF, 0xBB, 0xBF]

    @Test func aByteOrderMarkIsAccepted() throws {
        let rig = try Rig(config: "") { daemon in
            try Data(Self.bom + Array("[location]\ndeny=\(Self.badApp)\n[notifications]\nenabled=false\n".utf8))
                .write(to: URL(fileURLWithPath: daemon.configDirectory + "/permissions.conf"))
        }
        #expect(try rig.status("location", app: Self.badApp) == "restricted")
        #expect(try rig.status("notifications") == "disabled")
        #expect(try rig.configStatus == "s \"ok\"")
        #expect(try rig.generation == "u 1")

        // And in an edit, with line numbers still right after it.
        try Data(Self.bom + Array("[location]\nenabled=maybe\n".utf8))
            .write(to: URL(fileURLWithPath: rig.daemon.configDirectory + "/permissions.conf.d/10-bom.conf"), options: .atomic)
        let kept = try rig.waitForConfigStatus("kept: ")
        #expect(kept == "kept: \(rig.daemon.configDirectory)/permissions.conf.d/10-bom.conf:2: [location] enabled=maybe: expected true or false")
        #expect(try rig.signalsBeforeFence(on: "location") == [])
    }

    @Test func unreadableAtStartUpStartsFromTheLastGoodCopy() throws {
        let good = "[location]\ndeny=\(Self.badApp)\n[notifications]\nenabled=false\n"
        let rig = try Rig(config: good)
        #expect(try rig.status("location", app: Self.badApp) == "restricted")
        let copy = rig.daemon.stateDirectory + "/last-good.conf"
        let attributes = try FileManager.default.attributesOfItem(atPath: copy)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        #expect(try String(contentsOfFile: copy, encoding: .utf8).contains("deny=\(Self.badApp)"))

        // Broken while the daemon was stopped.
        rig.daemon.stop()
        try rig.daemon.writeConfig("[location]\nthis line is junk\n")
        try rig.restart()
        #expect(try rig.status("location", app: Self.badApp) == "restricted")
        #expect(try rig.status("notifications") == "disabled")
        let status = try rig.configStatus
        #expect(status.hasPrefix("s \"degraded: \(rig.configFile):2: "), "\(status)")
        #expect(status.hasSuffix("; started from the last good configuration, \(copy)\""), "\(status)")
        #expect(try rig.generation == "u 1")
        #expect(rig.daemon.log.contains("; started from the last good configuration, \(copy)"))

        // Still broken: still degraded, with the new reason.
        try rig.daemon.writeConfig("[location]\nenabled=maybe\n")
        #expect(try rig.waitForConfigStatus("degraded: ").hasPrefix("degraded: \(rig.configFile):2: [location] enabled=maybe"))
        #expect(try rig.signalsBeforeFence(on: "location") == [])

        // Readable again: applied, and kept as the new copy.
        try rig.daemon.writeConfig("[location]\ndeny=\(Self.badApp)\n")
        try rig.waitForGeneration(2)
        #expect(try rig.signalsBeforeFence(on: "location") == [statusLine(app: "", "notifications", "not-determined")])
        #expect(try rig.configStatus == "s \"ok\"")
        #expect(try !String(contentsOfFile: copy, encoding: .utf8).contains("enabled=false"))
    }

    @Test func unreadableAtStartUpWithNoCopyDisablesEveryPermission() throws {
        let rig = try Rig(config: "\n[location]\ndeny=\(Self.badApp)\nthis line is junk\n")
        #expect(try rig.status("location") == "disabled")
        #expect(try rig.status("location", app: Self.badApp) == "disabled")
        #expect(try rig.status("notifications") == "disabled")
        let status = try rig.configStatus
        #expect(status.hasPrefix("s \"degraded: \(rig.configFile):4: Key file contains line "), "\(status)")
        #expect(status.hasSuffix("no last good configuration; every permission is disabled until a usable configuration arrives\""))
        #expect(try rig.generation == "u 0")
        #expect(!FileManager.default.fileExists(atPath: rig.daemon.stateDirectory + "/last-good.conf"))
        #expect(rig.daemon.log.contains("no last good configuration; every permission is disabled"))

        try rig.daemon.writeConfig("[location]\ndeny=\(Self.badApp)\n")
        try rig.waitForGeneration(1)
        let seen = try rig.signalsBeforeFence()
        #expect(Set(seen) == [statusLine(app: "", "location", "not-determined"),
                              statusLine(app: Self.badApp, "location", "restricted"),
                              statusLine(app: "", "notifications", "not-determined")])
        #expect(seen.count == 3)
        #expect(try rig.configStatus == "s \"ok\"")
        #expect(try rig.status("location", app: Self.badApp) == "restricted")
    }

    @Test func aConfigFileThatCannotBeReadIsAnErrorNotAbsent() throws {
        let rig = try Rig(config: "[location]\ndeny=\(Self.badApp)\n")
        let copy = rig.daemon.stateDirectory + "/last-good.conf"

        // A dangling link named as permissions.conf, at start-up: the last good copy.
        rig.daemon.stop()
        try FileManager.default.removeItem(atPath: rig.configFile)
        try FileManager.default.createSymbolicLink(atPath: rig.configFile, withDestinationPath: "/nonexistent/permissions.conf")
        try rig.restart()
        #expect(try rig.status("location", app: Self.badApp) == "restricted")
        #expect(try rig.configStatus == "s \"degraded: \(rig.configFile): cannot read: No such file or directory; "
                + "started from the last good configuration, \(copy)\"")

        // A loop of links instead, while running: still an error, still the copy.
        try rig.sh("ln -s permissions.conf loop && mv loop permissions.conf")
        #expect(try rig.waitForConfigStatus("degraded: \(rig.configFile): cannot read: ")
                .hasPrefix("degraded: \(rig.configFile): cannot read: Too many levels of symbolic links; started from"))
        #expect(try rig.signalsBeforeFence(on: "location") == [])
        #expect(try rig.status("location", app: Self.badApp) == "restricted")
        #expect(rig.daemon.log.contains("\(rig.configFile): cannot read: Too many levels of symbolic links; keeping the last good configuration"))
    }

    @Test func aDropInDirectoryOrDropInThatCannotBeReadKeepsTheConfiguration() throws {
        let rig = try Rig(config: "") { daemon in
            try daemon.writeConfig("[location]\ndeny=\(Self.badApp)\n", name: "permissions.conf.d/50-deny.conf")
        }
        let dropIns = rig.daemon.configDirectory + "/permissions.conf.d"
        #expect(try rig.status("location", app: Self.badApp) == "restricted")

        // The drop-in directory replaced by a dangling link: kept, at once, nothing gone.
        try rig.sh("mv permissions.conf.d real.d && ln -s missing.d permissions.conf.d")
        #expect(try rig.waitForConfigStatus("kept: ") == "kept: \(dropIns): cannot read the directory: No such file or directory")
        #expect(try rig.signalsBeforeFence(on: "location") == [])
        #expect(try rig.status("location", app: Self.badApp) == "restricted")
        #expect(rig.daemon.log.contains("\(dropIns): cannot read the directory: No such file or directory; keeping the last good configuration"))
        #expect(!rig.daemon.log.contains("gone for 500 ms"), "\(rig.daemon.log)")

        // At start-up: the last good copy, and said so.
        try rig.restart()
        #expect(try rig.status("location", app: Self.badApp) == "restricted")
        #expect(try rig.configStatus.hasPrefix("s \"degraded: \(dropIns): cannot read the directory: No such file or directory; started from"))

        // Pointed at the directory again: its files are in force, as the copy was.
        try rig.sh("ln -s real.d missing.d")
        #expect(try rig.waitForConfigStatus("ok") == "ok")
        #expect(try rig.signalsBeforeFence(on: "location") == [])

        // A drop-in that is a dangling link: an error too, not a file that is not there.
        try rig.sh("ln -s /nonexistent/60-site.conf permissions.conf.d/60-site.conf")
        #expect(try rig.waitForConfigStatus("kept: ") == "kept: \(dropIns)/60-site.conf: cannot read: No such file or directory")
        #expect(try rig.signalsBeforeFence(on: "location") == [])
        #expect(try rig.status("location", app: Self.badApp) == "restricted")
    }

    @Test func controlCharactersFromAFileAreEscapedInTheLog() throws {
        let rig = try Rig(config: "")
        try rig.daemon.writeConfig("[location]\n\u{1b}[2Jjunk\n", name: "permissions.conf.d/50-junk.conf")
        _ = try rig.waitForConfigStatus("kept: ")
        let line = try rig.daemon.waitForLog("keeping the last good configuration")
        #expect(line.contains("\\x1b[2Jjunk"), "\(line)")
        #expect(!rig.daemon.log.contains("\u{1b}"))
    }

    // MARK: 3b. A parent of the config directory made again

    @Test func aConfigDirectoryWhoseParentIsMadeAgainIsWatchedAgain() throws {
        let rig = try Rig(config: "") { daemon in
            daemon.configDirectory = daemon.root + "/x/y/config"
            try FileManager.default.createDirectory(atPath: daemon.configDirectory + "/permissions.conf.d",
                                                    withIntermediateDirectories: true)
            try daemon.writeConfig("[location]\ndeny=\(Self.badApp)\n")
        }
        #expect(try rig.status("location", app: Self.badApp) == "restricted")

        try rig.sh("mv x/y x/y.old", in: rig.daemon.root)
        try rig.waitForGeneration(2)
        #expect(try rig.signalsBeforeFence() == [statusLine(app: Self.badApp, "location", "not-determined")])

        try rig.sh("mkdir -p x/y/config && printf '[location]\\ndeny=\(Self.badApp)\\n' > x/y/config/permissions.conf",
                   in: rig.daemon.root)
        try rig.waitForGeneration(3)
        #expect(try rig.signalsBeforeFence() == [statusLine(app: Self.badApp, "location", "restricted")])
        #expect(try rig.status("location", app: Self.badApp) == "restricted")

        // Later edits there are followed too.
        try rig.daemon.writeConfig("[notifications]\nenabled=false\n")
        try rig.waitForGeneration(4)
        #expect(Set(try rig.signalsBeforeFence(on: "location")) == [statusLine(app: Self.badApp, "location", "not-determined"),
                                                                     statusLine(app: "", "notifications", "disabled")])
    }

    // MARK: 1b. Each missing file has its own settle window

    @Test func eachMissingFileIsWaitedForItsWholeSettleWindow() throws {
        let rig = try Rig(config: "") { daemon in
            try daemon.writeConfig("[location]\ndeny=\(Self.badApp)\n", name: "permissions.conf.d/10-a.conf")
            try daemon.writeConfig("[notifications]\ndeny=\(Self.badApp)\n", name: "permissions.conf.d/20-b.conf")
        }
        let dropIns = rig.daemon.configDirectory + "/permissions.conf.d"
        #expect(try rig.status("notifications", app: Self.badApp) == "restricted")

        try rig.sh("mv 10-a.conf 10-a.conf~", in: dropIns)
        try rig.daemon.waitForLog("\(dropIns)/10-a.conf gone or being written; waiting")
        // 20-b.conf goes later: the first file's window must not cover it.
        let bGone = Date()
        try rig.sh("mv 20-b.conf 20-b.conf~", in: dropIns)
        try rig.waitForGeneration(2)
        #expect(Date().timeIntervalSince(bGone) >= 0.5)
        #expect(Set(try rig.signalsBeforeFence(on: "location")) == [statusLine(app: Self.badApp, "location", "not-determined"),
                                                                     statusLine(app: Self.badApp, "notifications", "not-determined")])
        #expect(rig.daemon.log.contains(
            "\(dropIns)/10-a.conf, \(dropIns)/20-b.conf gone for 500 ms; applying the configuration without them"),
            "\(rig.daemon.log)")
    }

    // MARK: 4. Spaces around values

    @Test func spacesAroundValuesAreTrimmed() throws {
        let rig = try Rig(config: "[notifications]\nenabled=false \n[location]\ndeny= \(Self.badApp)\t\n")
        #expect(try rig.status("notifications") == "disabled")
        #expect(try rig.status("location", app: Self.badApp) == "restricted")
        #expect(try rig.configStatus == "s \"ok\"")

        try rig.daemon.writeConfig("[notifications]\nenabled=true \t\n[location]\ndeny= \(Self.badApp)\t\n")
        try rig.waitForGeneration(2)
        #expect(try rig.signalsBeforeFence(on: "location") == [statusLine(app: "", "notifications", "not-determined")])
    }

    // MARK: 9. All or nothing

    @Test func aReloadAppliesAllOfANewConfigurationOrNone() throws {
        let rig = try Rig(config: "[location]\ndeny=\(Self.badApp)\n")
        let dropIns = rig.daemon.configDirectory + "/permissions.conf.d"

        // One section a plugin rejects: the other section, in the same drop-in, does not apply either.
        try rig.daemon.writeConfig("[notifications]\nenabled=false\n\n[location]\nenabled=maybe\n",
                                   name: "permissions.conf.d/50-mixed.conf")
        let kept = try rig.waitForConfigStatus("kept: ")
        #expect(kept == "kept: \(dropIns)/50-mixed.conf:5: [location] enabled=maybe: expected true or false")
        #expect(try rig.signalsBeforeFence(on: "location") == [])
        #expect(try rig.status("notifications") == "not-determined")
        #expect(try rig.generation == "u 1")
        #expect(rig.daemon.log.contains(
            "\(dropIns)/50-mixed.conf:5: [location] enabled=maybe: expected true or false; keeping the last good configuration"))

        // A malformed file beside a good edit of another: neither applies.
        // (Broken first: every reading on the way has a problem.)
        try rig.daemon.writeConfig("[location]\nno key here\n", name: "permissions.conf.d/60-broken.conf")
        try rig.daemon.writeConfig("[notifications]\nenabled=false\n", name: "permissions.conf.d/50-mixed.conf")
        let broken = try rig.waitForConfigStatus("kept: \(dropIns)/60-broken.conf:2: ")
        #expect(broken.contains("no key here"))
        #expect(try rig.signalsBeforeFence(on: "location") == [])
        #expect(try rig.status("notifications") == "not-determined")

        // A value of the daemon's own: the same.
        try rig.daemon.writeConfig("[service]\nagent-timeout=0\n", name: "permissions.conf.d/60-broken.conf")
        #expect(try rig.waitForConfigStatus("kept: ")
                == "kept: \(dropIns)/60-broken.conf:2: [service] agent-timeout=0: expected 1..3600 seconds")
        #expect(try rig.signalsBeforeFence(on: "location") == [])
        #expect(try rig.generation == "u 1")

        // Fixed: all of it applies at once.
        try rig.sh("rm permissions.conf.d/60-broken.conf")
        try rig.waitForGeneration(2)
        #expect(try rig.signalsBeforeFence(on: "location") == [statusLine(app: "", "notifications", "disabled")])
        #expect(try rig.configStatus == "s \"ok\"")
        #expect(try rig.status("location", app: Self.badApp) == "restricted")
    }
}
