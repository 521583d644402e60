/*
 * The configured MCP servers as the outbound sees them: which one of them
 * a device may use (mcp_servers[].allow), and the counters kept per
 * server name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/client_id.h"
#include "gateway/mcp/mcp_outbound_int.h"

const struct gw_config *
gw__mcp_outbound_config(const struct gw_mcp_outbound *ob)
{
    return gw_config_live_get(ob->config);
}

struct gw_outbound_server_stats *
gw__mcp_outbound_stats(struct gw_mcp_outbound *ob, const char *server)
{
    static struct gw_outbound_server_stats spare; /* out of memory */
    struct stats_rec *r;

    HASH_FIND_STR(ob->stats, server, r);
    if (r == NULL) {
        r = calloc(1, sizeof(*r));
        if (r == NULL) {
            return &spare;
        }
        snprintf(r->st.name, sizeof(r->st.name), "%s", server);
        HASH_ADD_STR(ob->stats, st.name, r);
        if (!GW_HASH_ADDED(r, hh)) {
            free(r);
            return &spare;
        }
    }
    return &r->st;
}

static bool list_has(char *const *list, size_t n, const char *s, size_t len)
{
    for (size_t i = 0; i < n; i++) {
        if (strlen(list[i]) == len && memcmp(list[i], s, len) == 0) {
            return true;
        }
    }
    return false;
}

const struct gw_mcp_server_config *
gw__mcp_outbound_server(const struct gw_config *cfg, const char *name,
                        const char *client_id)
{
    struct gw_client_id id;

    if (gw_client_id_parse(client_id, strlen(client_id), &id) != 0) {
        return NULL;
    }
    for (size_t i = 0; i < cfg->n_mcp_servers; i++) {
        const struct gw_mcp_server_config *ms = &cfg->mcp_servers[i];
        if (strcmp(ms->name, name) != 0) {
            continue;
        }
        if (ms->allow.n_groups > 0 &&
            !list_has(ms->allow.groups, ms->allow.n_groups, id.group,
                      id.group_len)) {
            return NULL;
        }
        if (ms->allow.n_macs > 0 && !list_has(ms->allow.macs, ms->allow.n_macs,
                                              id.mac, strlen(id.mac))) {
            return NULL;
        }
        if (ms->allow.n_client_ids > 0 &&
            !list_has(ms->allow.client_ids, ms->allow.n_client_ids, client_id,
                      strlen(client_id))) {
            return NULL;
        }
        return ms;
    }
    return NULL;
}
