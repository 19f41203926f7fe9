/* The directories scripts/install chose for an installed permissionsd: its
 * compiled-in defaults, written into the installed copy after the build (see
 * install-paths.c), so that one release build serves every --prefix,
 * --sysconfdir and --localstatedir. Each is "" in a build tree. */
#ifndef PERMISSIONS_INSTALL_PATHS_H
#define PERMISSIONS_INSTALL_PATHS_H

/* SYSCONFDIR/permissions */
const char *permissions_installed_config_dir(void);
/* LOCALSTATEDIR/lib/permissions */
const char *permissions_installed_state_dir(void);
/* PREFIX/lib/permissions/plugins */
const char *permissions_installed_plugin_dir(void);

#endif
