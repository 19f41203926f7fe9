/* Compile-time checks that the ABI's layout is what the header promises on this
 * platform: a change that moves a field breaks the build here, not a plugin. */
#include "permissions-plugin.h"

_Static_assert(offsetof(struct permissions_plugin, abi_version) == 0, "abi_version first");
_Static_assert(offsetof(struct permissions_plugin, struct_size) == 4, "struct_size second");
_Static_assert(offsetof(struct permissions_host, struct_size) == 4, "struct_size second");
_Static_assert(offsetof(struct permissions_snapshot, struct_size) == 4, "struct_size second");
_Static_assert(offsetof(struct permissions_config, struct_size) == 4, "struct_size second");
#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(struct permissions_plugin) == 64, "v1 descriptor size");
_Static_assert(sizeof(struct permissions_host) == 32, "v1 host size");
_Static_assert(sizeof(struct permissions_snapshot) == 64, "v1 snapshot size");
#endif
