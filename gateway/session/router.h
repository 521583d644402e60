/*
 * Backend routing (docs/architecture.md section 5): the first route whose match
 * fits the device picks the backends to try, in order.
 */
#ifndef GW_ROUTER_H
#define GW_ROUTER_H

#include <stddef.h>

#include "codec/client_id.h"
#include "config/config.h"

/*
 * Index of the first route of cfg matching the device, or -1 if none does.
 * A route matches when each of its non-empty lists (groups, macs,
 * client_ids) contains the device's value.
 */
int gw_router_match(const struct gw_config *cfg, const struct gw_client_id *id,
                    const char *client_id);

#endif /* GW_ROUTER_H */
