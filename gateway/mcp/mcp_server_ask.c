/*
 * Requests a device sends to its client (sampling/createMessage,
 * elicitation/create, roots/list; docs/protocol.md section 7): each goes,
 * under the gateway's own id "gw-<n>", to the newest session of the
 * device's endpoint that declared the capability and has a GET stream to
 * carry it. The client's POSTed response goes back to the device under
 * the device's own id. Every request ends exactly once toward the device:
 * answered, -32006 (no capable client, or it went away), -32003 (over
 * mcp.max_device_requests), -32001 (mcp.device_request_timeout_ms; the
 * client is told notifications/cancelled) or withdrawn by the device.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/jsonrpc.h"
#include "codec/mcp_caps.h"
#include "common/log.h"
#include "gateway/device/device_table.h"
#include "gateway/mcp/mcp_server_int.h"

#define ASK_TIMEOUT_DEFAULT_MS 60000

static const struct gw_config *config(const struct gw_mcp_server *srv)
{
    return gw_config_live_get(srv->env.config);
}

static char *subject_of(const struct gw_device *dev, char *out, size_t cap)
{
    snprintf(out, cap, "dev=%s", dev->client_id);
    return out;
}

/* An error to the device's own request id. */
static void to_device(struct gw_device *dev, const cJSON *id, int code,
                      const char *message)
{
    (void)gw_mcp_link_respond_error(&dev->link, id, code, message);
}

static void on_ask_closed(uv_handle_t *handle)
{
    free(handle->data);
}

/* Out of the lists; the memory goes when its timer has closed. */
static void ask_free(struct gw_mcp_ask *ask)
{
    gw_list_unlink(&ask->node);
    ask->cl->n_asks--;
    cJSON_Delete(ask->device_id);
    ask->device_id = NULL;
    (void)uv_timer_stop(&ask->timer);
    uv_close((uv_handle_t *)&ask->timer, on_ask_closed);
}

/* notifications/cancelled for the ask to its client, on its stream. */
static void cancel_toward_client(struct gw_mcp_ask *ask, const char *reason)
{
    cJSON *params = cJSON_CreateObject();
    cJSON *msg;

    if (params == NULL ||
        cJSON_AddStringToObject(params, "requestId", ask->id) == NULL ||
        cJSON_AddStringToObject(params, "reason", reason) == NULL) {
        cJSON_Delete(params);
        return;
    }
    if ((msg = gw_rpc_notification("notifications/cancelled", params)) !=
        NULL) {
        (void)gw__mcp_server_notify(ask->cl, msg);
        cJSON_Delete(msg);
    }
}

static void on_ask_timeout(uv_timer_t *timer)
{
    struct gw_mcp_ask *ask = timer->data;

    gw_log_peer(GW_LOG_WARN, NULL, ask->cl->subject,
                "%s %s from %s: no answer in time", ask->method, ask->id,
                ask->dev->client_id);
    ask->srv->stats.asks_timeout++;
    to_device(ask->dev, ask->device_id, GW_RPC_TIMEOUT,
              "the MCP client did not answer in time");
    cancel_toward_client(ask, "timed out");
    ask_free(ask);
}

/* The newest session of dev's endpoint with cap and an open stream. */
static struct gw_mcp_client *capable_client(struct gw_mcp_server *srv,
                                            const struct gw_device *dev,
                                            unsigned cap)
{
    struct gw_mcp_client *cl, *tmp, *best = NULL;

    HASH_ITER(hh, srv->clients, cl, tmp)
    {
        if (!gw_list_empty(&cl->streams) && (cl->client_caps & cap) &&
            strcmp(cl->client_id, dev->client_id) == 0 &&
            (best == NULL || cl->seq > best->seq)) {
            best = cl;
        }
    }
    return best;
}

static size_t asks_of(const struct gw_mcp_server *srv,
                      const struct gw_device *dev)
{
    size_t n = 0;

    for (const struct gw_list *it = srv->asks.next; it != &srv->asks;
         it = it->next) {
        n += GW_LIST_ENTRY(it, const struct gw_mcp_ask, node)->dev == dev;
    }
    return n;
}

/* A refusal of a device's request, answered at once. */
static void refuse(struct gw_mcp_server *srv, struct gw_device *dev,
                   const struct gw_rpc *rpc, int code, const char *message)
{
    char subject[GW_CLIENT_ID_MAX + 8];

    gw_log_peer(
        GW_LOG_WARN, dev->client_id, subject_of(dev, subject, sizeof(subject)),
        "%s from the device refused (%d): %s", rpc->method, code, message);
    srv->stats.asks_refused++;
    to_device(dev, rpc->id, code, message);
}

/* The message the client gets: the device's request under the ask's id. */
static cJSON *request_for_client(const struct gw_mcp_ask *ask,
                                 const struct gw_rpc *rpc)
{
    cJSON *msg = cJSON_CreateObject();

    if (msg == NULL || cJSON_AddStringToObject(msg, "jsonrpc", "2.0") == NULL ||
        cJSON_AddStringToObject(msg, "id", ask->id) == NULL ||
        cJSON_AddStringToObject(msg, "method", rpc->method) == NULL ||
        (rpc->params != NULL &&
         !cJSON_AddItemToObject(msg, "params",
                                cJSON_Duplicate(rpc->params, true)))) {
        cJSON_Delete(msg);
        return NULL;
    }
    return msg;
}

static void ask_start(struct gw_mcp_server *srv, struct gw_device *dev,
                      struct gw_mcp_client *cl, const struct gw_rpc *rpc)
{
    int timeout_ms = config(srv)->mcp.device_request_timeout_ms;
    struct gw_mcp_ask *ask = calloc(1, sizeof(*ask));
    cJSON *msg = NULL;

    if (ask == NULL ||
        (ask->device_id = cJSON_Duplicate(rpc->id, true)) == NULL) {
        free(ask);
        to_device(dev, rpc->id, GW_RPC_INTERNAL_ERROR, "out of memory");
        return;
    }
    if (uv_timer_init(srv->env.loop, &ask->timer) != 0) {
        cJSON_Delete(ask->device_id);
        free(ask);
        to_device(dev, rpc->id, GW_RPC_INTERNAL_ERROR, "out of resources");
        return;
    }
    ask->timer.data = ask;
    ask->srv = srv;
    ask->cl = cl;
    ask->dev = dev;
    snprintf(ask->id, sizeof(ask->id), "gw-%" PRIu64, ++srv->next_ask);
    snprintf(ask->method, sizeof(ask->method), "%s", rpc->method);
    gw_list_insert_head(&srv->asks, &ask->node);
    cl->n_asks++;
    if ((msg = request_for_client(ask, rpc)) == NULL) {
        to_device(dev, rpc->id, GW_RPC_INTERNAL_ERROR, "out of memory");
        ask_free(ask);
        return;
    }
    (void)uv_timer_start(
        &ask->timer, on_ask_timeout,
        timeout_ms > 0 ? (uint64_t)timeout_ms : ASK_TIMEOUT_DEFAULT_MS, 0);
    srv->stats.asks++;
    gw_log_peer(GW_LOG_INFO, NULL, cl->subject, "%s from %s sent as %s",
                ask->method, dev->client_id, ask->id);
    (void)gw__mcp_server_notify(cl, msg);
    cJSON_Delete(msg);
}

/* The device withdraws a request (notifications/cancelled). */
static bool withdrawn(struct gw_mcp_server *srv, const struct gw_device *dev,
                      const struct gw_rpc *rpc)
{
    const cJSON *rid =
        cJSON_GetObjectItemCaseSensitive(rpc->params, "requestId");
    const cJSON *reason =
        cJSON_GetObjectItemCaseSensitive(rpc->params, "reason");
    struct gw_mcp_ask *ask = NULL;

    if (rid == NULL) {
        return false;
    }
    for (struct gw_list *it = srv->asks.next; it != &srv->asks; it = it->next) {
        struct gw_mcp_ask *a = GW_LIST_ENTRY(it, struct gw_mcp_ask, node);
        if (a->dev == dev && cJSON_Compare(a->device_id, rid, true)) {
            ask = a;
            break;
        }
    }
    if (ask == NULL) {
        return false; /* not one of ours: maybe the backend's */
    }
    gw_log_peer(GW_LOG_INFO, NULL, ask->cl->subject, "%s %s withdrawn by %s",
                ask->method, ask->id, dev->client_id);
    srv->stats.asks_dropped++;
    cancel_toward_client(ask, cJSON_IsString(reason) ? reason->valuestring
                                                     : "withdrawn by the "
                                                       "device");
    ask_free(ask);
    return true;
}

bool gw_mcp_server_device_request(struct gw_mcp_server *srv,
                                  struct gw_device *dev,
                                  const struct gw_rpc *rpc)
{
    const struct gw_config *cfg;
    struct gw_mcp_client *cl;
    unsigned cap;
    char text[160];

    if (srv == NULL || dev == NULL || rpc->method == NULL) {
        return false;
    }
    if (rpc->kind == GW_RPC_NOTIFICATION) {
        return strcmp(rpc->method, "notifications/cancelled") == 0 &&
               withdrawn(srv, dev, rpc);
    }
    if (rpc->kind != GW_RPC_REQUEST ||
        (cap = gw_mcp_method_client_cap(rpc->method)) == 0) {
        return false;
    }
    cfg = config(srv);
    if ((cl = capable_client(srv, dev, cap)) == NULL) {
        snprintf(text, sizeof(text), "no MCP client of this device declared %s",
                 gw_mcp_client_cap_name(cap));
        refuse(srv, dev, rpc, GW_RPC_NO_CLIENT, text);
        return true;
    }
    if (cfg->mcp.max_device_requests > 0 &&
        asks_of(srv, dev) >= (size_t)cfg->mcp.max_device_requests) {
        snprintf(text, sizeof(text),
                 "too many requests are waiting for the MCP client "
                 "(mcp.max_device_requests %d)",
                 cfg->mcp.max_device_requests);
        refuse(srv, dev, rpc, GW_RPC_DEVICE_BUSY, text);
        return true;
    }
    ask_start(srv, dev, cl, rpc);
    return true;
}

void gw__mcp_server_ask_answered(struct gw_mcp_client *cl,
                                 const struct gw_rpc *rpc)
{
    struct gw_list *asks = &cl->srv->asks;
    struct gw_mcp_ask *ask = NULL;
    cJSON *result = NULL, *error = NULL;

    for (struct gw_list *it = asks->next; it != asks; it = it->next) {
        struct gw_mcp_ask *a = GW_LIST_ENTRY(it, struct gw_mcp_ask, node);
        if (a->cl == cl && cJSON_IsString(rpc->id) &&
            strcmp(a->id, rpc->id->valuestring) == 0) {
            ask = a;
            break;
        }
    }
    if (ask == NULL) {
        /* late (timed out, withdrawn) or made up: nothing waits for it */
        gw_log_peer(GW_LOG_INFO, NULL, cl->subject,
                    "a response to no waiting device request dropped");
        return;
    }
    if (rpc->result != NULL) {
        result = cJSON_Duplicate(rpc->result, true);
    } else {
        error = gw_rpc_error_normalise(rpc->error);
    }
    if (result == NULL && error == NULL) {
        to_device(ask->dev, ask->device_id, GW_RPC_INTERNAL_ERROR,
                  "out of memory");
    } else {
        (void)gw_mcp_link_respond(&ask->dev->link, ask->device_id, result,
                                  error);
    }
    gw_log_peer(GW_LOG_DEBUG, NULL, cl->subject, "%s %s answered (%s)",
                ask->method, ask->id, rpc->result != NULL ? "result" : "error");
    cl->srv->stats.asks_answered++;
    ask_free(ask);
}

void gw__mcp_server_asks_client_gone(struct gw_mcp_client *cl)
{
    struct gw_list *it, *tmp;

    GW_LIST_FOREACH_SAFE(it, tmp, &cl->srv->asks)
    {
        struct gw_mcp_ask *ask = GW_LIST_ENTRY(it, struct gw_mcp_ask, node);
        if (cl->n_asks == 0) {
            break;
        }
        if (ask->cl != cl) {
            continue;
        }
        gw_log_peer(GW_LOG_INFO, NULL, cl->subject,
                    "%s %s from %s: the client went away", ask->method, ask->id,
                    ask->dev->client_id);
        cl->srv->stats.asks_dropped++;
        to_device(ask->dev, ask->device_id, GW_RPC_NO_CLIENT,
                  "the MCP client went away");
        ask_free(ask);
    }
}

void gw__mcp_server_asks_device_gone(struct gw_mcp_server *srv,
                                     const struct gw_device *dev)
{
    struct gw_list *it, *tmp;

    GW_LIST_FOREACH_SAFE(it, tmp, &srv->asks)
    {
        struct gw_mcp_ask *ask = GW_LIST_ENTRY(it, struct gw_mcp_ask, node);
        if (ask->dev != dev) {
            continue;
        }
        srv->stats.asks_dropped++;
        cancel_toward_client(ask, "the device went offline");
        ask_free(ask);
    }
}
