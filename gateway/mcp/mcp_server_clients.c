/*
 * The MCP server's client sessions (see mcp_server_int.h): the table with
 * its limit and random ids, a session's end, the list_changed
 * notifications, and the sweep timer (idle expiry, keepalives).
 */

#include "gateway/mcp/mcp_server_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "codec/hex.h"
#include "codec/jsonrpc.h"
#include "common/log.h"

/* Proxies and clients drop a silent connection; a comment keeps it up. */
#define KEEPALIVE_MS 15000
#define SWEEP_MAX_MS 1000
#define SWEEP_MIN_MS 50

void gw__mcp_server_lists_changed(struct gw_mcp_server *srv,
                                  const char *client_id, unsigned caps)
{
    static const struct {
        unsigned cap;
        const char *method;
    } lists[] = {
        {GW_MCP_CAP_TOOLS, "notifications/tools/list_changed"},
        {GW_MCP_CAP_RESOURCES, "notifications/resources/list_changed"},
        {GW_MCP_CAP_PROMPTS, "notifications/prompts/list_changed"},
    };
    struct gw_mcp_client *cl, *tmp;

    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        cJSON *msg;
        if (!(caps & lists[i].cap) ||
            (msg = gw_rpc_notification(lists[i].method, NULL)) == NULL) {
            continue;
        }
        HASH_ITER(hh, srv->clients, cl, tmp)
        {
            if (gw_list_empty(&cl->streams) || !(cl->caps & lists[i].cap) ||
                (cl->client_id[0] != '\0' &&
                 strcmp(cl->client_id, client_id) != 0)) {
                continue;
            }
            (void)gw__mcp_server_notify(cl, msg);
        }
        cJSON_Delete(msg);
    }
}

/* ---- sessions ---- */

struct gw_mcp_client *gw__mcp_server_client_find(struct gw_mcp_server *srv,
                                                 const char *id)
{
    struct gw_mcp_client *cl = NULL;
    size_t len = strlen(id);

    if (len != GW_MCP_SESSION_ID_LEN) {
        return NULL;
    }
    HASH_FIND(hh, srv->clients, id, len, cl);
    return cl;
}

void gw__mcp_server_client_end(struct gw_mcp_client *cl, const char *why)
{
    struct gw_mcp_server *srv = cl->srv;

    gw_log_peer(GW_LOG_INFO, NULL, cl->subject, "session ended: %s", why);
    gw__mcp_server_asks_client_gone(cl);
    gw_mcp_peer_leave(srv->env.devices, &cl->peer);
    gw__mcp_server_pending_end_all(cl);
    gw__mcp_server_streams_end(cl);
    HASH_DEL(srv->clients, cl);
    srv->n_clients--;
    free(cl);
}

static int new_session_id(struct gw_mcp_server *srv,
                          char out[GW_MCP_SESSION_ID_LEN + 1])
{
    uint8_t raw[GW_MCP_SESSION_ID_LEN / 2];

    do {
        if (RAND_bytes(raw, sizeof(raw)) != 1) {
            return GW_ECRYPTO;
        }
        if (gw_hex_encode(raw, sizeof(raw), out, GW_MCP_SESSION_ID_LEN + 1) !=
            0) {
            return GW_ENOSPC;
        }
    } while (gw__mcp_server_client_find(srv, out) != NULL);
    return 0;
}

int gw__mcp_server_client_create(struct gw_mcp_server *srv,
                                 const char *client_id, const char *version,
                                 const struct gw_mcp_peer_ops *ops,
                                 struct gw_mcp_client **out)
{
    const struct gw_config *cfg = gw_config_live_get(srv->env.config);
    struct gw_mcp_client *cl;
    int rc;

    /* A full table refuses the newcomer: evicting would let anyone who
     * may initialize end the sessions of everyone else. */
    if (cfg->mcp.max_sessions > 0 &&
        srv->n_clients >= (size_t)cfg->mcp.max_sessions) {
        srv->stats.sessions_refused++;
        return GW_ELIMIT;
    }
    if ((cl = calloc(1, sizeof(*cl))) == NULL) {
        return GW_ENOMEM;
    }
    if ((rc = new_session_id(srv, cl->id)) != 0) {
        free(cl);
        return rc;
    }
    cl->srv = srv;
    cl->seq = ++srv->next_seq;
    gw_list_init(&cl->streams);
    gw_list_init(&cl->pending);
    snprintf(cl->subject, sizeof(cl->subject), "mcp sid=%.8s", cl->id);
    gw_mcp_peer_init(&cl->peer, ops, cl->subject, client_id[0] == '\0');
    snprintf(cl->client_id, sizeof(cl->client_id), "%s", client_id);
    snprintf(cl->version, sizeof(cl->version), "%s", version);
    gw__mcp_server_touch(cl);
    HASH_ADD(hh, srv->clients, id, GW_MCP_SESSION_ID_LEN, cl);
    if (!GW_HASH_ADDED(cl, hh)) { /* the table could not grow */
        free(cl);
        return GW_ENOMEM;
    }
    srv->n_clients++;
    srv->stats.sessions_opened++;
    *out = cl;
    return 0;
}

/* ---- the sweep: idle expiry and keepalives ---- */

static uint64_t sweep_interval(const struct gw_config *cfg)
{
    uint64_t ms = cfg->mcp.session_idle_timeout_ms > 0
                      ? (uint64_t)cfg->mcp.session_idle_timeout_ms / 4
                      : SWEEP_MAX_MS;

    return ms < SWEEP_MIN_MS ? SWEEP_MIN_MS
                             : (ms > SWEEP_MAX_MS ? SWEEP_MAX_MS : ms);
}

static void on_sweep(uv_timer_t *timer)
{
    struct gw_mcp_server *srv = timer->data;
    const struct gw_config *cfg = gw_config_live_get(srv->env.config);
    uint64_t now = uv_now(srv->env.loop);
    uint64_t idle = cfg->mcp.session_idle_timeout_ms > 0
                        ? (uint64_t)cfg->mcp.session_idle_timeout_ms
                        : UINT64_MAX;
    struct gw_mcp_client *cl, *tmp;

    HASH_ITER(hh, srv->clients, cl, tmp)
    {
        if (cl->n_streams == 0 && cl->n_pending == 0 &&
            now - cl->last_used_ms >= idle) {
            srv->stats.sessions_expired++;
            gw__mcp_server_client_end(cl, "idle");
            continue;
        }
        gw__mcp_server_streams_keepalive(cl, now, KEEPALIVE_MS);
    }
    (void)uv_timer_start(&srv->timer, on_sweep, sweep_interval(cfg), 0);
}

static void on_timer_closed(uv_handle_t *handle)
{
    struct gw_mcp_server *srv = handle->data;

    if (srv->close_cb != NULL) {
        srv->close_cb(srv, srv->close_arg);
    }
    free(srv);
}

/* On failure srv is freed (at once, or from the close callback). */
int gw__mcp_server_clients_start(struct gw_mcp_server *srv)
{
    const struct gw_config *cfg = gw_config_live_get(srv->env.config);
    int rc;

    if ((rc = uv_timer_init(srv->env.loop, &srv->timer)) != 0) {
        free(srv);
        return rc;
    }
    srv->timer.data = srv;
    if ((rc = uv_timer_start(&srv->timer, on_sweep, sweep_interval(cfg), 0)) !=
        0) {
        uv_close((uv_handle_t *)&srv->timer, on_timer_closed);
        return rc;
    }
    return 0;
}

void gw__mcp_server_clients_stop(struct gw_mcp_server *srv)
{
    struct gw_mcp_client *cl, *tmp;

    HASH_ITER(hh, srv->clients, cl, tmp)
    {
        gw__mcp_server_client_end(cl, "server stopping");
    }
    (void)uv_timer_stop(&srv->timer);
    uv_close((uv_handle_t *)&srv->timer, on_timer_closed);
}
