import PermissionsModel
import PermissionsConfig
import PermissionsService

/// What ConfigApplier needs of the service: its changes held back while a
/// configuration is tried, the configuration's settings put in force, and the
/// outcome shown (ConfigGeneration, ConfigStatus). PermissionsService in the daemon
/// (below); a recorder in unit tests, with no bus.
///
/// Used on the serving queue.
protocol ConfiguredService: AnyObject {
    /// The permissions the configuration declares now, with their snapshots.
    var declared: [String: Snapshot] { get }
    /// The fail-safe: every permission that would be available reads "disabled".
    var disabledForLackOfConfiguration: Bool { get set }
    func holdChanges()
    func releaseChanges()
    /// The daemon's own keys of a configuration, in force from now on; `hostPID` is
    /// the host's process as resolved from [identity] host-pid= and --host-pid.
    func takeSettings(_ core: CoreConfig, hostPID: UInt32)
    func setDeclared(_ new: [String: Snapshot])
    func setConfigState(generation: UInt32, status: String)
}

extension PermissionsService: ConfiguredService {
    func takeSettings(_ core: CoreConfig, hostPID: UInt32) {
        noAgentDefaults = core.noAgent
        agentTimeoutMilliseconds = Int32(core.agentTimeoutSeconds * 1000)
        callLimits = core.callLimits
        setInterpreters(core.interpreters)
        setHostPID(hostPID)
    }
}
