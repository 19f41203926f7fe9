package import PermissionsStore
package import PermissionsModel

/// The user decision in force for one (audience, app, permission), and where it
/// comes from: what a status counts (StatusTracker.decisionInForce decides it) and
/// what GetDetails shows (its decision and decision-scope).
package enum DecisionInForce: Equatable {
    /// A stored row: unassigned (`uid` nil: a deny, in force for every user) or the
    /// user's own.
    case stored(StoredDecision)
    /// The user's session grant ("allow-session"): authorized.
    case session

    package var decision: Decision {
        switch self {
        case .stored(let row): row.decision
        case .session: .authorized
        }
    }
}
