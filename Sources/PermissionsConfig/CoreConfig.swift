package import PermissionsModel
internal import PermissionsSupport
internal import SystemPrimitives

/// The keys of the configuration that the daemon itself reads; every other key
/// goes to the plugins.
///
///     [permissions]
///     declare=contacts;photos;screen-capture
///                              permissions that no plugin provides, declared by the
///                              administrator: each behaves like any other (decisions,
///                              requests, signals), configured by its own section
///                              with enabled=, allow=, deny= as for notifications
///
///     [service]
///     agent-timeout=120        seconds an agent may take to answer a prompt (1-3600)
///     outgoing-calls=96        the daemon's calls to polkit and agents pending for
///                              all users together (1-100000), and for one user:
///     outgoing-calls-per-user=16
///     pending-calls-per-connection=64
///                              calls of one connection waiting in the daemon, and
///     pending-calls-per-user=512  of one user's connections together (1-100000);
///                              see CallLimits
///     agents-per-user=32       agents one user may have registered at once (1-100000)
///     requests-per-connection=64
///                              StartRequest handles one connection may have open,
///     requests-per-user=512    and one user's connections together (1-100000)
///
///     [identity]
///     host-pid=self            the process whose mount namespace is the host's (1,
///                              or self: the daemon's own); absent: as the
///                              daemon's --host-pid, else its default
///     interpreters=python3;sh  executables whose callers are identified by the
///                              script they run (names, or absolute paths; see
///                              PermissionsIdentity/Interpreters.swift); absent:
///                              the default list; empty: none
///
///     [<permission>]
///     no-agent=not-determined  the answer to Request while no agent is registered:
///                              not-determined (default), denied or authorized;
///                              nothing is stored either way
package struct CoreConfig: Equatable, Sendable {
    package var agentTimeoutSeconds = 120
    package var callLimits = CallLimits()
    package var noAgent: [String: Status] = [:]
    /// Names from [permissions] declare=, valid ones only, in order.
    package var declared: [String] = []
    /// [identity] interpreters=, in order; nil without the key (the default list).
    package var interpreters: [String]?
    /// [identity] host-pid=; nil without the key.
    package var hostPID: HostPID?

    /// The process whose mount namespace counts as the host's.
    package enum HostPID: Equatable, Sendable {
        case pid(UInt32)
        /// The daemon's own namespace: a container whose apps share it.
        case daemon

        /// "self" or "1"; nil for anything else. A file outlives the boot a PID was
        /// true for, so no other PID is taken from one (--host-pid can name one).
        package init?(_ text: String) {
            switch text {
            case "self": self = .daemon
            case "1": self = .pid(1)
            default: return nil
            }
        }
    }

    package init() {}

    /// Splits `entries` into the daemon's settings and the plugins' entries. A bad
    /// value goes to `reject` ("FILE:LINE: [section] key=value: why"), and the
    /// previous setting is kept in the result; the daemon refuses the whole
    /// configuration when anything was rejected. Unknown keys are logged and ignored.
    package static func split(_ entries: [ConfigEntry], previous: CoreConfig,
                             reject: (String) -> Void = { logError($0) }) -> (CoreConfig, [ConfigEntry]) {
        // A key absent from the files takes its default; a bad value keeps what the
        // key had before it (an earlier file of this load, else the last good load).
        var core = CoreConfig()
        var rest: [ConfigEntry] = []
        var serviceKeysSet = Set<String>()
        for entry in entries {
            if entry.section == "permissions" {
                if entry.key == "declare" {
                    let names = entry.value.split(separator: ";").map { $0.trimmed }.filter { !$0.isEmpty }
                    for name in names {
                        if Validate.isPermissionName(name), !Validate.reservedSections.contains(name) {
                            if !core.declared.contains(name) { core.declared.append(name) }
                        } else {
                            reject("\(entry.origin): [permissions] declare: invalid permission name \"\(name.escapedForMessage)\"")
                        }
                    }
                } else {
                    logError("\(entry.origin): unknown key \"\(entry.key.escapedForMessage)\" in [permissions]; ignored")
                }
            } else if entry.section == "service" {
                guard let key = serviceKeys.first(where: { $0.name == entry.key }) else {
                    logError("\(entry.origin): unknown key \"\(entry.key.escapedForMessage)\" in [service]; ignored")
                    continue
                }
                if let number = Int(entry.value), key.range.contains(number) {
                    core[keyPath: key.value] = number
                } else {
                    if !serviceKeysSet.contains(key.name) { core[keyPath: key.value] = previous[keyPath: key.value] }
                    reject("\(entry.origin): [service] \(key.name)=\(entry.value.escapedForMessage): "
                           + "expected \(key.range.lowerBound)..\(key.range.upperBound) \(key.unit)")
                }
                serviceKeysSet.insert(key.name)
            } else if entry.section == "identity" {
                if entry.key == "host-pid" {
                    if let pid = HostPID(entry.value) {
                        core.hostPID = pid
                    } else {
                        core.hostPID = core.hostPID ?? previous.hostPID
                        reject("\(entry.origin): [identity] host-pid=\(entry.value.escapedForMessage): "
                               + "expected 1 or self")
                    }
                } else if entry.key == "interpreters" {
                    let names = entry.value.split(separator: ";").map { $0.trimmed }.filter { !$0.isEmpty }
                    if let bad = names.first(where: { !Self.isInterpreterEntry($0) }) {
                        core.interpreters = core.interpreters ?? previous.interpreters
                        reject("\(entry.origin): [identity] interpreters: invalid interpreter \"\(bad.escapedForMessage)\": "
                               + "expected a file name or an absolute path")
                    } else {
                        core.interpreters = names
                    }
                } else {
                    logError("\(entry.origin): unknown key \"\(entry.key.escapedForMessage)\" in [identity]; ignored")
                }
            } else if entry.key == "no-agent" {
                let allowed: [Status] = [.notDetermined, .denied, .authorized]
                if let status = Status(rawValue: entry.value), allowed.contains(status) {
                    core.noAgent[entry.section] = status
                } else {
                    let kept = core.noAgent[entry.section] ?? previous.noAgent[entry.section]
                    core.noAgent[entry.section] = kept
                    reject("\(entry.origin): [\(entry.section)] no-agent=\(entry.value.escapedForMessage): expected "
                           + "not-determined, denied or authorized")
                }
            } else {
                rest.append(entry)
            }
        }
        return (core, rest)
    }

    /// A [service] key: a whole number in `range`, kept at `value`.
    private struct ServiceKey {
        let name: String
        let range: ClosedRange<Int>
        let unit: String
        let value: WritableKeyPath<CoreConfig, Int>
    }

    private static var serviceKeys: [ServiceKey] {
        [ServiceKey(name: "agent-timeout", range: 1...3600, unit: "seconds", value: \.agentTimeoutSeconds),
         ServiceKey(name: "outgoing-calls", range: CallLimits.range, unit: "calls", value: \.callLimits.outgoingCalls),
         ServiceKey(name: "outgoing-calls-per-user", range: CallLimits.range, unit: "calls",
                    value: \.callLimits.outgoingCallsPerUser),
         ServiceKey(name: "pending-calls-per-connection", range: CallLimits.range, unit: "calls",
                    value: \.callLimits.pendingCallsPerConnection),
         ServiceKey(name: "pending-calls-per-user", range: CallLimits.range, unit: "calls",
                    value: \.callLimits.pendingCallsPerUser),
         ServiceKey(name: "agents-per-user", range: CallLimits.range, unit: "agents",
                    value: \.callLimits.agentsPerUser),
         ServiceKey(name: "requests-per-connection", range: CallLimits.range, unit: "requests",
                    value: \.callLimits.requestsPerConnection),
         ServiceKey(name: "requests-per-user", range: CallLimits.range, unit: "requests",
                    value: \.callLimits.requestsPerUser)]
    }

    /// An entry of [identity] interpreters=: a file name (letters, digits, ".", "_",
    /// "+", "-", not starting with "." or "-"), or an absolute path that is a valid
    /// app id (the executable's id it matches).
    static func isInterpreterEntry(_ entry: String) -> Bool {
        if entry.hasPrefix("/") { return Validate.isAppID(entry) }
        let bytes = Array(entry.utf8)
        guard let first = bytes.first, bytes.count <= 255, first != UInt8(ascii: "."), first != UInt8(ascii: "-")
        else { return false }
        return bytes.allSatisfy { b in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b)
                || [UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "+"), UInt8(ascii: "-")].contains(b)
        }
    }
}

extension CoreConfig {
    /// The snapshot of each declared permission that no plugin provides, from its
    /// section (enabled=, allow=, deny=). A section with a bad value goes to `reject`
    /// and keeps that permission's previous snapshot in the result (the daemon then
    /// refuses the whole configuration).
    package func declaredSnapshots(entries: [ConfigEntry], providedByPlugins: Set<String>,
                           previous: [String: Snapshot] = [:],
                           reject: (String) -> Void = { logError($0) }) -> [String: Snapshot] {
        var result: [String: Snapshot] = [:]
        for name in declared {
            if providedByPlugins.contains(name) {
                logWarning("[permissions] declare: \"\(name)\" is provided by a plugin; the plugin serves it")
                continue
            }
            do {
                let config = try SwitchConfig.parse(entries, section: name, warn: { logWarning($0) })
                var policies: [String: Policy] = [:]
                // Checked as a plugin's policies are (SnapshotReader): a bad id is logged.
                let source = "[permissions] declare \"\(name)\""
                for app in config.allow where isValidPolicyAppID(app, from: source) { policies[app] = .allow }
                for app in config.deny where isValidPolicyAppID(app, from: source) { policies[app] = .restricted }
                result[name] = Snapshot(permission: name, service: config.enabled ? .available : .disabled,
                                        policies: policies,
                                        details: config.disabledBy.map { Snapshot.KeyValue($0.key, $0.value) })
            } catch {
                reject(error.description)
                result[name] = previous[name] ?? Snapshot(permission: name, service: .available)
            }
        }
        return result
    }
}
