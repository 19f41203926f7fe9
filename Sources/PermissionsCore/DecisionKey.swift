/// (app id, permission): the key of a stored decision, a session grant and an open
/// prompt. Compared byte for byte, as SQLite compares TEXT: Swift's `==` on strings
/// treats canonically equivalent strings ("é" and "e" + U+0301) as equal, SQLite
/// does not, and the store's index must hold exactly the rows of the file. (App ids
/// and permission names from the bus are validated ASCII, where the two agree.)
struct DecisionKey: Hashable, Comparable, Sendable {
    let app: String
    let permission: String

    init(_ app: String, _ permission: String) {
        self.app = app
        self.permission = permission
    }

    static func == (a: Self, b: Self) -> Bool {
        a.app.utf8.elementsEqual(b.app.utf8) && a.permission.utf8.elementsEqual(b.permission.utf8)
    }

    func hash(into hasher: inout Hasher) {
        for var part in [app, permission] {
            hasher.combine(part.utf8.count)
            part.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        }
    }

    /// SQLite's order (BINARY collation): app id, then permission, by bytes.
    static func < (a: Self, b: Self) -> Bool {
        if !a.app.utf8.elementsEqual(b.app.utf8) { return a.app.utf8.lexicographicallyPrecedes(b.app.utf8) }
        return a.permission.utf8.lexicographicallyPrecedes(b.permission.utf8)
    }
}
