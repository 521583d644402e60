/*
 * The MCP server's task methods: a task-augmented tools/call's
 * CreateTaskResult is recorded for the session (its status notifications
 * go to it alone) and its id renamed on /mcp (<label>.<device task id>);
 * tasks/get, tasks/result and tasks/cancel go to the device the id names;
 * tasks/list only on a device endpoint (ids of many devices have no one
 * order to page in). A task is its creating session's alone: another
 * session's task answers as unknown and is left out of tasks/list.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/jsonrpc.h"
#include "codec/mcp_items.h"
#include "codec/mcp_tools.h"
#include "common/log.h"
#include "gateway/device/device_table.h"
#include "gateway/mcp/mcp_server_int.h"

#define RELATED_TASK "io.modelcontextprotocol/related-task"

/* obj.taskId renamed for label, when it is a string. */
static int rename_task_id(cJSON *obj, const char *label)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(obj, "taskId");
    char *name;

    if (!cJSON_IsString(id)) {
        return 0;
    }
    if ((name = gw_mcp_aggregate_id(label, id->valuestring)) == NULL) {
        return GW_ENOMEM;
    }
    cJSON_ReplaceItemInObjectCaseSensitive(obj, "taskId",
                                           cJSON_CreateString(name));
    free(name);
    return 0;
}

int gw__mcp_server_task_created(struct gw__mcp_pending *p, cJSON *result)
{
    cJSON *task = cJSON_GetObjectItemCaseSensitive(result, "task");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(task, "taskId");
    struct gw_device *dev;

    if (!cJSON_IsObject(task) || !cJSON_IsString(id)) {
        return 0; /* an ordinary tool result */
    }
    dev = gw_device_find(p->cl->srv->env.devices, p->client_id);
    if (dev != NULL) {
        gw_mcp_task_created(dev, &p->cl->peer, id->valuestring);
    }
    gw_log_peer(GW_LOG_DEBUG, NULL, p->cl->subject, "task %s created on %s",
                id->valuestring, p->client_id);
    return p->label[0] != '\0' ? rename_task_id(task, p->label) : 0;
}

/* tasks/get, tasks/cancel (a Task) and tasks/result (the tool's result,
 * maybe with the related task in _meta): the ids renamed on /mcp. */
static cJSON *task_shape(struct gw__mcp_pending *p,
                         const struct gw_mcp_reply *reply)
{
    cJSON *body, *meta;

    if (reply->outcome != GW_MCP_OK) {
        if (reply->outcome != GW_MCP_ERROR) {
            gw_log_peer(GW_LOG_INFO, NULL, p->cl->subject, "%s to %s: %s",
                        p->method, p->client_id,
                        gw_mcp_outcome_name(reply->outcome));
        }
        body = cJSON_Duplicate(reply->error, true);
        return body != NULL ? gw_rpc_error_with(p->id, body) : NULL;
    }
    if ((body = cJSON_Duplicate(reply->result, true)) == NULL) {
        return NULL;
    }
    if (p->label[0] != '\0') {
        meta = cJSON_GetObjectItemCaseSensitive(body, "_meta");
        if (rename_task_id(body, p->label) != 0 ||
            rename_task_id(cJSON_GetObjectItemCaseSensitive(meta, RELATED_TASK),
                           p->label) != 0) {
            cJSON_Delete(body);
            return NULL;
        }
    }
    return gw_rpc_result(p->id, body);
}

/* tasks/list: the device's page less the tasks of other sessions. */
static cJSON *list_shape(struct gw__mcp_pending *p,
                         const struct gw_mcp_reply *reply)
{
    const struct gw_device *dev;
    cJSON *body, *tasks;
    int i;

    if (reply->outcome != GW_MCP_OK) {
        return task_shape(p, reply);
    }
    if ((body = cJSON_Duplicate(reply->result, true)) == NULL) {
        return NULL;
    }
    dev = gw_device_find(p->cl->srv->env.devices, p->client_id);
    tasks = cJSON_GetObjectItemCaseSensitive(body, "tasks");
    for (i = cJSON_GetArraySize(tasks) - 1; i >= 0; i--) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetArrayItem(tasks, i), "taskId");
        if (dev == NULL || !cJSON_IsString(id) ||
            !gw_mcp_task_owned(dev, &p->cl->peer, id->valuestring)) {
            cJSON_DeleteItemFromArray(tasks, i);
        }
    }
    return gw_rpc_result(p->id, body);
}

cJSON *gw__mcp_server_tasks(struct gw_mcp_exchange *ex,
                            const struct gw_rpc *rpc, bool *started)
{
    static const char *const names[] = {"tasks/get", "tasks/result",
                                        "tasks/cancel", "tasks/list"};
    static const char *const keep_list[] = {"_meta", "cursor", NULL};
    static const char *const keep[] = {"_meta", NULL};
    struct gw_mcp_client *cl = ex->cl;
    const struct gw_config *cfg = gw_config_live_get(cl->srv->env.config);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(rpc->params, "taskId");
    char label[GW_MCP_LABEL_LEN + 1] = "";
    char text[GW_MCP_URI_MAX + 64];
    const char *method = NULL, *own;
    struct gw_device *dev;
    uint32_t timeout_ms = 0;
    cJSON *params, *err;

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(rpc->method, names[i]) == 0) {
            method = names[i];
        }
    }
    if (method == NULL) {
        return gw_rpc_error(rpc->id, GW_RPC_METHOD_NOT_FOUND,
                            "Method not found");
    }
    if (strcmp(method, "tasks/list") == 0) {
        if (cl->client_id[0] == '\0') {
            return gw__mcp_server_refuse(cl, rpc, GW_RPC_METHOD_NOT_FOUND,
                                         "tasks/list is served on "
                                         "/mcp/devices/{clientId} only");
        }
        if ((dev = gw__mcp_server_target(cl, rpc, NULL, method, &err)) ==
            NULL) {
            return err;
        }
        return gw__mcp_server_forward(
            ex, rpc, dev, method,
            gw__mcp_server_params_pick(rpc->params, keep_list), 0, list_shape,
            started);
    }
    if (!cJSON_IsString(id) || id->valuestring[0] == '\0') {
        snprintf(text, sizeof(text), "%s needs a taskId", method);
        return gw__mcp_server_refuse(cl, rpc, GW_RPC_INVALID_PARAMS, text);
    }
    own = id->valuestring;
    if (cl->client_id[0] == '\0' &&
        gw_mcp_aggregate_id_split(id->valuestring, label, &own) != 0) {
        snprintf(text, sizeof(text), "Unknown task: %.*s", GW_MCP_URI_MAX,
                 id->valuestring);
        return gw__mcp_server_refuse(cl, rpc, GW_RPC_INVALID_PARAMS, text);
    }
    if ((dev = gw__mcp_server_target(cl, rpc, label, method, &err)) == NULL) {
        return err;
    }
    if (!gw_mcp_task_owned(dev, &cl->peer, own)) {
        snprintf(text, sizeof(text), "Unknown task: %.*s", GW_MCP_URI_MAX,
                 id->valuestring);
        return gw__mcp_server_refuse(cl, rpc, GW_RPC_INVALID_PARAMS, text);
    }
    /* tasks/result waits for the task's end, which may take long. */
    if (strcmp(method, "tasks/result") == 0 &&
        cfg->mcp.task_result_timeout_ms > 0) {
        timeout_ms = (uint32_t)cfg->mcp.task_result_timeout_ms;
    }
    params = gw__mcp_server_params_pick(rpc->params, keep);
    if (params != NULL &&
        cJSON_AddStringToObject(params, "taskId", own) == NULL) {
        cJSON_Delete(params);
        params = NULL;
    }
    return gw__mcp_server_forward(ex, rpc, dev, method, params, timeout_ms,
                                  task_shape, started);
}
