/*
 * The uplink's demultiplexer: ssrc -> peer, looked up once per datagram.
 * Open addressing with linear probing over one flat array of (ssrc,
 * value) pairs, kept at most half full, so that a lookup touches one or
 * two adjacent cache lines however many sessions run (a chained table
 * walks a list of scattered nodes instead). Deletion shifts the following
 * entries back, so there are no tombstones to clean up.
 *
 * ssrc 0 is never a key: the gateway never hands it out (crypto/
 * session_keys.h), and the table uses it to mark empty slots.
 */
#ifndef GW_GATEWAY_SSRC_TABLE_H
#define GW_GATEWAY_SSRC_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

struct gw_ssrc_slot {
    uint32_t ssrc; /* 0 = empty */
    void *value;
};

struct gw_ssrc_table {
    struct gw_ssrc_slot *slots; /* mask + 1 of them, or NULL when empty */
    uint32_t mask;              /* capacity - 1; capacity is a power of 2 */
    uint32_t count;             /* keys present */
};

/* An empty table: all zeros also is one. */
void gw_ssrc_table_init(struct gw_ssrc_table *t);

/* Frees the slots; the values are the caller's. */
void gw_ssrc_table_free(struct gw_ssrc_table *t);

/*
 * Where a probe for ssrc starts. Fibonacci hashing: ssrcs are random
 * already, but a multiply costs nothing and keeps any pattern in them off
 * neighbouring slots.
 */
static inline uint32_t gw_ssrc_table_home(const struct gw_ssrc_table *t,
                                          uint32_t ssrc)
{
    return (ssrc * 0x9e3779b1u) & t->mask;
}

/* The value stored for ssrc, or NULL. Inline: it runs once per datagram. */
static inline void *gw_ssrc_table_find(const struct gw_ssrc_table *t,
                                       uint32_t ssrc)
{
    if (t->slots == NULL || ssrc == 0) {
        return NULL;
    }
    for (uint32_t i = gw_ssrc_table_home(t, ssrc);; i = (i + 1) & t->mask) {
        const struct gw_ssrc_slot *s = &t->slots[i];
        if (s->ssrc == ssrc) {
            return s->value;
        }
        if (s->ssrc == 0) {
            return NULL;
        }
    }
}

/*
 * Adds ssrc -> value (value not NULL). Grows the array when it would be
 * more than half full: the only allocation, made here at session start,
 * never per packet. Returns 0, GW_EINVAL (ssrc 0, NULL value), GW_EEXIST
 * or GW_ENOMEM (the table is unchanged).
 */
GW_MUST_CHECK int gw_ssrc_table_add(struct gw_ssrc_table *t, uint32_t ssrc,
                                    void *value);

/* Removes ssrc; returns its value, or NULL if it was not there. */
void *gw_ssrc_table_remove(struct gw_ssrc_table *t, uint32_t ssrc);

#endif /* GW_GATEWAY_SSRC_TABLE_H */
