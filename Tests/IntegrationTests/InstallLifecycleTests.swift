import Foundation
import Testing
import PermissionsTestSupport

/// scripts/install and scripts/uninstall with the service running, on a bus without
/// systemd (the daemon D-Bus activated by dbus-daemon itself): an install over a
/// running daemon restarts it, so that the new binary serves; an uninstall stops it
/// before removing its files, and a connector of this install too. A daemon that
/// is not this install's is left alone.
/// (With systemd as init the scripts go through systemctl instead, which CI cannot
/// run: doc/testing.md.)
@Suite struct InstallLifecycleTests {
    /// The PID owning org.example.Permissions on `bus`, or nil.
    static func owner(_ address: String) throws -> Int32? {
        let r = try run("/usr/bin/busctl", ["--address=\(address)", "call", "org.freedesktop.DBus",
                                            "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                            "GetConnectionUnixProcessID", "s", "org.example.Permissions"])
        return r.status == 0 ? Int32(r.stdout.dropFirst(2).trimmingCharacters(in: .whitespacesAndNewlines)) : nil
    }

    /// Whether the process has ended (gone, or a zombie its parent has not reaped).
    static func ended(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return true }
        return stat.contains(") Z ")
    }

    @Test func installRestartsARunningDaemonAndUninstallStopsIt() throws {
        let (root, flags) = try Installing.installWithRealPaths()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let daemonPath = root + "/usr/libexec/permissionsd"
        let bus = try InstalledBus(type: "system", policy: root + "/dbus/system.d/org.example.Permissions.conf",
                                   services: root + "/dbus/system-services")
        let onBus = ["DBUS_SYSTEM_BUS_ADDRESS": bus.address]
        let status = ["--address=\(bus.address)", "call", "org.example.Permissions", "/org/example/Permissions",
                      "org.example.Permissions", "GetStatus", "s", "location"]
        #expect(try run("/usr/bin/busctl", status).stdout == "s \"not-determined\"\n", "\(bus.log)")
        let first = try #require(try Self.owner(bus.address))

        // Installed again over it: the old daemon has ended, and the new binary serves
        // (its file is the installed one, not a deleted copy).
        let again = try Installing.install(flags, environment: onBus)
        #expect(again.stderr.contains("install: stopped permissionsd (pid \(first))"), "\(again.stderr)")
        #expect(Self.ended(first))
        let second = try #require(try Self.owner(bus.address), "\(again.stderr) \(bus.log)")
        #expect(second != first)
        #expect(again.stderr.contains("install: started the new permissionsd (pid \(second))"), "\(again.stderr)")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(second)/exe") == daemonPath)
        #expect(try run("/usr/bin/busctl", status).stdout == "s \"not-determined\"\n")

        // Uninstalled: stopped first, so nothing serves from deleted files, and the
        // name is free.
        let removed = try Installing.install(flags, script: "uninstall", environment: onBus)
        #expect(removed.stderr.contains("uninstall: stopped permissionsd (pid \(second))"), "\(removed.stderr)")
        #expect(Self.ended(second))
        #expect(try Self.owner(bus.address) == nil)
        #expect(!FileManager.default.fileExists(atPath: daemonPath))
    }

    /// Without systemd, a connector is started by hand (or another init): an
    /// upgrade says it still runs the old binary; an uninstall stops it before its
    /// file goes. One of another install (the build tree's) is left alone.
    @Test func uninstallStopsARunningConnectorOfThisInstall() throws {
        let (root, flags) = try Installing.installWithRealPaths()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let runtime = try TestRuntimeRoot()
        let installed = try RunningProgram(root + "/usr/libexec/permissionsd-connector",
                                           ["--listen", runtime.path + "/installed.socket", "--verbose"],
                                           collectingErrors: true)
        _ = try installed.errors!.next { $0.contains("serving user sockets") }
        let pid = installed.process.processIdentifier
        let other = try TestConnector(root: runtime.path)

        let again = try Installing.install(flags)
        #expect(again.stderr.contains("install: permissionsd-connector (pid \(pid)) still runs the old binary: restart it"),
                "\(again.stderr)")
        let removed = try Installing.install(flags, script: "uninstall")
        #expect(removed.stderr.contains("uninstall: stopped permissionsd-connector (pid \(pid))"), "\(removed.stderr)")
        #expect(Self.ended(pid))
        #expect(!FileManager.default.fileExists(atPath: root + "/usr/libexec/permissionsd-connector"))
        #expect(other.isRunning)
    }

    @Test func aDaemonOfAnotherInstallIsLeftAlone() throws {
        let (root, flags) = try Installing.installWithRealPaths()
        defer { try? FileManager.default.removeItem(atPath: root) }
        // The build tree's daemon holds the name: not this install's.
        let bus = try TestBus()
        let other = try DaemonUnderTest(bus: bus)
        let pid = try #require(other.pid)
        #expect(try Self.owner(bus.address) == pid)
        let again = try Installing.install(flags, environment: ["DBUS_SYSTEM_BUS_ADDRESS": bus.address])
        #expect(!again.stderr.contains("stopped"), "\(again.stderr)")
        let removed = try Installing.install(flags, script: "uninstall", environment: ["DBUS_SYSTEM_BUS_ADDRESS": bus.address])
        #expect(!removed.stderr.contains("stopped"), "\(removed.stderr)")
        #expect(try Self.owner(bus.address) == pid)
        #expect(other.isRunning)
    }
}
