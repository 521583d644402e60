/*
 * The config loader: read (size cap, UTF-8), parse (cJSON, positions for
 * syntax errors), walk the schema tables into a fresh struct, cross-check.
 * Every error is collected, one line each, so one run shows them all.
 */
#include "config/config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "codec/utf8.h"
#include "config/config_schema.h"

#define MAX_ERRORS 20  /* more are counted, not printed */
#define PATH_CAP   192 /* key paths are short; longer ones are cut */
#define QUOTE_CAP  48  /* file text echoed in a message, before "..." */
#define NEAR_LEN   64  /* longer words get no "did you mean" */

/* State of one load: where messages go and which key is being read. */
struct loader {
    const char *name;    /* file name, first on every message */
    char *err;           /* caller's buffer, may be NULL */
    size_t errlen;       /* its size */
    size_t used;         /* bytes written, NUL excluded */
    unsigned n_errors;   /* including those not printed */
    bool nomem;          /* an allocation failed: result is GW_ENOMEM */
    char path[PATH_CAP]; /* key path of the value being read */
    size_t path_len;     /* strlen(path) */
};

/* ---- messages ---------------------------------------------------------- */

#if defined(__GNUC__)
#define PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define PRINTF(f, a)
#endif

static void vappend(struct loader *ld, const char *fmt, va_list ap)
    PRINTF(2, 0);
static void append(struct loader *ld, const char *fmt, ...) PRINTF(2, 3);
static void fail_at(struct loader *ld, const char *where, const char *fmt, ...)
    PRINTF(3, 4);
static void fail_pos(struct loader *ld, const char *text, size_t off,
                     const char *fmt, ...) PRINTF(4, 5);

static void vappend(struct loader *ld, const char *fmt, va_list ap)
{
    int n;

    if (ld->err == NULL || ld->used + 1 >= ld->errlen) {
        return;
    }
    n = vsnprintf(ld->err + ld->used, ld->errlen - ld->used, fmt, ap);
    if (n > 0) {
        ld->used += (size_t)n;
        if (ld->used >= ld->errlen) {
            ld->used = ld->errlen - 1; /* vsnprintf truncated and ended */
        }
    }
}

static void append(struct loader *ld, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vappend(ld, fmt, ap);
    va_end(ap);
}

/* One line: NAME, then where (":3:5", ": mqtt.port" or ""), ": ", text. */
static void fail_at(struct loader *ld, const char *where, const char *fmt, ...)
{
    va_list ap;

    ld->n_errors++;
    if (ld->n_errors > MAX_ERRORS) {
        if (ld->n_errors == MAX_ERRORS + 1) {
            append(ld, "%s: too many errors, the rest are not shown\n",
                   ld->name);
        }
        return;
    }
    append(ld, "%s%s: ", ld->name, where);
    va_start(ap, fmt);
    vappend(ld, fmt, ap);
    va_end(ap);
    append(ld, "\n");
}

#define fail_key(ld, path, ...)                                                \
    do {                                                                       \
        char where_[PATH_CAP + 2];                                             \
        snprintf(where_, sizeof(where_), ": %s", (path));                      \
        fail_at((ld), where_, __VA_ARGS__);                                    \
    } while (0)

/* ---- key paths --------------------------------------------------------- */

static size_t path_push_key(struct loader *ld, const char *key)
{
    size_t mark = ld->path_len;
    char q[QUOTE_CAP];

    snprintf(ld->path + mark, sizeof(ld->path) - mark, "%s%s",
             mark > 0 ? "." : "", gw_config_schema_quote(key, q, sizeof(q)));
    ld->path_len = strlen(ld->path);
    return mark;
}

static size_t path_push_index(struct loader *ld, size_t index)
{
    size_t mark = ld->path_len;

    snprintf(ld->path + mark, sizeof(ld->path) - mark, "[%zu]", index);
    ld->path_len = strlen(ld->path);
    return mark;
}

static void path_pop(struct loader *ld, size_t mark)
{
    ld->path_len = mark;
    ld->path[mark] = '\0';
}

/* ---- the walk: JSON objects into structs, one table per object kind ---- */

static void load_object(struct loader *ld, const struct gw_config_table *table,
                        const cJSON *obj, void *base);

static void report(struct loader *ld, const char *why)
{
    if (why == gw_config_schema_oom) {
        ld->nomem = true;
    }
    fail_key(ld, ld->path, "%s", why);
}

static const char *wrong_type(const char *want, const cJSON *item, char *why,
                              size_t whylen)
{
    snprintf(why, whylen, "expected %s, got %s", want,
             gw_config_schema_json_type(item));
    return why;
}

static size_t count_items(const cJSON *array)
{
    size_t n = 0;

    for (const cJSON *it = array->child; it != NULL; it = it->next) {
        n++;
    }
    return n;
}

/* Checks a list's type and length; returns its length or SIZE_MAX. */
static size_t check_list(struct loader *ld, const struct gw_config_key *key,
                         const cJSON *item)
{
    char why[96];
    size_t n;

    if (!cJSON_IsArray(item)) {
        report(ld, wrong_type("an array", item, why, sizeof(why)));
        return SIZE_MAX;
    }
    n = count_items(item);
    if (n < (size_t)key->min) {
        snprintf(why, sizeof(why), "needs at least %lld entr%s", key->min,
                 key->min == 1 ? "y" : "ies");
        report(ld, why);
        return SIZE_MAX;
    }
    if (n > (size_t)key->max) {
        snprintf(why, sizeof(why), "has %zu entries, at most %lld allowed", n,
                 key->max);
        report(ld, why);
        return SIZE_MAX;
    }
    return n;
}

/* An array of objects: elements get defaults first, then the file. */
static void load_array(struct loader *ld, const struct gw_config_key *key,
                       const cJSON *item, void *base)
{
    size_t n = check_list(ld, key, item), i = 0;
    char *elems, why[96];

    if (n == SIZE_MAX || n == 0) {
        return;
    }
    elems = calloc(n, key->sub->size);
    if (elems == NULL) {
        report(ld, gw_config_schema_oom);
        return;
    }
    /* Owned by base from here on, so that a failure frees it. */
    *(char **)((char *)base + key->offset) = elems;
    *(size_t *)((char *)base + key->count_offset) = n;
    for (const cJSON *it = item->child; it != NULL; it = it->next, i++) {
        size_t mark = path_push_index(ld, i);
        void *elem = elems + i * key->sub->size;
        if (gw_config_schema_fill(key->sub, elem) < 0) {
            report(ld, gw_config_schema_oom);
        } else if (!cJSON_IsObject(it)) {
            report(ld, wrong_type("an object", it, why, sizeof(why)));
        } else {
            load_object(ld, key->sub, it, elem);
        }
        path_pop(ld, mark);
    }
}

/* An array of strings, each checked by key->check. */
static void load_strings(struct loader *ld, const struct gw_config_key *key,
                         const cJSON *item, void *base)
{
    size_t n = check_list(ld, key, item), i = 0;
    char **list, why[96];

    if (n == SIZE_MAX || n == 0) {
        return;
    }
    list = calloc(n, sizeof(*list));
    if (list == NULL) {
        report(ld, gw_config_schema_oom);
        return;
    }
    *(char ***)((char *)base + key->offset) = list;
    *(size_t *)((char *)base + key->count_offset) = n;
    for (const cJSON *it = item->child; it != NULL; it = it->next, i++) {
        size_t mark = path_push_index(ld, i);
        const char *reason =
            gw_config_schema_set(key, it, &list[i], why, sizeof(why));
        if (reason != NULL) {
            report(ld, reason);
        }
        path_pop(ld, mark);
    }
}

/*
 * An object of header names and string values (backends[].headers). The
 * names the gateway sets are checked once the auth scheme is known
 * (check_backends); here only the shape, so that the message can say
 * which entry is wrong. A value is never echoed: it is a secret.
 */
static void load_headers(struct loader *ld, const struct gw_config_key *key,
                         const cJSON *item, void *base)
{
    struct gw_header *list;
    size_t n, i = 0, total = 0;
    char why[96];

    if (!cJSON_IsObject(item)) {
        report(ld, wrong_type("an object", item, why, sizeof(why)));
        return;
    }
    n = count_items(item);
    if (n > (size_t)key->max) {
        snprintf(why, sizeof(why), "has %zu headers, at most %lld allowed", n,
                 key->max);
        report(ld, why);
        return;
    }
    if (n == 0) {
        return;
    }
    list = calloc(n, sizeof(*list));
    if (list == NULL) {
        report(ld, gw_config_schema_oom);
        return;
    }
    *(struct gw_header **)((char *)base + key->offset) = list;
    *(size_t *)((char *)base + key->count_offset) = n;
    for (const cJSON *it = item->child; it != NULL; it = it->next, i++) {
        size_t mark = path_push_key(ld, it->string);
        list[i].name = strdup(it->string);
        list[i].value =
            cJSON_IsString(it) ? strdup(it->valuestring) : strdup("");
        if (list[i].name == NULL || list[i].value == NULL) {
            report(ld, gw_config_schema_oom);
        } else if (!cJSON_IsString(it)) {
            report(ld, wrong_type("a string", it, why, sizeof(why)));
        } else {
            for (size_t j = 0; j < i; j++) {
                if (strcasecmp(list[j].name, it->string) == 0) {
                    report(ld, "duplicate header (names ignore case)");
                    break;
                }
            }
            total += strlen(list[i].name) + strlen(list[i].value);
        }
        path_pop(ld, mark);
    }
    if (total > GW_HEADERS_TOTAL_MAX) {
        snprintf(why, sizeof(why),
                 "names and values take %zu bytes, at most %d allowed", total,
                 GW_HEADERS_TOTAL_MAX);
        report(ld, why);
    }
}

static void load_value(struct loader *ld, const struct gw_config_key *key,
                       const cJSON *item, void *base)
{
    void *field = (char *)base + key->offset;
    const char *reason;
    char why[160];

    switch (key->type) {
    case GW_CF_OBJECT:
        if (!cJSON_IsObject(item)) {
            report(ld, wrong_type("an object", item, why, sizeof(why)));
        } else {
            load_object(ld, key->sub, item, field);
        }
        return;
    case GW_CF_ARRAY:
        load_array(ld, key, item, base);
        return;
    case GW_CF_STRINGS:
        load_strings(ld, key, item, base);
        return;
    case GW_CF_HEADERS:
        load_headers(ld, key, item, base);
        return;
    default:
        break;
    }
    reason = gw_config_schema_set(key, item, field, why, sizeof(why));
    if (reason != NULL) {
        report(ld, reason);
    }
}

static void unknown_key(struct loader *ld, const struct gw_config_table *table,
                        const char *key)
{
    const char *near = NULL;

    /* Past the cap nothing prints: skip the distance work. */
    if (ld->n_errors < MAX_ERRORS) {
        near = gw_config_schema_nearest(key, table->keys, table->n_keys,
                                        sizeof(table->keys[0]),
                                        offsetof(struct gw_config_key, name));
    }
    if (near != NULL) {
        fail_key(ld, ld->path, "unknown key (did you mean '%s'?)", near);
    } else {
        fail_key(ld, ld->path, "unknown key");
    }
}

static void load_object(struct loader *ld, const struct gw_config_table *table,
                        const cJSON *obj, void *base)
{
    uint64_t seen = 0; /* bit k: keys[k] was set (tables are small) */

    for (const cJSON *it = obj->child; it != NULL; it = it->next) {
        size_t mark = path_push_key(ld, it->string);
        size_t k = 0;

        while (k < table->n_keys && strcmp(table->keys[k].name, it->string)) {
            k++;
        }
        if (k == table->n_keys) {
            unknown_key(ld, table, it->string);
        } else if (seen & (UINT64_C(1) << k)) {
            fail_key(ld, ld->path, "duplicate key");
        } else {
            seen |= UINT64_C(1) << k;
            load_value(ld, &table->keys[k], it, base);
        }
        path_pop(ld, mark);
    }
    for (size_t k = 0; k < table->n_keys; k++) {
        if ((table->keys[k].flags & GW_CF_REQUIRED) &&
            !(seen & (UINT64_C(1) << k))) {
            size_t mark = path_push_key(ld, table->keys[k].name);
            fail_key(ld, ld->path, "missing (required in a %s)", table->what);
            path_pop(ld, mark);
        }
    }
}

/* ---- cross-checks: what no single key can check alone ------------------ */

/* Opened and read one byte: fopen() alone accepts a directory. */
static void check_readable(struct loader *ld, const char *path,
                           const char *file)
{
    char q[QUOTE_CAP];
    FILE *f = fopen(file, "rb");
    int saved;

    if (f != NULL) {
        (void)fgetc(f);
        saved = ferror(f) ? errno : 0;
        fclose(f);
        if (saved == 0) {
            return;
        }
        errno = saved;
    }
    fail_key(ld, path, "cannot read '%s': %s",
             gw_config_schema_quote(file, q, sizeof(q)), strerror(errno));
}

static void check_backends(struct loader *ld, struct gw_config *cfg)
{
    char path[PATH_CAP], q[QUOTE_CAP];

    if (cfg->n_backends == 0) {
        fail_key(ld, "backends", "at least one backend is required");
    }
    for (size_t i = 0; i < cfg->n_backends; i++) {
        const struct gw_backend_config *be = &cfg->backends[i];

        for (size_t j = 0; j < i; j++) {
            if (strcmp(be->name, cfg->backends[j].name) == 0) {
                snprintf(path, sizeof(path), "backends[%zu].name", i);
                fail_key(ld, path,
                         "duplicate backend name '%s' (as in "
                         "backends[%zu])",
                         gw_config_schema_quote(be->name, q, sizeof(q)), j);
                break;
            }
        }
        if (be->auth.scheme == GW_AUTH_BEARER && *be->auth.token == '\0') {
            snprintf(path, sizeof(path), "backends[%zu].auth.token", i);
            fail_key(ld, path, "required when the scheme is bearer");
        }
        if (be->auth.scheme == GW_AUTH_XIAOZHI_HMAC &&
            *be->auth.secret == '\0') {
            snprintf(path, sizeof(path), "backends[%zu].auth.secret", i);
            fail_key(ld, path, "required when the scheme is xiaozhi-hmac");
        }
        if (*be->ca_file != '\0') {
            snprintf(path, sizeof(path), "backends[%zu].ca_file", i);
            check_readable(ld, path, be->ca_file);
        }
        for (size_t h = 0; h < be->n_headers; h++) {
            const char *why = gw_config_header_check(
                be->headers[h].name, be->headers[h].value, be->auth.scheme);
            if (why != NULL) {
                snprintf(
                    path, sizeof(path), "backends[%zu].headers.%s", i,
                    gw_config_schema_quote(be->headers[h].name, q, sizeof(q)));
                fail_key(ld, path, "%s", why);
            }
        }
    }
}

static void check_mcp_servers(struct loader *ld, struct gw_config *cfg)
{
    char path[PATH_CAP], q[QUOTE_CAP];

    for (size_t i = 0; i < cfg->n_mcp_servers; i++) {
        const struct gw_mcp_server_config *ms = &cfg->mcp_servers[i];

        for (size_t j = 0; j < i; j++) {
            if (strcmp(ms->name, cfg->mcp_servers[j].name) == 0) {
                snprintf(path, sizeof(path), "mcp_servers[%zu].name", i);
                fail_key(ld, path,
                         "duplicate MCP server name '%s' (as in "
                         "mcp_servers[%zu])",
                         gw_config_schema_quote(ms->name, q, sizeof(q)), j);
                break;
            }
        }
        if (ms->auth.scheme == GW_AUTH_BEARER && *ms->auth.token == '\0') {
            snprintf(path, sizeof(path), "mcp_servers[%zu].auth.token", i);
            fail_key(ld, path, "required when the scheme is bearer");
        }
        if (*ms->ca_file != '\0') {
            snprintf(path, sizeof(path), "mcp_servers[%zu].ca_file", i);
            check_readable(ld, path, ms->ca_file);
        }
    }
}

/* Absent "routes" means: every device goes to the first backend. */
static int default_route(struct gw_config *cfg)
{
    struct gw_route_config *route = calloc(1, sizeof(*route));

    if (route == NULL) {
        return GW_ENOMEM;
    }
    cfg->routes = route;
    cfg->n_routes = 1;
    route->backends = calloc(1, sizeof(char *));
    if (route->backends == NULL) {
        return GW_ENOMEM;
    }
    route->n_backends = 1;
    route->backends[0] = strdup(cfg->backends[0].name);
    return route->backends[0] != NULL ? 0 : GW_ENOMEM;
}

static void resolve_route(struct loader *ld, const struct gw_config *cfg,
                          struct gw_route_config *route, size_t r)
{
    char path[PATH_CAP], q[QUOTE_CAP];

    route->backend_index = calloc(route->n_backends, sizeof(size_t));
    if (route->backend_index == NULL) {
        ld->nomem = true;
        return;
    }
    for (size_t k = 0; k < route->n_backends; k++) {
        const char *name = route->backends[k], *near;
        size_t b = 0;

        while (b < cfg->n_backends && strcmp(cfg->backends[b].name, name)) {
            b++;
        }
        route->backend_index[k] = b;
        if (b < cfg->n_backends) {
            for (size_t j = 0; j < k; j++) {
                if (route->backend_index[j] == b) {
                    snprintf(path, sizeof(path), "routes[%zu].backends[%zu]", r,
                             k);
                    fail_key(ld, path, "backend '%s' is listed twice",
                             gw_config_schema_quote(name, q, sizeof(q)));
                    break;
                }
            }
            continue;
        }
        snprintf(path, sizeof(path), "routes[%zu].backends[%zu]", r, k);
        near = gw_config_schema_nearest(
            name, cfg->backends, cfg->n_backends, sizeof(cfg->backends[0]),
            offsetof(struct gw_backend_config, name));
        fail_key(ld, path, "unknown backend '%s'%s%s%s",
                 gw_config_schema_quote(name, q, sizeof(q)),
                 near ? " (did you mean '" : "", near ? near : "",
                 near ? "'?)" : "");
    }
}

static void check_routes(struct loader *ld, struct gw_config *cfg, bool given)
{
    if (!given && cfg->n_backends > 0 && default_route(cfg) < 0) {
        ld->nomem = true;
        return;
    }
    for (size_t r = 0; r < cfg->n_routes && !ld->nomem; r++) {
        resolve_route(ld, cfg, &cfg->routes[r], r);
    }
}

static void check_mqtt(struct loader *ld, struct gw_config *cfg)
{
    if (*cfg->mqtt.client_id == '\0') {
        size_t len = strlen("hybridgw-") + strlen(cfg->instance) + 1;
        char *id = malloc(len);
        if (id == NULL) {
            ld->nomem = true;
            return;
        }
        snprintf(id, len, "hybridgw-%s", cfg->instance);
        free(cfg->mqtt.client_id);
        cfg->mqtt.client_id = id;
    }
    if (!cfg->mqtt.tls.enabled) {
        return; /* the files are not used, so not required to exist */
    }
    if ((*cfg->mqtt.tls.cert_file == '\0') !=
        (*cfg->mqtt.tls.key_file == '\0')) {
        fail_key(ld, "mqtt.tls", "cert_file and key_file go together");
    }
    if (*cfg->mqtt.tls.ca_file != '\0') {
        check_readable(ld, "mqtt.tls.ca_file", cfg->mqtt.tls.ca_file);
    }
    if (*cfg->mqtt.tls.cert_file != '\0') {
        check_readable(ld, "mqtt.tls.cert_file", cfg->mqtt.tls.cert_file);
    }
    if (*cfg->mqtt.tls.key_file != '\0') {
        check_readable(ld, "mqtt.tls.key_file", cfg->mqtt.tls.key_file);
    }
}

/* What ota.enabled needs, and a firmware offer that a device can use. */
static void check_ota(struct loader *ld, const struct gw_config *cfg)
{
    bool version = cfg->ota.firmware.version[0] != '\0';

    if (cfg->ota.enabled && cfg->ota.mqtt_endpoint[0] == '\0') {
        fail_key(ld, "ota.mqtt_endpoint",
                 "must be set when ota.enabled is true (the broker's "
                 "host:port as devices reach it)");
    }
    if (cfg->ota.enabled && cfg->ota.device_key[0] == '\0') {
        fail_key(ld, "ota.device_key",
                 "must be set when ota.enabled is true (the broker "
                 "plugin's plugin_opt_device_key)");
    }
    if (version != (cfg->ota.firmware.url[0] != '\0')) {
        fail_key(ld, version ? "ota.firmware.url" : "ota.firmware.version",
                 "must be set with ota.firmware.%s (a device upgrades from "
                 "the url when the version is newer than its own)",
                 version ? "version" : "url");
    }
    if (cfg->ota.firmware.force && !version) {
        fail_key(ld, "ota.firmware.force",
                 "needs ota.firmware.version and url");
    }
    /* A SQLite file is one instance's: the others would not know the
     * bindings it holds. */
    if (cfg->ota.enabled && cfg->ota.activation == GW_OTA_ACTIVATION_ON &&
        cfg->cluster.mode != GW_CLUSTER_MODE_OFF &&
        cfg->bindings.store == GW_BINDINGS_SQLITE) {
        fail_key(ld, "bindings.store",
                 "must be \"postgresql\" when cluster.mode is \"%s\" and "
                 "ota.activation is \"on\" (several instances need one "
                 "shared store)",
                 cfg->cluster.mode == GW_CLUSTER_MODE_HASH ? "hash" : "shared");
    }
}

/* cluster.instance defaults to mqtt.client_id (in mode hash), which must
 * then be a name. */
static void check_cluster(struct loader *ld, struct gw_config *cfg)
{
    const char *id = cfg->mqtt.client_id;
    size_t len = strlen(id);

    /* Mode off keeps "": nothing derived changes with mqtt.client_id. */
    if (ld->nomem || *cfg->cluster.instance != '\0' ||
        cfg->cluster.mode == GW_CLUSTER_MODE_OFF) {
        return;
    }
    if ((len == 0 || len > 64 ||
         strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                    "0123456789._-") != len)) {
        fail_key(ld, "cluster.instance",
                 "not set, and mqtt.client_id cannot stand for it (a name "
                 "has 1 to 64 letters, digits, '.', '_' or '-')");
        return;
    }
    char *copy = strdup(id);
    if (copy == NULL) {
        ld->nomem = true;
        return;
    }
    free(cfg->cluster.instance);
    cfg->cluster.instance = copy;
}

static void validate(struct loader *ld, struct gw_config *cfg,
                     bool routes_given)
{
    check_backends(ld, cfg);
    check_mcp_servers(ld, cfg);
    check_routes(ld, cfg, routes_given);
    check_mqtt(ld, cfg);
    check_cluster(ld, cfg);
    check_ota(ld, cfg);
    if (cfg->health.backoff_max_ms < cfg->health.backoff_ms) {
        fail_key(ld, "health.backoff_max_ms",
                 "must not be below health.backoff_ms (%d)",
                 cfg->health.backoff_ms);
    }
    if (cfg->udp.public_port == 0) {
        cfg->udp.public_port = cfg->udp.port;
    }
}

/* ---- reading and parsing ----------------------------------------------- */

/* 1-based line and column (in characters) of byte off. */
static void position(const char *text, size_t off, unsigned long *line,
                     unsigned long *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off; i++) {
        if (text[i] == '\n') {
            (*line)++;
            *col = 1;
        } else if (((unsigned char)text[i] & 0xc0) != 0x80) {
            (*col)++;
        }
    }
}

static void fail_pos(struct loader *ld, const char *text, size_t off,
                     const char *fmt, ...)
{
    char where[48], msg[160];
    unsigned long line, col;
    va_list ap;

    position(text, off, &line, &col);
    snprintf(where, sizeof(where), ":%lu:%lu", line, col);
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fail_at(ld, where, "%s", msg);
}

/*
 * Offset of the first byte that is NUL or not well-formed UTF-8, or len.
 * Each sequence is handed to gw_utf8_valid on its own, which finds where
 * the text breaks and not only that it does.
 */
static size_t bad_byte(const char *text, size_t len)
{
    size_t i = 0;

    if (gw_utf8_valid(text, len) && memchr(text, '\0', len) == NULL) {
        return len;
    }
    while (i < len) {
        unsigned char b = (unsigned char)text[i];
        size_t n = b < 0xc0 ? 1 : b < 0xe0 ? 2 : b < 0xf0 ? 3 : 4;
        if (n > len - i) {
            n = len - i;
        }
        if (b == 0 || !gw_utf8_valid(text + i, n)) {
            return i;
        }
        i += n;
    }
    return len;
}

/*
 * Offset of a "\u0000" escape, or len: cJSON would cut the string there,
 * so "ws://a\u0000b" would load as "ws://a". Backslashes only occur in
 * strings in valid JSON, so a plain scan is enough.
 */
static size_t nul_escape(const char *text, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (text[i] != '\\') {
            continue;
        }
        if (len - i >= 6 && memcmp(text + i + 1, "u0000", 5) == 0) {
            return i;
        }
        i++; /* skip the escaped character, which may be a backslash */
    }
    return len;
}

static void syntax_error(struct loader *ld, const char *text, size_t len,
                         size_t off)
{
    char snippet[24], q[sizeof(snippet) + 4];
    size_t n = 0;

    while (off + n < len && n + 1 < sizeof(snippet) && text[off + n] != '\n' &&
           text[off + n] != '\r') {
        snippet[n] = text[off + n];
        n++;
    }
    snippet[n] = '\0';
    if (off >= len || n == 0) {
        fail_pos(ld, text, off, "syntax error at the end of the input");
    } else {
        fail_pos(ld, text, off, "syntax error near '%s'",
                 gw_config_schema_quote(snippet, q, sizeof(q)));
    }
}

static bool blank(const char *text, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (strchr(" \t\r\n", text[i]) == NULL || text[i] == '\0') {
            return false;
        }
    }
    return true;
}

/* The checks that come before any key is looked at; NULL on failure. */
static cJSON *parse(struct loader *ld, const char *text, size_t len)
{
    const char *end = NULL;
    cJSON *root;
    char *copy;
    size_t off;

    if (len > GW_CONFIG_MAX_BYTES) {
        fail_at(ld, "", "larger than %d bytes", GW_CONFIG_MAX_BYTES);
        return NULL;
    }
    if (blank(text, len)) {
        fail_at(ld, "", "empty; a config needs at least one backend");
        return NULL;
    }
    if ((off = bad_byte(text, len)) < len) {
        fail_pos(ld, text, off, text[off] ? "invalid UTF-8" : "NUL byte");
        return NULL;
    }
    if ((off = nul_escape(text, len)) < len) {
        fail_pos(ld, text, off, "\\u0000 is not allowed in strings");
        return NULL;
    }
    /* A terminated copy: cJSON then never depends on len alone. */
    copy = malloc(len + 1);
    if (copy == NULL) {
        ld->nomem = true;
        return NULL;
    }
    memcpy(copy, text, len);
    copy[len] = '\0';
    root = cJSON_ParseWithLengthOpts(copy, len, &end, 0);
    off = end != NULL ? (size_t)(end - copy) : 0;
    while (root != NULL && off < len && strchr(" \t\r\n", text[off]) &&
           text[off] != '\0') {
        off++; /* cJSON stops right after the value */
    }
    if (root == NULL) {
        syntax_error(ld, text, len, off);
    } else if (off < len) {
        fail_pos(ld, text, off, "unexpected text after the top-level object");
    } else if (!cJSON_IsObject(root)) {
        fail_at(ld, "", "the top level must be an object, got %s",
                gw_config_schema_json_type(root));
    }
    free(copy);
    if (ld->n_errors > 0) {
        cJSON_Delete(root);
        root = NULL;
    }
    return root;
}

/* ---- public API -------------------------------------------------------- */

int gw_config_load_string(const char *text, size_t len, const char *name,
                          struct gw_config **out, char *err, size_t errlen)
{
    struct loader ld = {
        .name = name ? name : "<string>", .err = err, .errlen = errlen};
    struct gw_config *cfg = NULL;
    cJSON *root;

    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
    if (out == NULL || (text == NULL && len > 0)) {
        return GW_EINVAL;
    }
    *out = NULL;
    root = parse(&ld, text != NULL ? text : "", len);
    if (root != NULL) {
        cfg = calloc(1, sizeof(*cfg));
        if (cfg == NULL || (cfg->source = strdup(ld.name)) == NULL ||
            gw_config_schema_fill(&gw_config_schema, cfg) < 0) {
            ld.nomem = true;
        } else {
            load_object(&ld, &gw_config_schema, root, cfg);
        }
        if (ld.n_errors == 0 && !ld.nomem) {
            validate(&ld, cfg,
                     cJSON_GetObjectItemCaseSensitive(root, "routes") != NULL);
        }
        cJSON_Delete(root);
    }
    if (ld.nomem || ld.n_errors > 0) {
        gw_config_destroy(cfg);
        if (ld.nomem) {
            ld.used = 0;
            ld.n_errors = 0;
            fail_at(&ld, "", "out of memory");
            return GW_ENOMEM;
        }
        return GW_ECONFIG;
    }
    *out = cfg;
    return 0;
}

int gw_config_load_file(const char *path, struct gw_config **out, char *err,
                        size_t errlen)
{
    /* One byte more than allowed, so that "too big" can be seen. */
    char *buf = malloc(GW_CONFIG_MAX_BYTES + 1);
    size_t n;
    FILE *f;
    int rc;

    if (out != NULL) {
        *out = NULL;
    }
    if (path == NULL || out == NULL) {
        free(buf);
        return GW_EINVAL;
    }
    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    } else {
        errlen = 0; /* snprintf(NULL, 0, ...) writes nothing */
    }
    if (buf == NULL) {
        snprintf(err, errlen, "%s: out of memory\n", path);
        return GW_ENOMEM;
    }
    errno = 0;
    f = fopen(path, "rb");
    if (f == NULL) {
        rc = errno ? -errno : -EIO;
        snprintf(err, errlen, "%s: cannot open: %s\n", path, strerror(-rc));
        free(buf);
        return rc;
    }
    n = fread(buf, 1, GW_CONFIG_MAX_BYTES + 1, f);
    rc = ferror(f) ? (errno ? -errno : -EIO) : 0;
    fclose(f);
    if (rc < 0) {
        snprintf(err, errlen, "%s: cannot read: %s\n", path, strerror(-rc));
    } else {
        rc = gw_config_load_string(buf, n, path, out, err, errlen);
    }
    free(buf);
    return rc;
}

void gw_config_destroy(struct gw_config *cfg)
{
    if (cfg == NULL) {
        return;
    }
    /* backend_index is derived, so it is not in the schema. */
    for (size_t r = 0; r < cfg->n_routes; r++) {
        free(cfg->routes[r].backend_index);
    }
    gw_config_schema_free(&gw_config_schema, cfg);
    free(cfg->source);
    free(cfg);
}

size_t gw_config_restart_changes(const struct gw_config *running,
                                 const struct gw_config *loaded,
                                 gw_config_change_cb cb, void *arg)
{
    return gw_config_schema_diff(&gw_config_schema, running, loaded, "", cb,
                                 arg);
}

size_t gw_config_keep_restart_values(struct gw_config *running,
                                     struct gw_config *loaded)
{
    return gw_config_schema_keep(&gw_config_schema, running, loaded);
}

int gw_config_dump(const struct gw_config *cfg, bool secrets, char **out)
{
    cJSON *json = gw_config_schema_dump(&gw_config_schema, cfg, secrets);
    char *text = json != NULL ? cJSON_Print(json) : NULL;

    cJSON_Delete(json);
    *out = text != NULL ? strdup(text) : NULL;
    cJSON_free(text);
    return *out != NULL ? 0 : GW_ENOMEM;
}
