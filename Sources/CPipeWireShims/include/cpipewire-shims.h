/* PipeWire API that Swift cannot import, as plain functions.
 *
 * In libpipewire 0.3 most object methods (pw_core_sync, pw_*_add_listener) and
 * every pw_loop_* call are function-like macros over method tables, and the
 * interface type names are concatenated string literals: Swift's importer skips
 * both. Each wrapper here is one line around the macro it names. */
#ifndef CPIPEWIRE_SHIMS_H
#define CPIPEWIRE_SHIMS_H

#include <stdint.h>
#include <pipewire/pipewire.h>

/* PW_TYPE_INTERFACE_Node: PW_TYPE_INFO_INTERFACE_BASE "Node" is a concatenation. */
const char *cpw_type_interface_node(void);

/* pw_core_add_listener: a macro over the core proxy's method table. */
int cpw_core_add_listener(struct pw_core *core, struct spa_hook *listener,
                          const struct pw_core_events *events, void *data);

/* pw_core_sync: a macro; returns the seq that the matching `done` event carries. */
int cpw_core_sync(struct pw_core *core, uint32_t id, int seq);

/* pw_registry_add_listener: a macro over the registry proxy's method table. */
int cpw_registry_add_listener(struct pw_registry *registry, struct spa_hook *listener,
                              const struct pw_registry_events *events, void *data);

/* pw_loop_add_timer: a macro over the loop's utils interface. */
struct spa_source *cpw_loop_add_timer(struct pw_loop *loop, spa_source_timer_func_t func, void *data);

/* pw_loop_update_timer, relative and one-shot: fires once after `delay_ns`
 * nanoseconds. A zero timespec would disarm the timer instead, so 0 is sent as 1 ns. */
int cpw_loop_arm_timer(struct pw_loop *loop, struct spa_source *timer, uint64_t delay_ns);

/* pw_loop_add_event: a macro; an eventfd source that another thread can signal. */
struct spa_source *cpw_loop_add_event(struct pw_loop *loop, spa_source_event_func_t func, void *data);

/* pw_loop_signal_event: a macro; wakes the loop's thread to run the event's callback.
 * Safe from any thread (it writes to the eventfd). */
int cpw_loop_signal_event(struct pw_loop *loop, struct spa_source *source);

/* pw_loop_destroy_source: a macro over the loop's utils interface. */
/* An fd source (SPA_IO_IN etc.), not closed with the source: the caller owns the fd. */
struct spa_source *cpw_loop_add_io(struct pw_loop *loop, int fd, uint32_t mask, spa_source_io_func_t func, void *data);

/* pw_context_connect to the socket at an absolute path (remote.name), whatever
 * PIPEWIRE_REMOTE and XDG_RUNTIME_DIR say: pw_properties_new is variadic, which
 * Swift cannot call. */
struct pw_core *cpw_context_connect_path(struct pw_context *context, const char *path);

void cpw_loop_destroy_source(struct pw_loop *loop, struct spa_source *source);

/* &props->dict: pw_core_create_object takes the spa_dict inside pw_properties,
 * which Swift would otherwise reach with a pointer cast. */
const struct spa_dict *cpw_properties_dict(const struct pw_properties *properties);

/* Enforcement (Plugins/PipeWire/AppRemotes.swift). The interface type names of
 * the globals a manager follows besides nodes. */
const char *cpw_type_interface_client(void);
const char *cpw_type_interface_port(void);
const char *cpw_type_interface_link(void);
const char *cpw_type_interface_factory(void);

/* A connection with the client properties keys[i]=values[i]: over `fd` when it is
 * not negative (taken, even on failure), else to `path` (NULL: libpipewire's own
 * rules). */
struct pw_core *cpw_context_connect_tagged(struct pw_context *context, const char *path, int fd,
                                           const char *const *keys, const char *const *values, uint32_t n);

/* pw_registry_bind of a Client global, and pw_registry_destroy. */
struct pw_proxy *cpw_registry_bind_client(struct pw_registry *registry, uint32_t id);
int cpw_registry_destroy(struct pw_registry *registry, uint32_t id);

/* pw_client_update_permissions on a bound client: object ids[i] gets bits[i]
 * (PW_PERM_R 0400, W 0200, X 0100, M 0010). */
int cpw_client_update_permissions(struct pw_proxy *client, uint32_t n, const uint32_t *ids, const uint32_t *bits);

/* Why libpipewire could not be opened (loader.c opens it at the first call of one
 * of its functions, not when the plugin is loaded), or NULL when it was. Opens it
 * if no call has yet. */
const char *cpw_library_error(void);

#endif
