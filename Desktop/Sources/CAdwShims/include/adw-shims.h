// What Swift cannot call in GTK, GLib and libadwaita: each shim says why it exists.
#ifndef PERMISSIONS_ADW_SHIMS_H
#define PERMISSIONS_ADW_SHIMS_H

#include <adwaita.h>

/// AdwMessageDialog::response. g_signal_connect is a macro over
/// g_signal_connect_data with a G_CALLBACK cast; these take the handler typed, so
/// Swift passes a @convention(c) function without a cast.
typedef void (*permissions_response_handler)(AdwMessageDialog *dialog, const char *response, gpointer data);
gulong permissions_connect_response(AdwMessageDialog *dialog, permissions_response_handler handler,
                                    gpointer data, GClosureNotify destroy);

/// GObject::notify for one property ("notify::NAME"), typed as above.
typedef void (*permissions_notify_handler)(GObject *object, GParamSpec *property, gpointer data);
gulong permissions_connect_notify(gpointer object, const char *property, permissions_notify_handler handler,
                                  gpointer data);

/// A signal whose handler takes only the instance and the data ("clicked",
/// "toggled", "search-changed", GApplication's "activate" and "startup"), typed
/// as above.
typedef void (*permissions_plain_handler)(gpointer instance, gpointer data);
gulong permissions_connect_plain(gpointer instance, const char *signal, permissions_plain_handler handler,
                                 gpointer data, GClosureNotify destroy);

/// GSimpleAction::activate, whose handler also takes the action's parameter.
typedef void (*permissions_action_handler)(GSimpleAction *action, GVariant *parameter, gpointer data);
gulong permissions_connect_action(GSimpleAction *action, permissions_action_handler handler, gpointer data,
                                  GClosureNotify destroy);

/// A search entry's placeholder text: GTK 4.8 has only the property
/// ("placeholder-text"; gtk_search_entry_set_placeholder_text came in 4.10), and
/// g_object_set takes varargs.
void permissions_set_placeholder_text(GtkWidget *entry, const char *text);

/// gtk_accessible_update_property takes its properties as varargs: the label
/// (GTK_ACCESSIBLE_PROPERTY_LABEL) and description of one accessible.
void permissions_set_accessible_label(GtkWidget *widget, const char *label);
void permissions_set_accessible_description(GtkWidget *widget, const char *description);

/// Makes `window`, realized, transient for a window of another program, which
/// GTK 4 cannot name (it has no foreign windows). On X11, `WM_TRANSIENT_FOR` on
/// the window's surface (XSetTransientForHint) with the parent's XID; on Wayland,
/// gdk_wayland_toplevel_set_transient_for_exported with an xdg-foreign handle.
/// Each returns FALSE, doing nothing, when the window is not realized or its
/// surface is another windowing system's.
gboolean permissions_set_transient_for_x11(GtkWidget *window, unsigned long parent_xid);
gboolean permissions_set_transient_for_wayland(GtkWidget *window, const char *parent_handle);

#endif
