/* SPDX-License-Identifier: MIT */
/*
 * permissions-plugin.h: the plugin ABI of permissionsd, version 1.
 *
 * A plugin is a shared library named libpermissions-<name>.so in one of the
 * daemon's plugin directories. It exports exactly one symbol,
 * PERMISSIONS_PLUGIN_ENTRY ("permissions_plugin_entry_v1", declared at the end of
 * this header), a function that returns a pointer to a static struct
 * permissions_plugin describing it. A plugin can be written in C, Swift or any
 * language with a C ABI; it needs only this header.
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
 *   1. The host checks the file (owner, mode, directory: see doc/admin.md, "Trust"), reads
 *      it, and dlopen()s a private copy of what it read (RTLD_NOW | RTLD_LOCAL),
 *      calls the entry point and checks the descriptor: ABI version, struct_size,
 *      name equal to the file's <name>, permission names, no permission another
 *      plugin provides.
 *   2. init(host, &state): start; publish a first snapshot of every permission.
 *   3. configure(state, config): right after init, and after every change of the
 *      configuration files. Until this first configure has returned, the plugin's
 *      permissions do not exist for apps: what init publishes is held back, so an
 *      administrator's settings are in force from the first moment.
 *   4. fini(state): at shutdown, or when the file is removed or replaced. At
 *      shutdown every plugin's fini is called at once, and the daemon exits after
 *      2 seconds at most, whether each has returned or not. A replacement (a new
 *      file, or another directory's copy taking over) is started and configured
 *      before the old copy's fini: for that moment both run, each in its own copy
 *      of the library, with its own static data.
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
 *   validate(state, config) (ABI 1.1, optional) checks a configuration without
 *   applying it: the host calls it, between init and fini, with a configuration it
 *   means to apply, so that a configuration one plugin rejects is applied to none.
 *   It makes the same checks as configure, and changes nothing: it publishes
 *   nothing, keeps nothing, and logs nothing about the values. It reports each
 *   problem through config->problem, one line "FILE:LINE: reason" (the entry's
 *   origin first), and returns 0 if configure would accept the configuration,
 *   else -EINVAL. A problem reported makes the configuration rejected whatever
 *   validate returns, and -EINVAL without a report is rejected with a line of the
 *   host's. A plugin without validate is checked by configure alone, as in ABI 1.
 *
 * VERSIONING
 *   This is ABI 1. Every struct handed across (the descriptor, a snapshot, the
 *   host's struct, a configuration) starts with { uint32_t abi_version; uint32_t
 *   struct_size; }: 1, and the sizeof of the struct as the writer's copy of this
 *   header declares it. The structs as ABI 1 first shipped them are the "v1
 *   layout"; their sizes are the PERMISSIONS_*_V1_SIZE constants below. Fields
 *   added since are marked with the version that added them ("ABI 1.1", "ABI 1.2",
 *   "ABI 1.3").
 *
 *   What a later version of this header may do, without a new ABI:
 *   - append a field at the end of a struct, at or after the struct's previous
 *     sizeof: never inside its tail padding, which older writers leave
 *     uninitialised (declare explicit padding first where alignment would put the
 *     new field there);
 *   - append fields to an array element (permissions_app_policy, permissions_kv,
 *     permissions_device) the same way: each array is walked by the element size
 *     ("stride") its parent declares, policy_size, kv_size and device_size in the
 *     snapshot; kv_size applies to the details and to every device's properties;
 *   - add enum values.
 *   Nothing else changes: no field moves, shrinks, changes type or meaning.
 *   permissions_config_entry does not grow within ABI 1 (plugins built before
 *   strides existed index it by its v1 size): new data per entry would come as a
 *   parallel array appended to permissions_config.
 *
 *   How the reader of a struct someone else wrote reads it (the host reads the
 *   descriptor and snapshots, a plugin reads the host's struct and configuration):
 *   - abi_version other than 1, or a struct_size below the v1 size, is refused;
 *   - it reads a field only when struct_size covers it (PERMISSIONS_HAS_FIELD); a
 *     field it knows that the size does not cover has its documented default;
 *   - it never copies the struct whole at its own sizeof: the writer's may be
 *     shorter (an older header) or longer (a newer one, whose extra fields the
 *     reader ignores);
 *   - it walks an array by the stride: 0, or a stride field the struct_size does
 *     not cover, means the v1 element size; a stride below the v1 element size,
 *     or not a multiple of a pointer's alignment, is refused.
 *   So the host loads a plugin built against an older or a newer ABI 1 header
 *   alike. A writer sets struct_size and every stride to the sizeof of its own
 *   structs (PERMISSIONS_SNAPSHOT_INIT does it for a snapshot); a stride left 0
 *   is right only while that element struct has its v1 size. Write the structs
 *   with designated initializers (.init = ...): positional ones stop compiling
 *   under -Wextra -Werror (missing-field-initializers) once a field is appended.
 *   Refused by the host: a descriptor (the file is skipped, with one log line
 *   naming it and the reason), a snapshot or one of its strides (a publication
 *   outside the ABI: -EINVAL, and the plugin is made unavailable).
 *
 *   An incompatible change is a new ABI: a new PERMISSIONS_PLUGIN_ABI_VERSION, new
 *   structs, and a new entry symbol (permissions_plugin_entry_v2) beside which
 *   _v1's meaning never changes. A host looks up the entry symbols of the ABIs it
 *   implements and skips any other library with a log line; this header promises
 *   no adapter from one ABI to another. This host implements ABI 1 only.
 *
 * THREADS
 *   Each plugin has its own thread in the host: dlopen's constructors, the entry
 *   point, init, configure, validate and fini all run there, one at a time, never
 *   on the daemon's dispatch thread. A call that has not returned within 2 seconds
 *   makes the plugin "unavailable": the host stops listening to it (its thread is
 *   left blocked) and its permissions read "unsupported". So init must not wait for a
 *   slow backend: a plugin that does I/O runs its own thread or event loop and
 *   publishes when it knows.
 *   The host functions (log, publish) may be called from any thread, at any time
 *   between init's start and fini's return; they never block (connect_user_socket,
 *   which may, excepted). The host closes them
 *   before it calls fini, and when it gives up on a plugin; from then on they are
 *   ignored and publish returns -ESHUTDOWN, a call already under way included: 0
 *   means the snapshot was taken before the host closed them.
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
 * ENFORCEMENT (ABI 1.3)
 *   A plugin may do more than tell: it may hand apps a connection to its backend
 *   that reaches only what the user allowed (PipeWire: the camera's nodes for an
 *   app allowed the camera, and nothing else). It names those permissions in
 *   `enforced` and implements open_remote and remote_status. The app calls the
 *   service (OpenPipeWireRemote); the host checks that the app's status is
 *   "authorized", calls open_remote, and passes the descriptor to the app.
 *   open_remote runs on a host thread of its own, not the plugin's: it may wait
 *   on one user's backend, which must not delay the plugin's other calls or other
 *   users' opens. Several may run at once (for different remotes; the host runs
 *   at most 16 into one plugin, 4 for one user, and counts a call until it
 *   returns, even past its deadline), beside init, configure, validate and
 *   remote_status; fini is
 *   called once every open_remote has returned, never while one runs: one still
 *   running 2 seconds after the stop began means no fini at all (the plugin's
 *   state is left as it is; a copy replaced with remotes open then stops the
 *   daemon, as below for a plugin given up). The host waits 2 seconds for an
 *   open_remote, counted from the call's start; a descriptor returned later is
 *   closed, which ends that remote like any other, and the late return is
 *   logged. From then on the host calls
 *   remote_status, on the plugin's thread, each time the status of that
 *   remote's (uid, app, permission) changes: a deny, a reset, an admin lock, the
 *   device state, an expiry. The plugin then narrows or widens what the connection reaches, and must fail
 *   closed: a connection whose reach it cannot set is disconnected, never left
 *   wider. When a connection ends, for whatever reason, the plugin calls
 *   host->remote_closed. A plugin stopped (fini: shutdown, replaced) disconnects
 *   what it handed out. A plugin given up with remotes open (unavailable: a call
 *   past the watchdog, a flood, a struct outside the ABI) can no longer be
 *   trusted to narrow them, and the host, which keeps no copy of the
 *   descriptors (a connection must end when the app closes it), cannot end them:
 *   the daemon then stops, its service manager starts it again, and the new
 *   plugin disconnects whatever the old one made. A host older than 1.3
 *   never calls these, and a plugin built before 1.3 has none: its permissions
 *   are not enforced, and the service refuses to open remotes for them.
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
    /* One detail key is read by the service: with PERMISSIONS_SERVICE_DISABLED,
     * "disabled-by" says why, for a settings page (GetDetails' "disabled-by"):
     * "configuration" (the admin's switch) or "device" (the hardware is there
     * but off); without it the service says "unknown". */
    uint32_t n_devices;
    const struct permissions_device *devices;
    /* ABI 1.1: the size of one element of each array (see VERSIONING); 0 means the
     * v1 element size, as does a struct_size that does not cover the field. */
    uint32_t policy_size;                /* of policies[] */
    uint32_t kv_size;                    /* of details[] and of every device's properties[] */
    uint32_t device_size;                /* of devices[] */
};

/* Designated initializers for the head of a snapshot as this header defines it
 * (version, size and strides): struct permissions_snapshot s = {
 * PERMISSIONS_SNAPSHOT_INIT, .permission = "camera", ... }; */
#define PERMISSIONS_SNAPSHOT_INIT \
    .abi_version = PERMISSIONS_PLUGIN_ABI_VERSION, .struct_size = sizeof(struct permissions_snapshot), \
    .policy_size = sizeof(struct permissions_app_policy), .kv_size = sizeof(struct permissions_kv), \
    .device_size = sizeof(struct permissions_device)

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
    /* ABI 1.1: in a validate call, reports one problem ("FILE:LINE: reason"), to be
     * passed problem_data; copied during the call. NULL in configure, and absent
     * (see PERMISSIONS_HAS_FIELD) from an older host: check both before calling. */
    void *problem_data;
    void (*problem)(void *problem_data, const char *message);
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
     * Returns 0; -EINVAL for a permission the plugin did not declare, a value
     * outside the enums above, or a size or stride VERSIONING refuses: the snapshot
     * is ignored and the plugin, which broke the ABI, is made unavailable;
     * -ESHUTDOWN once the host is stopping the plugin (before fini) or has made it
     * unavailable; -EBUSY when this call made the plugin unavailable for flooding. */
    int (*publish)(void *host_data, const struct permissions_snapshot *snapshot);
    /* ABI 1.2: where each user's runtime directory is, on a daemon that serves many
     * users (the system bus): the directory holding ROOT/UID, the XDG_RUNTIME_DIR of
     * user UID ("/run/user" unless the daemon was told otherwise). NULL on a daemon
     * that serves one user (a session bus): the plugin's own environment says where
     * that user's things are. Absent from an older host (PERMISSIONS_HAS_FIELD):
     * treat as NULL. Valid until fini returns. */
    const char *user_runtime_root;
    /* ABI 1.2: replace the snapshot of one permission for one user only (uid): from
     * then on that user's view of the permission is this snapshot (service state,
     * admin policies, details, devices), and its changes are told to that user's
     * subscribers alone, never broadcast. Every other user, and the broadcast, keep
     * the snapshot publish gives (the machine-wide one), which a plugin whose state
     * is per user sets to what holds for a user it knows nothing of: for devices,
     * "unsupported". A user's snapshot stays until replaced (publish this
     * fallback for a user the plugin stops knowing of) and goes with the plugin.
     * Any thread; never blocks; same returns and limits as publish (the flood
     * limit counts both). Absent from an older host
     * (PERMISSIONS_HAS_FIELD): there, publish alone, and every user sees it.
     * A plugin built before this field never calls it and behaves as before: one
     * machine-wide state for everyone. */
    int (*publish_for_user)(void *host_data, uint32_t uid, const struct permissions_snapshot *snapshot);
    /* ABI 1.3: a remote that open_remote opened has ended for good (see
     * ENFORCEMENT): the app's connection closed, the backend went away, or the
     * plugin disconnected it. The host forgets it and sends no more remote_status
     * for it. Any thread; never blocks. Absent from an older host: there, no
     * remote is ever opened. */
    void (*remote_closed)(void *host_data, uint64_t remote_id);
    /* ABI 1.3: on a daemon that serves many users (user_runtime_root non-NULL),
     * connect to user uid's own socket ROOT/UID/NAME (name: a file name, such as
     * "pipewire-0"), verified to be that user's: ROOT/UID a directory owned by uid,
     * NAME in it a socket owned by uid (neither a symbolic link), and the process
     * that listens on what was connected running as uid (SO_PEERCRED), so that
     * whatever the path resolves to, the connection is to a server of that user's.
     * The daemon tries under its own privileges first; when those fall short, it
     * asks permissionsd-connector(8), which serves the name "pipewire-0" only.
     * Returns a connected stream socket, non-blocking and close-on-exec, that the
     * plugin owns (and closes); or -ENOENT (no such socket), -ECONNREFUSED (nobody
     * listens on it), -EPERM (not the user's), -ETIMEDOUT (nobody accepted within
     * about half a second), -EACCES (reachable neither under this daemon's
     * privileges nor through the connector, which is missing, does not answer, or
     * cannot reach it either: the daemon logs that once per user, with the
     * remedy), -EINVAL (not a file name), -ESHUTDOWN (as for publish), or another
     * negative errno. Blocks for up to about 1 second: call it from the plugin's
     * own thread, never from init, configure, validate or fini. NULL on a daemon
     * that serves one user, and absent from an older host (PERMISSIONS_HAS_FIELD):
     * there, connect by path. */
    int (*connect_user_socket)(void *host_data, uint32_t uid, const char *name);
};

/* ABI 1.3: one enforced connection the host asks a plugin to open (see
 * ENFORCEMENT). Borrowed for the call. */
struct permissions_remote {
    uint32_t abi_version;
    uint32_t struct_size;
    uint64_t id;                         /* the host's name for it, unique for the daemon's life */
    uint32_t uid;                        /* the user the app runs as: whose backend to use */
    uint32_t pid;                        /* the app's process, for logs; 0 if unknown */
    const char *app_id;                  /* the app the connection is for, as the host identified it */
    const char *permission;              /* one of the plugin's enforced permissions */
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
    /* ABI 1.1: check a configuration without applying it (see CONFIGURATION): 0,
     * or -EINVAL with each problem reported through config->problem. May be NULL.
     * The host reads it only when struct_size covers it. */
    int (*validate)(void *state, const struct permissions_config *config);
    /* ABI 1.3: enforcement (see ENFORCEMENT). All three, or none (NULL). */
    /* NULL-terminated: the plugin's permissions it enforces through open_remote. */
    const char *const *enforced;
    /* Open a connection to the backend for remote->app_id of user remote->uid, that
     * reaches only what remote->permission covers, and return its file descriptor
     * (the host owns it from then on), or a negative errno: -ENODEV (that user has
     * no backend now), -ETIMEDOUT, -EIO. The host has checked that the app's status
     * is "authorized". Returns within 1.5 seconds (the watchdog gives up at 2). */
    int (*open_remote)(void *state, const struct permissions_remote *remote);
    /* The status of an open remote's (uid, app, permission) is now `status` (a
     * status word: "authorized", "denied", "restricted", "disabled", ...). Anything
     * but "authorized" takes away what the connection reaches, at once; "authorized"
     * gives it back. Never blocks. */
    void (*remote_status)(void *state, uint64_t remote_id, const char *status);
};

/* The sizes of the structs in their v1 layout, the smallest a reader accepts.
 * Every v1 struct ends in a pointer, or (permissions_app_policy) in an int32_t
 * that pads the struct to two pointers. On LP64 (x86_64, aarch64): descriptor 64,
 * host 32, snapshot 64, config 24, config entry 32, and 16 for each element. */
#define PERMISSIONS_V1_END_(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))
enum permissions_v1_size {
    PERMISSIONS_PLUGIN_V1_SIZE = PERMISSIONS_V1_END_(struct permissions_plugin, fini),
    PERMISSIONS_HOST_V1_SIZE = PERMISSIONS_V1_END_(struct permissions_host, publish),
    PERMISSIONS_SNAPSHOT_V1_SIZE = PERMISSIONS_V1_END_(struct permissions_snapshot, devices),
    PERMISSIONS_CONFIG_V1_SIZE = PERMISSIONS_V1_END_(struct permissions_config, entries),
    PERMISSIONS_CONFIG_ENTRY_V1_SIZE = PERMISSIONS_V1_END_(struct permissions_config_entry, origin),
    PERMISSIONS_APP_POLICY_V1_SIZE = 2 * sizeof(const char *),
    PERMISSIONS_KV_V1_SIZE = PERMISSIONS_V1_END_(struct permissions_kv, value),
    PERMISSIONS_DEVICE_V1_SIZE = PERMISSIONS_V1_END_(struct permissions_device, properties),
};

typedef const struct permissions_plugin *(*permissions_plugin_entry_fn)(void);

/* The entry point every plugin defines and exports (and nothing else): returns its
 * descriptor, the same pointer every time, or NULL to decline loading. Called once,
 * on the plugin's thread, before init. */
const struct permissions_plugin *permissions_plugin_entry_v1(void);

#ifdef __cplusplus
}
#endif

#endif /* PERMISSIONS_PLUGIN_H */
