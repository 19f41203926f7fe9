// Unit tests of the HCI seam: the errno policy, the real probe on this machine
// (the kernel's HCI ioctls), the address as BlueZ writes it, and the plugin
// falling back to an injected probe when there is no system bus.
@testable import BluetoothPlugin
import DBusKit
import Dispatch
import Glibc
import PluginKit
import CBluetooth
import Synchronization
import Testing
import DBusKit

/// A scripted kernel: answers from `results`, repeating the last one; counts calls.
final class FakeKernel: KernelAdapterProbe {
    private let state: Mutex<(results: [KernelProbeResult], calls: Int)>

    init(_ results: KernelProbeResult...) { state = Mutex((results, 0)) }

    func probe() -> KernelProbeResult {
        state.withLock { s in
            s.calls += 1
            return s.results.count > 1 ? s.results.removeFirst() : s.results[0]
        }
    }

    var callCount: Int { state.withLock { $0.calls } }
}

/// Collects what the plugin publishes and lets a test wait for a matching one.
final class Publications: Sendable {
    private let list = Mutex<[PluginSnapshot]>([])
    private let arrived = DispatchSemaphore(value: 0)

    func append(_ s: PluginSnapshot) {
        list.withLock { $0.append(s) }
        arrived.signal()
    }

    var all: [PluginSnapshot] { list.withLock { $0 } }

    /// Waits up to 10 s for a publication that satisfies `predicate`.
    func waitFor(_ predicate: (PluginSnapshot) -> Bool) -> PluginSnapshot? {
        let deadline = DispatchTime.now() + .seconds(10)
        while true {
            if let hit = all.first(where: predicate) { return hit }
            if arrived.wait(timeout: deadline) == .timedOut { return all.first(where: predicate) }
        }
    }
}

/// Settings that reach no system bus, so the plugin lives on the kernel's list;
/// with `clock`, its timers run when the test advances that clock.
func noBus(poll: Int? = nil, clock: ManualClock? = nil) -> BlueZFollower.Settings {
    var s = BlueZFollower.Settings()
    s.bus = .address("unix:path=/nonexistent/permissions-test/system_bus_socket")
    s.kernelPollMilliseconds = poll
    if let clock { s.timers = clock }
    return s
}

/// The follower's first connection attempt, on a bus that is not there, arms its
/// timers after it has published the kernel's list, the next attempt (a one-shot
/// timer) last: waits for that one, so that the clock is moved, and the armed
/// timers are looked at, only once the attempt is over.
func waitForReconnection(_ clock: ManualClock) throws {
    try #require(clock.waitUntil { $0.contains { $0.repeating == nil } }, "timers armed: \(clock.pending)")
}

@Suite struct KernelFallbackTests {
    @Test func errnoPolicy() {
        #expect(KernelProbeResult.fromErrno(EAFNOSUPPORT) == .noKernelSupport)
        #expect(KernelProbeResult.fromErrno(ENODEV) == .adapters([]))
        #expect(KernelProbeResult.fromErrno(EPERM) == .failed(EPERM))
        for r in [KernelProbeResult.noKernelSupport, .failed(EMFILE), .adapters([])] { #expect(r.adapters.isEmpty) }
    }

    /// On this machine the kernel has no Bluetooth: the HCI socket fails with
    /// EAFNOSUPPORT, which must come out as "no kernel support", not as an error.
    @Test func realProbeWithoutKernelBluetooth() throws {
        let probe = socket(AF_BLUETOOTH, Int32(SOCK_RAW.rawValue), 1)
        if probe >= 0 { close(probe) }
        try #require(probe < 0 && errno == EAFNOSUPPORT, "this test is for kernels without Bluetooth")
        #expect(HCIDeviceList().probe() == .noKernelSupport)
    }

    /// The probe's two ioctls are the kernel's (<bluetooth/hci.h>: `_IOR('H', 210,
    /// int)` and `_IOR('H', 211, int)` on x86-64), and an address reads as
    /// libbluetooth's `ba2str` writes it: its bytes, stored least significant
    /// first, from the last, in capital hexadecimal.
    @Test func theProbesIoctlsAndAddressesAreBlueZs() {
        #expect(hciGetDeviceList == 0x8004_48d2)
        #expect(hciGetDeviceInfo == 0x8004_48d3)
        var address = bdaddr_t()
        address.b = (0x13, 0x71, 0xda, 0x7d, 0x1a, 0x00)
        #expect(HCIDeviceList.text(of: address) == "00:1A:7D:DA:71:13")
        address.b = (0xff, 0x0f, 0xf0, 0x01, 0x10, 0xab)
        #expect(HCIDeviceList.text(of: address) == "AB:10:01:F0:0F:FF")
        #expect(HCIDeviceList.text(of: bdaddr_t()) == "00:00:00:00:00:00")
    }

    @Test func publishesUnsupportedAtOnceThenTheKernelsAdapters() throws {
        let published = Publications()
        let kernel = FakeKernel(.adapters([Adapter(path: "hci0", address: "00:1A:7D:DA:71:13", name: "hci0", powered: true)]))
        let plugin = BluetoothPermission(settings: noBus(), kernel: kernel, publish: published.append, log: { _, _ in })
        defer { plugin.stop() }
        #expect(published.all.first?.service == .unsupported)  // before init returned
        let s = try #require(published.waitFor { $0.service == .available })
        #expect(s.details.map(\.value) == ["kernel"])
        #expect(s.devices.first?.map(\.value) == ["hci0", "00:1A:7D:DA:71:13", "hci0", "true"])
    }

    @Test func aFailingKernelMeansNoAdapter() throws {
        for result in [KernelProbeResult.noKernelSupport, .failed(EPERM), .fromErrno(ENODEV)] {
            let published = Publications()
            let lines = Mutex<[String]>([])
            let plugin = BluetoothPermission(settings: noBus(), kernel: FakeKernel(result), publish: published.append,
                                             log: { _, m in lines.withLock { $0.append(m) } })
            let s = try #require(published.waitFor { $0.details.first?.value == "kernel" })
            plugin.stop()
            #expect(s.service == .unsupported)
            #expect(s.devices.isEmpty)
            if case .failed = result {
                #expect(lines.withLock { $0.contains { $0.contains("errno \(EPERM)") } })
            }
        }
    }

    @Test func theKernelIsAskedAgainWhileBluetoothdIsAway() throws {
        let published = Publications()
        let clock = ManualClock()
        let kernel = FakeKernel(.adapters([]), .adapters([Adapter(path: "hci0", powered: false)]),
                                .adapters([Adapter(path: "hci0", powered: true)]))
        let plugin = BluetoothPermission(settings: noBus(poll: 20, clock: clock), kernel: kernel,
                                         publish: published.append, log: { _, _ in })
        defer { plugin.stop() }
        _ = try #require(published.waitFor { $0.details.first?.value == "kernel" })
        try waitForReconnection(clock)
        // The poll, and the next connection attempt (the first backoff, 100 ms).
        #expect(clock.pending == [.init(remaining: 20, repeating: 20), .init(remaining: 100, repeating: nil)])
        #expect(kernel.callCount == 1)
        clock.advance(by: .milliseconds(20))
        #expect(kernel.callCount == 2)
        #expect(published.all.last?.service == .disabled)
        clock.advance(by: .milliseconds(20))
        #expect(kernel.callCount == 3)
        #expect(published.all.last?.service == .available)
        // Same answers from then on: asked twice more, no further publication.
        let count = published.all.count
        clock.advance(by: .milliseconds(40))
        #expect(kernel.callCount == 5)
        #expect(published.all.count == count)
    }

    @Test func noKernelSupportIsNotPolled() throws {
        let published = Publications()
        let clock = ManualClock()
        let kernel = FakeKernel(.noKernelSupport)
        var settings = noBus(poll: 10, clock: clock)
        settings.firstRetryMilliseconds = 60_000  // one connection attempt: one probe
        let plugin = BluetoothPermission(settings: settings, kernel: kernel, publish: published.append,
                                         log: { _, _ in })
        defer { plugin.stop() }
        _ = try #require(published.waitFor { $0.details.first?.value == "kernel" })
        try waitForReconnection(clock)
        #expect(clock.pending == [.init(remaining: 60_000, repeating: nil)])  // the reconnection alone
        clock.advance(by: .milliseconds(59_999))  // 5 999 poll intervals, had there been polling
        #expect(kernel.callCount == 1)
        // The clock does drive the follower: the next connection attempt asks again.
        clock.advance(by: .milliseconds(1))
        #expect(kernel.callCount == 2)
    }

    /// A system bus daemon that accepts the connection but never answers holds
    /// the plugin's queue in libdbus's Hello (25 s); stop must not wait for that:
    /// the host gives fini 2 s.
    @Test func stopDoesNotWaitForAHungSystemBus() throws {
        // /tmp rather than $TMPDIR: a socket path must fit sun_path's 108 bytes.
        var template = Array("/tmp/bluetooth-unit.XXXXXX".utf8CString)
        let dir = String(cString: try #require(mkdtemp(&template)))
        let path = dir + "/system_bus_socket"
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path.utf8.prefix(raw.count - 1))
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(bound == 0 && listen(listener, 8) == 0)
        defer {
            close(listener)  // resets the pending connection: the plugin's Hello fails soon after
            unlink(path)
            rmdir(dir)
        }
        var settings = noBus()
        settings.bus = .address("unix:path=\(path)")
        let published = Publications()
        let plugin = BluetoothPermission(settings: settings, kernel: FakeKernel(.adapters([Adapter(path: "hci0", powered: true)])),
                                         publish: published.append, log: { _, _ in })
        let started = DispatchTime.now()
        plugin.stop()
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9
        #expect(seconds < 2)
        #expect(published.all.map(\.service) == [.unsupported])  // only init's
    }

    @Test func nothingIsPublishedAfterStop() throws {
        let published = Publications()
        let clock = ManualClock()
        let kernel = FakeKernel(.adapters([Adapter(path: "hci0", powered: true)]), .adapters([]))
        let plugin = BluetoothPermission(settings: noBus(poll: 5, clock: clock), kernel: kernel,
                                         publish: published.append, log: { _, _ in })
        _ = try #require(published.waitFor { $0.service == .available })
        try waitForReconnection(clock)
        plugin.stop()
        #expect(clock.pending.isEmpty)  // no timer outlived stop
        let count = published.all.count
        let calls = kernel.callCount
        clock.advance(by: .seconds(60))  // past the poll, the reconnection and every backoff
        #expect(published.all.count == count)
        #expect(kernel.callCount == calls)
    }
}
