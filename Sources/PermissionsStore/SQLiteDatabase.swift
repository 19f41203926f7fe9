internal import CSQLite
internal import Glibc
internal import PermissionsSupport

package struct StoreError: Error, CustomStringConvertible {
    package let message: String
    /// SQLite's primary result code, when the error came from SQLite.
    package var code: Int32 = 0
    package var description: String { message }
    /// The file is not a database or is damaged (as opposed to unwritable, say).
    var isCorruption: Bool { code == SQLITE_CORRUPT || code == SQLITE_NOTADB }
    /// The disk (or a quota) had no room for what SQLite had to write.
    var isDiskFull: Bool { code == SQLITE_FULL }

    /// Damage SQLite itself did not report as an error (e.g. from quick_check).
    static func damaged(_ message: String) -> StoreError { StoreError(message: message, code: SQLITE_CORRUPT) }
}

/// One SQLite connection, the only place that calls SQLite. Every result is
/// checked: a bind, a step or a prepare that fails throws a `StoreError` with
/// SQLite's message and primary code, so that a fault can never pass for "no
/// rows" or "done".
///
/// Not thread-safe: used by its DecisionStore only, on the service queue.
final class SQLiteDatabase {
    enum Value { case text(String), int(Int64), null }

    private let handle: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]
    /// Closed by `close()`: the handle is gone, and every statement throws.
    private(set) var isClosed = false
    /// The file, for messages.
    let path: String

    init(path: String) throws {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        guard rc == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            let errno = handle.map { sqlite3_system_errno($0) } ?? 0
            sqlite3_close(handle)
            throw StoreError(message: "cannot open \(path): \(message)"
                             + Self.readOnlyHint(path: path, code: rc & 0xff, errno: errno), code: rc & 0xff)
        }
        self.handle = handle
        self.path = path
        sqlite3_busy_timeout(handle, 2000)
    }

    deinit {
        close()
    }

    /// Finalizes every statement and closes the connection, which closes its file
    /// descriptors and so releases the EXCLUSIVE lock held through them. Closing
    /// checkpoints the WAL unless `setCheckpointOnClose(false)`. Returns SQLite's
    /// error, if closing reported one (the handle is released either way).
    @discardableResult
    func close() -> StoreError? {
        guard !isClosed else { return nil }
        isClosed = true
        for statement in statements.values { sqlite3_finalize(statement) }
        statements = [:]
        // sqlite3_close_v2: with every statement finalized it closes now; unlike
        // sqlite3_close it never leaves the handle open on SQLITE_BUSY.
        let rc = sqlite3_close_v2(handle)
        return rc == SQLITE_OK ? nil : StoreError(message: "closing \(path): \(String(cString: sqlite3_errstr(rc)))",
                                                  code: rc & 0xff)
    }

    /// Whether closing checkpoints the WAL into the file and deletes the WAL
    /// (SQLite's default).
    func setCheckpointOnClose(_ on: Bool) throws {
        guard !isClosed else { throw closedError }
        let rc = csqlite_set_checkpoint_on_close(handle, on ? 1 : 0)
        guard rc == SQLITE_OK else { throw failure(rc, "checkpoint on close") }
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    var changes: Int { Int(sqlite3_changes(handle)) }

    /// False while a transaction is open (BEGIN without COMMIT or ROLLBACK).
    var isAutocommit: Bool { isClosed || sqlite3_get_autocommit(handle) != 0 }

    private var closedError: StoreError {
        StoreError(message: "the decision store \(path) is closed (the daemon is stopping)", code: SQLITE_MISUSE)
    }

    private func failure(_ rc: Int32, _ sql: String) -> StoreError {
        let statement = sql.prefix(60).split(separator: "\n").first.map(String.init) ?? ""
        let message = String(cString: sqlite3_errmsg(handle))
        let hint = Self.readOnlyHint(path: path, code: rc & 0xff, errno: sqlite3_system_errno(handle))
        return StoreError(message: "\(message) (SQLite error \(rc), in \"\(statement)\")\(hint)", code: rc & 0xff)
    }

    /// For an I/O, read-only or cannot-open error: names a read-only file system
    /// (EROFS from the system call SQLite made, or the directory's file system
    /// mounted read-only), which SQLite reports only as "disk I/O error" or
    /// "attempt to write a readonly database". Empty otherwise.
    static func readOnlyHint(path: String, code: Int32, errno: Int32) -> String {
        guard code == SQLITE_IOERR || code == SQLITE_READONLY || code == SQLITE_CANTOPEN else { return "" }
        let directory = Files.directoryName(path)
        var fs = statvfs()
        let mountedReadOnly = statvfs(directory, &fs) == 0 && (fs.f_flag & UInt(ST_RDONLY)) != 0
        guard errno == EROFS || mountedReadOnly else { return "" }
        return "; the state directory \(directory) is on a read-only file system (EROFS)"
    }

    private func prepared(_ sql: String) throws -> OpaquePointer {
        guard !isClosed else { throw closedError }
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement else { throw failure(rc, sql) }
        statements[sql] = statement
        return statement
    }

    private func bind(_ statement: OpaquePointer, _ values: [Value], _ sql: String) throws {
        // SQLITE_TRANSIENT ((sqlite3_destructor_type)-1) does not import: SQLite copies the text.
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let rc: Int32
            switch value {
            // With its length in bytes, so that the file holds exactly the string the
            // caller (and the in-memory index) has, even one with a NUL inside.
            case .text(let s): rc = sqlite3_bind_text(statement, index, s, Int32(s.utf8.count), transient)
            case .int(let v): rc = sqlite3_bind_int64(statement, index, v)
            case .null: rc = sqlite3_bind_null(statement, index)
            }
            guard rc == SQLITE_OK else { throw failure(rc, sql) }
        }
    }

    /// Runs `sql` to its end, passing each row to `body`. Throws at the first step
    /// that is neither a row nor done, and whatever `body` throws.
    func rows(_ sql: String, _ values: [Value] = [], _ body: (Row) throws -> Void) throws {
        let statement = try prepared(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        try bind(statement, values, sql)
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { return }
            guard rc == SQLITE_ROW else { throw failure(rc, sql) }
            try body(Row(statement: statement))
        }
    }

    /// Runs `sql` to its end; rows it returns are ignored.
    func execute(_ sql: String, _ values: [Value] = []) throws {
        try rows(sql, values) { _ in }
    }

    /// The first column of every row, as text (for pragmas).
    func strings(_ sql: String) throws -> [String] {
        var result: [String] = []
        try rows(sql) { result.append($0.text(0) ?? "") }
        return result
    }

    /// Runs `body` in one write transaction: committed if it returns, rolled back if
    /// it throws. A commit that fails is rolled back too.
    func transaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            // SQLite may have rolled back already (SQLITE_FULL, IOERR): then ROLLBACK
            // itself fails, harmlessly; `endStrayTransaction` checks the outcome.
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// Ends a transaction left open by a failed rollback, so that a later statement
    /// cannot join it and report "done" for a write that is never committed.
    func endStrayTransaction() throws {
        guard !isAutocommit else { return }
        try? execute("ROLLBACK")
        guard isAutocommit else {
            throw StoreError(message: "a transaction is stuck open and cannot be rolled back", code: SQLITE_ERROR)
        }
    }

    /// A row of a running statement; valid only inside the `rows` body.
    struct Row {
        let statement: OpaquePointer

        /// The column's text, or nil unless it is TEXT holding valid UTF-8: a value of
        /// another type or with invalid UTF-8 is not silently converted.
        func text(_ column: Int32) -> String? {
            guard sqlite3_column_type(statement, column) == SQLITE_TEXT,
                  let bytes = sqlite3_column_text(statement, column)
            else { return nil }
            let count = Int(sqlite3_column_bytes(statement, column))
            return String(validating: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
        }

        /// The column's integer, or nil unless it is INTEGER.
        func int(_ column: Int32) -> Int64? {
            sqlite3_column_type(statement, column) == SQLITE_INTEGER ? sqlite3_column_int64(statement, column) : nil
        }

        func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }
    }
}
