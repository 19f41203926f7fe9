import PipeWireAccess
internal import CPipeWireShims
import PluginKit
internal import SystemPrimitives
import PermissionsModel

/// One publication: a permission, as one PipeWire gives it. `.environment` is
/// the machine-wide snapshot (on a daemon serving many users, always
/// "unsupported": no one PipeWire is everyone's).
struct Target: Hashable {
    var permission: DevicePermission
    var owner: Owner

    init(_ permission: DevicePermission, _ owner: Owner) {
        self.permission = permission
        self.owner = owner
    }
}

// What the plugin tells the host, on the loop's thread (and once from `start`).
extension PipeWireWatcher {
    /// Available with at least one device in a registry that is followed (or
    /// disabled, if the configuration says so); unsupported otherwise, including
    /// while PipeWire is unreachable or still listing. Policies from allow/deny.
    func snapshot(_ target: Target) -> PluginSnapshot {
        let config = configs?[target.permission] ?? SwitchConfig()
        if target.owner == .environment, userRuntimeRoot != nil {
            return Self.snapshot(target.permission, config, phase: "per-user")
        }
        let remote = remotes[target.owner]
        let phase = remote?.phase ?? .unreachable
        let list = phase == .connected ? remote?.devices.devices(for: target.permission) ?? [] : []
        return Self.snapshot(target.permission, config, phase: phase.rawValue, devices: list)
    }

    /// A permission's snapshot: unsupported without a device (also while no
    /// PipeWire is reached), with the `pipewire` detail saying why.
    static func snapshot(_ permission: DevicePermission, _ config: SwitchConfig, phase: String,
                         devices: [Device] = []) -> PluginSnapshot {
        var snapshot = config.snapshot(permission: permission.rawValue, details: [("pipewire", phase)])
        if devices.isEmpty { snapshot.service = .unsupported }
        snapshot.devices = devices.map(\.properties)
        return snapshot
    }

    func publish(_ permission: DevicePermission, of remote: PipeWireRemote) {
        publish(Target(permission, remote.owner))
    }

    /// Every publication there is: after a new configuration.
    func publishAll() {
        for permission in DevicePermission.allCases {
            publish(Target(permission, .environment))
            for owner in remotes.keys.sorted() where owner != .environment { publish(Target(permission, owner)) }
        }
    }

    /// Publishes the target's snapshot if it differs from the last one sent
    /// (the daemon would drop a repeat anyway, but need not be asked), once the
    /// first configuration is in, and within the throttle (shared by all users).
    func publish(_ target: Target) {
        guard configs != nil, !throttled.contains(target) else { return }
        guard snapshot(target) != lastPublished[target] else { return }
        let now = monotonicNanoseconds()
        if throttle.take(now: now) {
            send(target)
        } else {
            throttled.insert(target)
            if let throttleTimer { _ = cpw_loop_arm_timer(loop, throttleTimer, throttle.wait(now: now)) }
        }
    }

    /// The throttle's timer: what waited goes out now, at its latest state.
    func throttleTimerFired() {
        let waiting = throttled
        throttled = []
        for target in waiting.sorted(by: { ($0.owner, $0.permission.rawValue) < ($1.owner, $1.permission.rawValue) }) {
            publish(target)
        }
    }

    /// Sends the current snapshot, unconditionally.
    func send(_ target: Target) {
        let snapshot = snapshot(target)
        lastPublished[target] = snapshot
        switch target.owner {
        case .environment: host.publish(snapshot)
        // An older host cannot tell users apart: each then keeps the machine-wide
        // "unsupported" (checked at start, and logged once there).
        case .user(let uid): host.publish(snapshot, forUser: uid)
        }
    }
}
