/* wprules.c - what WirePlumber 0.5's access.rules make of a client, worked out
 * with PipeWire's own configuration parser and rule matcher (WirePlumber 0.5 is
 * not in Debian 12; these are the functions it calls).
 *
 * usage: wprules FILE... -- KEY=VALUE...
 * build: gcc -O2 -Wall -o wprules wprules.c $(pkg-config --cflags --libs libpipewire-0.3)
 *
 * Each FILE is read as PipeWire reads a configuration file (the whole text through
 * pw_properties_update_string, as conf.c's conf_load does) and must hold an
 * access.rules array, and nothing else. The KEY=VALUE pairs are a client's
 * properties (with "access" as WirePlumber works it out before matching). The
 * rules of the files, in the order given (WirePlumber's: its data directory's
 * fragments, then /etc's, then the user's, each in name order), are matched as
 * WirePlumber's JsonUtils.match_rules_update_properties does: pw_conf_match_rules
 * over the one set of properties, each matching rule's update-props applied to it
 * at once, so that a later rule sees the earlier ones' changes and replaces what
 * they set.
 *
 * PipeWire 0.3.65's parser takes almost any text (an unclosed bracket is closed by
 * the end of the file); the newer one WirePlumber 0.5 runs on refuses a file that
 * is not well formed. So each file is first checked here: brackets and braces
 * balanced and matching, strings closed (comments run from # to the end of a
 * line outside strings).
 *
 * Output: "matched FILE N" for each rule that applied (N from 1 in its file), then
 * "default_permissions=VALUE" ("none" when no rule set it). Exit 1 on a file that
 * is missing or not well formed, holds another key, or whose access.rules is not
 * an array of objects.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spa/utils/json.h>
#include <pipewire/pipewire.h>

struct match_data {
    struct pw_properties *client;
    const char *file;
    int rule;
    int matched;
};

static int on_action(void *data, const char *location, const char *action, const char *str, size_t len)
{
    struct match_data *d = data;
    if (strcmp(action, "update-props") != 0) return 0;
    pw_properties_update_string(d->client, str, len);
    d->matched = 1;
    return 0;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t size = 0, used = 0;
    char *text = NULL;
    for (;;) {
        if (used + 4096 + 1 > size) text = realloc(text, size = (size + 4096) * 2);
        size_t got = fread(text + used, 1, 4096, f);
        used += got;
        if (got == 0) break;
    }
    fclose(f);
    text[used] = '\0';
    return text;
}

/* Brackets balanced and matching, strings closed; 0, or -1 with the line told. */
static int check_well_formed(const char *path, const char *text)
{
    char stack[64];
    int depth = 0, line = 1, string_line = 0;
    for (const char *c = text; *c; c++) {
        if (*c == '\n') line++;
        if (string_line) {
            if (*c == '\\' && c[1]) {
                if (c[1] == '\n') line++;
                c++;
            } else if (*c == '"') string_line = 0;
            continue;
        }
        switch (*c) {
        case '"': string_line = line; break;
        case '#': while (c[1] && c[1] != '\n') c++; break;
        case '[': case '{':
            if (depth == (int)sizeof(stack)) {
                fprintf(stderr, "wprules: %s:%d: nested too deep\n", path, line);
                return -1;
            }
            stack[depth++] = *c == '[' ? ']' : '}';
            break;
        case ']': case '}':
            if (depth == 0 || stack[depth - 1] != *c) {
                fprintf(stderr, "wprules: %s:%d: unexpected '%c'\n", path, line, *c);
                return -1;
            }
            depth--;
            break;
        }
    }
    if (string_line) {
        fprintf(stderr, "wprules: %s:%d: string not closed\n", path, string_line);
        return -1;
    }
    if (depth > 0) {
        fprintf(stderr, "wprules: %s:%d: '%c' missing at the end\n", path, line, stack[depth - 1]);
        return -1;
    }
    return 0;
}

/* The rules of one file, each matched on its own so that a match can be told. */
static int apply_file(const char *path, struct pw_properties *client)
{
    char *text = read_file(path);
    if (!text) {
        fprintf(stderr, "wprules: %s: %m\n", path);
        return -1;
    }
    if (check_well_formed(path, text) < 0) {
        free(text);
        return -1;
    }
    struct pw_properties *conf = pw_properties_new(NULL, NULL);
    pw_properties_update_string(conf, text, strlen(text));
    free(text);
    const struct spa_dict_item *item;
    spa_dict_for_each(item, &conf->dict) {
        if (strcmp(item->key, "access.rules") != 0) {
            fprintf(stderr, "wprules: %s: unexpected key %s\n", path, item->key);
            pw_properties_free(conf);
            return -1;
        }
    }
    const char *rules = pw_properties_get(conf, "access.rules");
    struct spa_json array, rule_iter;
    const char *value;
    int len, n = 0;
    if (!rules || spa_json_enter_array((spa_json_init(&array, rules, strlen(rules)), &array), &rule_iter) <= 0) {
        fprintf(stderr, "wprules: %s: no access.rules array\n", path);
        pw_properties_free(conf);
        return -1;
    }
    while ((len = spa_json_next(&rule_iter, &value)) > 0) {
        n++;
        if (!spa_json_is_object(value, len)) {
            fprintf(stderr, "wprules: %s: rule %d is not an object\n", path, n);
            pw_properties_free(conf);
            return -1;
        }
        len = spa_json_container_len(&rule_iter, value, len);
        /* One rule as an array of one, for pw_conf_match_rules. */
        char *one = malloc(len + 3);
        sprintf(one, "[%.*s]", len, value);
        struct match_data d = { client, path, n, 0 };
        pw_conf_match_rules(one, strlen(one), path, &client->dict, on_action, &d);
        if (d.matched) printf("matched %s %d\n", path, n);
        free(one);
    }
    pw_properties_free(conf);
    return 0;
}

int main(int argc, char **argv)
{
    int i, separator = -1;
    for (i = 1; i < argc; i++)
        if (strcmp(argv[i], "--") == 0) { separator = i; break; }
    if (separator < 2) {
        fprintf(stderr, "usage: wprules FILE... -- KEY=VALUE...\n");
        return 2;
    }
    pw_init(NULL, NULL);
    struct pw_properties *client = pw_properties_new(NULL, NULL);
    for (i = separator + 1; i < argc; i++) {
        char *equals = strchr(argv[i], '=');
        if (!equals) {
            fprintf(stderr, "wprules: %s: not KEY=VALUE\n", argv[i]);
            return 2;
        }
        *equals = '\0';
        pw_properties_set(client, argv[i], equals + 1);
    }
    for (i = 1; i < separator; i++)
        if (apply_file(argv[i], client) < 0) return 1;
    const char *permissions = pw_properties_get(client, "default_permissions");
    printf("default_permissions=%s\n", permissions ? permissions : "none");
    pw_properties_free(client);
    pw_deinit();
    return 0;
}
