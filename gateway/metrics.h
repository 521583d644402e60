/*
 * /metrics: the instance's counters in the Prometheus text format
 * (version 0.0.4), every name prefixed hybridgw_.
 */
#ifndef GW_METRICS_H
#define GW_METRICS_H

#include <stddef.h>

#include "common/error.h"

struct gw_instance;

/* The whole exposition as a heap string (free()); GW_ENOMEM. */
GW_MUST_CHECK int gw_metrics_format(const struct gw_instance *inst, char **out,
                                    size_t *len);

#endif /* GW_METRICS_H */
