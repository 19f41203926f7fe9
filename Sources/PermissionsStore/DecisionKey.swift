/// (uid, app id, permission): the key of a stored decision, a session grant and an
/// open prompt. A decision belongs to one user; `uid` nil marks a row "unassigned":
/// one migrated from a store written before decisions had users (see DecisionStore).
///
/// Compared byte for byte, as SQLite compares TEXT: Swift's `==` on strings treats
/// canonically equivalent strings ("é" and "e" + U+0301) as equal, SQLite does not,
/// and the store's index must hold exactly the rows of the file. (App ids and
/// permission names from the bus are validated ASCII, where the two agree.)
package struct DecisionKey: Hashable, Comparable, Sendable {
    package let uid: UInt32?
    package let app: String
    package let permission: String

    package init(uid: UInt32?, _ app: String, _ permission: String) {
        self.uid = uid
        self.app = app
        self.permission = permission
    }

    package static func == (a: Self, b: Self) -> Bool {
        a.uid == b.uid && sameBytes(a.app, b.app) && sameBytes(a.permission, b.permission)
    }

    // Every read hashes keys (GetStatus looks up two or three): by bytes (ByteString).
    package func hash(into hasher: inout Hasher) {
        hasher.combine(uid)
        ByteString.combine(app, into: &hasher)
        ByteString.combine(permission, into: &hasher)
    }

    private static func sameBytes(_ a: String, _ b: String) -> Bool { ByteString.sameBytes(a, b) }

    /// Listing order: app id, then permission (by bytes, as SQLite's BINARY
    /// collation), then owner, unassigned first.
    package static func < (a: Self, b: Self) -> Bool {
        if !a.app.utf8.elementsEqual(b.app.utf8) { return a.app.utf8.lexicographicallyPrecedes(b.app.utf8) }
        if !a.permission.utf8.elementsEqual(b.permission.utf8) {
            return a.permission.utf8.lexicographicallyPrecedes(b.permission.utf8)
        }
        return (a.uid.map { Int64($0) } ?? -1) < (b.uid.map { Int64($0) } ?? -1)
    }

    /// The same (app, permission) of another owner.
    package func owned(by uid: UInt32?) -> DecisionKey { DecisionKey(uid: uid, app, permission) }
}
