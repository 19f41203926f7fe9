#include "cpipewire-shims.h"

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
