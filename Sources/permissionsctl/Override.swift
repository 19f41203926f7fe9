/// What `grant` and `deny` say on stderr when the decision they stored is not the
/// app's status afterwards: something above a user's decision in the precedence
/// decides it (an administrator's deny= or allow=, a permission switched off or
/// with nothing behind it, an unassigned deny from a store without users). The
/// decision is stored all the same, and the exit status stays 0.
enum Override {
    /// The note for `status` (GetStatusForApp after the write) of a stored
    /// `decision` ("authorized" or "denied"), or nil when the decision is in force.
    static func note(app: String, permission: String, decision: String, status: String) -> String? {
        let what = decision == "authorized" ? "the grant" : "the deny"
        switch (decision, status) {
        case (_, decision):
            return nil
        case ("authorized", "restricted"):
            return "\(app) is restricted for \(permission) by the administrator (deny= in permissions.conf): "
                + "\(what) is stored, and applies only once that entry goes"
        case ("denied", "authorized"):
            // GetStatusForApp answers for an app id, not a process: a script's id does not get allow=.
            let script = app.hasPrefix("/") ? " (if \(app) runs as a script, allow= does not count for it, "
                + "and the deny applies)" : ""
            return "\(app) is forced on for \(permission) by the administrator (allow= in permissions.conf): "
                + "\(what) is stored, and applies only once that entry goes\(script)"
        case ("authorized", "denied"):
            return "an unassigned deny of \(app) for \(permission) (from a store without users) holds for every "
                + "user: \(what) is stored, and applies once it is assigned or reset (permissionsctl list --all)"
        case (_, "disabled"), (_, "unsupported"):
            return "\(permission) is \(status) for every app (switched off, or nothing to use): \(what) is stored, "
                + "and applies once it is available"
        default:
            return nil
        }
    }
}
