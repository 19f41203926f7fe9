package import PermissionsStore

// "allow-session" grants: a user decision kept in memory only, which ends when the
// last requester it was given to leaves the bus (the app's process ended). Each
// belongs to one (uid, app, permission). Part of StatusTracker; confined to the
// service's queue.
extension StatusTracker {
    package func hasSessionGrant(_ key: DecisionKey) -> Bool {
        sessionGrants[key] != nil
    }

    /// Grants until every one of `owners` (unique names) has left the bus.
    /// Signals the change to the user.
    package func grantSession(uid: UInt32, app: String, permission: String, to owners: Set<String>) {
        signalling(audiences(of: uid), [(app, permission)]) {
            sessionGrants[DecisionKey(uid: uid, app, permission)] = owners
        }
    }

    /// Ends a grant at once, as a decision an administrator set or reset does
    /// (the caller signals).
    func endSessionGrant(_ key: DecisionKey) {
        sessionGrants[key] = nil
    }

    /// The user's permissions of `app` with a session grant, among `names` (all of them if empty).
    func sessionGrantedPermissions(uid: UInt32, app: String, among names: [String]) -> [String] {
        sessionGrants.keys.compactMap { key in
            key.uid == uid && key.app == app && (names.isEmpty || names.contains(key.permission)) ? key.permission : nil
        }
    }

    /// A connection left: the session grants given to it alone end.
    package func ownerLeft(_ name: String) {
        for (key, owners) in sessionGrants where owners.contains(name) {
            let rest = owners.subtracting([name])
            signalling(audiences(of: key.uid), [(key.app, key.permission)]) {
                sessionGrants[key] = rest.isEmpty ? nil : rest
            }
        }
    }
}
