/*
 * The generic walks over the key tables (config_schema.c): a scalar JSON
 * value into its field, defaults, free, compare, keep, dump, and the
 * pieces of the loader's messages.
 */
#include "config/config_schema.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---- names ------------------------------------------------------------- */

const char *gw_config_schema_name(const struct gw_config_name *names, int value)
{
    for (; names->name != NULL; names++) {
        if (names->value == value) {
            return names->name;
        }
    }
    return NULL;
}

/* ---- messages ---------------------------------------------------------- */

const char *gw_config_schema_quote(const char *s, char *buf, size_t size)
{
    size_t i = 0, cap = size > 4 ? size - 4 : 0;

    for (; s[i] != '\0' && i < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[i] = (c < 0x20 || c == 0x7f) ? '.' : (char)c;
    }
    if (s[i] != '\0') {
        while (i > 0 && ((unsigned char)s[i] & 0xc0) == 0x80) {
            i--; /* do not split a UTF-8 sequence */
        }
        memcpy(buf + i, "...", 3);
        i += 3;
    }
    buf[i] = '\0';
    return buf;
}

const char *gw_config_schema_json_type(const cJSON *item)
{
    if (cJSON_IsBool(item)) {
        return "a boolean";
    }
    if (cJSON_IsNull(item)) {
        return "null";
    }
    if (cJSON_IsNumber(item)) {
        return "a number";
    }
    if (cJSON_IsString(item)) {
        return "a string";
    }
    if (cJSON_IsArray(item)) {
        return "an array";
    }
    return cJSON_IsObject(item) ? "an object" : "an invalid value";
}

/* ---- setters: scalar JSON values into their fields --------------------- */

const char gw_config_schema_oom[] = "out of memory";

/* A setter stores item at field or returns a reason (why may hold it). */
typedef const char *(*setter)(const struct gw_config_key *key,
                              const cJSON *item, void *field, char *why,
                              size_t whylen);

static const char *wrong_type(const char *want, const cJSON *item, char *why,
                              size_t whylen)
{
    snprintf(why, whylen, "expected %s, got %s", want,
             gw_config_schema_json_type(item));
    return why;
}

static const char *set_string(const struct gw_config_key *key,
                              const cJSON *item, void *field, char *why,
                              size_t whylen)
{
    char *copy;

    (void)key;
    if (!cJSON_IsString(item)) {
        return wrong_type("a string", item, why, whylen);
    }
    copy = strdup(item->valuestring);
    if (copy == NULL) {
        return gw_config_schema_oom;
    }
    free(*(char **)field);
    *(char **)field = copy;
    return NULL;
}

static const char *set_int(const struct gw_config_key *key, const cJSON *item,
                           void *field, char *why, size_t whylen)
{
    double v;

    if (!cJSON_IsNumber(item)) {
        return wrong_type("an integer", item, why, whylen);
    }
    v = item->valuedouble;
    /* Range first: it also keeps the cast below defined (and NaN out). */
    if (!(v >= (double)key->min && v <= (double)key->max)) {
        snprintf(why, whylen, "%.15g is out of range %lld-%lld", v, key->min,
                 key->max);
        return why;
    }
    if ((double)(long long)v != v) {
        snprintf(why, whylen, "expected an integer, got %.15g", v);
        return why;
    }
    *(int *)field = (int)v;
    return NULL;
}

static const char *set_bool(const struct gw_config_key *key, const cJSON *item,
                            void *field, char *why, size_t whylen)
{
    (void)key;
    if (!cJSON_IsBool(item)) {
        return wrong_type("true or false", item, why, whylen);
    }
    *(bool *)field = cJSON_IsTrue(item);
    return NULL;
}

static const char *set_enum(const struct gw_config_key *key, const cJSON *item,
                            void *field, char *why, size_t whylen)
{
    char q[48];
    size_t used;

    if (!cJSON_IsString(item)) {
        return wrong_type("a string", item, why, whylen);
    }
    for (const struct gw_config_name *n = key->names; n->name; n++) {
        if (strcmp(n->name, item->valuestring) == 0) {
            *(int *)field = n->value;
            return NULL;
        }
    }
    snprintf(why, whylen, "'%s' is not one of",
             gw_config_schema_quote(item->valuestring, q, sizeof(q)));
    for (const struct gw_config_name *n = key->names; n->name; n++) {
        used = strlen(why);
        snprintf(why + used, whylen - used, "%s %s", n == key->names ? "" : ",",
                 n->name);
    }
    return why;
}

static const setter setters[] = {
    [GW_CF_STRING] = set_string,  [GW_CF_INT] = set_int,
    [GW_CF_BOOL] = set_bool,      [GW_CF_ENUM] = set_enum,
    [GW_CF_STRINGS] = set_string, /* one element of the list */
};

const char *gw_config_schema_set(const struct gw_config_key *key,
                                 const cJSON *item, void *field, char *why,
                                 size_t whylen)
{
    const char *reason = NULL;

    if ((size_t)key->type >= COUNT(setters) || setters[key->type] == NULL) {
        return "not a scalar"; /* objects and lists are the loader's */
    }
    reason = setters[key->type](key, item, field, why, whylen);
    if (reason == NULL && key->check != NULL) {
        reason = key->check(field);
    }
    return reason;
}

/* ---- "did you mean" ---------------------------------------------------- */

#define NEAR_LEN 64 /* longer words get no suggestion */

static unsigned char lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c - 'A' + 'a') : c;
}

/* Edit distance counting a swap of neighbours as one edit, no case. */
static size_t distance(const char *a, size_t la, const char *b, size_t lb)
{
    size_t d[NEAR_LEN + 1][NEAR_LEN + 1];

    for (size_t i = 0; i <= la; i++) {
        for (size_t j = 0; j <= lb; j++) {
            if (i == 0 || j == 0) {
                d[i][j] = i + j;
                continue;
            }
            size_t cost = lower((unsigned char)a[i - 1]) !=
                          lower((unsigned char)b[j - 1]);
            size_t best = d[i - 1][j - 1] + cost;
            best = d[i - 1][j] + 1 < best ? d[i - 1][j] + 1 : best;
            best = d[i][j - 1] + 1 < best ? d[i][j - 1] + 1 : best;
            if (i > 1 && j > 1 &&
                lower((unsigned char)a[i - 1]) ==
                    lower((unsigned char)b[j - 2]) &&
                lower((unsigned char)a[i - 2]) ==
                    lower((unsigned char)b[j - 1]) &&
                d[i - 2][j - 2] + 1 < best) {
                best = d[i - 2][j - 2] + 1;
            }
            d[i][j] = best;
        }
    }
    return d[la][lb];
}

const char *gw_config_schema_nearest(const char *word, const void *records,
                                     size_t n, size_t stride, size_t offset)
{
    size_t lw = strlen(word), best_d = SIZE_MAX;
    size_t limit = lw <= 3 ? 1 : lw <= 6 ? 2 : 3;
    const char *best = NULL;

    if (lw > NEAR_LEN) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        const char *cand =
            *(const char *const *)((const char *)records + i * stride + offset);
        size_t lc = strlen(cand), d;
        if (lc > NEAR_LEN) {
            continue;
        }
        d = distance(word, lw, cand, lc);
        if (d <= limit && d < (lw > lc ? lw : lc) && d < best_d) {
            best = cand;
            best_d = d;
        }
    }
    return best;
}

/* ---- generic walks ----------------------------------------------------- */

#define FIELD(base, key)   ((char *)(base) + (key)->offset)
#define CFIELD(base, key)  ((const char *)(base) + (key)->offset)
#define COUNTER(base, key) ((size_t *)((char *)(base) + (key)->count_offset))
#define CCOUNTER(base, key)                                                    \
    (*(const size_t *)((const char *)(base) + (key)->count_offset))

int gw_config_schema_fill(const struct gw_config_table *table, void *base)
{
    for (size_t i = 0; i < table->n_keys; i++) {
        const struct gw_config_key *key = &table->keys[i];
        void *field = FIELD(base, key);
        int rc;

        switch (key->type) {
        case GW_CF_STRING:
            *(char **)field = strdup(key->def_str ? key->def_str : "");
            if (*(char **)field == NULL) {
                return GW_ENOMEM;
            }
            break;
        case GW_CF_INT:
        case GW_CF_ENUM:
            *(int *)field = (int)key->def;
            break;
        case GW_CF_BOOL:
            *(bool *)field = key->def != 0;
            break;
        case GW_CF_OBJECT:
            rc = gw_config_schema_fill(key->sub, field);
            if (rc < 0) {
                return rc;
            }
            break;
        case GW_CF_ARRAY:
        case GW_CF_STRINGS:
        case GW_CF_HEADERS:
            *(void **)field = NULL;
            *COUNTER(base, key) = 0;
            break;
        }
    }
    return 0;
}

void gw_config_schema_free(const struct gw_config_table *table, void *base)
{
    for (size_t i = 0; i < table->n_keys; i++) {
        const struct gw_config_key *key = &table->keys[i];
        void *field = FIELD(base, key);
        size_t n;

        switch (key->type) {
        case GW_CF_STRING:
            free(*(char **)field);
            *(char **)field = NULL;
            break;
        case GW_CF_OBJECT:
            gw_config_schema_free(key->sub, field);
            break;
        case GW_CF_ARRAY:
            n = *COUNTER(base, key);
            for (size_t k = 0; k < n; k++) {
                gw_config_schema_free(key->sub,
                                      *(char **)field + k * key->sub->size);
            }
            free(*(void **)field);
            *(void **)field = NULL;
            *COUNTER(base, key) = 0;
            break;
        case GW_CF_STRINGS:
            n = *COUNTER(base, key);
            for (size_t k = 0; k < n; k++) {
                free((*(char ***)field)[k]);
            }
            free(*(void **)field);
            *(void **)field = NULL;
            *COUNTER(base, key) = 0;
            break;
        case GW_CF_HEADERS:
            n = *COUNTER(base, key);
            for (size_t k = 0; k < n; k++) {
                free((*(struct gw_header **)field)[k].name);
                free((*(struct gw_header **)field)[k].value);
            }
            free(*(void **)field);
            *(void **)field = NULL;
            *COUNTER(base, key) = 0;
            break;
        default:
            break;
        }
    }
}

static bool table_equal(const struct gw_config_table *table, const void *a,
                        const void *b)
{
    for (size_t i = 0; i < table->n_keys; i++) {
        if (!gw_config_schema_equal(&table->keys[i], a, b)) {
            return false;
        }
    }
    return true;
}

bool gw_config_schema_equal(const struct gw_config_key *key, const void *a,
                            const void *b)
{
    const void *fa = CFIELD(a, key), *fb = CFIELD(b, key);
    size_t n;

    switch (key->type) {
    case GW_CF_STRING:
        return strcmp(*(char *const *)fa, *(char *const *)fb) == 0;
    case GW_CF_INT:
    case GW_CF_ENUM:
        return *(const int *)fa == *(const int *)fb;
    case GW_CF_BOOL:
        return *(const bool *)fa == *(const bool *)fb;
    case GW_CF_OBJECT:
        return table_equal(key->sub, fa, fb);
    case GW_CF_ARRAY:
        n = CCOUNTER(a, key);
        if (n != CCOUNTER(b, key)) {
            return false;
        }
        for (size_t k = 0; k < n; k++) {
            size_t at = k * key->sub->size;
            if (!table_equal(key->sub, *(char *const *)fa + at,
                             *(char *const *)fb + at)) {
                return false;
            }
        }
        return true;
    case GW_CF_STRINGS:
        n = CCOUNTER(a, key);
        if (n != CCOUNTER(b, key)) {
            return false;
        }
        for (size_t k = 0; k < n; k++) {
            if (strcmp((*(char **const *)fa)[k], (*(char **const *)fb)[k])) {
                return false;
            }
        }
        return true;
    case GW_CF_HEADERS:
        n = CCOUNTER(a, key);
        if (n != CCOUNTER(b, key)) {
            return false;
        }
        for (size_t k = 0; k < n; k++) {
            const struct gw_header *ha = &(*(struct gw_header *const *)fa)[k];
            const struct gw_header *hb = &(*(struct gw_header *const *)fb)[k];
            if (strcmp(ha->name, hb->name) || strcmp(ha->value, hb->value)) {
                return false;
            }
        }
        return true;
    }
    return false;
}

size_t gw_config_schema_diff(const struct gw_config_table *table, const void *a,
                             const void *b, const char *prefix,
                             gw_config_change_cb cb, void *arg)
{
    size_t changed = 0;

    for (size_t i = 0; i < table->n_keys; i++) {
        const struct gw_config_key *key = &table->keys[i];
        char path[128];

        /* Key names are short constants and the nesting is shallow. */
        snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "",
                 key->name);
        if (key->type == GW_CF_OBJECT && !(key->flags & GW_CF_RESTART)) {
            changed += gw_config_schema_diff(key->sub, CFIELD(a, key),
                                             CFIELD(b, key), path, cb, arg);
        } else if ((key->flags & GW_CF_RESTART) &&
                   !gw_config_schema_equal(key, a, b)) {
            changed++;
            if (cb != NULL) {
                cb(path, arg);
            }
        }
    }
    return changed;
}

/* Bytes a key's value occupies in its struct (count excluded). */
static size_t field_size(const struct gw_config_key *key)
{
    switch (key->type) {
    case GW_CF_INT:
    case GW_CF_ENUM:
        return sizeof(int);
    case GW_CF_BOOL:
        return sizeof(bool);
    case GW_CF_OBJECT:
        return key->sub->size;
    default:
        return sizeof(void *);
    }
}

static void swap_bytes(void *a, void *b, size_t n)
{
    unsigned char *x = a, *y = b;

    for (size_t i = 0; i < n; i++) {
        unsigned char t = x[i];
        x[i] = y[i];
        y[i] = t;
    }
}

size_t gw_config_schema_keep(const struct gw_config_table *table, void *running,
                             void *loaded)
{
    size_t kept = 0;

    for (size_t i = 0; i < table->n_keys; i++) {
        const struct gw_config_key *key = &table->keys[i];

        if (key->type == GW_CF_OBJECT && !(key->flags & GW_CF_RESTART)) {
            kept += gw_config_schema_keep(key->sub, FIELD(running, key),
                                          FIELD(loaded, key));
        } else if ((key->flags & GW_CF_RESTART) &&
                   !gw_config_schema_equal(key, running, loaded)) {
            /* Ownership moves with the bytes: each side frees what it
             * ends up holding. */
            swap_bytes(FIELD(running, key), FIELD(loaded, key),
                       field_size(key));
            if (key->type == GW_CF_ARRAY || key->type == GW_CF_STRINGS ||
                key->type == GW_CF_HEADERS) {
                swap_bytes(COUNTER(running, key), COUNTER(loaded, key),
                           sizeof(size_t));
            }
            kept++;
        }
    }
    return kept;
}

/* Names as written; values masked like any secret string. */
static cJSON *dump_headers(const struct gw_config_key *key, const void *base,
                           bool secrets)
{
    const struct gw_header *h = *(struct gw_header *const *)CFIELD(base, key);
    cJSON *obj = cJSON_CreateObject();

    for (size_t k = 0; obj != NULL && k < CCOUNTER(base, key); k++) {
        const char *v = h[k].value;
        if ((key->flags & GW_CF_SECRET) && !secrets && *v != '\0') {
            v = "********";
        }
        if (cJSON_AddStringToObject(obj, h[k].name, v) == NULL) {
            cJSON_Delete(obj);
            obj = NULL;
        }
    }
    return obj;
}

static cJSON *dump_value(const struct gw_config_key *key, const void *base,
                         bool secrets)
{
    const void *field = CFIELD(base, key);
    const char *s;
    cJSON *list;

    switch (key->type) {
    case GW_CF_STRING:
        s = *(char *const *)field;
        if ((key->flags & GW_CF_SECRET) && !secrets && *s != '\0') {
            s = "********";
        }
        return cJSON_CreateString(s);
    case GW_CF_INT:
        return cJSON_CreateNumber(*(const int *)field);
    case GW_CF_BOOL:
        return cJSON_CreateBool(*(const bool *)field);
    case GW_CF_ENUM:
        s = gw_config_schema_name(key->names, *(const int *)field);
        return cJSON_CreateString(s != NULL ? s : "unknown");
    case GW_CF_OBJECT:
        return gw_config_schema_dump(key->sub, field, secrets);
    case GW_CF_HEADERS:
        return dump_headers(key, base, secrets);
    case GW_CF_ARRAY:
    case GW_CF_STRINGS:
        break;
    }
    list = cJSON_CreateArray();
    for (size_t k = 0; list != NULL && k < CCOUNTER(base, key); k++) {
        cJSON *item;
        if (key->type == GW_CF_ARRAY) {
            item = gw_config_schema_dump(
                key->sub, *(char *const *)field + k * key->sub->size, secrets);
        } else {
            item = cJSON_CreateString((*(char **const *)field)[k]);
        }
        if (item == NULL || !cJSON_AddItemToArray(list, item)) {
            cJSON_Delete(item);
            cJSON_Delete(list);
            list = NULL;
        }
    }
    return list;
}

cJSON *gw_config_schema_dump(const struct gw_config_table *table,
                             const void *base, bool secrets)
{
    cJSON *obj = cJSON_CreateObject();

    for (size_t i = 0; obj != NULL && i < table->n_keys; i++) {
        cJSON *value = dump_value(&table->keys[i], base, secrets);
        if (value == NULL ||
            !cJSON_AddItemToObject(obj, table->keys[i].name, value)) {
            cJSON_Delete(value);
            cJSON_Delete(obj);
            obj = NULL;
        }
    }
    return obj;
}
