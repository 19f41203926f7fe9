/* libpipewire, opened when first called rather than when the program or plugin
 * is loaded.
 *
 * The daemon's PipeWire plugin links no libpipewire (CPipeWire's module map names
 * none): these functions, with libpipewire's own names and signatures, stand in
 * for the 22 it calls, and open libpipewire-0.3.so.0 at the first call. The
 * plugin makes that call only once a PipeWire socket exists (PipeWireStart.swift),
 * so a machine without PipeWire never maps libpipewire, its SPA support plugins or
 * the loop's thread.
 *
 * Hidden: no program or library exports them, so they never stand in for
 * libpipewire's own calls to its functions (a program that also links libpipewire,
 * as the bench does, reaches the real ones through them).
 *
 * Every function is looked up once, all of them or none (under pthread_once, which
 * also orders the table's writes before its reads). When libpipewire cannot be
 * opened, or lacks one of them, each returns what its own failure returns (NULL,
 * or -ENOSYS with errno set), pw_init and pw_deinit do nothing, and
 * cpw_library_error says why: the plugin reports its first failing call with it. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#pragma GCC visibility push(hidden)
#include <pipewire/pipewire.h>
#include <pipewire/thread-loop.h>
#pragma GCC visibility pop
#include "cpipewire-shims.h"

#pragma GCC visibility push(hidden)

static struct {
    __typeof__(&pw_init) pw_init;
    __typeof__(&pw_deinit) pw_deinit;
    __typeof__(&pw_context_new) pw_context_new;
    __typeof__(&pw_context_destroy) pw_context_destroy;
    __typeof__(&pw_context_connect) pw_context_connect;
    __typeof__(&pw_context_connect_fd) pw_context_connect_fd;
    __typeof__(&pw_core_disconnect) pw_core_disconnect;
    __typeof__(&pw_core_steal_fd) pw_core_steal_fd;
    __typeof__(&pw_properties_set) pw_properties_set;
    __typeof__(&pw_proxy_destroy) pw_proxy_destroy;
    __typeof__(&pw_proxy_get_id) pw_proxy_get_id;
    __typeof__(&pw_thread_loop_new) pw_thread_loop_new;
    __typeof__(&pw_thread_loop_destroy) pw_thread_loop_destroy;
    __typeof__(&pw_thread_loop_get_loop) pw_thread_loop_get_loop;
    __typeof__(&pw_thread_loop_start) pw_thread_loop_start;
    __typeof__(&pw_thread_loop_stop) pw_thread_loop_stop;
    __typeof__(&pw_thread_loop_lock) pw_thread_loop_lock;
    __typeof__(&pw_thread_loop_unlock) pw_thread_loop_unlock;
    __typeof__(&pw_thread_loop_signal) pw_thread_loop_signal;
    __typeof__(&pw_thread_loop_timed_wait_full) pw_thread_loop_timed_wait_full;
    __typeof__(&pw_thread_loop_get_time) pw_thread_loop_get_time;
    __typeof__(&pw_properties_new) pw_properties_new;
} api;
static int loaded;
static char failure[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void open_library(void)
{
    void *library = dlopen("libpipewire-0.3.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        const char *why = dlerror();
        snprintf(failure, sizeof failure, "%s", why ? why : "cannot open libpipewire-0.3.so.0");
        return;
    }
#define RESOLVE(name) \
    if (!(api.name = (__typeof__(api.name))dlsym(library, #name))) { \
        snprintf(failure, sizeof failure, "libpipewire-0.3.so.0 has no %s", #name); \
        return; \
    }
    RESOLVE(pw_init)
    RESOLVE(pw_deinit)
    RESOLVE(pw_context_new)
    RESOLVE(pw_context_destroy)
    RESOLVE(pw_context_connect)
    RESOLVE(pw_context_connect_fd)
    RESOLVE(pw_core_disconnect)
    RESOLVE(pw_core_steal_fd)
    RESOLVE(pw_properties_set)
    RESOLVE(pw_proxy_destroy)
    RESOLVE(pw_proxy_get_id)
    RESOLVE(pw_thread_loop_new)
    RESOLVE(pw_thread_loop_destroy)
    RESOLVE(pw_thread_loop_get_loop)
    RESOLVE(pw_thread_loop_start)
    RESOLVE(pw_thread_loop_stop)
    RESOLVE(pw_thread_loop_lock)
    RESOLVE(pw_thread_loop_unlock)
    RESOLVE(pw_thread_loop_signal)
    RESOLVE(pw_thread_loop_timed_wait_full)
    RESOLVE(pw_thread_loop_get_time)
    RESOLVE(pw_properties_new)
#undef RESOLVE
    loaded = 1;
}

/* Whether the table is complete; errno ENOSYS if not. */
static int ready(void)
{
    pthread_once(&once, open_library);
    if (!loaded)
        errno = ENOSYS;
    return loaded;
}

#pragma GCC visibility pop

const char *cpw_library_error(void)
{
    pthread_once(&once, open_library);
    return loaded ? NULL : failure;
}

#pragma GCC visibility push(hidden)

void pw_init(int *argc, char **argv[])
{
    if (ready()) api.pw_init(argc, argv);
}

void pw_deinit(void)
{
    if (ready()) api.pw_deinit();
}

struct pw_context *pw_context_new(struct pw_loop *main_loop, struct pw_properties *props, size_t user_data_size)
{
    return ready() ? api.pw_context_new(main_loop, props, user_data_size) : NULL;
}

void pw_context_destroy(struct pw_context *context)
{
    if (ready()) api.pw_context_destroy(context);
}

struct pw_core *pw_context_connect(struct pw_context *context, struct pw_properties *properties, size_t user_data_size)
{
    return ready() ? api.pw_context_connect(context, properties, user_data_size) : NULL;
}

struct pw_core *pw_context_connect_fd(struct pw_context *context, int fd, struct pw_properties *properties, size_t user_data_size)
{
    return ready() ? api.pw_context_connect_fd(context, fd, properties, user_data_size) : NULL;
}

int pw_core_disconnect(struct pw_core *core)
{
    return ready() ? api.pw_core_disconnect(core) : -ENOSYS;
}

int pw_core_steal_fd(struct pw_core *core)
{
    return ready() ? api.pw_core_steal_fd(core) : -ENOSYS;
}

int pw_properties_set(struct pw_properties *properties, const char *key, const char *value)
{
    return ready() ? api.pw_properties_set(properties, key, value) : -ENOSYS;
}

void pw_proxy_destroy(struct pw_proxy *proxy)
{
    if (ready()) api.pw_proxy_destroy(proxy);
}

uint32_t pw_proxy_get_id(struct pw_proxy *proxy)
{
    return ready() ? api.pw_proxy_get_id(proxy) : SPA_ID_INVALID;
}

struct pw_thread_loop *pw_thread_loop_new(const char *name, const struct spa_dict *props)
{
    return ready() ? api.pw_thread_loop_new(name, props) : NULL;
}

void pw_thread_loop_destroy(struct pw_thread_loop *loop)
{
    if (ready()) api.pw_thread_loop_destroy(loop);
}

struct pw_loop *pw_thread_loop_get_loop(struct pw_thread_loop *loop)
{
    return ready() ? api.pw_thread_loop_get_loop(loop) : NULL;
}

int pw_thread_loop_start(struct pw_thread_loop *loop)
{
    return ready() ? api.pw_thread_loop_start(loop) : -ENOSYS;
}

void pw_thread_loop_stop(struct pw_thread_loop *loop)
{
    if (ready()) api.pw_thread_loop_stop(loop);
}

void pw_thread_loop_lock(struct pw_thread_loop *loop)
{
    if (ready()) api.pw_thread_loop_lock(loop);
}

void pw_thread_loop_unlock(struct pw_thread_loop *loop)
{
    if (ready()) api.pw_thread_loop_unlock(loop);
}

void pw_thread_loop_signal(struct pw_thread_loop *loop, bool wait_for_accept)
{
    if (ready()) api.pw_thread_loop_signal(loop, wait_for_accept);
}

int pw_thread_loop_timed_wait_full(struct pw_thread_loop *loop, struct timespec *abstime)
{
    return ready() ? api.pw_thread_loop_timed_wait_full(loop, abstime) : -ENOSYS;
}

int pw_thread_loop_get_time(struct pw_thread_loop *loop, struct timespec *abstime, int64_t timeout)
{
    return ready() ? api.pw_thread_loop_get_time(loop, abstime, timeout) : -ENOSYS;
}

/* Variadic: the pairs are set one by one on an empty set, as libpipewire's own does. */
struct pw_properties *pw_properties_new(const char *key, ...)
{
    if (!ready()) return NULL;
    struct pw_properties *properties = api.pw_properties_new(NULL, NULL);
    if (!properties) return NULL;
    va_list pairs;
    va_start(pairs, key);
    for (; key; key = va_arg(pairs, const char *))
        api.pw_properties_set(properties, key, va_arg(pairs, const char *));
    va_end(pairs);
    return properties;
}

#pragma GCC visibility pop
