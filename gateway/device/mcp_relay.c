/*
 * Backend MCP through the device's shared link. The backend's ids never
 * reach the device: each request gets the link's own id and the answer
 * goes back under the backend's. A call waits on its session's relay, so
 * an answer that outlives the session has nowhere to go and is dropped.
 */
#include "gateway/device/mcp_relay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/jsonrpc.h"
#include "codec/mcp_caps.h"
#include "codec/mcp_items.h"
#include "common/log.h"
#include "gateway/device/mcp_discovery_int.h"

/* A backend request waiting for the device. */
struct relay_call {
    struct gw_list node; /* in relay->calls */
    struct gw_mcp_relay *relay;
    cJSON *id; /* the backend's own id */
    uint64_t handle;
    bool read;      /* resources/read: its contents are checked */
    bool task_call; /* tools/call with params.task: a task may start */
};

/* Sends payload (moved) to the backend. */
static void send_to_backend(struct gw_mcp_relay *relay, cJSON *payload)
{
    if (payload != NULL) {
        relay->send(relay->arg, payload);
    }
    cJSON_Delete(payload);
}

/* A device notification the backend asked for (mcp_peers.h). */
static void peer_notify(struct gw_mcp_peer *peer, const struct gw_device *dev,
                        const char *method, const cJSON *params)
{
    struct gw_mcp_relay *relay =
        GW_CONTAINER_OF(peer, struct gw_mcp_relay, peer);

    (void)dev;
    send_to_backend(relay,
                    gw_rpc_notification(method, cJSON_Duplicate(params, 1)));
}

static const struct gw_mcp_peer_ops relay_peer_ops = {.notify = peer_notify};

void gw_mcp_relay_init(struct gw_mcp_relay *relay,
                       struct gw_device_table *devices, const char *client_id,
                       const char *subject, gw_mcp_relay_send_fn send,
                       void *arg)
{
    relay->devices = devices;
    relay->links = &devices->links;
    relay->client_id = client_id;
    gw_mcp_peer_init(&relay->peer, &relay_peer_ops, subject, false);
    gw_list_init(&relay->calls);
    relay->send = send;
    relay->arg = arg;
}

static void call_free(struct relay_call *c)
{
    gw_list_unlink(&c->node);
    cJSON_Delete(c->id);
    free(c);
}

void gw_mcp_relay_close(struct gw_mcp_relay *relay)
{
    struct gw_list *it, *tmp;

    GW_LIST_FOREACH_SAFE(it, tmp, &relay->calls)
    {
        struct relay_call *c = GW_LIST_ENTRY(it, struct relay_call, node);
        gw_mcp_abandon(relay->links, c->handle);
        call_free(c);
    }
    gw_mcp_peer_leave(relay->devices, &relay->peer);
}

/* A read's contents, checked against mcp.max_resource_bytes: the result
 * to pass on, or NULL with *err (a JSON-RPC error object) set. */
static cJSON *checked_read(const struct gw_mcp_relay *relay,
                           const cJSON *result, cJSON **err)
{
    const struct gw_config *cfg = gw_config_live_get(relay->links->config);
    char why[160];

    if (gw_mcp_contents_check(result, (size_t)cfg->mcp.max_resource_bytes, NULL,
                              why, sizeof(why)) != 0) {
        gw_log_peer(GW_LOG_WARN, NULL, relay->peer.subject,
                    "resources/read refused: %s", why);
        *err = cJSON_CreateObject();
        if (*err != NULL) {
            cJSON_AddNumberToObject(*err, "code", GW_RPC_INTERNAL_ERROR);
            cJSON_AddStringToObject(*err, "message", why);
        }
        return NULL;
    }
    return cJSON_Duplicate(result, 1);
}

/* A CreateTaskResult: the task's status notifications are the backend's. */
static void note_task(struct gw_mcp_relay *relay, const cJSON *result)
{
    const cJSON *task = cJSON_GetObjectItemCaseSensitive(result, "task");
    const char *id =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(task, "taskId"));
    struct gw_device *dev = gw_device_find(relay->devices, relay->client_id);

    if (id != NULL && dev != NULL) {
        gw_mcp_task_created(dev, &relay->peer, id);
    }
}

static void on_reply(void *arg, const struct gw_mcp_reply *reply)
{
    struct relay_call *c = arg;
    struct gw_mcp_relay *relay = c->relay;
    cJSON *answer, *body = NULL, *err = NULL;

    if (reply->outcome != GW_MCP_OK) {
        answer = gw_rpc_error_with(c->id, cJSON_Duplicate(reply->error, 1));
    } else if (c->read &&
               (body = checked_read(relay, reply->result, &err)) == NULL) {
        answer = gw_rpc_error_with(c->id, err);
    } else {
        if (c->task_call) {
            note_task(relay, reply->result);
        }
        answer = gw_rpc_result(
            c->id, body != NULL ? body : cJSON_Duplicate(reply->result, 1));
    }
    call_free(c);
    send_to_backend(relay, answer);
}

/* The device's progress on a backend request, under the backend's token. */
static void on_progress(void *arg, const cJSON *params)
{
    struct relay_call *c = arg;

    send_to_backend(c->relay, gw_rpc_notification("notifications/progress",
                                                  cJSON_Duplicate(params, 1)));
}

/* A waiting call for the backend's request rpc; NULL (the backend told)
 * when memory is short. */
static struct relay_call *call_new(struct gw_mcp_relay *relay,
                                   const struct gw_rpc *rpc)
{
    struct relay_call *c = calloc(1, sizeof(*c));

    if (c == NULL || (c->id = cJSON_Duplicate(rpc->id, 1)) == NULL) {
        free(c);
        send_to_backend(relay, gw_rpc_error(rpc->id, GW_RPC_INTERNAL_ERROR,
                                            "out of memory"));
        return NULL;
    }
    c->relay = relay;
    gw_list_insert_tail(&relay->calls, &c->node);
    return c;
}

/* Sends the backend's request on the shared link (params moved), or
 * refuses it with (code, why) when why is not NULL. */
static void forward(struct gw_mcp_relay *relay, struct gw_device *dev,
                    const struct gw_rpc *rpc, cJSON *params, int code,
                    const char *why)
{
    const struct gw_config *cfg = gw_config_live_get(relay->links->config);
    struct gw_mcp_opts opts = {.on_progress = on_progress};
    struct relay_call *c = call_new(relay, rpc);

    /* tasks/result waits for the task's end, which may take long. */
    if (strcmp(rpc->method, "tasks/result") == 0) {
        opts.timeout_ms = (uint32_t)cfg->mcp.task_result_timeout_ms;
    }

    if (c == NULL) {
        cJSON_Delete(params);
        return;
    }
    if (why != NULL) {
        cJSON_Delete(params);
        gw_mcp_refuse(relay->links, GW_MCP_FROM_BACKEND, code, why, on_reply, c,
                      &c->handle);
        return;
    }
    c->read = strcmp(rpc->method, "resources/read") == 0;
    c->task_call =
        strcmp(rpc->method, "tools/call") == 0 &&
        cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(rpc->params, "task"));
    gw_mcp_request_with(relay->links, &dev->link, rpc->method, params, &opts,
                        GW_MCP_FROM_BACKEND, on_reply, c, &c->handle);
}

/* resources/subscribe|unsubscribe and logging/setLevel: the backend is
 * one peer of the device among others (mcp_peers.h). */
static void peer_request(struct gw_mcp_relay *relay, struct gw_device *dev,
                         const struct gw_rpc *rpc)
{
    const char *uri = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(rpc->params, "uri"));
    const char *level = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(rpc->params, "level"));
    enum gw_mcp_log_level lv;
    struct relay_call *c;

    if (strcmp(rpc->method, "logging/setLevel") == 0 &&
        (level == NULL || gw_mcp_log_level_parse(level, &lv) != 0)) {
        forward(relay, dev, rpc, NULL, GW_RPC_INVALID_PARAMS,
                "level must be one of the MCP logging levels");
        return;
    }
    if ((c = call_new(relay, rpc)) == NULL) {
        return;
    }
    if (strcmp(rpc->method, "logging/setLevel") == 0) {
        gw_mcp_set_level(relay->devices, dev, &relay->peer, lv,
                         GW_MCP_FROM_BACKEND, on_reply, c, &c->handle);
    } else {
        gw_mcp_subscribe(relay->devices, dev, &relay->peer, uri,
                         strcmp(rpc->method, "resources/subscribe") == 0,
                         GW_MCP_FROM_BACKEND, on_reply, c, &c->handle);
    }
}

/* The backend withdraws a request: the device hears it under the link's
 * id, and the backend gets no answer (MCP: the receiver of a cancelled
 * request sends none). */
static void backend_cancelled(struct gw_mcp_relay *relay, const cJSON *params)
{
    const cJSON *rid = cJSON_GetObjectItemCaseSensitive(params, "requestId");
    struct gw_list *it, *tmp;

    GW_LIST_FOREACH_SAFE(it, tmp, &relay->calls)
    {
        struct relay_call *c = GW_LIST_ENTRY(it, struct relay_call, node);
        if (rid != NULL && cJSON_Compare(c->id, rid, 1)) {
            gw_mcp_abandon(relay->links, c->handle);
            call_free(c);
            return;
        }
    }
    gw_log_peer(GW_LOG_DEBUG, NULL, relay->peer.subject,
                "cancel for no waiting request");
}

/* tools/list: from the cache when it is complete, else from the device. */
static void backend_tools_list(struct gw_mcp_relay *relay,
                               struct gw_device *dev, const struct gw_rpc *rpc,
                               bool expose)
{
    const cJSON *cursor =
        cJSON_GetObjectItemCaseSensitive(rpc->params, "cursor");
    bool first_page = cursor == NULL || (cJSON_IsString(cursor) &&
                                         cursor->valuestring[0] == '\0');

    if (gw_tool_cache_complete(&dev->tools) && first_page) {
        cJSON *result = cJSON_CreateObject();
        cJSON *tools =
            gw_tool_cache_visible(&dev->tools, GW_TOOLS_FOR_BACKEND, expose);
        if (result == NULL || tools == NULL ||
            !cJSON_AddItemToObject(result, "tools", tools)) {
            cJSON_Delete(result);
            cJSON_Delete(tools);
            send_to_backend(relay, gw_rpc_error(rpc->id, GW_RPC_INTERNAL_ERROR,
                                                "out of memory"));
            return;
        }
        char subject[GW_CLIENT_ID_MAX + 16];
        snprintf(subject, sizeof(subject), "dev=%s mcp", dev->client_id);
        gw_log_peer(GW_LOG_DEBUG, NULL, subject,
                    "tools/list answered from the cache");
        send_to_backend(relay, gw_rpc_result(rpc->id, result));
        return;
    }
    cJSON *params = cJSON_Duplicate(rpc->params, 1);
    if (!expose && cJSON_IsObject(params)) {
        cJSON_DeleteItemFromObjectCaseSensitive(params, "withUserTools");
    }
    forward(relay, dev, rpc, params, 0, NULL);
}

/*
 * The params of a backend's initialize as the device gets them: its
 * capabilities carry the gateway's client capabilities too, so that
 * esp-mcp, which forgets discovery's on every initialize, still sends its
 * requests to the MCP clients that can answer them. New; NULL when memory
 * is short. Params or capabilities of the wrong type pass as they are:
 * the device judges them.
 */
static cJSON *init_params(const struct gw_config *cfg, const cJSON *params)
{
    const cJSON *theirs =
        cJSON_GetObjectItemCaseSensitive(params, "capabilities");
    cJSON *out = cJSON_Duplicate(params, 1);
    cJSON *caps;

    if (out == NULL || !cJSON_IsObject(out) ||
        (theirs != NULL && !cJSON_IsObject(theirs))) {
        return out;
    }
    caps = gw__device_client_capabilities(cfg, theirs);
    cJSON_DeleteItemFromObjectCaseSensitive(out, "capabilities");
    if (caps == NULL || !cJSON_AddItemToObject(out, "capabilities", caps)) {
        cJSON_Delete(caps);
        cJSON_Delete(out);
        return NULL;
    }
    return out;
}

int gw_mcp_relay_from_backend(struct gw_mcp_relay *relay, struct gw_device *dev,
                              const struct gw_envelope *env, const char *raw,
                              size_t len)
{
    const cJSON *payload =
        cJSON_GetObjectItemCaseSensitive(env->root, "payload");
    const struct gw_config *cfg = gw_config_live_get(dev->table->config);
    bool expose = cfg->mcp.expose_user_tools;
    char why[256];
    struct gw_rpc rpc;

    if (gw_rpc_classify(payload, &rpc) != 0) {
        return GW_EPROTO;
    }
    if (rpc.kind == GW_RPC_NOTIFICATION &&
        strcmp(rpc.method, "notifications/cancelled") == 0) {
        backend_cancelled(relay, rpc.params);
        return 0;
    }
    if (rpc.kind != GW_RPC_REQUEST) {
        /* Other notifications and answers to the device's own requests
         * carry no id of the link's: they pass as they are. */
        (void)gw_publish_json(relay->links->pub, dev->client_id, raw, len);
        return 0;
    }
    if (!gw_mcp_catalog_allows(&dev->catalog, dev->client_id, rpc.method, why,
                               sizeof(why))) {
        gw_log_peer(GW_LOG_WARN, NULL, relay->peer.subject,
                    "backend %s refused: %s", rpc.method, why);
        forward(relay, dev, &rpc, NULL, GW_RPC_METHOD_NOT_FOUND, why);
        return 0;
    }
    if (strcmp(rpc.method, "resources/subscribe") == 0 ||
        strcmp(rpc.method, "resources/unsubscribe") == 0 ||
        strcmp(rpc.method, "logging/setLevel") == 0) {
        peer_request(relay, dev, &rpc);
        return 0;
    }
    if (strcmp(rpc.method, "tools/list") == 0) {
        backend_tools_list(relay, dev, &rpc, expose);
        return 0;
    }
    if (strcmp(rpc.method, "tools/call") == 0) {
        const char *name = cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(rpc.params, "name"));
        if (!gw_tool_cache_may_call(&dev->tools, GW_TOOLS_FOR_BACKEND, name,
                                    expose, why, sizeof(why))) {
            char subject[GW_CLIENT_ID_MAX + 16];
            snprintf(subject, sizeof(subject), "dev=%s mcp", dev->client_id);
            gw_log_peer(GW_LOG_WARN, NULL, subject,
                        "backend tools/call refused: %s", why);
            forward(relay, dev, &rpc, NULL, GW_RPC_INVALID_PARAMS, why);
            return 0;
        }
    }
    forward(relay, dev, &rpc,
            strcmp(rpc.method, "initialize") == 0
                ? init_params(cfg, rpc.params)
                : cJSON_Duplicate(rpc.params, 1),
            0, NULL);
    return 0;
}
