/*
 * A latency histogram of fixed bounds, counted as /metrics writes it (per
 * bucket, not cumulative, with the sum): constant time, no allocation, so
 * that a conversation's turn can be timed where it passes.
 */
#ifndef GW_LATENCY_H
#define GW_LATENCY_H

#include <stdint.h>

/* Upper bounds in microseconds, from 250 us to 5 s; the last bucket holds
 * the rest. */
#define GW_LATENCY_BUCKETS 14
extern const uint32_t gw_latency_bounds_us[GW_LATENCY_BUCKETS];

struct gw_latency {
    uint64_t le[GW_LATENCY_BUCKETS + 1]; /* counts per bucket */
    uint64_t count;
    uint64_t sum_us;
};

/* One observation of ns nanoseconds (a difference of uv_hrtime()). */
void gw_latency_add(struct gw_latency *h, uint64_t ns);

#endif /* GW_LATENCY_H */
