/*
 * The config schema: every key of docs/architecture.md section 5 declared once
 * (config_schema.c), with its type, target member, default, range, reload
 * policy and validator (config_checks.c). The loader, the reload diff and
 * the dump all walk these tables (config_walk.c).
 */
#ifndef GW_CONFIG_SCHEMA_H
#define GW_CONFIG_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"

struct cJSON;

/* What a key holds, and so how it is parsed, freed, compared and dumped. */
enum gw_config_type {
    GW_CF_STRING,  /* char *, never NULL once defaults are filled */
    GW_CF_INT,     /* int within [min, max] */
    GW_CF_BOOL,    /* bool */
    GW_CF_ENUM,    /* an int-sized enum, written by name (names) */
    GW_CF_OBJECT,  /* a nested struct described by sub */
    GW_CF_ARRAY,   /* pointer to count elements of sub->size bytes */
    GW_CF_STRINGS, /* char ** holding count strings */
    GW_CF_HEADERS  /* struct gw_header * holding count name/value pairs,
                      written as an object of strings */
};

/* Key flags. RELOAD is 0 so that it reads as the default. */
#define GW_CF_RELOAD   0x00u /* a SIGHUP reload applies a new value */
#define GW_CF_RESTART  0x01u /* read at start only; a reload warns */
#define GW_CF_REQUIRED 0x02u /* no default: the object must set it */
#define GW_CF_SECRET   0x04u /* masked when dumped */

/* One accepted spelling of an enum value. */
struct gw_config_name {
    const char *name; /* as written in the file */
    int value;        /* the enum constant */
};

/*
 * Checks, and may normalise in place, a value already stored at field
 * (char ** for strings and for each element of a string list, int * for
 * ints). Returns NULL when fine, else a short reason; the caller adds the
 * file name and the key path, which already say which value is meant.
 */
typedef const char *(*gw_config_check)(void *field);

struct gw_config_table;

/* One key of one object kind. */
struct gw_config_key {
    const char *name; /* JSON member name */
    enum gw_config_type type;
    unsigned flags;      /* GW_CF_RELOAD / GW_CF_RESTART / ... */
    size_t offset;       /* of the member within the table's struct */
    size_t count_offset; /* ARRAY / STRINGS: offset of the size_t count */
    const char *def_str; /* STRING default; NULL means "" */
    long long def;       /* INT / BOOL / ENUM default */
    long long min, max;  /* INT range; ARRAY / STRINGS element count */
    const struct gw_config_name *names; /* ENUM spellings, NULL-ended */
    const struct gw_config_table *sub;  /* OBJECT / ARRAY element layout */
    gw_config_check check;              /* optional validator */
};

/* The keys of one object kind, and the struct they fill. */
struct gw_config_table {
    const char *what;                 /* "backend", for messages */
    const struct gw_config_key *keys; /* in file order for dumps */
    size_t n_keys; /* at most 64: the loader keeps a bit per key */
    size_t size;   /* sizeof the struct, for array elements */
};

/* The top-level object: struct gw_config. */
extern const struct gw_config_table gw_config_schema;

/* Name of value in names, or NULL when it has none. */
const char *gw_config_schema_name(const struct gw_config_name *names,
                                  int value);

/*
 * Stores a scalar JSON value (STRING, INT, BOOL, ENUM, or one element of a
 * STRINGS list) at field, then runs key->check. Returns NULL, or a short
 * reason (possibly in why), or gw_config_schema_oom. The old string at
 * field is freed only when the new one is stored.
 */
const char *gw_config_schema_set(const struct gw_config_key *key,
                                 const struct cJSON *item, void *field,
                                 char *why, size_t whylen);

/* The reason returned on allocation failure, told apart by identity. */
extern const char gw_config_schema_oom[];

/* "a string", "an object"...: what the file had where something else was
 * expected. */
const char *gw_config_schema_json_type(const struct cJSON *item);

/*
 * Text from the file made fit for a message: control characters become
 * '.', and text longer than size - 4 is cut (at a character boundary) and
 * ends in "...". Returns buf.
 */
const char *gw_config_schema_quote(const char *s, char *buf, size_t size);

/*
 * The candidate closest to word (case-insensitive edit distance, a swap of
 * neighbours counting as one edit), or NULL when none is close enough to
 * be a likely typo. Candidates are the char * at offset in n records of
 * stride bytes, so both key tables and backend arrays can be searched.
 */
const char *gw_config_schema_nearest(const char *word, const void *records,
                                     size_t n, size_t stride, size_t offset);

/*
 * Fills every member of the struct at base with its default: strings are
 * duplicated ("" when no default), arrays are empty. On failure what was
 * allocated stays in place for gw_config_schema_free.
 */
GW_MUST_CHECK int gw_config_schema_fill(const struct gw_config_table *table,
                                        void *base);

/* Frees every string and array the table reaches from base. */
void gw_config_schema_free(const struct gw_config_table *table, void *base);

/* Deep equality of one key's value in two structs of the same table. */
bool gw_config_schema_equal(const struct gw_config_key *key, const void *a,
                            const void *b);

/*
 * Calls cb for every GW_CF_RESTART key (at any depth) whose values at a and
 * b differ, with its path prefixed by prefix; returns how many.
 */
size_t gw_config_schema_diff(const struct gw_config_table *table, const void *a,
                             const void *b, const char *prefix,
                             gw_config_change_cb cb, void *arg);

/*
 * Swaps every restart-only value that differs between running and loaded,
 * so that loaded keeps the running values (and running, about to be
 * released, the new ones). Returns how many keys were swapped.
 */
size_t gw_config_schema_keep(const struct gw_config_table *table, void *running,
                             void *loaded);

/*
 * The struct at base as a JSON object, every key present, or NULL when out
 * of memory. GW_CF_SECRET strings that are not empty print as "********"
 * unless secrets is true.
 */
struct cJSON *gw_config_schema_dump(const struct gw_config_table *table,
                                    const void *base, bool secrets);

#endif /* GW_CONFIG_SCHEMA_H */
