// libadwaita (which brings GTK 4, GLib and GIO) and GIO's desktop files.
#include <adwaita.h>
#include <gio/gdesktopappinfo.h>
#include <libintl.h>
