import Foundation
import Testing
import PermissionsTestSupport
import SystemPrimitives

/// The bluetooth plugin against the bluez5 mock on a stand-in system bus.
///
/// Exact counts: each test waits for every bluetooth StatusChanged it expects, in
/// order (`nextStatus`), so an extra signal shows up as a wrong word. A step that
/// must cause no signal is followed by one that must, through the same path
/// (mock -> system bus -> plugin queue -> daemon): the plugin handles bluetoothd's
/// signals in order, so when the later signal arrives, the earlier step has been
/// handled and a signal from it would have come first.
@Suite(.hangGuard) struct BluetoothTests {
    @Test func noAdapterIsUnsupportedAndTheFirstAdapterMakesItAvailable() throws {
        let w = try BlueZWorld()
        #expect(try w.status() == "s \"unsupported\"\n")
        try w.mock.addAdapter("hci0")
        #expect(try w.nextStatus() == "not-determined")
        #expect(try w.status() == "s \"not-determined\"\n")
        try w.mock.removeAdapter("hci0")
        #expect(try w.nextStatus() == "unsupported")
        #expect(w.statuses == ["not-determined", "unsupported"])
    }

    @Test func powerOffAndOnSignalOnceEach() throws {
        let w = try BlueZWorld()
        try w.mock.addAdapter("hci0")
        #expect(try w.nextStatus() == "not-determined")
        try w.mock.setPowered("hci0", false)
        #expect(try w.nextStatus() == "disabled")
        #expect(try w.status() == "s \"disabled\"\n")
        try w.mock.setPowered("hci0", true)
        #expect(try w.nextStatus() == "not-determined")
        try w.mock.setPowered("hci0", true)  // PropertiesChanged with the same value
        try w.mock.setPowered("hci0", false)
        #expect(try w.nextStatus() == "disabled")
        #expect(w.statuses == ["not-determined", "disabled", "not-determined", "disabled"])
    }

    @Test func changesThatKeepTheStatusSignalNothing() throws {
        let w = try BlueZWorld()
        try w.mock.addAdapter("hci0")
        #expect(try w.nextStatus() == "not-determined")
        try w.mock.set("hci0", "Alias", "<'Renamed'>")
        try w.mock.set("hci0", "Discovering", "<true>")  // (the template's StartDiscovery needs a filter)
        try w.mock.addAdapter("hci1")  // a second adapter while one is powered
        try w.mock.setPowered("hci0", false)  // hci1 is still on
        try w.mock.setPowered("hci1", false)
        #expect(try w.nextStatus() == "disabled")
        #expect(w.statuses == ["not-determined", "disabled"])
    }

    @Test func detailsListTheAdapters() throws {
        let w = try BlueZWorld()
        try w.mock.addAdapter("hci0", name: "Kitchen")
        #expect(try w.nextStatus() == "not-determined")
        try w.mock.addAdapter("hci1", name: "Desk")
        try w.mock.setPowered("hci1", false)
        try w.mock.set("hci0", "Alias", "<'Kitchen radio'>")
        try w.mock.setPowered("hci0", false)
        #expect(try w.nextStatus() == "disabled")
        try w.mock.setPowered("hci0", true)
        #expect(try w.nextStatus() == "not-determined")

        let r = try w.daemon.ctl("status", "bluetooth")
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("service-state: available"))
        #expect(lines.contains("plugin: bluetooth"))
        #expect(lines.contains("plugin-details: source=bluez"))
        let devices = Array(lines.drop { $0 != "devices:" }.dropFirst())
        #expect(devices == [
            "  - path=/org/bluez/hci0 address=00:01:02:03:04:05 name=Kitchen radio powered=true",
            "  - path=/org/bluez/hci1 address=01:02:03:04:05:06 name=Desk powered=false",
        ], "\(r.stdout)")
        #expect(w.statuses == ["not-determined", "disabled", "not-determined"])
    }

    @Test func rfkillBlockIsDisabled() throws {
        let w = try BlueZWorld()
        try w.mock.addAdapter("hci0")
        #expect(try w.nextStatus() == "not-determined")
        try w.mock.addProperty("hci0", "PowerState", "<'on'>")
        // Blocked: bluetoothd does not promise which property changes first, so
        // PowerState alone must already count.
        try w.mock.update("hci0", "{'PowerState': <'off-blocked'>}")
        #expect(try w.nextStatus() == "disabled")
        try w.mock.update("hci0", "{'Powered': <false>}")
        let r = try w.daemon.ctl("status", "bluetooth")
        #expect(r.stdout.contains("  - path=/org/bluez/hci0 address=00:01:02:03:04:05 name=test-host powered=false power-state=off-blocked"),
                "\(r.stdout)")
        try w.mock.update("hci0", "{'PowerState': <'off-enabling'>}")  // unblocked, powering on
        try w.mock.update("hci0", "{'Powered': <true>, 'PowerState': <'on'>}")
        #expect(try w.nextStatus() == "not-determined")
        #expect(w.statuses == ["not-determined", "disabled", "not-determined"])
    }

    @Test func bluetoothdAbsentAtStart() throws {
        let w = try BlueZWorld(mockRunning: false)
        #expect(try w.status() == "s \"unsupported\"\n")
        try w.waitForLog("bluetoothd is not running")
        let r = try w.daemon.ctl("status", "bluetooth")
        #expect(r.stdout.contains("plugin-details: source=kernel"), "\(r.stdout)")  // no kernel Bluetooth here
        #expect(r.stdout.contains("devices: none"))
        try w.mock.start()
        try w.mock.addAdapter("hci0")
        #expect(try w.nextStatus() == "not-determined")
        #expect(w.statuses == ["not-determined"])
    }

    @Test func bluetoothdRestartsAndTheStateFollows() throws {
        // An adapter that exists before the daemon starts comes from GetManagedObjects.
        // The mock answers it only once the monitor listens, so that the signal is seen.
        let w = try BlueZWorld(beforeDaemon: { mock in
            try mock.addAdapter("hci0")
            mock.freeze()
        })
        w.mock.thaw()
        #expect(try w.nextStatus() == "not-determined")
        w.mock.kill()
        #expect(try w.nextStatus() == "unsupported")
        try w.mock.start()
        try w.mock.addAdapter("hci0")
        #expect(try w.nextStatus() == "not-determined")
        try w.mock.setPowered("hci0", false)
        #expect(try w.nextStatus() == "disabled")
        w.mock.kill()
        #expect(try w.nextStatus() == "unsupported")
        try w.mock.start()
        try w.mock.addAdapter("hci0")  // re-created, powered
        #expect(try w.nextStatus() == "not-determined")
        #expect(w.statuses == ["not-determined", "unsupported", "not-determined", "disabled", "unsupported",
                               "not-determined"])
    }

    @Test func systemBusRestartReconnects() throws {
        let w = try BlueZWorld()
        try w.mock.addAdapter("hci0")
        #expect(try w.nextStatus() == "not-determined")
        w.mock.kill()
        w.system.kill()
        #expect(try w.nextStatus() == "unsupported")
        try w.waitForLog("lost the system bus")
        try w.system.start()
        try w.mock.start()
        try w.mock.addAdapter("hci0")
        #expect(try w.nextStatus(timeout: 30) == "not-determined")
        #expect(w.statuses == ["not-determined", "unsupported", "not-determined"])
    }

    /// A bluetoothd that owns its name but answers nothing delays no call to the
    /// daemon; once it answers, the state follows.
    @Test func unansweringBluetoothdDelaysNothing() throws {
        let w = try BlueZWorld(beforeDaemon: { mock in
            try mock.addAdapter("hci0")
            mock.freeze()
        })
        // A daemon that waited for the plugin's GetManagedObjects would answer after
        // the plugin's 5 s call timeout at the earliest: busctl gives it 3 s.
        let r = try w.daemon.busctl(["--timeout=3", "call", "org.example.Permissions", "/org/example/Permissions",
                                     "org.example.Permissions", "GetStatus", "s", "bluetooth"])
        #expect(r.stdout == "s \"unsupported\"\n", "\(r.stderr)")
        let all = try w.daemon.busctl(["--timeout=3", "call", "org.example.Permissions", "/org/example/Permissions",
                                       "org.example.Permissions", "GetAll"])
        #expect(all.stdout == "a{ss} 2 \"bluetooth\" \"unsupported\" \"location\" \"not-determined\"\n", "\(all.stderr)")
        // The plugin gives up on its call after 5 s and asks again.
        try w.waitForLog("bluetoothd did not answer GetManagedObjects")
        w.mock.thaw()
        #expect(try w.nextStatus() == "not-determined")
        #expect(w.statuses == ["not-determined"])
    }

    /// fini does not wait for bluetoothd either: the daemon stops while the plugin
    /// has a call out to a bluetoothd that will never answer it.
    @Test func theDaemonStopsWhileBluetoothdHangs() throws {
        let w = try BlueZWorld(beforeDaemon: { mock in
            try mock.addAdapter("hci0")
            mock.freeze()
        })
        try w.waitForLog("bluetoothd did not answer GetManagedObjects")  // and it asks again
        w.daemon.stop()  // SIGTERM: fini runs; the suite's time limit catches a hang
        #expect(!w.daemon.isRunning)
        #expect(!w.daemon.log.contains("<3>"), "\(w.daemon.log)")
        w.mock.thaw()
    }

    @Test func configurationLocksAndSwitches() throws {
        let w = try BlueZWorld(config: "[bluetooth]\ndeny=org.example.Locked\n")
        try w.mock.addAdapter("hci0")
        #expect(try w.nextStatus() == "not-determined")
        #expect(try w.daemon.call("GetStatusForApp", "ss", "org.example.Locked", "bluetooth").stdout == "s \"restricted\"\n")
        try w.daemon.writeConfig("[bluetooth]\nenabled=false\n")
        #expect(try w.nextStatus() == "disabled")
        try w.daemon.writeConfig("[bluetooth]\nenabled=true\n")
        #expect(try w.nextStatus() == "not-determined")
        #expect(w.statuses == ["not-determined", "disabled", "not-determined"])
    }

    /// The script, 50 times over: add, power off and on, a second adapter,
    /// remove both, kill the mock and start it again. Every signal is checked in
    /// order, and the total is exact.
    @Test func fiftyCycles() throws {
        let w = try BlueZWorld()
        var expected: [String] = []
        func expect(_ status: String, _ step: String, _ cycle: Int) throws {
            let got = try w.nextStatus()
            expected.append(status)
            #expect(got == status, "cycle \(cycle), \(step)")
            if got != status { throw HarnessError(description: "cycle \(cycle): \(step) gave \(got), not \(status)") }
        }
        for cycle in 1...50 {
            try w.mock.addAdapter("hci0")
            try expect("not-determined", "first adapter", cycle)
            try w.mock.set("hci0", "Alias", "<'cycle \(cycle)'>")  // no signal
            try w.mock.setPowered("hci0", false)
            try expect("disabled", "power off", cycle)
            try w.mock.setPowered("hci0", true)
            try expect("not-determined", "power on", cycle)
            try w.mock.addAdapter("hci1")  // no signal: hci0 is on
            try w.mock.setPowered("hci0", false)  // no signal: hci1 is on
            try w.mock.removeAdapter("hci1")
            try expect("disabled", "remove the powered one", cycle)
            try w.mock.removeAdapter("hci0")
            try expect("unsupported", "remove the last", cycle)
            try w.mock.addAdapter("hci0")
            try expect("not-determined", "add again", cycle)
            w.mock.kill()
            try expect("unsupported", "bluetoothd killed", cycle)
            try w.mock.start()  // no adapters: no signal (the next cycle's first step fences it)
        }
        try w.mock.addAdapter("hci0")
        try expect("not-determined", "after the last cycle", 51)
        #expect(expected.count == 50 * 7 + 1)
        #expect(w.statuses == expected)
    }
}
