/// (app id, permission): the key of a stored decision, a session grant and an open
/// prompt. Compared byte for byte, as SQLite compares TEXT: Swift's `==` on strings
/// treats canonically equivalent strings ("é" and "e" + U+0301) as equal, SQLite
/// does not, and the store's index must hold exactly the rows of the file. (App ids
/// and permission names from the bus are validated ASCII, where the two agree.)
package struct DecisionKey: Hashable, Comparable, Sendable {
    package let app: String
    package let permission: String

    package init(_ app: String, _ permission: String) {
        self.app = app
        self.permission = permission
    }

    package static func == (a: Self, b: Self) -> Bool {
        a.app.utf8.elementsEqual(b.app.utf8) && a.permission.utf8.elementsEqual(b.permission.utf8)
    }

    package func hash(into hasher: inout Hasher) {
        for var part in [app, permission] {
            hasher.combine(part.utf8.count)
            part.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        }
    }

    /// SQLite's order (BINARY collation): app id, then permission, by bytes.
    package static func < (a: Self, b: Self) -> Bool {
        if !a.app.utf8.elementsEqual(b.app.utf8) { return a.app.utf8.lexicographicallyPrecedes(b.app.utf8) }
        return a.permission.utf8.lexicographicallyPrecedes(b.permission.utf8)
    }
}
