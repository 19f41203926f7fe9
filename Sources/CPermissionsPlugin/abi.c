/* Compile-time checks that the ABI's layout is what the header promises on this
 * platform: a change that moves a field breaks the build here, not a plugin.
 *
 * The v1 structs below are the header of ABI 1's first release, copied and frozen:
 * every plugin built before fields were appended has exactly this layout. The
 * header's structs must keep each of these fields at the same offset, and its
 * PERMISSIONS_*_V1_SIZE constants (which the host uses to accept or refuse a
 * plugin's struct) must be these structs' sizes. */
#include "permissions-plugin.h"

struct v1_kv { const char *key; const char *value; };
struct v1_app_policy { const char *app_id; int32_t policy; };
struct v1_device { uint32_t n_properties; const struct v1_kv *properties; };
struct v1_snapshot {
    uint32_t abi_version; uint32_t struct_size; const char *permission; int32_t service_state;
    uint32_t n_policies; const struct v1_app_policy *policies; uint32_t n_details; const struct v1_kv *details;
    uint32_t n_devices; const struct v1_device *devices;
};
struct v1_config_entry { const char *section; const char *key; const char *value; const char *origin; };
struct v1_config { uint32_t abi_version; uint32_t struct_size; uint32_t n_entries; const struct v1_config_entry *entries; };
struct v1_host {
    uint32_t abi_version; uint32_t struct_size; void *host_data;
    void (*log)(void *, int, const char *); int (*publish)(void *, const void *);
};
struct v1_plugin {
    uint32_t abi_version; uint32_t struct_size; const char *name; const char *version; const char *description;
    const char *const *permissions; int (*init)(const void *, void **); int (*configure)(void *, const void *);
    void (*fini)(void *);
};

/* A field of the v1 struct sits where the header's struct has it. */
#define SAME(type, field) \
    _Static_assert(offsetof(struct v1_##type, field) == offsetof(struct permissions_##type, field), \
                   #type "." #field " moved from its v1 offset")
/* The v1 size constant is the v1 struct's size, and nothing grew inside it. */
#define V1_SIZE(type, constant) \
    _Static_assert(sizeof(struct v1_##type) == constant, #constant " is not the v1 size"); \
    _Static_assert(sizeof(struct permissions_##type) >= constant, #type " shrank below v1")

SAME(kv, key); SAME(kv, value);
V1_SIZE(kv, PERMISSIONS_KV_V1_SIZE);
SAME(app_policy, app_id); SAME(app_policy, policy);
V1_SIZE(app_policy, PERMISSIONS_APP_POLICY_V1_SIZE);
SAME(device, n_properties); SAME(device, properties);
V1_SIZE(device, PERMISSIONS_DEVICE_V1_SIZE);
SAME(snapshot, abi_version); SAME(snapshot, struct_size); SAME(snapshot, permission); SAME(snapshot, service_state);
SAME(snapshot, n_policies); SAME(snapshot, policies); SAME(snapshot, n_details); SAME(snapshot, details);
SAME(snapshot, n_devices); SAME(snapshot, devices);
V1_SIZE(snapshot, PERMISSIONS_SNAPSHOT_V1_SIZE);
SAME(config_entry, section); SAME(config_entry, key); SAME(config_entry, value); SAME(config_entry, origin);
V1_SIZE(config_entry, PERMISSIONS_CONFIG_ENTRY_V1_SIZE);
SAME(config, abi_version); SAME(config, struct_size); SAME(config, n_entries); SAME(config, entries);
V1_SIZE(config, PERMISSIONS_CONFIG_V1_SIZE);
SAME(host, abi_version); SAME(host, struct_size); SAME(host, host_data); SAME(host, log); SAME(host, publish);
V1_SIZE(host, PERMISSIONS_HOST_V1_SIZE);
SAME(plugin, abi_version); SAME(plugin, struct_size); SAME(plugin, name); SAME(plugin, version);
SAME(plugin, description); SAME(plugin, permissions); SAME(plugin, init); SAME(plugin, configure); SAME(plugin, fini);
V1_SIZE(plugin, PERMISSIONS_PLUGIN_V1_SIZE);

/* Appended fields start at or after the v1 size, never in its padding. */
_Static_assert(offsetof(struct permissions_snapshot, policy_size) >= PERMISSIONS_SNAPSHOT_V1_SIZE,
               "policy_size inside the v1 snapshot");
_Static_assert(offsetof(struct permissions_plugin, validate) >= PERMISSIONS_PLUGIN_V1_SIZE,
               "validate inside the v1 descriptor");
_Static_assert(offsetof(struct permissions_config, problem_data) >= PERMISSIONS_CONFIG_V1_SIZE,
               "problem_data inside the v1 configuration");
_Static_assert(offsetof(struct permissions_host, user_runtime_root) >= PERMISSIONS_HOST_V1_SIZE,
               "user_runtime_root inside the v1 host struct");
/* ABI 1.3's connect_user_socket comes right after remote_closed: no padding
 * between them to leave uninitialised (VERSIONING). */
_Static_assert(offsetof(struct permissions_host, connect_user_socket)
               == offsetof(struct permissions_host, remote_closed) + sizeof(void (*)(void)),
               "connect_user_socket not right after remote_closed");
/* Config entries never grow in ABI 1 (see VERSIONING). */
_Static_assert(sizeof(struct permissions_config_entry) == PERMISSIONS_CONFIG_ENTRY_V1_SIZE,
               "permissions_config_entry grew");

#if defined(__x86_64__) || defined(__aarch64__)
/* The figures the header quotes for LP64. */
_Static_assert(PERMISSIONS_PLUGIN_V1_SIZE == 64 && PERMISSIONS_HOST_V1_SIZE == 32 && PERMISSIONS_SNAPSHOT_V1_SIZE == 64
               && PERMISSIONS_CONFIG_V1_SIZE == 24 && PERMISSIONS_CONFIG_ENTRY_V1_SIZE == 32
               && PERMISSIONS_APP_POLICY_V1_SIZE == 16 && PERMISSIONS_KV_V1_SIZE == 16
               && PERMISSIONS_DEVICE_V1_SIZE == 16, "LP64 v1 sizes");
_Static_assert(sizeof(struct permissions_snapshot) == 80, "ABI 1.1 snapshot size");
_Static_assert(sizeof(struct permissions_plugin) == 96, "ABI 1.3 descriptor size");
_Static_assert(sizeof(struct permissions_config) == 40, "ABI 1.1 configuration size");
_Static_assert(sizeof(struct permissions_host) == 64, "ABI 1.3 host size");
_Static_assert(sizeof(struct permissions_remote) == 40, "ABI 1.3 remote size");
#endif
