/// The keys of the configuration that the daemon itself reads; every other key
/// goes to the plugins.
///
///     [service]
///     agent-timeout=120        seconds an agent may take to answer a prompt (1-3600)
///
///     [<permission>]
///     no-agent=not-determined  the answer to Request while no agent is registered:
///                              not-determined (default), denied or authorized;
///                              nothing is stored either way
public struct CoreConfig: Equatable, Sendable {
    public var agentTimeoutSeconds = 120
    public var noAgent: [String: Status] = [:]

    public init() {}

    /// Splits `entries` into the daemon's settings and the plugins' entries. A bad
    /// value is logged with its origin and the previous setting kept.
    public static func split(_ entries: [ConfigEntry], previous: CoreConfig) -> (CoreConfig, [ConfigEntry]) {
        var core = CoreConfig()
        core.agentTimeoutSeconds = previous.agentTimeoutSeconds
        var rest: [ConfigEntry] = []
        var sawTimeout = false
        for entry in entries {
            if entry.section == "service" {
                if entry.key == "agent-timeout", let seconds = Int(entry.value), (1...3600).contains(seconds) {
                    core.agentTimeoutSeconds = seconds
                    sawTimeout = true
                } else {
                    logError("\(entry.origin): [service] \(entry.key)=\(entry.value.escapedForMessage): "
                             + "expected agent-timeout=1..3600; ignored")
                }
            } else if entry.key == "no-agent" {
                let allowed: [Status] = [.notDetermined, .denied, .authorized]
                if let status = Status(rawValue: entry.value), allowed.contains(status) {
                    core.noAgent[entry.section] = status
                } else {
                    logError("\(entry.origin): [\(entry.section)] no-agent=\(entry.value.escapedForMessage): expected "
                             + "not-determined, denied or authorized; keeping \(previous.noAgent[entry.section]?.rawValue ?? "not-determined")")
                    if let kept = previous.noAgent[entry.section] { core.noAgent[entry.section] = kept }
                }
            } else {
                rest.append(entry)
            }
        }
        if !sawTimeout { core.agentTimeoutSeconds = entries.contains { $0.section == "service" } ? previous.agentTimeoutSeconds : 120 }
        return (core, rest)
    }
}
