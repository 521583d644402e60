/* First-match routing of a device to a list of backends. */
#include "gateway/session/router.h"

#include <stdbool.h>
#include <string.h>

static bool list_has(char *const *list, size_t n, const char *s, size_t len)
{
    for (size_t i = 0; i < n; i++) {
        if (strlen(list[i]) == len && memcmp(list[i], s, len) == 0) {
            return true;
        }
    }
    return false;
}

static bool route_fits(const struct gw_route_config *r,
                       const struct gw_client_id *id, const char *client_id)
{
    if (r->n_groups > 0 &&
        !list_has(r->groups, r->n_groups, id->group, id->group_len)) {
        return false;
    }
    if (r->n_macs > 0 &&
        !list_has(r->macs, r->n_macs, id->mac, strlen(id->mac))) {
        return false;
    }
    if (r->n_client_ids > 0 && !list_has(r->client_ids, r->n_client_ids,
                                         client_id, strlen(client_id))) {
        return false;
    }
    return true;
}

int gw_router_match(const struct gw_config *cfg, const struct gw_client_id *id,
                    const char *client_id)
{
    for (size_t i = 0; i < cfg->n_routes; i++) {
        if (route_fits(&cfg->routes[i], id, client_id)) {
            return (int)i;
        }
    }
    return -1;
}
