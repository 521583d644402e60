/*
 * The MCP server's tool methods: tools/list pages built from the device
 * tool caches, and tools/call (task-augmented too) sent to the device that
 * owns the tool.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/jsonrpc.h"
#include "codec/mcp_tools.h"
#include "common/log.h"
#include "gateway/mcp/mcp_server_int.h"

/* ---- tools/list ---- */

static bool expose_user_tools(const struct gw_mcp_server *srv)
{
    return gw_config_live_get(srv->env.config)->mcp.expose_user_tools;
}

static bool tool_hidden(const struct gw_mcp_server *srv, const cJSON *tool)
{
    return !gw_tool_visible(tool, GW_TOOLS_FOR_CLIENT, expose_user_tools(srv));
}

/* A copy of a device's tool as the session shows it; NULL on OOM. */
static cJSON *shown_tool(const cJSON *tool, const char *name,
                         const struct gw_device *dev, bool aggregated)
{
    cJSON *copy = cJSON_Duplicate(tool, true);

    if (copy == NULL) {
        return NULL;
    }
    if (!cJSON_ReplaceItemInObjectCaseSensitive(copy, "name",
                                                cJSON_CreateString(name))) {
        cJSON_Delete(copy);
        return NULL;
    }
    /* MCP requires an input schema; some firmware tools omit it. */
    if (!cJSON_IsObject(
            cJSON_GetObjectItemCaseSensitive(copy, "inputSchema"))) {
        cJSON_DeleteItemFromObjectCaseSensitive(copy, "inputSchema");
        cJSON *schema = cJSON_AddObjectToObject(copy, "inputSchema");
        if (schema == NULL ||
            cJSON_AddStringToObject(schema, "type", "object") == NULL) {
            cJSON_Delete(copy);
            return NULL;
        }
    }
    if (!aggregated) {
        return copy;
    }
    return gw__mcp_server_item_of(copy, dev);
}

/* Adds dev's visible tools to the page; false once the page is full. */
static bool page_add_device(const struct gw_mcp_server *srv,
                            struct gw__mcp_page *pg,
                            const struct gw_device *dev, bool aggregated)
{
    char name[GW_MCP_TOOL_NAME_MAX + 1];
    const cJSON *tool;

    /* Only a complete list is shown: a tool missing from a cut one could
     * not be called anyway (tool_cache.h). */
    if (!gw_tool_cache_complete(&dev->tools)) {
        return true;
    }
    cJSON_ArrayForEach(tool, dev->tools.tools)
    {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(tool, "name");
        if (!cJSON_IsString(n) || tool_hidden(srv, tool)) {
            continue;
        }
        if (aggregated ? gw_mcp_aggregate_name(dev->label, n->valuestring, name,
                                               sizeof(name)) != 0
                       : !gw_mcp_tool_name_valid(n->valuestring,
                                                 strlen(n->valuestring))) {
            continue;
        }
        /* only visible tools count toward the cursor's offset */
        if (!gw__mcp_server_page_take(pg)) {
            if (pg->more) {
                return false;
            }
            continue;
        }
        const char *shown = aggregated ? name : n->valuestring;
        cJSON *item = shown_tool(tool, shown, dev, aggregated);
        if (item != NULL && !cJSON_AddItemToArray(pg->items, item)) {
            cJSON_Delete(item);
        }
    }
    return true;
}

cJSON *gw__mcp_server_tools_list(struct gw_mcp_exchange *ex,
                                 const struct gw_rpc *rpc, bool *started)
{
    struct gw_mcp_client *cl = ex->cl;
    struct gw_mcp_server *srv = cl->srv;
    struct gw__mcp_page pg = {0};
    const struct gw_device *dev;
    cJSON *res;

    (void)started;
    if (!gw__mcp_server_page_cursor(&pg, rpc->params)) {
        return gw__mcp_server_refuse(cl, rpc, GW_RPC_INVALID_PARAMS,
                                     "invalid cursor");
    }
    if ((res = gw__mcp_server_page_new(&pg, "tools")) == NULL) {
        return NULL;
    }
    if (cl->client_id[0] != '\0') {
        dev = gw_device_find(srv->env.devices, cl->client_id);
        if (dev != NULL) {
            (void)page_add_device(srv, &pg, dev, false);
        }
    } else {
        GW_DEVICE_FOREACH(srv->env.devices, dev)
        {
            if (!page_add_device(srv, &pg, dev, true)) {
                break;
            }
        }
    }
    return gw__mcp_server_page_result(rpc, res, &pg);
}

/* ---- tools/call ---- */

/* The result of a call the device refused (bad arguments, unknown tool):
 * a tool error the model can read, not a protocol error. */
static cJSON *refused_result(const cJSON *error)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(error, "message");
    cJSON *res = cJSON_CreateObject();
    cJSON *content = cJSON_AddArrayToObject(res, "content");
    cJSON *item = cJSON_CreateObject();

    if (content == NULL || item == NULL ||
        !cJSON_AddItemToArray(content, item)) {
        cJSON_Delete(item);
        cJSON_Delete(res);
        return NULL;
    }
    if (cJSON_AddStringToObject(item, "type", "text") == NULL ||
        cJSON_AddStringToObject(item, "text",
                                cJSON_IsString(m) ? m->valuestring
                                                  : "device error") == NULL ||
        cJSON_AddBoolToObject(res, "isError", true) == NULL) {
        cJSON_Delete(res);
        return NULL;
    }
    return res;
}

/* A device's tools/call reply as the client sees it: a refusal becomes a
 * tool error, a CreateTaskResult is recorded (and renamed on /mcp). */
static cJSON *call_shape(struct gw__mcp_pending *p,
                         const struct gw_mcp_reply *reply)
{
    cJSON *body = NULL;

    switch (reply->outcome) {
    case GW_MCP_OK:
        if ((body = cJSON_Duplicate(reply->result, true)) != NULL &&
            gw__mcp_server_task_created(p, body) != 0) {
            cJSON_Delete(body);
            body = NULL;
        }
        return body != NULL ? gw_rpc_result(p->id, body) : NULL;
    case GW_MCP_ERROR:
        body = refused_result(reply->error);
        return body != NULL ? gw_rpc_result(p->id, body) : NULL;
    default:
        gw_log_peer(GW_LOG_INFO, NULL, p->cl->subject, "tools/call to %s: %s",
                    p->client_id, gw_mcp_outcome_name(reply->outcome));
        body = cJSON_Duplicate(reply->error, true);
        return body != NULL ? gw_rpc_error_with(p->id, body) : NULL;
    }
}

cJSON *gw__mcp_server_tools_call(struct gw_mcp_exchange *ex,
                                 const struct gw_rpc *rpc, bool *started)
{
    static const char *const keep[] = {"_meta", "task", NULL};
    struct gw_mcp_client *cl = ex->cl;
    struct gw_mcp_server *srv = cl->srv;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(rpc->params, "name");
    const cJSON *args =
        cJSON_GetObjectItemCaseSensitive(rpc->params, "arguments");
    const cJSON *task = cJSON_GetObjectItemCaseSensitive(rpc->params, "task");
    char label[GW_MCP_LABEL_LEN + 1] = "";
    char why[GW_CLIENT_ID_MAX + 256];
    struct gw_device *dev;
    const char *tool;
    cJSON *params, *err = NULL;

    if (!cJSON_IsString(name) || name->valuestring[0] == '\0') {
        return gw__mcp_server_refuse(cl, rpc, GW_RPC_INVALID_PARAMS,
                                     "tools/call needs a tool name");
    }
    if (args != NULL && !cJSON_IsNull(args) && !cJSON_IsObject(args)) {
        return gw__mcp_server_refuse(cl, rpc, GW_RPC_INVALID_PARAMS,
                                     "tools/call arguments must be an object");
    }
    if (task != NULL && !cJSON_IsObject(task)) {
        return gw__mcp_server_refuse(cl, rpc, GW_RPC_INVALID_PARAMS,
                                     "tools/call task must be an object");
    }
    tool = name->valuestring;
    if (cl->client_id[0] == '\0' &&
        gw_mcp_aggregate_split(name->valuestring, label, &tool) != 0) {
        snprintf(why, sizeof(why), "Unknown tool: %.*s", GW_MCP_TOOL_NAME_MAX,
                 name->valuestring);
        return gw__mcp_server_refuse(cl, rpc, GW_RPC_INVALID_PARAMS, why);
    }
    if ((dev = gw__mcp_server_target(cl, rpc, label, "tools/call", &err)) ==
        NULL) {
        return err;
    }
    /* A task is the device's to run: only one that offers them gets it. */
    if (task != NULL &&
        !gw_mcp_catalog_offers(&dev->catalog, GW_MCP_CAP_TASKS)) {
        snprintf(why, sizeof(why), "device %s does not offer %s",
                 dev->client_id, gw_mcp_cap_name(GW_MCP_CAP_TASKS));
        return gw__mcp_server_refuse(cl, rpc, GW_RPC_METHOD_NOT_FOUND, why);
    }
    /* The allow-list decides (tool_cache.h); a refusal names the tool as
     * the client wrote it. */
    if (!gw_tool_cache_may_call(&dev->tools, GW_TOOLS_FOR_CLIENT, tool,
                                expose_user_tools(srv), why, sizeof(why))) {
        gw_log_peer(GW_LOG_WARN, NULL, cl->subject,
                    "tools/call %s on %s refused: %s", tool, dev->client_id,
                    why);
        srv->stats.refused++;
        return gw_rpc_error(rpc->id, GW_RPC_INVALID_PARAMS, why);
    }
    params = gw__mcp_server_params_pick(rpc->params, keep);
    if (params != NULL &&
        (cJSON_AddStringToObject(params, "name", tool) == NULL ||
         !cJSON_AddItemToObject(params, "arguments",
                                cJSON_IsObject(args)
                                    ? cJSON_Duplicate(args, true)
                                    : cJSON_CreateObject()))) {
        cJSON_Delete(params);
        params = NULL;
    }
    gw_log_peer(GW_LOG_DEBUG, NULL, cl->subject, "tools/call %s on %s", tool,
                dev->client_id);
    return gw__mcp_server_forward(ex, rpc, dev, "tools/call", params, 0,
                                  call_shape, started);
}
