/* pwremote.c - "an app" on a PipeWire connection it was handed, for tests of
 * OpenPipeWireRemote and of what a session manager grants a restricted client.
 *
 * usage: pwremote [PERMISSION]                      (default camera)
 *        pwremote --socket PATH [--access VALUE]
 * build: gcc -O2 -Wall -o pwremote pwremote.c \
 *            $(pkg-config --cflags --libs libpipewire-0.3 gio-2.0 gio-unix-2.0)
 *
 * The connection:
 *   default    calls org.example.Permissions.OpenPipeWireRemote(PERMISSION, {}) on
 *              /org/example/Permissions over the system bus (G_BUS_TYPE_SYSTEM:
 *              DBUS_SYSTEM_BUS_ADDRESS when set), takes the fd from the reply's
 *              fd list and connects with pw_context_connect_fd. A D-Bus error
 *              prints "error NAME MESSAGE" and exits 2.
 *   --socket   connects to the PipeWire socket PATH itself; --access VALUE sets
 *              the client property pipewire.access to VALUE in what it connects
 *              with. PipeWire's module-access leaves a client that arrives with
 *              pipewire.access set alone ("has already access"), with no
 *              permissions at all, so it waits for a manager to grant some.
 *
 * Output on stdout, a line per event, flushed:
 *   global ID TYPE perms=rwxm key=value...   a registry global; TYPE without
 *                 "PipeWire:Interface:" (Node, Port, Link, Factory, Client, ...),
 *                 perms as pw-cli writes them ("r-x-"), then those of the keys
 *                 below that it has. Whitespace, "\" and "=" in a value are
 *                 written \xHH.
 *   remove ID     the global went (or the client lost R on it)
 *   synced        the first core round trip completed (the registry's first
 *                 burst is in), and after each "sync" command
 *   stream-node ID | stream-error MESSAGE
 *   link ID | link-error RES MESSAGE | link-state ID STATE [ERROR]
 *   core-error ID RES MESSAGE
 *   disconnected  the connection went (PipeWire stopped, the client was
 *                 destroyed); exits 3
 *   bad-command LINE
 * On stderr: "busy" once, when the first round trip has not completed after
 * 2 s (a client with no R on the core is never read from); it keeps waiting.
 *
 * Commands on stdin, one a line (end of input is "quit"):
 *   stream            a video capture pw_stream of its own, not autoconnected
 *                     (its node's media.class is Stream/Input/Video)
 *   link OUT IN [OUT_PORT IN_PORT]
 *                     a link from node OUT to node IN through the link-factory
 *                     (object.linger=false: it goes with this client); without
 *                     ports, PipeWire takes a free port of each node, or one that
 *                     mixes several links (a camera's video port, once linked,
 *                     is neither: "unknown output port")
 *   sync              a core round trip
 *   quit              exits 0
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <gio/gio.h>
#include <gio/gunixfdlist.h>
#include <spa/param/video/format-utils.h>
#include <spa/utils/result.h>
#include <pipewire/pipewire.h>

#define MAX_STREAMS 8
#define MAX_LINKS 64

static const char *const shown_keys[] = {
    PW_KEY_MEDIA_CLASS, PW_KEY_NODE_NAME, PW_KEY_FACTORY_NAME,
    PW_KEY_LINK_OUTPUT_NODE, PW_KEY_LINK_INPUT_NODE, PW_KEY_LINK_OUTPUT_PORT, PW_KEY_LINK_INPUT_PORT,
    PW_KEY_NODE_ID, PW_KEY_PORT_DIRECTION, PW_KEY_PORT_NAME,
    PW_KEY_ACCESS, PW_KEY_APP_NAME, PW_KEY_MODULE_NAME, "metadata.name", NULL,
};

struct link {
    struct pw_proxy *proxy;
    struct spa_hook proxy_listener;
    struct spa_hook link_listener;
    uint32_t bound_id;
};

static struct pw_main_loop *loop;
static struct pw_context *context;
static struct pw_core *core;
static struct pw_registry *registry;
static struct spa_hook core_listener, registry_listener;
static struct spa_source *busy_timer;
static int first_sync = -1, command_sync = -1;
static int exit_status;
static struct { struct pw_stream *stream; struct spa_hook listener; } streams[MAX_STREAMS];
static int n_streams;
static struct link links[MAX_LINKS];
static int n_links;
static char input[4096];
static size_t input_len;

static void out(const char *format, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vprintf(format, args);
    va_end(args);
    putchar('\n');
    fflush(stdout);
}

static void quit(int status)
{
    exit_status = status;
    pw_main_loop_quit(loop);
}

/* A value as one word: whitespace, backslash and "=" escaped. */
static void put_value(const char *value)
{
    for (const unsigned char *c = (const unsigned char *)value; *c; c++) {
        if (*c <= ' ' || *c == '\\' || *c == '=' || *c == 0x7f) printf("\\x%02x", *c);
        else putchar(*c);
    }
}

/* ---- registry ---- */

static void on_global(void *data, uint32_t id, uint32_t permissions, const char *type,
                      uint32_t version, const struct spa_dict *props)
{
    const char *prefix = "PipeWire:Interface:";
    if (strncmp(type, prefix, strlen(prefix)) == 0) type += strlen(prefix);
    printf("global %u %s perms=%c%c%c%c", id, type,
           permissions & PW_PERM_R ? 'r' : '-', permissions & PW_PERM_W ? 'w' : '-',
           permissions & PW_PERM_X ? 'x' : '-', permissions & PW_PERM_M ? 'm' : '-');
    for (int i = 0; props && shown_keys[i]; i++) {
        const char *value = spa_dict_lookup(props, shown_keys[i]);
        if (!value) continue;
        printf(" %s=", shown_keys[i]);
        put_value(value);
    }
    putchar('\n');
    fflush(stdout);
}

static void on_global_remove(void *data, uint32_t id)
{
    out("remove %u", id);
}

static const struct pw_registry_events registry_events = {
    PW_VERSION_REGISTRY_EVENTS,
    .global = on_global,
    .global_remove = on_global_remove,
};

/* ---- core ---- */

static void on_core_done(void *data, uint32_t id, int seq)
{
    if (id != PW_ID_CORE) return;
    if (seq == first_sync) {
        first_sync = -1;
        out("synced");
    }
    if (seq == command_sync) {
        command_sync = -1;
        out("synced");
    }
}

static void on_core_error(void *data, uint32_t id, int seq, int res, const char *message)
{
    if (id == PW_ID_CORE && res == -EPIPE) {
        out("disconnected");
        quit(3);
        return;
    }
    out("core-error %u %d %s", id, res, message ? message : "");
}

static const struct pw_core_events core_events = {
    PW_VERSION_CORE_EVENTS,
    .done = on_core_done,
    .error = on_core_error,
};

static void on_busy_timer(void *data, uint64_t expirations)
{
    if (first_sync != -1) {
        fprintf(stderr, "busy\n");
        fflush(stderr);
    }
}

/* ---- stream ---- */

static void on_stream_state(void *data, enum pw_stream_state old, enum pw_stream_state state, const char *error)
{
    struct pw_stream *stream = data;
    /* The node id is known once the server has made the node (PAUSED). */
    if (state == PW_STREAM_STATE_PAUSED && old == PW_STREAM_STATE_CONNECTING)
        out("stream-node %u", pw_stream_get_node_id(stream));
    else if (state == PW_STREAM_STATE_ERROR)
        out("stream-error %s", error ? error : "");
}

static const struct pw_stream_events stream_events = {
    PW_VERSION_STREAM_EVENTS,
    .state_changed = on_stream_state,
};

static void make_stream(void)
{
    if (n_streams == MAX_STREAMS) {
        out("stream-error too many streams");
        return;
    }
    struct pw_stream *stream = pw_stream_new(core, "pwremote",
        pw_properties_new(PW_KEY_MEDIA_TYPE, "Video", PW_KEY_MEDIA_CATEGORY, "Capture",
                          PW_KEY_MEDIA_ROLE, "Camera", NULL));
    if (!stream) {
        out("stream-error %s", strerror(errno));
        return;
    }
    streams[n_streams].stream = stream;
    pw_stream_add_listener(stream, &streams[n_streams].listener, &stream_events, stream);
    n_streams++;
    uint8_t buffer[1024];
    struct spa_pod_builder builder = SPA_POD_BUILDER_INIT(buffer, sizeof(buffer));
    const struct spa_pod *params[1];
    params[0] = spa_format_video_raw_build(&builder, SPA_PARAM_EnumFormat,
        &SPA_VIDEO_INFO_RAW_INIT(.format = SPA_VIDEO_FORMAT_RGB, .size = SPA_RECTANGLE(320, 240),
                                 .framerate = SPA_FRACTION(25, 1)));
    int res = pw_stream_connect(stream, PW_DIRECTION_INPUT, PW_ID_ANY, PW_STREAM_FLAG_MAP_BUFFERS, params, 1);
    if (res < 0) out("stream-error %s", spa_strerror(res));
}

/* ---- links ---- */

static void on_link_bound(void *data, uint32_t global_id)
{
    struct link *link = data;
    link->bound_id = global_id;
    out("link %u", global_id);
}

static void on_link_error(void *data, int seq, int res, const char *message)
{
    out("link-error %d %s", res, message ? message : "");
}

static const struct pw_proxy_events link_proxy_events = {
    PW_VERSION_PROXY_EVENTS,
    .bound = on_link_bound,
    .error = on_link_error,
};

static void on_link_info(void *data, const struct pw_link_info *info)
{
    struct link *link = data;
    if (!(info->change_mask & PW_LINK_CHANGE_MASK_STATE)) return;
    if (info->error)
        out("link-state %u %s %s", info->id, pw_link_state_as_string(info->state), info->error);
    else
        out("link-state %u %s", info->id, pw_link_state_as_string(info->state));
    (void)link;
}

static const struct pw_link_events link_events = {
    PW_VERSION_LINK_EVENTS,
    .info = on_link_info,
};

static void make_link(const char *output_node, const char *input_node, const char *output_port,
                      const char *input_port)
{
    if (n_links == MAX_LINKS) {
        out("link-error %d too many links", -ENOSPC);
        return;
    }
    struct pw_properties *props = pw_properties_new(PW_KEY_LINK_OUTPUT_NODE, output_node,
                                                    PW_KEY_LINK_INPUT_NODE, input_node,
                                                    PW_KEY_OBJECT_LINGER, "false", NULL);
    if (output_port) pw_properties_set(props, PW_KEY_LINK_OUTPUT_PORT, output_port);
    if (input_port) pw_properties_set(props, PW_KEY_LINK_INPUT_PORT, input_port);
    struct pw_proxy *proxy = pw_core_create_object(core, "link-factory", PW_TYPE_INTERFACE_Link,
                                                   PW_VERSION_LINK, &props->dict, 0);
    pw_properties_free(props);
    if (!proxy) {
        out("link-error %d %s", -errno, strerror(errno));
        return;
    }
    struct link *link = &links[n_links++];
    link->proxy = proxy;
    pw_proxy_add_listener(proxy, &link->proxy_listener, &link_proxy_events, link);
    pw_proxy_add_object_listener(proxy, &link->link_listener, &link_events, link);
}

/* ---- commands ---- */

static void run_command(char *line)
{
    char *words[6];
    int n = 0;
    for (char *save = NULL, *word = strtok_r(line, " \t", &save); word && n < 6; word = strtok_r(NULL, " \t", &save))
        words[n++] = word;
    if (n == 0) return;
    if (n == 1 && strcmp(words[0], "stream") == 0) make_stream();
    else if (n == 3 && strcmp(words[0], "link") == 0) make_link(words[1], words[2], NULL, NULL);
    else if (n == 5 && strcmp(words[0], "link") == 0) make_link(words[1], words[2], words[3], words[4]);
    else if (n == 1 && strcmp(words[0], "sync") == 0) command_sync = pw_core_sync(core, PW_ID_CORE, command_sync);
    else if (n == 1 && strcmp(words[0], "quit") == 0) quit(0);
    else {
        printf("bad-command");
        for (int i = 0; i < n; i++) printf(" %s", words[i]);
        putchar('\n');
        fflush(stdout);
    }
}

static void on_stdin(void *data, int fd, uint32_t mask)
{
    ssize_t got = read(fd, input + input_len, sizeof(input) - 1 - input_len);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (got <= 0) {
        quit(0);
        return;
    }
    input_len += got;
    char *newline;
    while ((newline = memchr(input, '\n', input_len)) != NULL) {
        *newline = '\0';
        size_t used = newline - input + 1;
        run_command(input);
        memmove(input, input + used, input_len - used);
        input_len -= used;
    }
    if (input_len == sizeof(input) - 1) {
        out("bad-command line too long");
        input_len = 0;
    }
}

/* ---- the connection ---- */

/* OpenPipeWireRemote(permission, {}) -> h; the fd, or -1 with the error printed. */
static int open_remote(const char *permission)
{
    GError *error = NULL;
    GDBusConnection *bus = g_bus_get_sync(G_BUS_TYPE_SYSTEM, NULL, &error);
    GVariant *reply = NULL;
    GUnixFDList *fds = NULL;
    int fd = -1;
    if (bus) {
        reply = g_dbus_connection_call_with_unix_fd_list_sync(bus, "org.example.Permissions",
            "/org/example/Permissions", "org.example.Permissions", "OpenPipeWireRemote",
            g_variant_new("(s@a{sv})", permission, g_variant_new_array(G_VARIANT_TYPE("{sv}"), NULL, 0)),
            G_VARIANT_TYPE("(h)"), G_DBUS_CALL_FLAGS_NONE, -1, NULL, &fds, NULL, &error);
    }
    if (reply) {
        gint32 handle;
        g_variant_get(reply, "(h)", &handle);
        fd = fds ? g_unix_fd_list_get(fds, handle, &error) : -1;
        if (fd < 0 && !error)
            error = g_error_new(G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS, "the reply carries no file descriptor");
    }
    if (fd < 0) {
        char *name = g_dbus_error_get_remote_error(error);
        if (name) g_dbus_error_strip_remote_error(error);
        else name = g_dbus_error_encode_gerror(error);
        out("error %s %s", name, error->message);
        g_free(name);
        g_error_free(error);
    }
    if (reply) g_variant_unref(reply);
    if (fds) g_object_unref(fds);
    if (bus) g_object_unref(bus);
    return fd;
}

static int usage(void)
{
    fprintf(stderr, "usage: pwremote [PERMISSION]\n       pwremote --socket PATH [--access VALUE]\n");
    return 1;
}

int main(int argc, char **argv)
{
    const char *socket_path = NULL, *access = NULL, *permission = "camera";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc) socket_path = argv[++i];
        else if (strcmp(argv[i], "--access") == 0 && i + 1 < argc) access = argv[++i];
        else if (argv[i][0] != '-') permission = argv[i];
        else return usage();
    }
    if (access && !socket_path) return usage();

    pw_init(&argc, &argv);
    loop = pw_main_loop_new(NULL);
    context = pw_context_new(pw_main_loop_get_loop(loop), NULL, 0);
    struct pw_properties *props = pw_properties_new(PW_KEY_APP_NAME, "pwremote", NULL);
    if (socket_path) {
        pw_properties_set(props, PW_KEY_REMOTE_NAME, socket_path);
        if (access) pw_properties_set(props, PW_KEY_ACCESS, access);
        core = pw_context_connect(context, props, 0);
        if (!core) {
            fprintf(stderr, "pwremote: connecting to %s: %s\n", socket_path, strerror(errno));
            return 1;
        }
    } else {
        int fd = open_remote(permission);
        if (fd < 0) {
            pw_properties_free(props);
            return 2;
        }
        core = pw_context_connect_fd(context, fd, props, 0);
        if (!core) {
            fprintf(stderr, "pwremote: pw_context_connect_fd: %s\n", strerror(errno));
            return 1;
        }
    }
    pw_core_add_listener(core, &core_listener, &core_events, NULL);
    registry = pw_core_get_registry(core, PW_VERSION_REGISTRY, 0);
    pw_registry_add_listener(registry, &registry_listener, &registry_events, NULL);
    first_sync = pw_core_sync(core, PW_ID_CORE, 0);

    struct pw_loop *l = pw_main_loop_get_loop(loop);
    busy_timer = pw_loop_add_timer(l, on_busy_timer, NULL);
    struct timespec two_seconds = { 2, 0 };
    pw_loop_update_timer(l, busy_timer, &two_seconds, NULL, false);
    pw_loop_add_io(l, STDIN_FILENO, SPA_IO_IN | SPA_IO_HUP, false, on_stdin, NULL);

    pw_main_loop_run(loop);

    for (int i = 0; i < n_streams; i++) pw_stream_destroy(streams[i].stream);
    pw_proxy_destroy((struct pw_proxy *)registry);
    pw_core_disconnect(core);
    pw_context_destroy(context);
    pw_main_loop_destroy(loop);
    pw_deinit();
    return exit_status;
}
