import Foundation
import Testing
import PermissionsTestSupport

/// The daemon's D-Bus I/O thread when poll(2) fails for good.
@Suite struct ServingFailureTests {
    /// poll refuses more descriptors than RLIMIT_NOFILE allows (EINVAL), and the
    /// I/O thread always polls two (its wake-up pipe and the bus socket). With the
    /// limit lowered under the running daemon, every poll after the next wake-up
    /// fails: the daemon must say so and exit with a failure for its service manager
    /// to restart it, not retry at once forever on one core.
    @Test func pollFailingForGoodEndsTheDaemon() throws {
        let bus = try TestBus()
        let daemon = try DaemonUnderTest(bus: bus)
        let pid = try #require(daemon.pid)
        let limit = try run("/usr/bin/prlimit", ["--pid", "\(pid)", "--nofile=1:"])
        #expect(limit.status == 0, "\(limit.stderr)")
        // Wakes the I/O thread; its next poll is the first with the lower limit.
        _ = try daemon.busctl(["call", "org.example.Permissions", "/org/example/Permissions",
                               "org.freedesktop.DBus.Peer", "Ping"])
        #expect(daemon.waitForExit(timeout: 15)?.description == "exit 1")
        #expect(daemon.log.contains("D-Bus I/O: poll failed: Invalid argument (errno 22); "
                                    + "the connection is no longer served; exiting"), "\(daemon.log)")
    }
}
