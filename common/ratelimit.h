/*
 * Token buckets: how often one source (a device, a backend, a whole
 * listener) may do something, such as write a log line or say hello. A
 * keyed table gives each source its own bucket within a bound on memory.
 * Time is the caller's (loop milliseconds); nothing here reads a clock.
 */
#ifndef GW_COMMON_RATELIMIT_H
#define GW_COMMON_RATELIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Refills per_s tokens a second up to burst; starts full. */
struct gw_bucket_rate {
    double per_s;
    double burst;
};

struct gw_bucket {
    double tokens;
    uint64_t last_ms;
    uint64_t refused; /* takes refused since the last one allowed */
    bool started;
};

/*
 * Takes one token if there is one. On success *refused (may be NULL)
 * gets how many takes were refused since the previous success, so that a
 * log line can say how many were left out.
 */
bool gw_bucket_take(struct gw_bucket *b, const struct gw_bucket_rate *rate,
                    uint64_t now_ms, uint64_t *refused);

/* Whether the bucket has refilled to its burst (it can be forgotten). */
bool gw_bucket_idle(const struct gw_bucket *b,
                    const struct gw_bucket_rate *rate, uint64_t now_ms);

struct gw_ratelimit_entry;

/*
 * One bucket per key (client ids and the like, compared as strings) plus
 * one bucket over all keys, so that many sources together are bounded
 * too. At most max_keys buckets are kept: full ones are forgotten (a full
 * bucket is what a new key gets anyway), and when none is, keys beyond
 * the bound share one overflow bucket.
 */
struct gw_ratelimit {
    struct gw_bucket_rate per_key;
    struct gw_bucket_rate all_rate; /* per_s 0: no overall bound */
    size_t max_keys;
    struct gw_ratelimit_entry *by_key;
    size_t count;
    struct gw_bucket all;
    struct gw_bucket overflow;
    uint64_t last_sweep_ms;
};

void gw_ratelimit_init(struct gw_ratelimit *rl, struct gw_bucket_rate per_key,
                       struct gw_bucket_rate all, size_t max_keys);

/*
 * One event for key at now_ms: true if it may go ahead, with *refused
 * (may be NULL) as for gw_bucket_take (the key's count). Never fails: out
 * of memory, the key uses the overflow bucket.
 */
bool gw_ratelimit_take(struct gw_ratelimit *rl, const char *key,
                       uint64_t now_ms, uint64_t *refused);

/* New rates (a config reload); the buckets keep their tokens. */
void gw_ratelimit_set_rate(struct gw_ratelimit *rl,
                           struct gw_bucket_rate per_key,
                           struct gw_bucket_rate all);

/* Frees every bucket; rl can be initialised again. */
void gw_ratelimit_free(struct gw_ratelimit *rl);

#endif /* GW_COMMON_RATELIMIT_H */
