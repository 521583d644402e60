/*
 * Backend MCP through the device's shared link. The backend's ids never
 * reach the device: each request gets the link's own id and the answer
 * goes back under the backend's, to the session that asked, if it lives.
 */
#include "gateway/mcp_relay.h"

#include <stdlib.h>
#include <string.h>

#include "codec/jsonrpc.h"
#include "codec/mcp_tools.h"
#include "gateway/device.h"
#include "gateway/instance.h"
#include "common/log.h"
#include "gateway/session.h"

/* A backend request waiting for the device. */
struct relay_call {
    struct gw_instance *inst;
    uint64_t serial; /* of the session that asked */
    cJSON *id;       /* the backend's own id */
    char client_id[GW_CLIENT_ID_MAX + 1];
};

cJSON *gw_mcp_relay_visible_tools(const struct gw_device *dev, bool with_user)
{
    const cJSON *t;
    cJSON *out;

    if (dev == NULL || dev->tools == NULL ||
        (out = cJSON_CreateArray()) == NULL) {
        return NULL;
    }
    cJSON_ArrayForEach(t, dev->tools)
    {
        if (!with_user && gw_mcp_tool_user_only(t)) {
            continue;
        }
        cJSON *copy = cJSON_Duplicate(t, 1);
        if (copy == NULL || !cJSON_AddItemToArray(out, copy)) {
            cJSON_Delete(copy);
            cJSON_Delete(out);
            return NULL;
        }
    }
    return out;
}

bool gw_mcp_relay_user_only(const struct gw_device *dev, const char *name)
{
    const cJSON *t;

    if (dev == NULL || dev->tools == NULL || name == NULL) {
        return false;
    }
    cJSON_ArrayForEach(t, dev->tools)
    {
        const char *n =
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "name"));
        if (n != NULL && strcmp(n, name) == 0) {
            return gw_mcp_tool_user_only(t);
        }
    }
    return false;
}

/* {"type":"mcp","session_id":sid,"payload":payload} to the backend. */
static void send_to_backend(struct gw_session *s, cJSON *payload)
{
    cJSON *env = cJSON_CreateObject();
    char *text = NULL;

    if (payload == NULL || env == NULL ||
        cJSON_AddStringToObject(env, "type", "mcp") == NULL ||
        cJSON_AddStringToObject(env, "session_id", s->session_id) == NULL ||
        !cJSON_AddItemToObject(env, "payload", payload)) {
        cJSON_Delete(env);
        cJSON_Delete(payload);
        return;
    }
    text = cJSON_PrintUnformatted(env);
    cJSON_Delete(env);
    if (text == NULL ||
        gw_backend_conn_send_text(s->ws, text, strlen(text)) != 0) {
        gw_log(GW_LOG_WARN, s->subject, "mcp answer to the backend dropped");
    }
    cJSON_free(text);
}

static struct gw_session *live_session(struct gw_instance *inst,
                                       const char *client_id, uint64_t serial)
{
    struct gw_session *s = NULL;

    HASH_FIND_STR(inst->sessions, client_id, s);
    return s != NULL && s->serial == serial && s->state == GW_SESSION_ACTIVE &&
                   s->ws != NULL
               ? s
               : NULL;
}

static void on_reply(void *arg, const struct gw_mcp_reply *reply)
{
    struct relay_call *c = arg;
    struct gw_session *s = live_session(c->inst, c->client_id, c->serial);

    if (s != NULL) {
        cJSON *answer =
            reply->outcome == GW_MCP_OK
                ? gw_rpc_result(c->id, cJSON_Duplicate(reply->result, 1))
                : gw_rpc_error_with(c->id, cJSON_Duplicate(reply->error, 1));
        send_to_backend(s, answer);
    } else {
        char subject[GW_CLIENT_ID_MAX + 8];
        snprintf(subject, sizeof(subject), "dev=%s", c->client_id);
        GW_LOG(GW_LOG_DEBUG, subject,
               "mcp answer for an ended session dropped");
    }
    cJSON_Delete(c->id);
    free(c);
}

/* Sends the backend's request on the shared link; params moved. */
static void forward(struct gw_session *s, const struct gw_rpc *rpc,
                    cJSON *params)
{
    struct relay_call *c = calloc(1, sizeof(*c));

    if (c == NULL || (c->id = cJSON_Duplicate(rpc->id, 1)) == NULL) {
        free(c);
        cJSON_Delete(params);
        send_to_backend(
            s, gw_rpc_error(rpc->id, GW_RPC_INTERNAL_ERROR, "out of memory"));
        return;
    }
    c->inst = s->inst;
    c->serial = s->serial;
    memcpy(c->client_id, s->client_id, sizeof(c->client_id));
    gw_devices_request(&s->inst->devices, s->client_id, rpc->method, params, 0,
                       GW_MCP_FROM_BACKEND, on_reply, c, NULL);
}

/* tools/list: from the cache when it is complete, else from the device. */
static void backend_tools_list(struct gw_session *s, const struct gw_rpc *rpc,
                               const struct gw_device *dev, bool expose)
{
    const cJSON *cursor =
        cJSON_GetObjectItemCaseSensitive(rpc->params, "cursor");
    bool with_user = expose && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
                                   rpc->params, "withUserTools"));
    bool first_page = cursor == NULL || (cJSON_IsString(cursor) &&
                                         cursor->valuestring[0] == '\0');

    if (dev != NULL && dev->tools_complete && first_page) {
        cJSON *result = cJSON_CreateObject();
        cJSON *tools = gw_mcp_relay_visible_tools(dev, with_user);
        if (result == NULL || tools == NULL ||
            !cJSON_AddItemToObject(result, "tools", tools)) {
            cJSON_Delete(result);
            cJSON_Delete(tools);
            send_to_backend(s, gw_rpc_error(rpc->id, GW_RPC_INTERNAL_ERROR,
                                            "out of memory"));
            return;
        }
        GW_LOG(GW_LOG_DEBUG, s->subject, "tools/list answered from the cache");
        send_to_backend(s, gw_rpc_result(rpc->id, result));
        return;
    }
    cJSON *params = cJSON_Duplicate(rpc->params, 1);
    if (!expose && cJSON_IsObject(params)) {
        cJSON_DeleteItemFromObjectCaseSensitive(params, "withUserTools");
    }
    forward(s, rpc, params);
}

void gw_mcp_relay_from_backend(struct gw_session *s,
                               const struct gw_envelope *env, const char *raw,
                               size_t len)
{
    struct gw_instance *inst = s->inst;
    const cJSON *payload =
        cJSON_GetObjectItemCaseSensitive(env->root, "payload");
    bool expose = gw_instance_config(inst)->mcp.expose_user_tools;
    struct gw_rpc rpc;

    if (gw_rpc_classify(payload, &rpc) != 0) {
        inst->stats.refused[GW_REFUSE_BACKEND]++;
        gw_log(GW_LOG_WARN, s->subject, "backend mcp is not JSON-RPC: dropped");
        return;
    }
    inst->stats.backend_messages++;
    if (rpc.kind != GW_RPC_REQUEST) {
        /* Notifications and answers to the device's own requests carry no
         * id of the link's: they pass as they are. */
        (void)gw_instance_publish_device(inst, s->client_id, raw, len);
        return;
    }
    const struct gw_device *dev = gw_devices_find(&inst->devices, s->client_id);
    if (strcmp(rpc.method, "tools/list") == 0) {
        backend_tools_list(s, &rpc, dev, expose);
        return;
    }
    if (strcmp(rpc.method, "tools/call") == 0 && !expose) {
        const char *name = cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(rpc.params, "name"));
        if (gw_mcp_relay_user_only(dev, name)) {
            char text[160];
            snprintf(text, sizeof(text), "Unknown tool: %.128s", name);
            gw_log(GW_LOG_WARN, s->subject,
                   "backend called user-only tool %.128s: refused", name);
            send_to_backend(s,
                            gw_rpc_error(rpc.id, GW_RPC_INVALID_PARAMS, text));
            return;
        }
    }
    forward(s, &rpc, cJSON_Duplicate(rpc.params, 1));
}
