#include "cpipewire-shims.h"

#include <unistd.h>

const char *cpw_type_interface_node(void) { return PW_TYPE_INTERFACE_Node; }

int cpw_core_add_listener(struct pw_core *core, struct spa_hook *listener,
                          const struct pw_core_events *events, void *data)
{
    return pw_core_add_listener(core, listener, events, data);
}

int cpw_core_sync(struct pw_core *core, uint32_t id, int seq) { return pw_core_sync(core, id, seq); }

int cpw_registry_add_listener(struct pw_registry *registry, struct spa_hook *listener,
                              const struct pw_registry_events *events, void *data)
{
    return pw_registry_add_listener(registry, listener, events, data);
}

struct spa_source *cpw_loop_add_timer(struct pw_loop *loop, spa_source_timer_func_t func, void *data)
{
    return pw_loop_add_timer(loop, func, data);
}

int cpw_loop_arm_timer(struct pw_loop *loop, struct spa_source *timer, uint64_t delay_ns)
{
    if (delay_ns == 0)
        delay_ns = 1;
    struct timespec value = { .tv_sec = (time_t)(delay_ns / SPA_NSEC_PER_SEC),
                              .tv_nsec = (long)(delay_ns % SPA_NSEC_PER_SEC) };
    struct timespec interval = { 0, 0 };
    return pw_loop_update_timer(loop, timer, &value, &interval, false);
}

struct spa_source *cpw_loop_add_event(struct pw_loop *loop, spa_source_event_func_t func, void *data)
{
    return pw_loop_add_event(loop, func, data);
}

int cpw_loop_signal_event(struct pw_loop *loop, struct spa_source *source)
{
    return pw_loop_signal_event(loop, source);
}

void cpw_loop_destroy_source(struct pw_loop *loop, struct spa_source *source)
{
    pw_loop_destroy_source(loop, source);
}

const struct spa_dict *cpw_properties_dict(const struct pw_properties *properties)
{
    return &properties->dict;
}

struct spa_source *cpw_loop_add_io(struct pw_loop *loop, int fd, uint32_t mask, spa_source_io_func_t func, void *data)
{
    return pw_loop_add_io(loop, fd, mask, false, func, data);
}

struct pw_core *cpw_context_connect_path(struct pw_context *context, const char *path)
{
    struct pw_properties *props = pw_properties_new(PW_KEY_REMOTE_NAME, path, NULL);
    if (props == NULL)
        return NULL;
    return pw_context_connect(context, props, 0);  /* takes props, on failure too */
}

/* Enforcement: the types a manager follows, and what it does to an app's client. */
const char *cpw_type_interface_client(void) { return PW_TYPE_INTERFACE_Client; }
const char *cpw_type_interface_port(void) { return PW_TYPE_INTERFACE_Port; }
const char *cpw_type_interface_link(void) { return PW_TYPE_INTERFACE_Link; }
const char *cpw_type_interface_factory(void) { return PW_TYPE_INTERFACE_Factory; }

struct pw_core *cpw_context_connect_tagged(struct pw_context *context, const char *path, int fd,
                                           const char *const *keys, const char *const *values, uint32_t n)
{
    struct pw_properties *props = pw_properties_new(NULL, NULL);
    if (props == NULL) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++)
        pw_properties_set(props, keys[i], values[i]);
    if (fd >= 0)
        return pw_context_connect_fd(context, fd, props, 0);  /* takes props and fd */
    if (path != NULL)
        pw_properties_set(props, PW_KEY_REMOTE_NAME, path);
    return pw_context_connect(context, props, 0);
}

struct pw_proxy *cpw_registry_bind_client(struct pw_registry *registry, uint32_t id)
{
    return pw_registry_bind(registry, id, PW_TYPE_INTERFACE_Client, PW_VERSION_CLIENT, 0);
}

int cpw_registry_destroy(struct pw_registry *registry, uint32_t id)
{
    return pw_registry_destroy(registry, id);
}

int cpw_client_update_permissions(struct pw_proxy *client, uint32_t n, const uint32_t *ids, const uint32_t *bits)
{
    struct pw_permission permissions[n > 0 ? n : 1];
    for (uint32_t i = 0; i < n; i++)
        permissions[i] = PW_PERMISSION_INIT(ids[i], bits[i]);
    return pw_client_update_permissions((struct pw_client *)client, n, permissions);
}
