/* libpipewire, loaded when first called rather than when the program or plugin
 * is loaded.
 *
 * The daemon's PipeWire plugin links no libpipewire (CPipeWire's module map names
 * none): these functions, with libpipewire's own names and signatures, stand in
 * for the 22 it calls, and open libpipewire-0.3.so.0 at the first call. The
 * plugin makes that call only once a PipeWire socket exists (PipeWireStart.swift),
 * so a machine without PipeWire never maps libpipewire, its SPA support plugins or
 * the loop's thread. The plugin exports none of these (plugin.map), so they
 * replace nothing of libpipewire's for anyone else.
 *
 * When libpipewire cannot be opened, each returns what its own failure returns
 * (NULL, or -ENOSYS with errno set), and pw_init and pw_deinit do nothing: the
 * plugin then reports its first failing call, as it would a failing libpipewire. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <pipewire/pipewire.h>
#include <pipewire/thread-loop.h>
#include "cpipewire-shims.h"

static void *library;
static pthread_once_t opened = PTHREAD_ONCE_INIT;

static void open_library(void)
{
    library = dlopen("libpipewire-0.3.so.0", RTLD_NOW | RTLD_LOCAL);
}

/* The address of libpipewire's `name`, or NULL with errno ENOSYS. */
static void *real(const char *name)
{
    pthread_once(&opened, open_library);
    void *symbol = library ? dlsym(library, name) : NULL;
    if (!symbol)
        errno = ENOSYS;
    return symbol;
}

int cpw_library_loaded(void)
{
    return library != NULL;
}

/* Each: the function pointer, looked up once (a race only looks it up twice). */
#define REAL(name) \
    static __typeof__(&name) f; \
    if (!f) f = (__typeof__(&name))real(#name)

void pw_init(int *argc, char **argv[])
{
    REAL(pw_init);
    if (f) f(argc, argv);
}

void pw_deinit(void)
{
    REAL(pw_deinit);
    if (f) f();
}

struct pw_context *pw_context_new(struct pw_loop *main_loop, struct pw_properties *props, size_t user_data_size)
{
    REAL(pw_context_new);
    return f ? f(main_loop, props, user_data_size) : NULL;
}

void pw_context_destroy(struct pw_context *context)
{
    REAL(pw_context_destroy);
    if (f) f(context);
}

struct pw_core *pw_context_connect(struct pw_context *context, struct pw_properties *properties,
                                   size_t user_data_size)
{
    REAL(pw_context_connect);
    return f ? f(context, properties, user_data_size) : NULL;
}

struct pw_core *pw_context_connect_fd(struct pw_context *context, int fd, struct pw_properties *properties,
                                      size_t user_data_size)
{
    REAL(pw_context_connect_fd);
    return f ? f(context, fd, properties, user_data_size) : NULL;
}

int pw_core_disconnect(struct pw_core *core)
{
    REAL(pw_core_disconnect);
    return f ? f(core) : -ENOSYS;
}

int pw_core_steal_fd(struct pw_core *core)
{
    REAL(pw_core_steal_fd);
    return f ? f(core) : -ENOSYS;
}

/* Variadic: the pairs are set one by one on an empty set, as libpipewire's own does. */
struct pw_properties *pw_properties_new(const char *key, ...)
{
    REAL(pw_properties_new);
    static __typeof__(&pw_properties_set) set;
    if (!set) set = (__typeof__(&pw_properties_set))real("pw_properties_set");
    if (!f || !set) return NULL;
    struct pw_properties *properties = f(NULL, NULL);
    if (!properties) return NULL;
    va_list pairs;
    va_start(pairs, key);
    for (; key; key = va_arg(pairs, const char *))
        set(properties, key, va_arg(pairs, const char *));
    va_end(pairs);
    return properties;
}

int pw_properties_set(struct pw_properties *properties, const char *key, const char *value)
{
    REAL(pw_properties_set);
    return f ? f(properties, key, value) : -ENOSYS;
}

void pw_proxy_destroy(struct pw_proxy *proxy)
{
    REAL(pw_proxy_destroy);
    if (f) f(proxy);
}

uint32_t pw_proxy_get_id(struct pw_proxy *proxy)
{
    REAL(pw_proxy_get_id);
    return f ? f(proxy) : SPA_ID_INVALID;
}

struct pw_thread_loop *pw_thread_loop_new(const char *name, const struct spa_dict *props)
{
    REAL(pw_thread_loop_new);
    return f ? f(name, props) : NULL;
}

void pw_thread_loop_destroy(struct pw_thread_loop *loop)
{
    REAL(pw_thread_loop_destroy);
    if (f) f(loop);
}

struct pw_loop *pw_thread_loop_get_loop(struct pw_thread_loop *loop)
{
    REAL(pw_thread_loop_get_loop);
    return f ? f(loop) : NULL;
}

int pw_thread_loop_start(struct pw_thread_loop *loop)
{
    REAL(pw_thread_loop_start);
    return f ? f(loop) : -ENOSYS;
}

void pw_thread_loop_stop(struct pw_thread_loop *loop)
{
    REAL(pw_thread_loop_stop);
    if (f) f(loop);
}

void pw_thread_loop_lock(struct pw_thread_loop *loop)
{
    REAL(pw_thread_loop_lock);
    if (f) f(loop);
}

void pw_thread_loop_unlock(struct pw_thread_loop *loop)
{
    REAL(pw_thread_loop_unlock);
    if (f) f(loop);
}

void pw_thread_loop_signal(struct pw_thread_loop *loop, bool wait_for_accept)
{
    REAL(pw_thread_loop_signal);
    if (f) f(loop, wait_for_accept);
}

int pw_thread_loop_timed_wait_full(struct pw_thread_loop *loop, struct timespec *abstime)
{
    REAL(pw_thread_loop_timed_wait_full);
    return f ? f(loop, abstime) : -ENOSYS;
}

int pw_thread_loop_get_time(struct pw_thread_loop *loop, struct timespec *abstime, int64_t timeout)
{
    REAL(pw_thread_loop_get_time);
    return f ? f(loop, abstime, timeout) : -ENOSYS;
}
