#include "adw-shims.h"

#ifdef GDK_WINDOWING_X11
#include <gdk/x11/gdkx.h>
#endif
#ifdef GDK_WINDOWING_WAYLAND
#include <gdk/wayland/gdkwayland.h>
#endif

gulong permissions_connect_response(AdwMessageDialog *dialog, permissions_response_handler handler,
                                    gpointer data, GClosureNotify destroy) {
    return g_signal_connect_data(dialog, "response", G_CALLBACK(handler), data, destroy, 0);
}

void permissions_set_accessible_label(GtkWidget *widget, const char *label) {
    gtk_accessible_update_property(GTK_ACCESSIBLE(widget), GTK_ACCESSIBLE_PROPERTY_LABEL, label, -1);
}

void permissions_set_accessible_description(GtkWidget *widget, const char *description) {
    gtk_accessible_update_property(GTK_ACCESSIBLE(widget), GTK_ACCESSIBLE_PROPERTY_DESCRIPTION, description, -1);
}

gulong permissions_connect_notify(gpointer object, const char *property, permissions_notify_handler handler,
                                  gpointer data) {
    char *signal = g_strconcat("notify::", property, NULL);
    gulong id = g_signal_connect_data(object, signal, G_CALLBACK(handler), data, NULL, 0);
    g_free(signal);
    return id;
}

void permissions_set_placeholder_text(GtkWidget *entry, const char *text) {
    g_object_set(entry, "placeholder-text", text, NULL);
}

gulong permissions_connect_plain(gpointer instance, const char *signal, permissions_plain_handler handler,
                                 gpointer data, GClosureNotify destroy) {
    return g_signal_connect_data(instance, signal, G_CALLBACK(handler), data, destroy, 0);
}

gulong permissions_connect_action(GSimpleAction *action, permissions_action_handler handler, gpointer data,
                                  GClosureNotify destroy) {
    return g_signal_connect_data(action, "activate", G_CALLBACK(handler), data, destroy, 0);
}

gboolean permissions_set_transient_for_x11(GtkWidget *window, unsigned long parent_xid) {
#ifdef GDK_WINDOWING_X11
    GdkSurface *surface = gtk_native_get_surface(GTK_NATIVE(window));
    if (surface == NULL || !GDK_IS_X11_SURFACE(surface)) return FALSE;
    Display *display = gdk_x11_display_get_xdisplay(gdk_surface_get_display(surface));
    XSetTransientForHint(display, gdk_x11_surface_get_xid(surface), (Window)parent_xid);
    return TRUE;
#else
    (void)window;
    (void)parent_xid;
    return FALSE;
#endif
}

gboolean permissions_set_transient_for_wayland(GtkWidget *window, const char *parent_handle) {
#ifdef GDK_WINDOWING_WAYLAND
    GdkSurface *surface = gtk_native_get_surface(GTK_NATIVE(window));
    if (surface == NULL || !GDK_IS_WAYLAND_TOPLEVEL(surface)) return FALSE;
    return gdk_wayland_toplevel_set_transient_for_exported(GDK_TOPLEVEL(surface), parent_handle);
#else
    (void)window;
    (void)parent_handle;
    return FALSE;
#endif
}
