import Glibc
import PluginKit
import PermissionsModel

// From the kernel's interfaces to what the daemon is told, as pure functions:
//
//   no interface but the loopback up, running and with an address -> unsupported
//   at least one                                                   -> available
//
// plus the [local-network] section, as for location: enabled=false gives
// "disabled" while there is a local network; allow/deny are per-app admin entries.

/// One interface through which devices of the local network can be reached.
struct LocalInterface: Sendable, Equatable {
    var name: String
}

/// The interfaces that are up and running (a carrier: a link whose other end is
/// down does not count), are not the loopback, and have at least one IPv4 or IPv6
/// address, sorted by name. Nil when the kernel's list cannot be read (the caller
/// then fails closed).
func localInterfaces() -> [LocalInterface]? {
    var list: UnsafeMutablePointer<ifaddrs>?
    guard getifaddrs(&list) == 0 else { return nil }
    defer { freeifaddrs(list) }
    let needed = UInt32(IFF_UP) | UInt32(IFF_RUNNING)
    var found: [String: LocalInterface] = [:]
    var entry = list
    while let e = entry {
        defer { entry = e.pointee.ifa_next }
        let flags = e.pointee.ifa_flags
        guard flags & needed == needed, flags & UInt32(IFF_LOOPBACK) == 0,
              let family = e.pointee.ifa_addr?.pointee.sa_family,
              family == sa_family_t(AF_INET) || family == sa_family_t(AF_INET6),
              let cName = e.pointee.ifa_name else { continue }
        let name = String(cString: cName)
        found[name] = LocalInterface(name: name)
    }
    return found.values.sorted { $0.name < $1.name }
}

/// The snapshot of `local-network` for a set of interfaces and a configuration.
func localNetworkSnapshot(_ interfaces: [LocalInterface], config: SwitchConfig = SwitchConfig()) -> PluginSnapshot {
    let service: PluginServiceState = interfaces.isEmpty ? .unsupported : config.enabled ? .available : .disabled
    return PluginSnapshot(
        permission: "local-network", service: service,
        policies: config.allow.map { ($0, .allow) } + config.deny.map { ($0, .restricted) },
        details: [("source", "rtnetlink")] + (service == .disabled ? config.disabledBy : []),
        devices: interfaces.map { [("interface", $0.name)] })
}
