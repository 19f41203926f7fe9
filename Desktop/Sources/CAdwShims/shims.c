#include "adw-shims.h"

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
