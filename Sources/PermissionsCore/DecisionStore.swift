internal import CSQLite
internal import Glibc

/// A stored user decision and where it came from.
public struct StoredDecision: Sendable, Equatable {
    public var appID: String
    public var permission: String
    public var decision: Decision
    /// Microseconds since the Unix epoch.
    public var setAt: Int64
    /// Free text naming who made it, e.g. "uid 0 (/usr/bin/permissionsctl)".
    public var setBy: String
    /// When it stops applying, in microseconds since the Unix epoch; nil = never.
    public var expiresAt: Int64? = nil
}

public struct StoreError: Error, CustomStringConvertible {
    public let message: String
    /// SQLite's primary result code, when the error came from SQLite.
    public var code: Int32 = 0
    public var description: String { message }
    /// The file is not a database or is damaged (as opposed to unwritable, say).
    var isCorruption: Bool { code == SQLITE_CORRUPT || code == SQLITE_NOTADB }
}

/// Per-app decisions in SQLite: one row per (app id, permission).
///
/// Durability: WAL journal with `synchronous=FULL`, so a write is on disk when
/// `set`/`reset` return, before the D-Bus reply goes out. A store file that SQLite
/// cannot read (truncated, not a database) is moved aside and a new one started, so
/// a damaged file can never stop the daemon from starting (xdg-desktop-portal #627).
///
/// Not thread-safe: owned by the service and used only on its queue.
public final class DecisionStore {
    private let db: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]
    public let path: String

    public init(path: String) throws {
        self.path = path
        do {
            db = try Self.open(path)
        } catch let error as StoreError where !error.isCorruption {
            throw error
        } catch {
            let aside = "\(path).corrupt-\(currentMicroseconds())"
            logError("decision store \(path) is unreadable (\(error)); moved it to \(aside) and starting empty")
            _ = rename(path, aside)
            unlink(path + "-wal")
            unlink(path + "-shm")
            db = try Self.open(path)
        }
    }

    private static func open(_ path: String) throws -> OpaquePointer {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        guard sqlite3_open_v2(path, &handle, flags, nil) == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            let code = handle.map { sqlite3_errcode($0) & 0xff } ?? SQLITE_NOMEM
            sqlite3_close(handle)
            throw StoreError(message: "cannot open \(path): \(message)", code: code)
        }
        sqlite3_busy_timeout(handle, 2000)
        let setup = """
            PRAGMA journal_mode=WAL;
            PRAGMA synchronous=FULL;
            CREATE TABLE IF NOT EXISTS decisions (
                app_id TEXT NOT NULL,
                permission TEXT NOT NULL,
                decision TEXT NOT NULL CHECK (decision IN ('authorized', 'denied')),
                set_at INTEGER NOT NULL,
                set_by TEXT NOT NULL,
                expires_at INTEGER,
                PRIMARY KEY (app_id, permission)
            ) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
            PRAGMA quick_check;
            """
        var error: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, setup, nil, nil, &error)
        if rc != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? "unknown error"
            sqlite3_free(error)
            sqlite3_close(handle)
            throw StoreError(message: message, code: rc & 0xff)
        }
        // Schema version 1 had no expires_at (an error here means the column exists).
        sqlite3_exec(handle, "ALTER TABLE decisions ADD COLUMN expires_at INTEGER", nil, nil, nil)
        // Start-up and the expiry timer look for decisions that expire: index only those.
        sqlite3_exec(handle, "CREATE INDEX IF NOT EXISTS decisions_expiry ON decisions (expires_at) "
                     + "WHERE expires_at IS NOT NULL", nil, nil, nil)
        return handle
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close(db)
    }

    // MARK: Queries

    /// The decision in force for the pair: an expired one does not count.
    public func decision(app: String, permission: String) -> StoredDecision? {
        query("\(Self.columns) WHERE app_id = ?1 AND permission = ?2 AND (expires_at IS NULL OR expires_at > ?3)",
              [.text(app), .text(permission), .int(currentMicroseconds())]).first
    }

    static let columns = "SELECT app_id, permission, decision, set_at, set_by, expires_at FROM decisions"

    /// Every stored decision, or one app's, sorted by app id then permission.
    public func list(app: String? = nil) -> [StoredDecision] {
        if let app {
            return query("\(Self.columns) WHERE app_id = ?1 ORDER BY app_id, permission", [.text(app)])
        }
        return query("\(Self.columns) ORDER BY app_id, permission", [])
    }

    /// Stores a decision durably (replaces an earlier one for the same pair).
    public func set(app: String, permission: String, decision: Decision, setBy: String,
                    expiresAt: Int64? = nil) throws {
        try execute("INSERT OR REPLACE INTO decisions (app_id, permission, decision, set_at, set_by, expires_at) "
                    + "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    [.text(app), .text(permission), .text(decision.rawValue), .int(currentMicroseconds()), .text(setBy),
                     expiresAt.map { .int($0) } ?? .null])
    }

    /// Decisions whose time has come (expires_at <= now), for the expiry timer.
    public func expired(now: Int64 = currentMicroseconds()) -> [StoredDecision] {
        query("\(Self.columns) WHERE expires_at IS NOT NULL AND expires_at <= ?1", [.int(now)])
    }

    /// The earliest expiry of a stored decision, if any (it may already be due).
    public func nextExpiry() -> Int64? {
        query("\(Self.columns) WHERE expires_at IS NOT NULL ORDER BY expires_at LIMIT 1", []).first?.expiresAt
    }

    /// Deletes one decision if it is still the same (an expiry must not remove a
    /// newer decision made meanwhile).
    public func remove(_ decision: StoredDecision) throws {
        try execute("DELETE FROM decisions WHERE app_id = ?1 AND permission = ?2 AND set_at = ?3",
                    [.text(decision.appID), .text(decision.permission), .int(decision.setAt)])
    }

    /// Moves the serial epoch on: the larger of the stored one plus one and
    /// `atLeast`; stored, and returned. One write per daemon start.
    public func nextEpoch(atLeast: Int64) throws -> Int64 {
        let next = max((query(meta: "serial-epoch") ?? 0) + 1, atLeast)
        try execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('serial-epoch', ?1)", [.int(next)])
        return next
    }

    /// Adds one to a persistent counter and returns its new value.
    public func increment(_ key: String) throws -> Int64 {
        try execute("INSERT INTO meta (key, value) VALUES (?1, 1) ON CONFLICT (key) DO UPDATE SET value = value + 1",
                    [.text(key)])
        return query(meta: key) ?? 1
    }

    private func query(meta key: String) -> Int64? {
        guard let statement = try? prepared("SELECT value FROM meta WHERE key = ?1") else { return nil }
        bind(statement, [.text(key)])
        defer { sqlite3_reset(statement) }
        return sqlite3_step(statement) == SQLITE_ROW ? sqlite3_column_int64(statement, 0) : nil
    }

    /// Removes an app's decisions for the given permissions (all when empty); returns
    /// how many rows went, in one transaction.
    public func reset(app: String, permissions: [String]) throws -> Int {
        if permissions.isEmpty {
            try execute("DELETE FROM decisions WHERE app_id = ?1", [.text(app)])
            return Int(sqlite3_changes(db))
        }
        try execute("BEGIN IMMEDIATE", [])
        var removed = 0
        do {
            for permission in Set(permissions) {
                try execute("DELETE FROM decisions WHERE app_id = ?1 AND permission = ?2",
                            [.text(app), .text(permission)])
                removed += Int(sqlite3_changes(db))
            }
            try execute("COMMIT", [])
        } catch {
            try? execute("ROLLBACK", [])
            throw error
        }
        return removed
    }

    // MARK: SQLite plumbing

    enum Binding { case text(String), int(Int64), null }

    private func prepared(_ sql: String) throws -> OpaquePointer {
        if let statement = statements[sql] {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
            return statement
        }
        var statement: OpaquePointer?
        guard sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil) == SQLITE_OK,
              let statement
        else { throw StoreError(message: String(cString: sqlite3_errmsg(db))) }
        statements[sql] = statement
        return statement
    }

    private func bind(_ statement: OpaquePointer, _ bindings: [Binding]) {
        // SQLITE_TRANSIENT ((sqlite3_destructor_type)-1) does not import: SQLite copies the text.
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        for (index, binding) in bindings.enumerated() {
            switch binding {
            case .text(let s): sqlite3_bind_text(statement, Int32(index + 1), s, -1, transient)
            case .int(let v): sqlite3_bind_int64(statement, Int32(index + 1), v)
            case .null: sqlite3_bind_null(statement, Int32(index + 1))
            }
        }
    }

    private func execute(_ sql: String, _ bindings: [Binding]) throws {
        let statement = try prepared(sql)
        bind(statement, bindings)
        let rc = sqlite3_step(statement)
        sqlite3_reset(statement)
        guard rc == SQLITE_DONE || rc == SQLITE_ROW else {
            throw StoreError(message: String(cString: sqlite3_errmsg(db)))
        }
    }

    private func query(_ sql: String, _ arguments: [Binding]) -> [StoredDecision] {
        guard let statement = try? prepared(sql) else { return [] }
        bind(statement, arguments)
        var rows: [StoredDecision] = []
        while sqlite3_step(statement) == SQLITE_ROW {
            func text(_ column: Int32) -> String {
                sqlite3_column_text(statement, column).map { String(cString: $0) } ?? ""
            }
            guard let decision = Decision(rawValue: text(2)) else { continue }
            let expires = sqlite3_column_type(statement, 5) == SQLITE_NULL ? nil : sqlite3_column_int64(statement, 5)
            rows.append(StoredDecision(appID: text(0), permission: text(1), decision: decision,
                                       setAt: sqlite3_column_int64(statement, 3), setBy: text(4), expiresAt: expires))
        }
        sqlite3_reset(statement)
        return rows
    }
}

public func currentMicroseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000
}
