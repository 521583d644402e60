/*
 * Devices as MCP clients of configured servers; see mcp_outbound.h. This
 * file holds the entry points, the outcome names, the counters' readers
 * and the outbound's life; below it mcp_outbound_device.c (a device's
 * messages), mcp_outbound_session.c (sessions and their calls),
 * mcp_outbound_http.c (transfers), mcp_outbound_reply.c (to the device)
 * and mcp_outbound_servers.c (which servers, their counters).
 */
#include "gateway/mcp/mcp_outbound.h"

#include <stdlib.h>
#include <string.h>

#include "codec/jsonrpc.h"
#include "common/log.h"
#include "common/ratelimit.h"
#include "gateway/mcp/mcp_outbound_int.h"

/* Log lines about one device's requests: as the dispatcher's. */
static const struct gw_bucket_rate log_per_device = {0.1, 5};
static const struct gw_bucket_rate log_all = {5, 50};
#define LOG_KEYS_MAX 4096

static const char *const outcome_names[GW_OUTBOUND_OUTCOME_COUNT_] = {
#define XX(name, text) [GW_OUTBOUND_##name] = text,
    GW_OUTBOUND_OUTCOME_MAP(XX)
#undef XX
};
static const char *const failure_names[GW_OUTBOUND_FAILURE_COUNT_] = {
#define XX(name, text) [GW_OUTBOUND_FAIL_##name] = text,
    GW_OUTBOUND_FAILURE_MAP(XX)
#undef XX
};

const char *gw_outbound_outcome_name(enum gw_outbound_outcome o)
{
    return (unsigned)o < GW_OUTBOUND_OUTCOME_COUNT_ ? outcome_names[o] : "?";
}

const char *gw_outbound_failure_name(enum gw_outbound_failure f)
{
    return (unsigned)f < GW_OUTBOUND_FAILURE_COUNT_ ? failure_names[f] : "?";
}

bool gw_mcp_outbound_on_device(struct gw_mcp_outbound *ob,
                               const char *client_id,
                               const struct gw_envelope *env)
{
    const cJSON *endpoint =
        cJSON_GetObjectItemCaseSensitive(env->root, "endpoint");
    const cJSON *payload;
    struct gw_rpc rpc;

    if (endpoint == NULL) {
        return false;
    }
    if (!cJSON_IsString(endpoint) || endpoint->valuestring[0] == '\0') {
        ob->refused++;
        gw__mcp_outbound_log(
            ob, GW_LOG_WARN, client_id,
            "message refused: endpoint must be a non-empty string");
        return true;
    }
    payload = cJSON_GetObjectItemCaseSensitive(env->root, "payload");
    if (gw_rpc_classify(payload, &rpc) != 0) {
        ob->refused++;
        gw__mcp_outbound_log(
            ob, GW_LOG_WARN, client_id,
            "message to %.64s refused: payload is not JSON-RPC",
            endpoint->valuestring);
        return true;
    }
    if (ob->closing) {
        if (rpc.kind == GW_RPC_REQUEST) {
            gw__mcp_outbound_reply_error(ob, client_id, endpoint->valuestring,
                                         rpc.id, GW_RPC_CANCELLED,
                                         "the gateway is shutting down");
        }
        return true;
    }
    switch (rpc.kind) {
    case GW_RPC_REQUEST:
        gw__mcp_outbound_request(ob, client_id, endpoint->valuestring, payload,
                                 &rpc);
        break;
    case GW_RPC_NOTIFICATION:
        gw__mcp_outbound_notification(ob, client_id, endpoint->valuestring,
                                      payload, &rpc);
        break;
    case GW_RPC_RESPONSE:
        /* The gateway never passes the server's requests on. */
        ob->refused++;
        gw__mcp_outbound_log(ob, GW_LOG_INFO, client_id,
                             "response to %.64s dropped: nothing was asked",
                             endpoint->valuestring);
        break;
    }
    return true;
}

void gw_mcp_outbound_device_gone(struct gw_mcp_outbound *ob,
                                 const char *client_id)
{
    struct ob_session *s, *tmp;

    HASH_ITER(hh, ob->sessions, s, tmp)
    {
        if (strcmp(s->client_id, client_id) == 0) {
            gw__mcp_outbound_session_end(s, GW_OUTBOUND_CANCELLED, 0, NULL,
                                         true);
        }
    }
}

size_t gw_mcp_outbound_sessions(const struct gw_mcp_outbound *ob)
{
    return ob->n_sessions;
}

uint64_t gw_mcp_outbound_refused(const struct gw_mcp_outbound *ob)
{
    return ob->refused;
}

void gw_mcp_outbound_each_stats(
    const struct gw_mcp_outbound *ob,
    void (*cb)(void *arg, const struct gw_outbound_server_stats *st), void *arg)
{
    const struct stats_rec *r;

    for (r = ob->stats; r != NULL; r = r->hh.next) {
        cb(arg, &r->st);
    }
}

/* ---- life ---- */

int gw_mcp_outbound_init(const struct gw_mcp_outbound_env *env,
                         struct gw_mcp_outbound **out)
{
    struct gw_mcp_outbound *ob = calloc(1, sizeof(*ob));
    int rc;

    if (ob == NULL) {
        return GW_ENOMEM;
    }
    rc = gw_http_client_init(env->loop, &ob->http);
    if (rc != 0) {
        free(ob);
        return rc;
    }
    ob->loop = env->loop;
    ob->config = env->config;
    ob->pub = env->pub;
    ob->devices = env->devices;
    ob->bindings = env->bindings;
    ob->http_open = true;
    gw_list_init(&ob->posts);
    gw_ratelimit_init(&ob->log_limit, log_per_device, log_all, LOG_KEYS_MAX);
    *out = ob;
    return 0;
}

static void on_http_closed(struct gw_http_client *c, void *arg)
{
    struct gw_mcp_outbound *ob = arg;

    (void)c;
    ob->http_open = false;
    gw__mcp_outbound_maybe_done(ob);
}

void gw_mcp_outbound_close(struct gw_mcp_outbound *ob,
                           void (*cb)(struct gw_mcp_outbound *ob, void *arg),
                           void *arg)
{
    struct ob_session *s, *tmp;

    if (ob->closing) {
        return;
    }
    ob->closing = true;
    ob->close_cb = cb;
    ob->close_arg = arg;
    HASH_ITER(hh, ob->sessions, s, tmp)
    {
        gw__mcp_outbound_session_end(s, GW_OUTBOUND_SHUTDOWN, GW_RPC_CANCELLED,
                                     "the gateway is shutting down", false);
    }
    while (!gw_list_empty(&ob->posts)) {
        gw__mcp_outbound_xfer_abandon(
            GW_LIST_ENTRY(gw_list_first(&ob->posts), struct ob_xfer, node));
    }
    gw_http_client_close(ob->http, on_http_closed, ob);
}
