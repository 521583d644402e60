/*
 * What the MCP server's methods do alike with a client's request: find
 * the device it is for, pick the params passed on, page a list by its
 * cursor, and refuse it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/jsonrpc.h"
#include "common/log.h"
#include "gateway/device/device_table.h"
#include "gateway/mcp/mcp_server_int.h"

/* Items per page of every list, and the prefix of the opaque cursors. */
#define PAGE_ITEMS    100
#define CURSOR_PREFIX "gw-offset-"

cJSON *gw__mcp_server_refuse(struct gw_mcp_client *cl, const struct gw_rpc *rpc,
                             int code, const char *message)
{
    gw_log_peer(GW_LOG_WARN, NULL, cl->subject, "%s refused (%d): %s",
                rpc->method, code, message);
    cl->srv->stats.refused++;
    return gw_rpc_error(rpc->id, code, message);
}

/* ---- which device ---- */

struct gw_device *gw__mcp_server_target(struct gw_mcp_client *cl,
                                        const struct gw_rpc *rpc,
                                        const char *label, const char *method,
                                        cJSON **err)
{
    struct gw_device_table *devs = cl->srv->env.devices;
    char text[GW_CLIENT_ID_MAX + 96];
    struct gw_device *dev;

    *err = NULL;
    if (cl->client_id[0] != '\0') {
        dev = gw_device_find(devs, cl->client_id);
        if (dev == NULL) {
            snprintf(text, sizeof(text), "device %s is offline", cl->client_id);
            *err = gw_rpc_error(rpc->id, GW_RPC_DEVICE_OFFLINE, text);
            return NULL;
        }
    } else {
        dev = gw_device_find_label(devs, label);
        if (dev == NULL) {
            snprintf(text, sizeof(text), "no online device has label %.*s",
                     GW_MCP_LABEL_LEN, label);
            *err = gw_rpc_error(rpc->id, GW_RPC_DEVICE_OFFLINE, text);
            return NULL;
        }
    }
    if (method != NULL && !gw_mcp_catalog_allows(&dev->catalog, dev->client_id,
                                                 method, text, sizeof(text))) {
        *err = gw__mcp_server_refuse(cl, rpc, GW_RPC_METHOD_NOT_FOUND, text);
        return NULL;
    }
    return dev;
}

/* ---- params ---- */

cJSON *gw__mcp_server_params_pick(const cJSON *src, const char *const *names)
{
    cJSON *out = cJSON_CreateObject();

    for (; out != NULL && *names != NULL; names++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(src, *names);
        if (v != NULL &&
            !cJSON_AddItemToObject(out, *names, cJSON_Duplicate(v, true))) {
            cJSON_Delete(out);
            out = NULL;
        }
    }
    return out;
}

/* ---- pages of a list ---- */

/* Offsets are encoded so that clients treat the cursor as opaque. */
bool gw__mcp_server_page_cursor(struct gw__mcp_page *pg, const cJSON *params)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(params, "cursor");
    const char *s;
    size_t v = 0;

    pg->offset = 0;
    if (c == NULL || cJSON_IsNull(c)) {
        return true;
    }
    if (!cJSON_IsString(c) || strncmp(c->valuestring, CURSOR_PREFIX,
                                      sizeof(CURSOR_PREFIX) - 1) != 0) {
        return false;
    }
    s = c->valuestring + sizeof(CURSOR_PREFIX) - 1;
    if (*s == '\0' || strlen(s) > 9) {
        return false;
    }
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9') {
            return false;
        }
        v = v * 10 + (size_t)(*s - '0');
    }
    pg->offset = v;
    return true;
}

cJSON *gw__mcp_server_page_new(struct gw__mcp_page *pg, const char *member)
{
    cJSON *res = cJSON_CreateObject();

    if (res == NULL ||
        (pg->items = cJSON_AddArrayToObject(res, member)) == NULL) {
        cJSON_Delete(res);
        return NULL;
    }
    return res;
}

bool gw__mcp_server_page_take(struct gw__mcp_page *pg)
{
    if (pg->seen++ < pg->offset) {
        return false;
    }
    if ((size_t)cJSON_GetArraySize(pg->items) == PAGE_ITEMS) {
        pg->more = true;
        return false;
    }
    return true;
}

cJSON *gw__mcp_server_page_result(const struct gw_rpc *rpc, cJSON *res,
                                  const struct gw__mcp_page *pg)
{
    char cursor[sizeof(CURSOR_PREFIX) + 24];

    if (pg->more) {
        snprintf(cursor, sizeof(cursor), CURSOR_PREFIX "%zu",
                 pg->offset + PAGE_ITEMS);
        if (cJSON_AddStringToObject(res, "nextCursor", cursor) == NULL) {
            cJSON_Delete(res);
            return NULL;
        }
    }
    return gw_rpc_result(rpc->id, res);
}

cJSON *gw__mcp_server_item_of(cJSON *copy, const struct gw_device *dev)
{
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(copy, "description");
    const char *was = cJSON_IsString(desc) ? desc->valuestring : "";
    size_t len = strlen(dev->client_id) + 4 + strlen(was);
    char *text = malloc(len);

    if (text == NULL) {
        cJSON_Delete(copy);
        return NULL;
    }
    snprintf(text, len, "[%s] %s", dev->client_id, was);
    cJSON_DeleteItemFromObjectCaseSensitive(copy, "description");
    if (cJSON_AddStringToObject(copy, "description", text) == NULL) {
        cJSON_Delete(copy);
        copy = NULL;
    }
    free(text);
    return copy;
}
