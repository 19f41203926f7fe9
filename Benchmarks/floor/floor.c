/* The C floor of `permissions-bench core`: the physical limit of a D-Bus service on
 * libdbus, with none of DBusKit's costs (router, fast path, Swift runtime). One
 * thread, one connection to the bus at --address, owning a bus name,
 * dbus_connection_read_write_dispatch in a loop, and one filter that answers:
 *
 *   Status(s) -> s   GetStatus's shape: the argument read, a constant word answered
 *   Emit(s)          the plain signal Tick(s), then the reply (broadcast fan-out)
 *   Subscribe()      the caller added to a list
 *   EmitEach(s)      Tick(s) marshalled once, a copy sent to each subscriber, then
 *                    the reply (unicast fan-out)
 *   UnsubscribeAll() the list emptied
 *
 * on the interface org.example.BenchFloor at /org/example/BenchFloor.
 * org.freedesktop.DBus.Peer.Ping is answered by libdbus itself, before any filter.
 * The bench builds it at run time (CoreBench.swift, buildCFloor):
 *
 *   cc -O2 -Wall -Werror -o floor-c floor.c $(pkg-config --cflags --libs dbus-1)
 *
 * usage: floor-c --address ADDRESS --name BUSNAME
 */
#include <dbus/dbus.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FLOOR_PATH "/org/example/BenchFloor"
#define FLOOR_INTERFACE "org.example.BenchFloor"
/* As long as permissionsd's answer to the bench's GetStatus(location). */
#define FLOOR_STATUS_WORD "not-determined"

static char **subscribers;
static size_t subscriber_count, subscriber_capacity;

static void die(const char *what, DBusError *error) {
    fprintf(stderr, "floor-c: %s: %s\n", what, error && dbus_error_is_set(error) ? error->message : "out of memory");
    exit(1);
}

static void reply_empty(DBusConnection *connection, DBusMessage *call) {
    DBusMessage *reply = dbus_message_new_method_return(call);
    if (!reply || !dbus_connection_send(connection, reply, NULL)) die("reply", NULL);
    dbus_message_unref(reply);
}

/* The first argument of a call whose signature is "s", or NULL. */
static const char *string_argument(DBusMessage *call) {
    DBusMessageIter iter;
    const char *value = NULL;
    if (!dbus_message_iter_init(call, &iter) || dbus_message_iter_get_arg_type(&iter) != DBUS_TYPE_STRING) return NULL;
    dbus_message_iter_get_basic(&iter, &value);
    return value;
}

static DBusMessage *tick(const char *word) {
    DBusMessage *signal = dbus_message_new_signal(FLOOR_PATH, FLOOR_INTERFACE, "Tick");
    if (!signal || !dbus_message_append_args(signal, DBUS_TYPE_STRING, &word, DBUS_TYPE_INVALID)) die("Tick", NULL);
    return signal;
}

static DBusHandlerResult filter(DBusConnection *connection, DBusMessage *message, void *data) {
    (void)data;
    if (dbus_message_get_type(message) != DBUS_MESSAGE_TYPE_METHOD_CALL
        || !dbus_message_has_path(message, FLOOR_PATH) || !dbus_message_has_interface(message, FLOOR_INTERFACE))
        return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
    const char *member = dbus_message_get_member(message);
    if (strcmp(member, "Status") == 0 && dbus_message_has_signature(message, "s")) {
        (void)string_argument(message); /* read, as permissionsd reads its argument */
        const char *word = FLOOR_STATUS_WORD;
        DBusMessage *reply = dbus_message_new_method_return(message);
        if (!reply || !dbus_message_append_args(reply, DBUS_TYPE_STRING, &word, DBUS_TYPE_INVALID)
            || !dbus_connection_send(connection, reply, NULL))
            die("Status reply", NULL);
        dbus_message_unref(reply);
    } else if (strcmp(member, "Emit") == 0 && dbus_message_has_signature(message, "s")) {
        DBusMessage *signal = tick(string_argument(message));
        if (!dbus_connection_send(connection, signal, NULL)) die("Tick", NULL);
        dbus_message_unref(signal);
        reply_empty(connection, message);
    } else if (strcmp(member, "Subscribe") == 0) {
        if (subscriber_count == subscriber_capacity) {
            subscriber_capacity = subscriber_capacity ? 2 * subscriber_capacity : 16;
            subscribers = realloc(subscribers, subscriber_capacity * sizeof *subscribers);
            if (!subscribers) die("Subscribe", NULL);
        }
        subscribers[subscriber_count++] = strdup(dbus_message_get_sender(message));
        reply_empty(connection, message);
    } else if (strcmp(member, "EmitEach") == 0 && dbus_message_has_signature(message, "s")) {
        /* The cheapest N sends libdbus has: one message marshalled, copied per subscriber. */
        DBusMessage *signal = tick(string_argument(message));
        for (size_t i = 0; i < subscriber_count; i++) {
            DBusMessage *copy = dbus_message_copy(signal);
            if (!copy || !dbus_message_set_destination(copy, subscribers[i]) || !dbus_connection_send(connection, copy, NULL))
                die("EmitEach", NULL);
            dbus_message_unref(copy);
        }
        dbus_message_unref(signal);
        reply_empty(connection, message);
    } else if (strcmp(member, "UnsubscribeAll") == 0) {
        for (size_t i = 0; i < subscriber_count; i++) free(subscribers[i]);
        subscriber_count = 0;
        reply_empty(connection, message);
    } else {
        return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
    }
    return DBUS_HANDLER_RESULT_HANDLED;
}

int main(int argc, char **argv) {
    if (argc != 5 || strcmp(argv[1], "--address") != 0 || strcmp(argv[3], "--name") != 0) {
        fprintf(stderr, "usage: floor-c --address ADDRESS --name BUSNAME\n");
        return 2;
    }
    DBusError error;
    dbus_error_init(&error);
    DBusConnection *connection = dbus_connection_open_private(argv[2], &error);
    if (!connection) die("connect", &error);
    if (!dbus_bus_register(connection, &error)) die("Hello", &error);
    dbus_connection_set_exit_on_disconnect(connection, TRUE);
    if (!dbus_connection_add_filter(connection, filter, NULL, NULL)) die("filter", NULL);
    int owned = dbus_bus_request_name(connection, argv[4], DBUS_NAME_FLAG_DO_NOT_QUEUE, &error);
    if (owned < 0) die("RequestName", &error);
    if (owned != DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER) {
        fprintf(stderr, "floor-c: %s is taken\n", argv[4]);
        return 1;
    }
    while (dbus_connection_read_write_dispatch(connection, -1)) {}
    return 0;
}
