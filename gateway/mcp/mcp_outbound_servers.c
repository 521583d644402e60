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

/*
 * Whether the device's identity passes ms's group and MAC rules. With
 * bindings kept, that identity is its binding's: a client id's text is
 * what any device could claim, and a MAC two bindings hold matches
 * nothing. Without them (credentials issued elsewhere, or the lab), the
 * broker authenticated the id, and its text is all there is.
 */
static bool identity_allowed(struct gw_mcp_outbound *ob,
                             const struct gw_mcp_server_config *ms,
                             const char *client_id,
                             const struct gw_client_id *id)
{
    const char *group = id->group, *mac = id->mac;
    size_t group_len = id->group_len;
    struct gw_binding b;
    int rc;

    if (ms->allow.n_groups == 0 && ms->allow.n_macs == 0) {
        return true;
    }
    if (ob->bindings != NULL) {
        rc = gw_binding_identity(ob->bindings, client_id, &b);
        if (rc != 0) {
            gw__mcp_outbound_log(
                ob, GW_LOG_WARN, client_id, "not allowed to MCP server %s: %s",
                ms->name,
                rc == GW_ENOENT   ? "not bound"
                : rc == GW_EEXIST ? "its MAC is bound to another identity too"
                                  : "the bindings are unavailable");
            return false;
        }
        group = b.group;
        group_len = strlen(b.group);
        mac = b.mac;
    }
    return (ms->allow.n_groups == 0 ||
            list_has(ms->allow.groups, ms->allow.n_groups, group, group_len)) &&
           (ms->allow.n_macs == 0 ||
            list_has(ms->allow.macs, ms->allow.n_macs, mac, strlen(mac)));
}

const struct gw_mcp_server_config *
gw__mcp_outbound_server(struct gw_mcp_outbound *ob, const char *name,
                        const char *client_id)
{
    const struct gw_config *cfg = gw__mcp_outbound_config(ob);
    struct gw_client_id id;

    if (gw_client_id_parse(client_id, strlen(client_id), &id) != 0) {
        return NULL;
    }
    for (size_t i = 0; i < cfg->n_mcp_servers; i++) {
        const struct gw_mcp_server_config *ms = &cfg->mcp_servers[i];
        if (strcmp(ms->name, name) != 0) {
            continue;
        }
        if (ms->allow.n_client_ids > 0 &&
            !list_has(ms->allow.client_ids, ms->allow.n_client_ids, client_id,
                      strlen(client_id))) {
            return NULL;
        }
        return identity_allowed(ob, ms, client_id, &id) ? ms : NULL;
    }
    return NULL;
}
