#include <sqlite3.h>

/* sqlite3_db_config is variadic, which Swift cannot call: one shim per option used.
 * Whether closing the last connection checkpoints the WAL into the database file
 * and deletes the WAL (SQLite's default: on). */
static inline int csqlite_set_checkpoint_on_close(sqlite3 *db, int on) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, on ? 0 : 1, (int *)0);
}
