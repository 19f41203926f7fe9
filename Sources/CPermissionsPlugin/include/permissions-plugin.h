/* SPDX-License-Identifier: MIT */
/*
 * permissions-plugin.h: the plugin ABI of permissionsd, version 1.
 *
 * A plugin is a shared library named libpermissions-<name>.so in one of the
 * daemon's plugin directories. It exports exactly one symbol,
 * PERMISSIONS_PLUGIN_ENTRY ("permissions_plugin_entry_v1"), a function that
 * returns a pointer to a static struct permissions_plugin describing it. A plugin
 * can be written in C, Swift or any language with a C ABI; it needs only this
 * header.
 *
 * MODEL
 *   A plugin is the source of truth for the permissions it names (say "camera").
 *   It does not answer queries: it *publishes* a snapshot of each permission's state
 *   whenever that state changes (a device appeared, a config file was edited), and
 *   the daemon combines the snapshot with the user's stored decision:
 *
 *     unsupported > disabled > restricted (admin deny) > admin allow
 *                 > stored user decision > not-determined
 *
 *   The daemon keeps the last snapshot of each permission, diffs it against the new
 *   one, and emits exactly one StatusChanged D-Bus signal per real change. A plugin
 *   may therefore publish freely (the same snapshot twice costs no signal), but a
 *   storm of publications still costs the daemon work.
 *
 * LIFECYCLE
 *   1. The host dlopen()s the file (RTLD_NOW | RTLD_LOCAL), calls the entry point
 *      and checks the descriptor: ABI version, struct_size, name equal to the
 *      file's <name>, permission names, no permission another plugin provides.
 *   2. init(host, &state): start; publish a first snapshot of every permission.
 *   3. configure(state, config): right after init, and after every change of the
 *      configuration files.
 *   4. fini(state): at shutdown, or when the file is removed or replaced.
 *   The library is never dlclose()d: code of a stopped plugin stays mapped.
 *
 * CONFIGURATION
 *   Configuration is the daemon's: permissions.conf and permissions.conf.d/NAME.conf
 *   in its config directory, keyfile syntax. configure() receives every key of the
 *   sections named like the plugin or like one of its permissions, already parsed
 *   (values unescaped, and trimmed of leading and trailing spaces and tabs), each
 *   with its origin "FILE:LINE" to quote in messages.
 *   A plugin validates the values; on a bad one it logs the origin and the reason
 *   (PERMISSIONS_LOG_ERR: the daemon quotes that line in its ConfigStatus), keeps its
 *   last good configuration and returns -EINVAL. A configuration applies whole or
 *   not at all: when another plugin refuses it, configure() is called again with
 *   the last good configuration. The daemon keeps some keys for itself
 *   ([service], [permissions], and no-agent= in any section).
 *
 * VERSIONING
 *   Every struct starts with { uint32_t abi_version; uint32_t struct_size; }.
 *   A compatible change only appends fields to a struct and bumps nothing else:
 *   a reader checks struct_size before touching a field beyond the ones it was built
 *   with (PERMISSIONS_HAS_FIELD), and a host reads an older plugin's shorter
 *   descriptor the same way. Enum values are only added; an unknown value is
 *   refused (the publication is ignored), never guessed at. An incompatible change
 *   gets a new entry symbol (_v2) and ABI version; the host then keeps loading _v1
 *   plugins through an adapter for as long as it can.
 *
 * THREADS
 *   Each plugin has its own thread in the host: dlopen's constructors, the entry
 *   point, init, configure and fini all run there, one at a time, never on the
 *   daemon's dispatch thread. A call that has not returned within 2 seconds makes
 *   the plugin "unavailable": the host stops listening to it (its thread is left
 *   blocked) and its permissions read "unsupported". So init must not wait for a
 *   slow backend: a plugin that does I/O runs its own thread or event loop and
 *   publishes when it knows.
 *   The host functions (log, publish) may be called from any thread, at any time
 *   between init's start and fini's return; they never block. After fini, or once
 *   the plugin is unavailable, they are ignored (publish returns -ESHUTDOWN).
 *
 * LIMITS
 *   More than 1000 publications in one second makes a plugin unavailable (a storm
 *   must not starve the daemon); publications of the same permission that arrive
 *   faster than the daemon applies them are coalesced to the latest. More than 50
 *   log lines a second are dropped (and counted in a later line).
 *
 * FAULTS
 *   A plugin runs inside the daemon. A plugin that crashes (a bad pointer, abort())
 *   takes the daemon down with it; the service manager restarts it (Restart=, D-Bus
 *   activation) and no decision is lost: each is on disk (SQLite, WAL journal,
 *   synchronous=FULL) before the call that made it returns. Everything short of a
 *   crash (a failing, blocking, flooding plugin, or values outside this ABI) is
 *   contained: logged, the plugin marked unavailable, the others served.
 *
 * OWNERSHIP
 *   The descriptor and every string in it live as long as the library is loaded.
 *   Pointers passed across a call (snapshots, config entries, messages) are borrowed
 *   for that call only: the receiver copies what it keeps. The host never frees
 *   plugin memory and the plugin never frees host memory.
 *
 * ERRORS
 *   Functions that can fail return 0 on success or a negative errno. From init,
 *   -ENOTSUP or -ENODEV mean "not available on this system": the host logs that
 *   quietly; the plugin's permissions read "unsupported".
 */
#ifndef PERMISSIONS_PLUGIN_H
#define PERMISSIONS_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PERMISSIONS_PLUGIN_ABI_VERSION 1u

/* The one symbol a plugin exports. */
#define PERMISSIONS_PLUGIN_ENTRY "permissions_plugin_entry_v1"

/* True when a struct of the given (reported) size contains `field`. */
#define PERMISSIONS_HAS_FIELD(ptr, type, field) \
    ((ptr)->struct_size >= offsetof(type, field) + sizeof(((type *)0)->field))

/* State of the device or service behind a permission, for every app. */
enum permissions_service_state {
    PERMISSIONS_SERVICE_AVAILABLE = 0,   /* the app's own decision applies */
    PERMISSIONS_SERVICE_DISABLED = 1,    /* switched off for everyone: "disabled" */
    PERMISSIONS_SERVICE_UNSUPPORTED = 2, /* nothing to use: "unsupported" */
};

/* An administrator's entry for one app. */
enum permissions_policy {
    PERMISSIONS_POLICY_NONE = 0,         /* no entry: the user's decision applies */
    PERMISSIONS_POLICY_RESTRICTED = 1,   /* locked deny: "restricted" */
    PERMISSIONS_POLICY_ALLOW = 2,        /* forced allow: "authorized" */
};

/* A key and a value, both UTF-8; used for details and for devices. */
struct permissions_kv {
    const char *key;
    const char *value;
};

struct permissions_app_policy {
    const char *app_id;
    int32_t policy;                      /* enum permissions_policy */
};

/* One device behind a permission (a camera node, a bluetooth adapter), described
 * by key/value pairs such as "name" and "description". */
struct permissions_device {
    uint32_t n_properties;
    const struct permissions_kv *properties;
};

/* Everything a plugin knows about one permission, published as a whole. */
struct permissions_snapshot {
    uint32_t abi_version;
    uint32_t struct_size;
    const char *permission;              /* one of the plugin's permissions */
    int32_t service_state;               /* enum permissions_service_state */
    uint32_t n_policies;                 /* per-app admin entries, app ids unique */
    const struct permissions_app_policy *policies;
    uint32_t n_details;                  /* shown by GetDetails, e.g. "max-accuracy" */
    const struct permissions_kv *details;
    uint32_t n_devices;
    const struct permissions_device *devices;
};

/* One key of the daemon's configuration, from a [section] named like one of the
 * plugin's permissions or like the plugin itself. */
struct permissions_config_entry {
    const char *section;
    const char *key;
    const char *value;                   /* raw keyfile value, unescaped */
    const char *origin;                  /* "FILE:LINE", for error messages */
};

struct permissions_config {
    uint32_t abi_version;
    uint32_t struct_size;
    uint32_t n_entries;
    const struct permissions_config_entry *entries;
};

/* syslog(3) priorities, for host->log. */
#define PERMISSIONS_LOG_ERR 3
#define PERMISSIONS_LOG_WARNING 4
#define PERMISSIONS_LOG_INFO 6
#define PERMISSIONS_LOG_DEBUG 7

/* What the daemon gives a plugin. Valid from init until fini returns. */
struct permissions_host {
    uint32_t abi_version;
    uint32_t struct_size;
    void *host_data;                     /* pass back as the first argument */
    /* Log one line (no trailing newline) under the plugin's name. Any thread. */
    void (*log)(void *host_data, int priority, const char *message);
    /* Replace the snapshot of one permission. Any thread; never blocks.
     * Returns 0; -EINVAL for a permission the plugin did not declare or a value
     * outside the enums above: the snapshot is ignored and the plugin, which broke
     * the ABI, is made unavailable; -ESHUTDOWN after fini or once the plugin is
     * unavailable; -EBUSY when this call made the plugin unavailable for flooding. */
    int (*publish)(void *host_data, const struct permissions_snapshot *snapshot);
};

/* The descriptor a plugin returns from its entry point. */
struct permissions_plugin {
    uint32_t abi_version;                /* PERMISSIONS_PLUGIN_ABI_VERSION */
    uint32_t struct_size;                /* sizeof(struct permissions_plugin) */
    const char *name;                    /* must equal <name> in libpermissions-<name>.so */
    const char *version;                 /* the plugin's own version, free text */
    const char *description;
    const char *const *permissions;      /* NULL-terminated; [a-z][a-z0-9-]{0,63} */
    /* Start. Store private state in *ret_state (may stay NULL). Should publish a
     * first snapshot of every permission, now or soon; until then the host reports
     * the permission as "unsupported". */
    int (*init)(const struct permissions_host *host, void **ret_state);
    /* Apply configuration: called after a successful init and after every change of
     * the daemon's configuration files. Returning a negative errno rejects the new
     * configuration: the plugin keeps its last good one and logs why, quoting the
     * entry's origin. May be NULL. */
    int (*configure)(void *state, const struct permissions_config *config);
    /* Stop: join threads, free state. No host call after it returns. May be NULL. */
    void (*fini)(void *state);
};

typedef const struct permissions_plugin *(*permissions_plugin_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* PERMISSIONS_PLUGIN_H */
