import Foundation
import Testing
import PermissionsTestSupport

/// open_remote may wait on one user's backend (a hung PipeWire), so each call has
/// a thread of its own, and the service bounds how many run into each plugin:
/// four a user, sixteen in all, counted until the plugin returns. The plugins are
/// OpenRemoteAtStopTests' "slow-open", whose opens for a user wait while
/// DIR/block-UID exists, and the same built as "other-open", with marks of its
/// own (never blocked); gdbus, run as each user, is the app.
@Suite(.hangGuard) struct OpenRemoteThreadsTests {
    let marks: String
    let otherMarks: String
    let plugins: String
    let bus: TestBus
    let daemon: DaemonUnderTest

    init() throws {
        marks = try makeTemporaryDirectory("open-remote-marks")
        otherMarks = try makeTemporaryDirectory("open-remote-other-marks")
        plugins = try makeTemporaryDirectory("open-remote-plugins")
        try PluginLoadingTests.compile(OpenRemoteAtStopTests.plugin(marks: marks, version: "0.1"), into: plugins,
                                       file: "libpermissions-slow-open.so")
        try PluginLoadingTests.compile(OpenRemoteAtStopTests.plugin(marks: otherMarks, version: "0.1", name: "other-open"),
                                       into: plugins, file: "libpermissions-other-open.so")
        bus = try TestBus()
        daemon = try DaemonUnderTest(bus: bus, pluginDirectories: [plugins])
        for uid in 1...5 {
            for permission in ["slow-open", "other-open"] {
                #expect(try daemon.ctl("grant", "--user", String(uid), "/usr/bin/gdbus", permission).status == 0)
            }
        }
    }

    /// Ends the held opens (the plugin's wait ends at DIR/release) and removes the directories.
    private func finish() {
        make("release")
        daemon.stop()
        for directory in [marks, otherMarks, plugins] { try? FileManager.default.removeItem(atPath: directory) }
    }

    private func make(_ mark: String) {
        _ = FileManager.default.createFile(atPath: marks + "/" + mark, contents: nil)
    }

    private func began() -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: marks)) ?? []).count { $0.hasPrefix("open-began-") }
    }

    private func waitUntilBegan(_ count: Int, within seconds: TimeInterval) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while began() < count {
            guard Date() < deadline else {
                throw HarnessError(description: "\(began()) of \(count) opens began within \(seconds) s")
            }
            usleep(10_000)
        }
    }

    /// Four slow-open opens of each of `users` (the most a user may have), held in
    /// the plugin until finish(); returns once all have begun there.
    private func holdFourOpens(ofUsers users: ClosedRange<Int>, beganWithin seconds: TimeInterval) throws
        -> [RunningProgram] {
        for uid in users { make("block-\(uid)") }
        let held = try users.flatMap { uid in try (0..<4).map { _ in try openRemote(asUser: UInt32(uid)) } }
        try waitUntilBegan(held.count, within: seconds)
        return held
    }

    private func openRemote(asUser uid: UInt32, permission: String = "slow-open") throws -> RunningProgram {
        try RunningProgram("/usr/bin/gdbus", ["call", "--address", bus.address, "--dest", "org.example.Permissions",
                                               "--object-path", "/org/example/Permissions", "--method",
                                               "org.example.Permissions.OpenPipeWireRemote", permission, "{}"],
                           asUser: uid, collectingErrors: true)
    }

    /// Users 1, 2 and 3 each have four opens held (the most a user may): twelve
    /// calls waiting in the plugin at once. All twelve begin at once, and user 4's
    /// open is answered while they wait. (Before: the calls shared a concurrent
    /// queue, whose pool is a thread per core and grows by about a thread a
    /// second, so on 2 cores the twelve began over ten seconds and user 4's open
    /// came after them.)
    @Test func heldOpensOfThreeUsersHoldNoOtherUsersOpenBack() throws {
        defer { finish() }
        let held = try holdFourOpens(ofUsers: 1...3, beganWithin: 5)
        let other = try openRemote(asUser: 4)
        _ = try other.lines.next(timeout: 5) { $0.hasPrefix("(handle") }  // its descriptor came
        withExtendedLifetime(other) {}  // gdbus is killed when its RunningProgram goes
        // The twelve wait in the plugin until finish() makes DIR/release.
        withExtendedLifetime(held) {}
    }

    /// A call that outlives the deadline still counts until the plugin returns:
    /// user 1's four opens are answered Unavailable after 2 s, but a fifth is
    /// refused while those four still wait in the plugin, and taken once they have
    /// returned, which the log says. (Before: the answer ended the count, and each
    /// round of four took four more threads.)
    @Test func callsPastTheDeadlineCountUntilThePluginReturns() throws {
        defer { finish() }
        make("block-1")
        let held = try (0..<4).map { _ in try openRemote(asUser: 1) }
        for program in held {
            let error = try #require(program.errors).next(timeout: 10) { $0.contains("Error") }
            #expect(error.contains("org.example.Permissions.Error.Unavailable"), "\(error)")
            #expect(error.contains("timed out"), "\(error)")
        }
        let fifth = try openRemote(asUser: 1)
        let refused = try #require(fifth.errors).next(timeout: 10) { $0.contains("Error") }
        #expect(refused.contains("org.example.Permissions.Error.LimitExceeded")
                    && refused.contains("user 1 has 4 connections being opened"), "\(refused)")
        #expect(began() == 4, "the refused open reached the plugin; \(daemon.log)")
        // The four return (EIO) once released, each logged; then user 1 opens again.
        try FileManager.default.removeItem(atPath: marks + "/block-1")
        make("release")
        _ = try daemon.waitForLog("past its deadline", count: 4)
        let again = try openRemote(asUser: 1)
        let answer = try? again.lines.next(timeout: 5) { $0.hasPrefix("(handle") }
        #expect(answer != nil, "\(again.errors?.all ?? []) \(daemon.log)")
        withExtendedLifetime(held) {}
        withExtendedLifetime(fifth) {}
    }

    /// One plugin's calls that do not return hold back that plugin's opens only:
    /// users 1 to 4 have four held in slow-open each (sixteen, the most one plugin
    /// may have), user 5 is refused slow-open, and users 5 and 1 open through
    /// other-open. (Before: the count was of every plugin's calls, and a plugin
    /// that never returned held every plugin's opens back until a restart. A
    /// breaker helper's finding.)
    @Test func heldCallsOfOnePluginHoldNoOtherPluginsOpensBack() throws {
        defer { finish() }
        let held = try holdFourOpens(ofUsers: 1...4, beganWithin: 10)
        let refused = try openRemote(asUser: 5)
        let error = try #require(refused.errors).next(timeout: 10) { $0.contains("Error") }
        #expect(error.contains("LimitExceeded") && error.contains("16 connections are being opened by plugin slow-open"),
                "\(error)")
        for uid: UInt32 in [5, 1] {
            let other = try openRemote(asUser: uid, permission: "other-open")
            _ = try other.lines.next(timeout: 5) { $0.hasPrefix("(handle") }  // its descriptor came
            withExtendedLifetime(other) {}
        }
        withExtendedLifetime((held, refused)) {}
    }
}
