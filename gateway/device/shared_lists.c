/*
 * One copy of each distinct device list, by content; see
 * shared_lists_int.h. Lists are interned as parsed: the same firmware
 * sends the same bytes, so its lists match member for member, in order.
 */
#include "gateway/device/shared_lists_int.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "common/hash.h"

struct shared {
    UT_hash_handle by_hash_hh;  /* in by_hash (in_by_hash) */
    UT_hash_handle by_items_hh; /* in by_items */
    uint64_t hash;              /* of the content */
    const cJSON *items;         /* the key of by_items */
    unsigned refs;
    bool in_by_hash; /* false: a hash another list holds, never matched */
};

/* One store for every table of a loop thread (an instance is one). */
static _Thread_local struct shared *by_hash;
static _Thread_local struct shared *by_items;
static _Thread_local size_t held;

#define FNV_OFFSET 14695981039346656037ull
#define FNV_PRIME  1099511628211ull

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < n; i++) {
        h = (h ^ b[i]) * FNV_PRIME;
    }
    return h;
}

static uint64_t mix_str(uint64_t h, const char *s)
{
    /* The terminator too: "ab","c" and "a","bc" differ. */
    return s != NULL ? mix(h, s, strlen(s) + 1) : mix(h, "\xff", 1);
}

/* Members in order, keys, types and values: what equal() compares. */
static uint64_t hash_of(const cJSON *j, uint64_t h)
{
    for (; j != NULL; j = j->next) {
        int type = j->type & 0xff;
        h = mix(h, &type, sizeof(type));
        h = mix_str(h, j->string);
        if (cJSON_IsString(j) || cJSON_IsRaw(j)) {
            h = mix_str(h, j->valuestring);
        } else if (cJSON_IsNumber(j)) {
            h = mix(h, &j->valuedouble, sizeof(j->valuedouble));
        }
        h = hash_of(j->child, mix(h, "{", 1));
        h = mix(h, "}", 1);
    }
    return h;
}

static bool same_str(const char *a, const char *b)
{
    return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* Member for member, in order (cJSON_Compare ignores the order of keys,
 * and the order is part of what a device shows). */
static bool equal(const cJSON *a, const cJSON *b)
{
    for (; a != NULL && b != NULL; a = a->next, b = b->next) {
        if ((a->type & 0xff) != (b->type & 0xff) ||
            !same_str(a->string, b->string)) {
            return false;
        }
        if ((cJSON_IsString(a) || cJSON_IsRaw(a)) &&
            !same_str(a->valuestring, b->valuestring)) {
            return false;
        }
        if (cJSON_IsNumber(a) &&
            memcmp(&a->valuedouble, &b->valuedouble, sizeof(double)) != 0) {
            return false;
        }
        if (!equal(a->child, b->child)) {
            return false;
        }
    }
    return a == NULL && b == NULL;
}

/* A list's own content: its type and members, not the key or siblings
 * it may have had where it was parsed. */
static uint64_t list_hash(const cJSON *list)
{
    int type = list->type & 0xff;

    return hash_of(list->child, mix(FNV_OFFSET, &type, sizeof(type)));
}

static bool same_list(const cJSON *a, const cJSON *b)
{
    return (a->type & 0xff) == (b->type & 0xff) && equal(a->child, b->child);
}

const cJSON *gw__device_list_share(cJSON *items)
{
    struct shared *s;
    uint64_t h;

    if (items == NULL) {
        return NULL;
    }
    h = list_hash(items);
    HASH_FIND(by_hash_hh, by_hash, &h, sizeof(h), s);
    if (s != NULL && same_list(s->items, items)) {
        cJSON_Delete(items);
        s->refs++;
        return s->items;
    }
    bool collided = s != NULL;
    if ((s = calloc(1, sizeof(*s))) == NULL) {
        return items; /* its holder's alone: unshare frees it */
    }
    s->hash = h;
    s->items = items;
    s->refs = 1;
    HASH_ADD(by_items_hh, by_items, items, sizeof(s->items), s);
    if (!GW_HASH_ADDED(s, by_items_hh)) {
        free(s);
        return items;
    }
    /* Another list with this hash keeps its place; this one is then
     * held alone (a collision: no device of that firmware shares it). */
    if (!collided) {
        HASH_ADD(by_hash_hh, by_hash, hash, sizeof(s->hash), s);
        s->in_by_hash = GW_HASH_ADDED(s, by_hash_hh);
    }
    held++;
    return items;
}

static struct shared *find(const cJSON *items)
{
    struct shared *s;

    HASH_FIND(by_items_hh, by_items, &items, sizeof(items), s);
    return s;
}

void gw__device_list_unshare(const cJSON *items)
{
    struct shared *s;

    if (items == NULL) {
        return;
    }
    if ((s = find(items)) == NULL) {
        cJSON_Delete((cJSON *)items); /* kept alone, at an OOM */
        return;
    }
    GW_ASSERT(s->refs > 0);
    if (--s->refs > 0) {
        return;
    }
    HASH_DELETE(by_items_hh, by_items, s);
    if (s->in_by_hash) {
        HASH_DELETE(by_hash_hh, by_hash, s);
    }
    held--;
    cJSON_Delete((cJSON *)s->items);
    free(s);
}

unsigned gw__device_list_refs(const cJSON *items)
{
    const struct shared *s = items != NULL ? find(items) : NULL;

    return s != NULL ? s->refs : 0;
}

size_t gw__device_lists_held(void)
{
    return held;
}
