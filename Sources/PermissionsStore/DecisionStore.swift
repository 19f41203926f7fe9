package import PermissionsModel
internal import Glibc
internal import PermissionsSupport
internal import SystemPrimitives

/// A stored user decision and where it came from.
package struct StoredDecision: Sendable, Equatable {
    /// The user it belongs to; nil for an unassigned row (see DecisionStore).
    package var uid: UInt32?
    package var appID: String
    package var permission: String
    package var decision: Decision
    /// Microseconds since the Unix epoch.
    package var setAt: Int64
    /// Free text naming who made it, e.g. "uid 0 (/usr/bin/permissionsctl)".
    package var setBy: String
    /// When it stops applying, in microseconds since the Unix epoch; nil = never.
    package var expiresAt: Int64? = nil

    package var key: DecisionKey { DecisionKey(uid: uid, appID, permission) }

    /// Whether it applies at `now`: it has no end, or its end is still to come (as
    /// `DecisionStore.decision` counts it).
    package func isInForce(at now: Int64) -> Bool { expiresAt.map { $0 > now } ?? true }

    package init(uid: UInt32?, appID: String, permission: String, decision: Decision, setAt: Int64, setBy: String,
                 expiresAt: Int64? = nil) {
        (self.uid, self.appID, self.permission, self.decision) = (uid, appID, permission, decision)
        (self.setAt, self.setBy, self.expiresAt) = (setAt, setBy, expiresAt)
    }
}

/// Per-user decisions: one row per (uid, app id, permission) in SQLite, and in
/// memory those of the owners loaded.
///
/// Users: a store written before decisions had users (a table `decisions`) is
/// migrated at open, failing closed: each of its rows becomes *unassigned* (uid -1 in the
/// file, nil here). The service keeps an unassigned deny in force for every user
/// and lets an unassigned grant apply to nobody, until an administrator assigns the
/// row to a user or resets it (see StatusTracker).
///
/// Loading: the open reads the unassigned rows (kept in memory always: a deny
/// counts for every user) and nothing of any user's. A user's rows are read with
/// one query on the primary key (uid, app_id, permission), whose range for one uid
/// is contiguous, by `readRows`, and installed with `install`, when the service
/// first needs them; `evict` lets them go. So start-up costs the same with a
/// million rows as with none: it never scans every row (no `count(*)`, no full
/// read, no `quick_check`, which reads every page).
///
/// Reads come from memory only: once a user is loaded, a fault of the file or the
/// disk can never turn their stored "denied" into "no decision". A read of a user
/// not loaded finds nothing, so the service loads before it reads (see
/// PermissionsService's UserLoads). A load that cannot read every row of the user
/// throws; it never yields a short list. Writes go to SQLite first and change
/// memory only once SQLite has committed them, so memory and file agree: a failed
/// write throws and changes neither.
///
/// Durability: WAL journal with `synchronous=FULL`, so a write is on disk when
/// `write` (or `set`, `reset`, ...) returns; the daemon replies and signals only
/// after that (see DecisionCommitter).
///
/// The daemon is the file's only user: it is opened with `locking_mode=EXCLUSIVE`
/// (set before the first access, which is `journal_mode=WAL`), so that SQLite keeps
/// the WAL index in heap memory and never maps a `-shm` file. Nothing another
/// process does to the state directory can then fault the daemon (a truncated `-shm`
/// was a SIGBUS), and a second process cannot open the store while the daemon runs.
///
/// A file SQLite reports as damaged at the open (not a database, a damaged schema
/// or unassigned rows, a file shorter than its pages), or one shorter than
/// SQLite's header (truncated), is moved aside
/// with its WAL and an empty store started, so a damaged file never stops the
/// daemon from starting (xdg-desktop-portal #627); the
/// store is then `degraded` (every stored deny is gone). It stays degraded, across
/// restarts, while any file moved aside (`<path>.corrupt-*`) is still beside the
/// store: the new store being readable does not bring the old denies back. An
/// administrator ends it by restoring or removing the file, then restarting. Any
/// other failure to load (an I/O error, the file locked by another process, a row
/// this version does not understand) fails the open and leaves the file as it is.
/// Damage on a page of one user's rows is found when that user is loaded: their
/// load fails (the service answers StorageFailed for them alone) and the file is
/// left as it is, since every other user's rows may be whole.
///
/// Not thread-safe. Used on one queue, or, in the daemon, through a
/// `DecisionCommitter`: its writer queue touches only the SQLite connection
/// (`write`, `nextEpoch`, `close`), the serving queue only memory (reads, `apply`).
package final class DecisionStore {
    private let db: SQLiteDatabase
    private var index: DecisionIndex
    /// The serial epoch stored in the meta table (0 if none yet), in
    /// `SerialEpoch.movable` (the load refuses any other).
    private var epoch: Int64
    package let path: String
    /// Why the store is degraded, naming the file moved aside; nil when the store
    /// was read whole and no store moved aside is left beside it.
    package private(set) var degradedReason: String?

    package init(path: String) throws {
        self.path = path
        let loaded: Loaded
        let reason: String?
        do {
            try Self.checkHeaderLength(path)
            loaded = try Self.load(path)
            reason = Self.leftAsideReason(path)
        } catch let error as StoreError where error.isCorruption {
            let aside = "\(path)\(Self.asideInfix)\(currentMicroseconds())"
            try Self.moveAside(path, to: aside, because: error)
            reason = "the decision store was unreadable (\(error)) and was moved to \(aside); "
                + "the decisions stored in it are not in force"
            loaded = try Self.load(path)
        }
        (db, index, epoch) = (loaded.db, loaded.index, loaded.epoch)
        degradedReason = reason
        if let reason {
            logError("DEGRADED: \(reason). While a store moved aside (\(path)\(Self.asideInfix)*) is in the state "
                     + "directory, no request is answered \"authorized\" by a no-agent setting. To end this: "
                     + "inspect it (sqlite3), re-apply the decisions wanted with permissionsctl, remove it "
                     + "(with its -wal), and restart.")
        }
    }

    /// Fails as damage when the file exists but is shorter than SQLite's 100-byte
    /// header: SQLite would take it for a new, empty database, and every stored deny
    /// would be gone without a word (a store truncated to 0 bytes). Only a missing
    /// file is a first start; a new store has its header from its first `journal_mode`
    /// pragma on, so only a crash in the instant between creating it and that pragma
    /// leaves a short file of ours (and reads, fail-closed, as damage).
    private static func checkHeaderLength(_ path: String) throws {
        var st = stat()
        // Missing: a first start. Any other stat error is for the open to report.
        guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_size < sqliteHeaderLength else { return }
        throw StoreError.damaged("\(path) is \(st.st_size) bytes long, shorter than a SQLite header "
                                 + "(\(sqliteHeaderLength) bytes): truncated")
    }

    private static let sqliteHeaderLength = 100

    /// What a store moved aside is named after: `<path>.corrupt-<µs since the epoch>`.
    static let asideInfix = ".corrupt-"

    /// The degraded reason for stores moved aside at an earlier start and still
    /// beside `path` (their denies are still out of force), naming the newest; nil
    /// if there are none. A directory that cannot be listed counts as degraded: the
    /// absence of such a file cannot be known.
    private static func leftAsideReason(_ path: String) -> String? {
        let directory = Files.directoryName(path)
        let prefix = Files.baseName(path) + asideInfix
        let names: [String]
        switch Files.listing(directory) {
        case .failure(let error):
            return "cannot list \(directory) to look for a decision store moved aside (\(prefix)*): \(error); "
                + "the decisions in such a store would not be in force"
        case .success(let all):
            names = all.filter { $0.hasPrefix(prefix) }
        }
        // Newest by the time in the name; of one time, the store rather than its WAL.
        func key(_ name: String) -> (Int64, Int, String) {
            var stamp = name.dropFirst(prefix.count)
            if stamp.hasSuffix("-wal") { stamp = stamp.dropLast(4) }
            return (Int64(stamp) ?? -1, name.hasSuffix("-wal") ? 0 : 1, name)
        }
        guard let newest = names.max(by: { key($0) < key($1) }) else { return nil }
        let others = names.count - 1
        return "\(directory)/\(newest) holds a decision store moved aside as unreadable"
            + (others > 0 ? " (and \(others) other file\(others == 1 ? "" : "s") like it)" : "")
            + "; the decisions stored in it are not in force until it is restored or removed"
    }

    private typealias Loaded = (db: SQLiteDatabase, index: DecisionIndex, epoch: Int64)

    /// Opens the file, sets it up and reads every row.
    private static func load(_ path: String) throws -> Loaded {
        let db = try SQLiteDatabase(path: path)
        // Until every row has loaded, closing must not write: SQLite's close would
        // checkpoint the WAL into a damaged file, or delete a WAL it cannot read,
        // before the file is moved aside with its WAL or left as it is.
        try db.setCheckpointOnClose(false)
        // Before anything reads the file: see the type's comment.
        try db.execute("PRAGMA locking_mode=EXCLUSIVE")
        let mode = try db.strings("PRAGMA journal_mode=WAL")
        guard mode == ["wal"] else {
            throw StoreError(message: "cannot use a write-ahead log for \(path) (journal mode \(mode))")
        }
        // The exclusive lock is held from here on. A -shm beside the file was left by
        // an older version (which mapped it); nothing reads it any more.
        unlink(path + "-shm")
        try db.execute("PRAGMA synchronous=FULL")
        // The WAL kept small (SQLite's default lets it grow to 1 000 pages, 4 MiB):
        // checkpointed into the file once it passes 128 pages (512 KiB), and cut back
        // to that size after. On a disk with less room than the WAL takes, it filled
        // the disk, and once the store had grown since the last checkpoint no
        // checkpoint could run (the file had no room to grow): every write failed.
        try db.execute("PRAGMA wal_autocheckpoint=128")
        try db.execute("PRAGMA journal_size_limit=524288")
        try db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID")
        try checkPageCount(db, path)
        try upgradeSchema(db, path)

        var index = DecisionIndex()
        index.install(nil, try readRows(db, path, owner: -1))
        var epoch: Int64 = 0
        try db.rows("SELECT value FROM meta WHERE key = 'serial-epoch'") { row in
            guard let value = row.int(0) else {
                throw StoreError(message: "\(path) has a serial epoch that is not an integer; left as it is")
            }
            // Refused here, before anything is served: a start needs the next one.
            guard SerialEpoch.movable.contains(value) else { throw SerialEpochError.outOfRange(value, path: path) }
            epoch = value
        }
        // Everything into the main file, so that the WAL holds only what changed since
        // this start. A failure here is no reason not to serve: writes will tell.
        do {
            try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        } catch {
            logWarning("cannot checkpoint the decision store \(path): \(error)")
        }
        try db.setCheckpointOnClose(true)
        return (db, index, epoch)
    }

    /// The cheap part of the check at open: a file shorter than the pages its
    /// header counts was cut short (a copy that stopped, a full disk), and reading
    /// the pages past its end would find zeros. Only with no WAL left from the last
    /// run (a clean stop checkpoints and empties it): frames in a WAL may hold the
    /// file's last pages. Damage inside a page is found by the query that reads it.
    private static func checkPageCount(_ db: SQLiteDatabase, _ path: String) throws {
        var st = stat()
        guard stat(path + "-wal", &st) != 0 || st.st_size == 0 else { return }
        var pages: Int64 = 0, size: Int64 = 0
        try db.rows("PRAGMA page_count") { pages = $0.int(0) ?? 0 }
        try db.rows("PRAGMA page_size") { size = $0.int(0) ?? 0 }
        guard stat(path, &st) == 0, Int64(st.st_size) < pages * size else { return }
        throw StoreError.damaged("\(path) is \(st.st_size) bytes long, shorter than its \(pages) pages of \(size) bytes: "
                                 + "truncated")
    }

    /// Every row of one owner (`owner` as stored: a uid, or -1 for the unassigned
    /// rows), read on the primary key's range for it. Throws rather than return a
    /// short list: at the first row that cannot be read (damage: SQLite's error), or
    /// that this version does not understand.
    private static func readRows(_ db: SQLiteDatabase, _ path: String, owner: Int64) throws -> PackedRows {
        var rows = PackedRows()
        try db.rows("SELECT app_id, permission, decision, set_at, set_by, expires_at, uid FROM user_decisions "
                    + "WHERE uid = ?1", [.int(owner)]) { rows.append(try decoded($0, path)) }
        return rows
    }

    /// Every row of every owner, or of one app, in `DecisionKey` order (SQLite's
    /// BINARY order of app_id and permission, then the owner, -1 first).
    private static func readAll(_ db: SQLiteDatabase, _ path: String, app: String?) throws -> [StoredDecision] {
        var rows: [StoredDecision] = []
        let columns = "SELECT app_id, permission, decision, set_at, set_by, expires_at, uid FROM user_decisions"
        let order = " ORDER BY app_id, permission, uid"
        if let app {
            try db.rows(columns + " WHERE app_id = ?1" + order, [.text(app)]) { rows.append(try decoded($0, path)) }
        } else {
            try db.rows(columns + order) { rows.append(try decoded($0, path)) }
        }
        return rows
    }

    /// One row as read, checked: a value of an unexpected type, or a decision word
    /// this version does not know, throws.
    private static func decoded(_ row: SQLiteDatabase.Row, _ path: String) throws -> StoredDecision {
        guard let app = row.text(0), let permission = row.text(1), let word = row.text(2),
              let setAt = row.int(3), let setBy = row.text(4), row.isNull(5) || row.int(5) != nil,
              let owner = row.int(6), owner >= -1, owner < Int64(UInt32.max)
        else {
            throw StoreError(message: "\(path) has a decision row with a value of an unexpected type "
                             + "(app id \"\((row.text(0) ?? "?").escapedForMessage)\"); left as it is")
        }
        // Fail closed: a word this version does not know (a newer version's file, an
        // edit) might mean "deny"; guessing or skipping it could grant.
        guard let decision = Decision(rawValue: word) else {
            throw StoreError(message: "\(path) has an unknown decision \"\(word.escapedForMessage)\" for "
                             + "\"\(app.escapedForMessage)\" / \"\(permission.escapedForMessage)\"; left as it is")
        }
        return StoredDecision(uid: owner == -1 ? nil : UInt32(owner), appID: app, permission: permission,
                              decision: decision, setAt: setAt, setBy: setBy, expiresAt: row.isNull(5) ? nil : row.int(5))
    }

    /// The decisions table of this version, `user_decisions`. The owner: a uid, or
    /// -1 for an unassigned row (uid_t's -1 is no user's, so never a real owner).
    private static let userDecisionsTable = """
        CREATE TABLE user_decisions (
            uid INTEGER NOT NULL CHECK (uid >= -1 AND uid < 4294967295),
            app_id TEXT NOT NULL,
            permission TEXT NOT NULL,
            decision TEXT NOT NULL CHECK (decision IN ('authorized', 'denied')),
            set_at INTEGER NOT NULL,
            set_by TEXT NOT NULL,
            expires_at INTEGER,
            PRIMARY KEY (uid, app_id, permission)
        ) WITHOUT ROWID
        """

    /// What an older daemon finds under the name it reads, `decisions`: a view with
    /// one row whose decision word it does not know, so that it refuses to start
    /// and leaves the file alone (its own fail-closed rule) rather than read every
    /// user's rows as everybody's. A downgrade then fails loudly instead of lending
    /// one user's grants to all.
    private static let olderDaemonTripwire = """
        CREATE VIEW decisions (app_id, permission, decision, set_at, set_by, expires_at) AS
        SELECT 'this store keeps decisions per user (table user_decisions)', 'any',
               'needs-a-permissionsd-with-users', 0, '', NULL
        """

    /// Brings the file to this version's layout:
    /// - new: `user_decisions` and the tripwire view;
    /// - a store from before users (a table `decisions`): its rows, brought up to
    ///   the last layout without users first (expires_at, no expiry index), move to
    ///   `user_decisions` as unassigned rows (see the type's comment), in one
    ///   transaction, and the table gives way to the tripwire; nothing is lost, and
    ///   an interrupted migration leaves the old table as it was;
    /// - the tripwire view missing (dropped by hand): made again.
    /// A file with both an old `decisions` table and `user_decisions` is refused
    /// and left alone: an older daemon has written to it since, and which rows
    /// hold cannot be known.
    private static func upgradeSchema(_ db: SQLiteDatabase, _ path: String) throws {
        let old = try db.strings("SELECT type FROM sqlite_master WHERE name = 'decisions'")
        let current = try !db.strings("SELECT name FROM sqlite_master WHERE name = 'user_decisions'").isEmpty
        switch (old, current) {
        case (["table"], true):
            throw StoreError(message: "\(path) has both a per-user table (user_decisions) and a table of an older "
                             + "daemon (decisions); left as it is")
        case (["table"], false):
            // Schema version 1 had no expires_at.
            if try !db.strings("SELECT name FROM pragma_table_info('decisions')").contains("expires_at") {
                try db.execute("ALTER TABLE decisions ADD COLUMN expires_at INTEGER")
            }
            // Version 2 indexed expires_at for its queries; reads come from memory now.
            try db.execute("DROP INDEX IF EXISTS decisions_expiry")
            let count = try db.transaction { () throws -> Int in
                try db.execute(userDecisionsTable)
                try db.execute("""
                    INSERT INTO user_decisions (uid, app_id, permission, decision, set_at, set_by, expires_at)
                    SELECT -1, app_id, permission, decision, set_at, set_by, expires_at FROM decisions
                    """)
                let moved = db.changes
                try db.execute("DROP TABLE decisions")
                try db.execute(olderDaemonTripwire)
                return moved
            }
            logWarning("\(path): migrated \(count) decision(s) from a store without users; they are unassigned: "
                       + "a deny stays in force for every user, a grant applies to nobody, until an administrator "
                       + "assigns or resets it (permissionsctl list --all)")
        case (_, false):
            try db.transaction {
                try db.execute(userDecisionsTable)
                if old.isEmpty { try db.execute(olderDaemonTripwire) }
            }
        case (_, true):
            if old.isEmpty { try db.execute(olderDaemonTripwire) }
        }
    }

    /// Moves a damaged store and its WAL to `aside`. Fails closed: if the file cannot
    /// be moved, it is neither deleted nor overwritten, and the open fails (the daemon
    /// does not start) rather than start empty over it.
    private static func moveAside(_ path: String, to aside: String, because error: StoreError) throws {
        guard rename(path, aside) == 0 else {
            throw StoreError(message: "the decision store \(path) is unreadable (\(error)) and cannot be moved "
                             + "aside to \(aside): \(errnoName(errno)); left as it is")
        }
        // An empty WAL (the one the failed open made) holds nothing to keep.
        if let wal = Files.linkStatus(path + "-wal"), (wal.st_mode & S_IFMT) == S_IFREG, wal.st_size == 0 {
            unlink(path + "-wal")
        }
        // The WAL goes with it: left here, SQLite would replay it into the new store.
        if rename(path + "-wal", aside + "-wal") != 0, errno != ENOENT {
            let why = errnoName(errno)
            let undone = rename(aside, path) == 0 ? "moved it back" : "it stays at \(aside)"
            throw StoreError(message: "the decision store \(path) is unreadable (\(error)); cannot move its WAL "
                             + "aside: \(why); \(undone)")
        }
        unlink(path + "-shm")
    }

    // MARK: Loading users, from the file to memory

    /// Reads every row of `uid` from the file (not into memory: see `install`).
    /// Touches only the SQLite connection (see DecisionCommitter). Throws on damage
    /// or a row this version does not understand; never returns a short list.
    func readRows(uid: UInt32) throws -> PackedRows {
        try db.endStrayTransaction()
        return try Self.readRows(db, path, owner: Int64(uid))
    }

    /// Every row in the file, of every owner or of one app, in `DecisionKey` order,
    /// loaded or not (ListAllDecisions: admins). Touches only the SQLite connection.
    package func readAll(app: String?) throws -> [StoredDecision] {
        try db.endStrayTransaction()
        return try Self.readAll(db, path, app: app)
    }

    /// Makes `rows`, all of `uid`'s as `readRows` read them, their rows in memory.
    /// Touches only memory.
    func install(uid: UInt32, rows: PackedRows) { index.install(uid, rows) }

    /// Lets `uid`'s rows go from memory (the file keeps them). Touches only memory.
    package func evict(uid: UInt32) { index.evict(uid) }

    /// Whether `uid`'s rows are in memory. Touches only memory.
    package func isLoaded(uid: UInt32) -> Bool { index.isLoaded(uid) }

    /// The users whose rows are in memory, in order.
    package var loadedUsers: [UInt32] { index.loadedUsers }

    /// How many rows are in memory (the unassigned ones and the loaded users').
    package var rowsInMemory: Int { index.rowCount }

    /// How many distinct names (app ids, permissions, setters) are in memory: only
    /// those of the rows in memory.
    package var namesInMemory: Int { index.namesHeld }

    /// Reads and installs `uid`'s rows, on the caller's queue: for a store used on
    /// one queue (tests, tools).
    package func load(uid: UInt32) throws {
        install(uid: uid, rows: try readRows(uid: uid))
    }

    // MARK: Reads, from memory

    /// The row of exactly this key, if in force: an expired one does not count.
    package func decision(_ key: DecisionKey, now: Int64 = currentMicroseconds()) -> StoredDecision? {
        index.decision(key, now: now)
    }

    /// Every stored decision of every owner in memory, or one app's, in
    /// `DecisionKey` order (expired ones too, until the expiry timer removes them).
    package func list(app: String? = nil) -> [StoredDecision] { index.list(app: app) }

    /// Decisions whose time has come (expires_at <= now), for the expiry timer.
    package func expired(now: Int64 = currentMicroseconds()) -> [StoredDecision] { index.expired(now: now) }

    /// The earliest expiry of a stored decision, if any (it may already be due).
    package func nextExpiry() -> Int64? { index.nextExpiry() }

    // MARK: Writes, to the file and then to memory

    /// The owner as stored: the uid, or -1 for an unassigned row.
    private static func owner(_ uid: UInt32?) -> SQLiteDatabase.Value { .int(uid.map { Int64($0) } ?? -1) }

    /// Stores a decision durably (replaces an earlier one for the same key).
    package func set(_ key: DecisionKey, decision: Decision, setBy: String, expiresAt: Int64? = nil) throws {
        let row = StoredDecision(uid: key.uid, appID: key.app, permission: key.permission, decision: decision,
                                 setAt: currentMicroseconds(), setBy: setBy, expiresAt: expiresAt)
        _ = try commitNow(.set(row))
    }

    /// Deletes one decision if it is still the same (an expiry must not remove a
    /// newer decision made meanwhile).
    package func remove(_ decision: StoredDecision) throws {
        _ = try commitNow(.remove(decision))
    }

    /// Removes one owner's decisions of `app` for the given permissions (all when
    /// empty); returns how many rows went, in one transaction.
    package func reset(uid: UInt32?, app: String, permissions: [String]) throws -> Int {
        try commitNow(.reset(uid: uid, app: app, permissions: permissions))
    }

    /// Gives the unassigned rows of `app` for `permissions` (all when empty) to
    /// `uid`, in one transaction; where the user has a row of their own for the
    /// same permission, theirs stays (it was made later) and the unassigned row
    /// goes. Returns how many unassigned rows were settled.
    package func assign(app: String, permissions: [String], to uid: UInt32) throws -> Int {
        try commitNow(.assign(app: app, permissions: permissions, to: uid))
    }

    /// A write to the file and then to memory, on the caller's queue: for a store
    /// used on one queue (tests, tools). The daemon commits through a
    /// `DecisionCommitter`, which calls the two halves on two queues.
    ///
    /// The owner is loaded first, as the service loads one before it writes: what
    /// the write touches, and how many rows it counts, are in memory.
    private func commitNow(_ change: DecisionWrite) throws -> Int {
        let owner: UInt32? = switch change {
        case .set(let row), .remove(let row): row.uid
        case .reset(let uid, _, _): uid
        case .assign(_, _, let uid): uid
        }
        if let owner, !isLoaded(uid: owner) { try load(uid: owner) }
        return apply(change, rowsInFile: try write([change])[0])
    }

    /// Commits `writes` to the file in one transaction (one fsync): all of them or,
    /// if any fails, none. Memory is not touched: `apply` each afterwards, in order.
    /// Touches only the SQLite connection (see DecisionCommitter).
    ///
    /// A disk too full for the WAL: the WAL is checkpointed into the file only after
    /// a commit that leaves it longer than 1 000 pages (about 4 MiB), so on a disk
    /// with less room it grew until every commit failed, for good, however small the
    /// store. On SQLITE_FULL the WAL is checkpointed into the file and truncated,
    /// which frees its room, and the commit tried once more (the failed one changed
    /// nothing).
    ///
    /// Returns how many rows of the file each write changed, in order.
    @discardableResult
    package func write(_ writes: [DecisionWrite]) throws -> [Int] {
        func commit() throws -> [Int] {
            try db.endStrayTransaction()
            var counts: [Int] = []
            try db.transaction {
                for change in writes { counts.append(try execute(change)) }
            }
            return counts
        }
        do {
            return try commit()
        } catch let error as StoreError where error.isDiskFull {
            guard (try? db.execute("PRAGMA wal_checkpoint(TRUNCATE)")) != nil else { throw error }
            return try commit()
        }
    }

    /// Applies a write that `write` committed to memory; how many rows it touched.
    /// Touches only memory (see DecisionCommitter).
    package func apply(_ change: DecisionWrite) -> Int {
        index.apply(change)
    }

    /// `apply`, with how many rows of the file the write changed (`write`'s count):
    /// a reset of a user who is not loaded (one whose rows cannot be read: see
    /// `PermissionsService.resetDecisions`) touched nothing in memory, and counts
    /// what went from the file.
    package func apply(_ change: DecisionWrite, rowsInFile: Int) -> Int {
        let touched = apply(change)
        if case .reset(let uid?, _, _) = change, !isLoaded(uid: uid) { return rowsInFile }
        return touched
    }

    /// A write's statements. Each names its rows by what they are (owner, app,
    /// permission), never by a list read from memory, which may be behind the file
    /// while a group of writes is being committed.
    /// Returns how many rows the statements changed.
    private func execute(_ change: DecisionWrite) throws -> Int {
        var changed = 0
        func run(_ sql: String, _ values: [SQLiteDatabase.Value]) throws {
            try db.execute(sql, values)
            changed += db.changes
        }
        switch change {
        case .set(let row):
            try run("INSERT OR REPLACE INTO user_decisions (uid, app_id, permission, decision, set_at, set_by, "
                    + "expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    [Self.owner(row.uid), .text(row.appID), .text(row.permission), .text(row.decision.rawValue),
                     .int(row.setAt), .text(row.setBy), row.expiresAt.map { .int($0) } ?? .null])
        case .remove(let row):
            try run("DELETE FROM user_decisions WHERE uid = ?1 AND app_id = ?2 AND permission = ?3 "
                    + "AND set_at = ?4",
                    [Self.owner(row.uid), .text(row.appID), .text(row.permission), .int(row.setAt)])
        case .reset(let uid, let app, let permissions):
            let owner: [SQLiteDatabase.Value] = [Self.owner(uid), .text(app)]
            if permissions.isEmpty {
                try run("DELETE FROM user_decisions WHERE uid = ?1 AND app_id = ?2", owner)
            }
            for permission in permissions {
                try run("DELETE FROM user_decisions WHERE uid = ?1 AND app_id = ?2 AND permission = ?3",
                        owner + [.text(permission)])
            }
        case .assign(let app, let permissions, let uid):
            let pair: [SQLiteDatabase.Value] = [Self.owner(uid), .text(app)]
            // The user's own row of the same permission, if any, stays: it was made later.
            if permissions.isEmpty {
                try run("UPDATE user_decisions SET uid = ?1 WHERE uid = -1 AND app_id = ?2 AND NOT EXISTS "
                        + "(SELECT 1 FROM user_decisions AS own WHERE own.uid = ?1 AND own.app_id = ?2 "
                        + "AND own.permission = user_decisions.permission)", pair)
                try run("DELETE FROM user_decisions WHERE uid = -1 AND app_id = ?1", [.text(app)])
            }
            for permission in permissions {
                try run("UPDATE user_decisions SET uid = ?1 WHERE uid = -1 AND app_id = ?2 AND permission = ?3 "
                        + "AND NOT EXISTS (SELECT 1 FROM user_decisions WHERE uid = ?1 AND app_id = ?2 "
                        + "AND permission = ?3)", pair + [.text(permission)])
                try run("DELETE FROM user_decisions WHERE uid = -1 AND app_id = ?1 AND permission = ?2",
                        [.text(app), .text(permission)])
            }
        }
        return changed
    }

    /// Moves the serial epoch on (see SerialEpoch.next: the stored one plus one, or
    /// the clock's seconds when larger), stores it, and returns it. One write per
    /// daemon start. Throws `SerialEpochError`: `outOfRange` when the stored epoch
    /// has no next one, `notStored` when the write fails (the epoch is then not
    /// moved on). The WAL is checkpointed after, as at the load, so that it holds
    /// only what changed since the start began serving.
    package func nextEpoch(clockSeconds: Int64) throws -> UInt32 {
        let next = try epochAfter(clockSeconds: clockSeconds)
        try storeEpoch(next)
        return next
    }

    /// The epoch `nextEpoch` would store, without storing it; throws
    /// `SerialEpochError.outOfRange` when there is none.
    package func epochAfter(clockSeconds: Int64) throws -> UInt32 {
        guard let next = SerialEpoch.next(after: epoch, clockSeconds: clockSeconds) else {
            throw SerialEpochError.outOfRange(epoch, path: path)
        }
        return next
    }

    /// `nextEpoch`'s write: stores `next` (from `epochAfter`), then checkpoints.
    package func storeEpoch(_ next: UInt32) throws {
        try commitEpoch(next)
        checkpointAfterEpoch()
    }

    /// Stores `next` (from `epochAfter`) as the serial epoch: durable when this
    /// returns, as every commit is (WAL, `synchronous=FULL`), checkpointed or not.
    package func commitEpoch(_ next: UInt32) throws {
        do {
            try db.endStrayTransaction()
            try db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('serial-epoch', ?1)", [.int(Int64(next))])
        } catch {
            throw SerialEpochError.notStored(next, path: path, why: "\(error)")
        }
        epoch = Int64(next)
    }

    /// Checkpoints the WAL into the file and empties it after the epoch's commit,
    /// as at the load, so that it holds only what changed since the start began
    /// serving. A failure is logged: writes will tell.
    package func checkpointAfterEpoch() {
        do {
            try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        } catch {
            logWarning("cannot checkpoint the decision store \(path): \(error)")
        }
    }

    /// For a clean stop: checkpoints the WAL into the file and closes it, so that
    /// `decisions.sqlite` alone holds every decision (a copy of it, or a WAL lost
    /// between runs, loses nothing), and the EXCLUSIVE lock, held through the file
    /// descriptor, is released even if the process lingers after `_exit` (a thread
    /// stuck in the kernel on a caller's FUSE file system keeps the fd table alive).
    /// A checkpoint that fails is logged and the store closed anyway; SQLite's
    /// close tries the checkpoint once more. Every write after this throws.
    package func close() {
        guard !db.isClosed else { return }
        do {
            // One row: busy (1 if it could not finish), WAL frames, frames checkpointed.
            var busy: Int64 = 0
            try db.rows("PRAGMA wal_checkpoint(TRUNCATE)") { busy = $0.int(0) ?? 1 }
            if busy != 0 { logWarning("cannot checkpoint the decision store \(path) at stop: the WAL is in use") }
        } catch {
            logWarning("cannot checkpoint the decision store \(path) at stop: \(error)")
        }
        if let error = db.close() { logWarning("\(error)") }
    }

    /// For tests: runs SQL on the store's own connection (e.g. to make it fail).
    func executeForTesting(_ sql: String) throws {
        try db.execute(sql)
    }
}

package func currentMicroseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000
}
