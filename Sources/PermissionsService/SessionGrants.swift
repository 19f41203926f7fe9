internal import PermissionsStore

// "allow-session" grants: a user decision kept in memory only, which ends when the
// last requester it was given to leaves the bus (the app's process ended). Part of
// StatusTracker; confined to the service's queue.
extension StatusTracker {
    package func hasSessionGrant(_ app: String, _ permission: String) -> Bool {
        sessionGrants[DecisionKey(app, permission)] != nil
    }

    /// Grants until every one of `owners` (unique names) has left the bus.
    package func grantSession(_ app: String, _ permission: String, to owners: Set<String>) {
        sessionGrants[DecisionKey(app, permission)] = owners
    }

    /// Ends a grant at once, as a decision an administrator set or reset does.
    package func endSessionGrant(_ app: String, _ permission: String) {
        sessionGrants[DecisionKey(app, permission)] = nil
    }

    /// The app's permissions with a session grant, among `names` (all of them if empty).
    func sessionGrantedPermissions(app: String, among names: [String]) -> [String] {
        sessionGrants.keys.compactMap { key in
            key.app == app && (names.isEmpty || names.contains(key.permission)) ? key.permission : nil
        }
    }

    /// A connection left: the session grants given to it alone end.
    package func ownerLeft(_ name: String) {
        for (key, owners) in sessionGrants where owners.contains(name) {
            let before = status(app: key.app, permission: key.permission)
            let rest = owners.subtracting([name])
            sessionGrants[key] = rest.isEmpty ? nil : rest
            let after = status(app: key.app, permission: key.permission)
            if before != after, isKnown(key.permission) {
                emit(key.app, key.permission, after)
            }
        }
    }
}
