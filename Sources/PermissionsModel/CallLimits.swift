/// How much of the daemon one connection or one user may hold at once: the
/// [service] keys of permissions.conf(5) of the same names, and their defaults.
/// Each is a number of calls (of agents, for agents-per-user; of open request
/// handles, for requests-per-connection and requests-per-user); a call over one gets
/// org.example.Permissions.Error.LimitExceeded, quoting it.
public struct CallLimits: Equatable, Sendable {
    /// The daemon's calls pending for users, all together (outgoing-calls): polkit
    /// checks and calls to agents. It must stay below what the bus lets one
    /// connection wait for (max_replies_per_connection, 128 on a stock system
    /// bus), with the rest kept for the daemon's own calls.
    public var outgoingCalls = 96
    /// The same for one user (outgoing-calls-per-user): one user's polkit agent
    /// or prompt agent that never answers holds this many at most.
    public var outgoingCallsPerUser = 16
    /// Calls of one connection waiting in the daemon for an answer
    /// (pending-calls-per-connection): for its identity, polkit or a prompt.
    public var pendingCallsPerConnection = 64
    /// The same for all connections of one user (pending-calls-per-user).
    public var pendingCallsPerUser = 512
    /// Agents registered by one user's connections at once (agents-per-user): a
    /// desktop's agent, a terminal's, a few more; not one per object path a
    /// client can make up (each is kept, checked and logged).
    public var agentsPerUser = 32
    /// StartRequest handles one connection may have open at once
    /// (requests-per-connection): each waits in the daemon, as a blocking Request
    /// would, but holds no call, so pending-calls-per-connection does not count it.
    public var requestsPerConnection = 64
    /// The same for all connections of one user (requests-per-user).
    public var requestsPerUser = 512

    /// The range every key takes.
    public static let range = 1...100_000

    public init() {}
}
