/*
 * Backend MCP through the device's shared link. The backend's ids never
 * reach the device: each request gets the link's own id and the answer
 * goes back under the backend's. A call waits on its session's relay, so
 * an answer that outlives the session has nowhere to go and is dropped.
 */
#include "gateway/mcp_relay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/jsonrpc.h"
#include "common/log.h"

/* A backend request waiting for the device. */
struct relay_call {
    struct gw_list node; /* in relay->calls */
    struct gw_mcp_relay *relay;
    cJSON *id; /* the backend's own id */
    uint64_t handle;
};

void gw_mcp_relay_init(struct gw_mcp_relay *relay, struct gw_mcp_links *links,
                       gw_mcp_relay_send_fn send, void *arg)
{
    relay->links = links;
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
}

/* Sends payload (moved) to the backend. */
static void send_to_backend(struct gw_mcp_relay *relay, cJSON *payload)
{
    if (payload != NULL) {
        relay->send(relay->arg, payload);
    }
    cJSON_Delete(payload);
}

static void on_reply(void *arg, const struct gw_mcp_reply *reply)
{
    struct relay_call *c = arg;
    struct gw_mcp_relay *relay = c->relay;
    cJSON *answer =
        reply->outcome == GW_MCP_OK
            ? gw_rpc_result(c->id, cJSON_Duplicate(reply->result, 1))
            : gw_rpc_error_with(c->id, cJSON_Duplicate(reply->error, 1));

    call_free(c);
    send_to_backend(relay, answer);
}

/* Sends the backend's request on the shared link (params moved), or
 * refuses it with (code, why) when why is not NULL. */
static void forward(struct gw_mcp_relay *relay, struct gw_device *dev,
                    const struct gw_rpc *rpc, cJSON *params, int code,
                    const char *why)
{
    struct relay_call *c = calloc(1, sizeof(*c));

    if (c == NULL || (c->id = cJSON_Duplicate(rpc->id, 1)) == NULL) {
        free(c);
        cJSON_Delete(params);
        send_to_backend(relay, gw_rpc_error(rpc->id, GW_RPC_INTERNAL_ERROR,
                                            "out of memory"));
        return;
    }
    c->relay = relay;
    gw_list_insert_tail(&relay->calls, &c->node);
    if (why != NULL) {
        cJSON_Delete(params);
        gw_mcp_refuse(relay->links, GW_MCP_FROM_BACKEND, code, why, on_reply, c,
                      &c->handle);
        return;
    }
    gw_mcp_request(relay->links, &dev->link, rpc->method, params, 0,
                   GW_MCP_FROM_BACKEND, on_reply, c, &c->handle);
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
        GW_LOG(GW_LOG_DEBUG, subject, "tools/list answered from the cache");
        send_to_backend(relay, gw_rpc_result(rpc->id, result));
        return;
    }
    cJSON *params = cJSON_Duplicate(rpc->params, 1);
    if (!expose && cJSON_IsObject(params)) {
        cJSON_DeleteItemFromObjectCaseSensitive(params, "withUserTools");
    }
    forward(relay, dev, rpc, params, 0, NULL);
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
    if (rpc.kind != GW_RPC_REQUEST) {
        /* Notifications and answers to the device's own requests carry no
         * id of the link's: they pass as they are. */
        (void)gw_publish_json(relay->links->pub, dev->client_id, raw, len);
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
            gw_log(GW_LOG_WARN, subject, "backend tools/call refused: %s", why);
            forward(relay, dev, &rpc, NULL, GW_RPC_INVALID_PARAMS, why);
            return 0;
        }
    }
    forward(relay, dev, &rpc, cJSON_Duplicate(rpc.params, 1), 0, NULL);
    return 0;
}
