internal import CPipeWireShims
import PluginKit
internal import SystemPrimitives
import PermissionsModel

// What the plugin tells the host, on the loop's thread (and once from `start`).
extension PipeWireWatcher {
    /// Available with at least one device in a registry that is followed (or
    /// disabled, if the configuration says so); unsupported otherwise, including
    /// while PipeWire is unreachable or still listing. Policies from allow/deny.
    func snapshot(_ permission: DevicePermission) -> PluginSnapshot {
        let list = phase == .connected ? devices.devices(for: permission) : []
        var snapshot = (configs?[permission] ?? SwitchConfig())
            .snapshot(permission: permission.rawValue, details: [("pipewire", phase.rawValue)])
        if list.isEmpty { snapshot.service = .unsupported }
        snapshot.devices = list.map(\.properties)
        return snapshot
    }

    func setPhase(_ new: Phase) {
        phase = new
        DevicePermission.allCases.forEach(publish)
    }

    /// Publishes the permission's snapshot if it differs from the last one sent
    /// (the daemon would drop a repeat anyway, but need not be asked), once the
    /// first configuration is in, and within the throttle.
    func publish(_ permission: DevicePermission) {
        guard configs != nil, !throttled.contains(permission) else { return }
        guard snapshot(permission) != lastPublished[permission] else { return }
        let now = monotonicNanoseconds()
        if throttle.take(now: now) {
            send(permission)
        } else {
            throttled.insert(permission)
            if let throttleTimer { _ = cpw_loop_arm_timer(loop, throttleTimer, throttle.wait(now: now)) }
        }
    }

    /// The throttle's timer: what waited goes out now, at its latest state.
    func throttleTimerFired() {
        let waiting = throttled
        throttled = []
        for permission in DevicePermission.allCases where waiting.contains(permission) { publish(permission) }
    }

    /// Sends the current snapshot, unconditionally.
    func send(_ permission: DevicePermission) {
        let snapshot = snapshot(permission)
        lastPublished[permission] = snapshot
        host.publish(snapshot)
    }
}
