/*
 * The latency histograms' bounds and their one way in (latency.h).
 */
#include "gateway/core/latency.h"

const uint32_t gw_latency_bounds_us[GW_LATENCY_BUCKETS] = {
    250,   500,    1000,   2500,   5000,    10000,   25000,
    50000, 100000, 250000, 500000, 1000000, 2500000, 5000000,
};

void gw_latency_add(struct gw_latency *h, uint64_t ns)
{
    uint64_t us = ns / 1000;
    int b = 0;

    while (b < GW_LATENCY_BUCKETS && us > gw_latency_bounds_us[b]) {
        b++;
    }
    h->le[b]++;
    h->count++;
    h->sum_us += us;
}
