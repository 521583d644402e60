/* Token buckets and a bounded table of them; see the .h. */
#include "common/ratelimit.h"

#include <stdlib.h>
#include <string.h>

#include "common/hash.h"

/* A full table looks for buckets to forget at most this often. */
#define SWEEP_INTERVAL_MS 1000

struct gw_ratelimit_entry {
    UT_hash_handle hh;
    struct gw_bucket bucket;
    char key[]; /* NUL-terminated */
};

static void refill(struct gw_bucket *b, const struct gw_bucket_rate *rate,
                   uint64_t now_ms)
{
    if (!b->started) {
        b->started = true;
        b->tokens = rate->burst;
        b->last_ms = now_ms;
        return;
    }
    if (now_ms > b->last_ms) {
        b->tokens += (double)(now_ms - b->last_ms) * rate->per_s / 1000.0;
        b->last_ms = now_ms;
    }
    if (b->tokens > rate->burst) {
        b->tokens = rate->burst;
    }
}

bool gw_bucket_take(struct gw_bucket *b, const struct gw_bucket_rate *rate,
                    uint64_t now_ms, uint64_t *refused)
{
    refill(b, rate, now_ms);
    if (b->tokens < 1.0) {
        b->refused++;
        return false;
    }
    b->tokens -= 1.0;
    if (refused != NULL) {
        *refused = b->refused;
    }
    b->refused = 0;
    return true;
}

bool gw_bucket_idle(const struct gw_bucket *b,
                    const struct gw_bucket_rate *rate, uint64_t now_ms)
{
    if (!b->started) {
        return true;
    }
    double since = now_ms > b->last_ms ? (double)(now_ms - b->last_ms) : 0;
    return b->tokens + since * rate->per_s / 1000.0 >= rate->burst;
}

void gw_ratelimit_init(struct gw_ratelimit *rl, struct gw_bucket_rate per_key,
                       struct gw_bucket_rate all, size_t max_keys)
{
    memset(rl, 0, sizeof(*rl));
    rl->per_key = per_key;
    rl->all_rate = all;
    rl->max_keys = max_keys;
}

void gw_ratelimit_set_rate(struct gw_ratelimit *rl,
                           struct gw_bucket_rate per_key,
                           struct gw_bucket_rate all)
{
    rl->per_key = per_key;
    rl->all_rate = all;
}

/*
 * Forgets the buckets that have refilled; they would start full anyway
 * (a count of refusals long past goes with them).
 */
static void sweep(struct gw_ratelimit *rl, uint64_t now_ms)
{
    struct gw_ratelimit_entry *e, *tmp;

    rl->last_sweep_ms = now_ms;
    HASH_ITER(hh, rl->by_key, e, tmp)
    {
        if (gw_bucket_idle(&e->bucket, &rl->per_key, now_ms)) {
            HASH_DEL(rl->by_key, e);
            free(e);
            rl->count--;
        }
    }
}

static struct gw_bucket *bucket_of(struct gw_ratelimit *rl, const char *key,
                                   uint64_t now_ms)
{
    struct gw_ratelimit_entry *e;
    size_t len = strlen(key);

    HASH_FIND(hh, rl->by_key, key, len, e);
    if (e != NULL) {
        return &e->bucket;
    }
    if (rl->count >= rl->max_keys &&
        (rl->last_sweep_ms == 0 ||
         now_ms - rl->last_sweep_ms >= SWEEP_INTERVAL_MS)) {
        sweep(rl, now_ms);
    }
    if (rl->count >= rl->max_keys ||
        (e = calloc(1, sizeof(*e) + len + 1)) == NULL) {
        return &rl->overflow;
    }
    memcpy(e->key, key, len + 1);
    HASH_ADD(hh, rl->by_key, key[0], len, e);
    if (!GW_HASH_ADDED(e, hh)) {
        free(e);
        return &rl->overflow;
    }
    rl->count++;
    return &e->bucket;
}

bool gw_ratelimit_take(struct gw_ratelimit *rl, const char *key,
                       uint64_t now_ms, uint64_t *refused)
{
    struct gw_bucket *b = bucket_of(rl, key != NULL ? key : "", now_ms);

    if (rl->all_rate.per_s > 0) {
        /* The overall bucket first: a key's own count then says how many
         * of its events went unseen, whichever bucket stopped them. */
        refill(&rl->all, &rl->all_rate, now_ms);
        if (rl->all.tokens < 1.0) {
            b->refused++;
            return false;
        }
    }
    if (!gw_bucket_take(b, &rl->per_key, now_ms, refused)) {
        return false;
    }
    if (rl->all_rate.per_s > 0) {
        rl->all.tokens -= 1.0;
    }
    return true;
}

void gw_ratelimit_free(struct gw_ratelimit *rl)
{
    struct gw_ratelimit_entry *e, *tmp;

    HASH_ITER(hh, rl->by_key, e, tmp)
    {
        HASH_DEL(rl->by_key, e);
        free(e);
    }
    rl->count = 0;
}
