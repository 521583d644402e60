/* ssrc -> peer, open addressing; see ssrc_table.h for why. */
#include "gateway/audio/ssrc_table.h"

#include <stdbool.h>
#include <stdlib.h>

#define MIN_CAPACITY 64u

void gw_ssrc_table_init(struct gw_ssrc_table *t)
{
    t->slots = NULL;
    t->mask = 0;
    t->count = 0;
}

void gw_ssrc_table_free(struct gw_ssrc_table *t)
{
    free(t->slots);
    gw_ssrc_table_init(t);
}

static void place(struct gw_ssrc_table *t, uint32_t ssrc, void *value)
{
    uint32_t i = gw_ssrc_table_home(t, ssrc);

    while (t->slots[i].ssrc != 0) {
        i = (i + 1) & t->mask;
    }
    t->slots[i].ssrc = ssrc;
    t->slots[i].value = value;
}

static int resize(struct gw_ssrc_table *t, uint32_t capacity)
{
    struct gw_ssrc_table grown = {.mask = capacity - 1, .count = t->count};

    grown.slots = calloc(capacity, sizeof(*grown.slots));
    if (grown.slots == NULL) {
        return GW_ENOMEM;
    }
    for (uint32_t i = 0; t->slots != NULL && i <= t->mask; i++) {
        if (t->slots[i].ssrc != 0) {
            place(&grown, t->slots[i].ssrc, t->slots[i].value);
        }
    }
    free(t->slots);
    *t = grown;
    return 0;
}

int gw_ssrc_table_add(struct gw_ssrc_table *t, uint32_t ssrc, void *value)
{
    if (ssrc == 0 || value == NULL) {
        return GW_EINVAL;
    }
    if (gw_ssrc_table_find(t, ssrc) != NULL) {
        return GW_EEXIST;
    }
    if (t->slots == NULL || (uint64_t)(t->count + 1) * 2 > t->mask + 1ull) {
        uint64_t capacity =
            t->slots == NULL ? MIN_CAPACITY : (uint64_t)(t->mask + 1) * 2;
        if (capacity > (1ull << 31)) {
            return GW_ENOMEM;
        }
        int err = resize(t, (uint32_t)capacity);
        if (err < 0) {
            return err;
        }
    }
    place(t, ssrc, value);
    t->count++;
    return 0;
}

void *gw_ssrc_table_remove(struct gw_ssrc_table *t, uint32_t ssrc)
{
    uint32_t i, j;
    void *value;

    if (t->slots == NULL || ssrc == 0) {
        return NULL;
    }
    for (i = gw_ssrc_table_home(t, ssrc); t->slots[i].ssrc != ssrc;
         i = (i + 1) & t->mask) {
        if (t->slots[i].ssrc == 0) {
            return NULL;
        }
    }
    value = t->slots[i].value;
    /*
     * Backward shift: move each following entry of the run into the hole
     * unless the hole lies before its home, i.e. unless the entry's home
     * is cyclically in (i, j]; then a probe for it would stop at the hole.
     */
    for (j = (i + 1) & t->mask; t->slots[j].ssrc != 0; j = (j + 1) & t->mask) {
        uint32_t h = gw_ssrc_table_home(t, t->slots[j].ssrc);
        bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
        if (!stays) {
            t->slots[i] = t->slots[j];
            i = j;
        }
    }
    t->slots[i].ssrc = 0;
    t->slots[i].value = NULL;
    t->count--;
    return value;
}
