/* The installed paths live in a section of their own, .permissions_paths, of a
 * fixed size: scripts/install rewrites it in the installed copy with
 * `objcopy --update-section .permissions_paths=FILE`, FILE being the three paths,
 * each padded with NULs to PATH_FIELD bytes. A build is never patched in place,
 * and no rebuild is needed per prefix (a release build takes minutes).
 *
 * Not const: the compiler must not fold what it sees here ("" everywhere) into
 * the accessors; the rewrite happens after it has done its work. */
#include "install-paths.h"

#define PATH_FIELD 1024

struct permissions_install_paths {
    char config_dir[PATH_FIELD];
    char state_dir[PATH_FIELD];
    char plugin_dir[PATH_FIELD];
};

_Static_assert(sizeof(struct permissions_install_paths) == 3 * PATH_FIELD,
               "scripts/install writes exactly three fields of PATH_FIELD bytes");

__attribute__((section(".permissions_paths"), used, aligned(16)))
struct permissions_install_paths permissions_install_paths;

const char *permissions_installed_config_dir(void) { return permissions_install_paths.config_dir; }
const char *permissions_installed_state_dir(void) { return permissions_install_paths.state_dir; }
const char *permissions_installed_plugin_dir(void) { return permissions_install_paths.plugin_dir; }
