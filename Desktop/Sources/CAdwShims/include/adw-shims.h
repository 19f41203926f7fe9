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

/// gtk_accessible_update_property takes its properties as varargs: the label
/// (GTK_ACCESSIBLE_PROPERTY_LABEL) and description of one accessible.
void permissions_set_accessible_label(GtkWidget *widget, const char *label);
void permissions_set_accessible_description(GtkWidget *widget, const char *description);

#endif
