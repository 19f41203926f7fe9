/* SPDX-License-Identifier: MIT */
/*
 * example-lan: an example permissionsd plugin in C, built with nothing but a C
 * compiler and the SDK header (see the Makefile). It gives the permission
 * "example-lan" (may the app talk to devices on the local network?), driven by
 * its configuration section:
 *
 *     [example-lan]
 *     enabled=true               false: "disabled" for every app
 *     allow=org.example.Cast     forced allow: "authorized"
 *     deny=org.example.Tracker   locked deny: "restricted"
 *     disabled-for=1000          "disabled" for this user alone (ABI 1.2 hosts)
 *
 * It also shows enforcement (ABI 1.3): it names "example-lan" in `enforced`, and
 * an app that calls OpenPipeWireRemote("example-lan", {}) gets a socket on which
 * the plugin writes the app's status each time it changes ("authorized" first,
 * one word a line). Its "backend" is the plugin itself; a real one (the PipeWire
 * plugin) narrows what the connection reaches instead of telling.
 *
 * The plugin keeps no thread: it publishes from init and configure, and answers
 * open_remote and remote_status, which the host calls on the plugin's own thread,
 * one at a time.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "permissions-plugin.h"

#define PERMISSION "example-lan"
#define MAX_APPS 256

#define MAX_USERS 64
#define MAX_REMOTES 64

/* An open remote: the host's id and the plugin's end of the socket pair. */
struct remote {
    uint64_t id;
    int fd;
};

struct config {
    int enabled;
    long disabled_for;             /* a uid, or -1 */
    int n_policies;
    struct permissions_app_policy policies[MAX_APPS];
    char *apps[MAX_APPS];          /* owns the app id strings above */
};

struct state {
    const struct permissions_host *host;
    struct config current;
    /* Users given a state of their own so far: a user keeps theirs until it is
     * replaced, so each gets the machine-wide one again whenever it changes. */
    uint32_t users[MAX_USERS];
    int n_users;
    struct remote remotes[MAX_REMOTES];
    int n_remotes;
};

static void config_clear(struct config *c) {
    for (int i = 0; i < c->n_policies; i++)
        free(c->apps[i]);
    memset(c, 0, sizeof *c);
    c->enabled = 1;
    c->disabled_for = -1;
}

static void say(struct state *s, int priority, const char *origin, const char *what) {
    char line[512];
    /* The host copies the message during the call. */
    snprintf(line, sizeof line, "%s: [" PERMISSION "] %s; keeping the last good configuration", origin, what);
    s->host->log(s->host->host_data, priority, line);
}

/* Adds the ;-separated app ids of `value` with `policy`; -EINVAL if too many. */
static int add_apps(struct config *c, const char *value, int32_t policy) {
    char *copy = strdup(value), *save = NULL;
    if (!copy)
        return -ENOMEM;
    for (char *app = strtok_r(copy, ";", &save); app; app = strtok_r(NULL, ";", &save)) {
        while (*app == ' ')
            app++;
        if (!*app)
            continue;
        if (c->n_policies == MAX_APPS) {
            free(copy);
            return -EINVAL;
        }
        c->apps[c->n_policies] = strdup(app);
        c->policies[c->n_policies].app_id = c->apps[c->n_policies];
        c->policies[c->n_policies].policy = policy;
        c->n_policies++;
    }
    free(copy);
    return 0;
}

static void publish(struct state *s) {
    struct permissions_snapshot snapshot = {
        PERMISSIONS_SNAPSHOT_INIT,   /* version, size and the arrays' element sizes */
        .permission = PERMISSION,
        .service_state = s->current.enabled ? PERMISSIONS_SERVICE_AVAILABLE : PERMISSIONS_SERVICE_DISABLED,
        .n_policies = (uint32_t)s->current.n_policies,
        .policies = s->current.policies,
    };
    s->host->publish(s->host->host_data, &snapshot);

    /* ABI 1.2: one user's own state (publish_for_user), on a host that has it. The
     * user named by disabled-for= reads "disabled", and hears of it alone; every
     * other user, and a host without the field, see the snapshot above. */
    if (!PERMISSIONS_HAS_FIELD(s->host, struct permissions_host, publish_for_user) || !s->host->publish_for_user)
        return;
    int listed = 0;
    for (int i = 0; i < s->n_users; i++) {
        if ((long)s->users[i] == s->current.disabled_for)
            listed = 1;
        else
            s->host->publish_for_user(s->host->host_data, s->users[i], &snapshot);
    }
    if (s->current.disabled_for < 0)
        return;
    if (!listed && s->n_users < MAX_USERS)
        s->users[s->n_users++] = (uint32_t)s->current.disabled_for;
    snapshot.service_state = PERMISSIONS_SERVICE_DISABLED;
    s->host->publish_for_user(s->host->host_data, (uint32_t)s->current.disabled_for, &snapshot);
}

static int plugin_init(const struct permissions_host *host, void **ret_state) {
    if (host->abi_version != PERMISSIONS_PLUGIN_ABI_VERSION ||
        !PERMISSIONS_HAS_FIELD(host, struct permissions_host, publish))
        return -ENOTSUP;
    struct state *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->host = host;
    config_clear(&s->current);
    publish(s);
    *ret_state = s;
    return 0;
}

static int plugin_configure(void *state, const struct permissions_config *config) {
    struct state *s = state;
    struct config next;
    memset(&next, 0, sizeof next);
    next.enabled = 1;
    next.disabled_for = -1;
    for (uint32_t i = 0; i < config->n_entries; i++) {
        const struct permissions_config_entry *e = &config->entries[i];
        if (strcmp(e->section, PERMISSION) != 0)
            continue;
        int r = 0;
        if (strcmp(e->key, "enabled") == 0) {
            if (strcmp(e->value, "true") == 0)
                next.enabled = 1;
            else if (strcmp(e->value, "false") == 0)
                next.enabled = 0;
            else
                r = -EINVAL;
        } else if (strcmp(e->key, "allow") == 0) {
            r = add_apps(&next, e->value, PERMISSIONS_POLICY_ALLOW);
        } else if (strcmp(e->key, "deny") == 0) {
            r = add_apps(&next, e->value, PERMISSIONS_POLICY_RESTRICTED);
        } else if (strcmp(e->key, "disabled-for") == 0) {
            char *end;
            errno = 0;
            long uid = strtol(e->value, &end, 10);
            if (errno || end == e->value || *end || uid < 0 || uid > 4294967294L)
                r = -EINVAL;
            else
                next.disabled_for = uid;
        }
        if (r < 0) {
            char what[256];
            snprintf(what, sizeof what, "%s=%s is not valid", e->key, e->value);
            say(s, PERMISSIONS_LOG_ERR, e->origin, what);
            config_clear(&next);
            return r;
        }
    }
    config_clear(&s->current);
    s->current = next;
    publish(s);
    return 0;
}

/* Forgets remote i: closes the plugin's end and tells the host it has ended. */
static void remote_end(struct state *s, int i) {
    close(s->remotes[i].fd);
    if (PERMISSIONS_HAS_FIELD(s->host, struct permissions_host, remote_closed) && s->host->remote_closed)
        s->host->remote_closed(s->host->host_data, s->remotes[i].id);
    s->remotes[i] = s->remotes[--s->n_remotes];
}

/* Writes `status` to remote i; a remote whose app has closed its end ends. */
static void remote_tell(struct state *s, int i, const char *status) {
    char line[64];
    int n = snprintf(line, sizeof line, "%s\n", status);
    /* Never blocks, never raises SIGPIPE: a full or closed socket ends the remote. */
    if (send(s->remotes[i].fd, line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) != n)
        remote_end(s, i);
}

/* ABI 1.3: the host checked that the app is "authorized"; returns the app's end. */
static int plugin_open_remote(void *state, const struct permissions_remote *remote) {
    struct state *s = state;
    if (strcmp(remote->permission, PERMISSION) != 0)
        return -EINVAL;
    if (s->n_remotes == MAX_REMOTES)
        return -EBUSY;
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0)
        return -errno;
    s->remotes[s->n_remotes++] = (struct remote){ .id = remote->id, .fd = pair[0] };
    if (send(pair[0], "authorized\n", 11, MSG_NOSIGNAL | MSG_DONTWAIT) != 11) {
        close(pair[1]);
        s->n_remotes--;
        close(pair[0]);
        return -EIO;
    }
    return pair[1];
}

/* ABI 1.3: the app's status changed; never blocks. */
static void plugin_remote_status(void *state, uint64_t id, const char *status) {
    struct state *s = state;
    for (int i = 0; i < s->n_remotes; i++) {
        if (s->remotes[i].id == id) {
            remote_tell(s, i, status);
            return;
        }
    }
}

static void plugin_fini(void *state) {
    struct state *s = state;
    if (!s)
        return;
    /* Fail closed: nothing would tell the apps any more. */
    for (int i = 0; i < s->n_remotes; i++)
        close(s->remotes[i].fd);
    config_clear(&s->current);
    free(s);
}

static const char *const permissions[] = { PERMISSION, NULL };
static const char *const enforced[] = { PERMISSION, NULL };

static const struct permissions_plugin descriptor = {
    .abi_version = PERMISSIONS_PLUGIN_ABI_VERSION,
    .struct_size = sizeof descriptor,
    .name = "example-lan",
    .version = "1.0",
    .description = "An example: local network access, from the [example-lan] config section",
    .permissions = permissions,
    .init = plugin_init,
    .configure = plugin_configure,
    .fini = plugin_fini,
    .enforced = enforced,                /* ABI 1.3; an older host reads none of these three */
    .open_remote = plugin_open_remote,
    .remote_status = plugin_remote_status,
};

const struct permissions_plugin *permissions_plugin_entry_v1(void) {
    return &descriptor;
}
