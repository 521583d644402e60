/*
 * The MCP server's methods besides tools and tasks: resources (lists from
 * the device catalogs, read with its contents checked, subscriptions per
 * session), prompts (lists, get), completion/complete and
 * logging/setLevel; and the device notifications a session asked for
 * (resources/updated, message, tasks/status), renamed on /mcp.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/jsonrpc.h"
#include "codec/mcp_items.h"
#include "codec/mcp_tools.h"
#include "common/list.h"
#include "common/log.h"
#include "gateway/device/device_table.h"
#include "gateway/mcp/mcp_server_int.h"

static bool aggregated(const struct gw_mcp_client *cl)
{
    return cl->client_id[0] == '\0';
}

/* ---- lists ---- */

/* A copy of item as /mcp shows it: its key renamed for the device, its
 * description prefixed with the client id. NULL on OOM or for a name
 * that cannot be made. */
static cJSON *shown_item(enum gw_mcp_list_kind kind, const cJSON *item,
                         const struct gw_device *dev)
{
    const char *key = gw_mcp_list_key(kind);
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(item, key);
    cJSON *copy;
    char *name;

    if (!cJSON_IsString(k)) {
        return NULL;
    }
    name = kind == GW_MCP_LIST_PROMPTS
               ? gw_mcp_aggregate_id(dev->label, k->valuestring)
               : gw_mcp_aggregate_uri(dev->label, k->valuestring);
    if (name == NULL || (copy = cJSON_Duplicate(item, true)) == NULL) {
        free(name);
        return NULL;
    }
    if (!cJSON_ReplaceItemInObjectCaseSensitive(copy, key,
                                                cJSON_CreateString(name))) {
        free(name);
        cJSON_Delete(copy);
        return NULL;
    }
    free(name);
    return gw__mcp_server_item_of(copy, dev);
}

/* Adds dev's items of kind to the page; false once the page is full. */
static bool page_add(struct gw__mcp_page *pg, enum gw_mcp_list_kind kind,
                     const struct gw_device *dev, bool agg)
{
    const cJSON *items = gw_mcp_catalog_items(&dev->catalog, kind);
    const cJSON *item;

    cJSON_ArrayForEach(item, items)
    {
        if (!gw__mcp_server_page_take(pg)) {
            if (pg->more) {
                return false;
            }
            continue;
        }
        cJSON *shown =
            agg ? shown_item(kind, item, dev) : cJSON_Duplicate(item, true);
        if (shown != NULL && !cJSON_AddItemToArray(pg->items, shown)) {
            cJSON_Delete(shown);
        }
    }
    return true;
}

static unsigned list_cap(enum gw_mcp_list_kind kind)
{
    return kind == GW_MCP_LIST_PROMPTS ? GW_MCP_CAP_PROMPTS
                                       : GW_MCP_CAP_RESOURCES;
}

/*
 * A page of kind: on /mcp from every device that offers it (a device
 * without the capability contributes nothing); on a device endpoint from
 * the device, -32601 when it does not offer it. Only complete lists show.
 */
static cJSON *list_page(struct gw_mcp_client *cl, const struct gw_rpc *rpc,
                        enum gw_mcp_list_kind kind)
{
    struct gw_device_table *devs = cl->srv->env.devices;
    struct gw__mcp_page pg = {0};
    const struct gw_device *dev;
    char why[GW_CLIENT_ID_MAX + 96];
    cJSON *res;

    if (!gw__mcp_server_page_cursor(&pg, rpc->params)) {
        return gw__mcp_server_refuse(cl, rpc, GW_RPC_INVALID_PARAMS,
                                     "invalid cursor");
    }
    if (!aggregated(cl) &&
        (dev = gw_device_find(devs, cl->client_id)) != NULL &&
        !gw_mcp_catalog_allows(&dev->catalog, dev->client_id, rpc->method, why,
                               sizeof(why))) {
        return gw__mcp_server_refuse(cl, rpc, GW_RPC_METHOD_NOT_FOUND, why);
    }
    if ((res = gw__mcp_server_page_new(&pg, gw_mcp_list_member(kind))) ==
        NULL) {
        return NULL;
    }
    if (!aggregated(cl)) {
        if ((dev = gw_device_find(devs, cl->client_id)) != NULL) {
            (void)page_add(&pg, kind, dev, false);
        }
    } else {
        GW_DEVICE_FOREACH(devs, dev)
        {
            if (gw_mcp_catalog_offers(&dev->catalog, list_cap(kind)) &&
                !page_add(&pg, kind, dev, true)) {
                break;
            }
        }
    }
    return gw__mcp_server_page_result(rpc, res, &pg);
}

cJSON *gw__mcp_server_resources_list(struct gw_mcp_exchange *ex,
                                     const struct gw_rpc *rpc, bool *started)
{
    (void)started;
    return list_page(ex->cl, rpc, GW_MCP_LIST_RESOURCES);
}

cJSON *gw__mcp_server_templates_list(struct gw_mcp_exchange *ex,
                                     const struct gw_rpc *rpc, bool *started)
{
    (void)started;
    return list_page(ex->cl, rpc, GW_MCP_LIST_TEMPLATES);
}

cJSON *gw__mcp_server_prompts_list(struct gw_mcp_exchange *ex,
                                   const struct gw_rpc *rpc, bool *started)
{
    (void)started;
    return list_page(ex->cl, rpc, GW_MCP_LIST_PROMPTS);
}

/* ---- names in requests ---- */

/*
 * The device's own name of what a request names: as written on a device
 * endpoint; on /mcp split into the label (into label) and the device's
 * name, by uri (hybridgw://<label>/<uri>) or not (<label>.<name>). NULL
 * for a name the gateway did not make.
 */
static const char *own_name(const struct gw_mcp_client *cl, const char *name,
                            bool uri, char label[GW_MCP_LABEL_LEN + 1])
{
    const char *own = NULL;

    label[0] = '\0';
    if (!aggregated(cl)) {
        return name;
    }
    if (uri ? gw_mcp_aggregate_uri_split(name, label, &own) != 0
            : gw_mcp_aggregate_id_split(name, label, &own) != 0) {
        return NULL;
    }
    return own;
}

/* A non-empty string member of params, else NULL. */
static const char *string_param(const cJSON *params, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(params, name);

    return cJSON_IsString(v) && v->valuestring[0] != '\0' ? v->valuestring
                                                          : NULL;
}

static cJSON *unknown(struct gw_mcp_client *cl, const struct gw_rpc *rpc,
                      const char *what, const char *name)
{
    char text[GW_MCP_URI_MAX + 64];

    snprintf(text, sizeof(text), "Unknown %s: %.*s", what, GW_MCP_URI_MAX,
             name);
    return gw__mcp_server_refuse(cl, rpc, GW_RPC_INVALID_PARAMS, text);
}

/* params picked from the request's, with name set to value; NULL on OOM. */
static cJSON *params_with(const struct gw_rpc *rpc, const char *const *keep,
                          const char *name, const char *value)
{
    cJSON *params = gw__mcp_server_params_pick(rpc->params, keep);

    if (params != NULL &&
        cJSON_AddStringToObject(params, name, value) == NULL) {
        cJSON_Delete(params);
        return NULL;
    }
    return params;
}

/* ---- resources/read ---- */

static cJSON *read_shape(struct gw__mcp_pending *p,
                         const struct gw_mcp_reply *reply)
{
    const struct gw_config *cfg = gw_config_live_get(p->cl->srv->env.config);
    char why[160];
    cJSON *body;
    int rc;

    if (reply->outcome != GW_MCP_OK) {
        body = cJSON_Duplicate(reply->error, true);
        return body != NULL ? gw_rpc_error_with(p->id, body) : NULL;
    }
    rc = gw_mcp_contents_check(reply->result,
                               cfg->mcp.max_resource_bytes > 0
                                   ? (size_t)cfg->mcp.max_resource_bytes
                                   : 0,
                               NULL, why, sizeof(why));
    if (rc != 0) {
        gw_log_peer(GW_LOG_WARN, NULL, p->cl->subject,
                    "resources/read from %s refused: %s", p->client_id, why);
        p->cl->srv->stats.refused++;
        return gw_rpc_error(
            p->id, GW_RPC_INTERNAL_ERROR,
            rc == GW_ETOOBIG ? why : "device sent invalid resource contents");
    }
    if ((body = cJSON_Duplicate(reply->result, true)) == NULL) {
        return NULL;
    }
    if (p->label[0] != '\0' &&
        gw_mcp_rename_members(body, "contents", "uri", p->label) != 0) {
        cJSON_Delete(body);
        return NULL;
    }
    return gw_rpc_result(p->id, body);
}

cJSON *gw__mcp_server_resources_read(struct gw_mcp_exchange *ex,
                                     const struct gw_rpc *rpc, bool *started)
{
    static const char *const keep[] = {"_meta", NULL};
    struct gw_mcp_client *cl = ex->cl;
    const char *uri = string_param(rpc->params, "uri");
    char label[GW_MCP_LABEL_LEN + 1];
    struct gw_device *dev;
    const char *own;
    cJSON *err;

    if (uri == NULL) {
        return gw__mcp_server_refuse(cl, rpc, GW_RPC_INVALID_PARAMS,
                                     "resources/read needs a uri");
    }
    if ((own = own_name(cl, uri, true, label)) == NULL) {
        return unknown(cl, rpc, "resource", uri);
    }
    if ((dev = gw__mcp_server_target(cl, rpc, label, rpc->method, &err)) ==
        NULL) {
        return err;
    }
    return gw__mcp_server_forward(ex, rpc, dev, "resources/read",
                                  params_with(rpc, keep, "uri", own), 0,
                                  read_shape, started);
}

/* ---- resources/subscribe, resources/unsubscribe ---- */

cJSON *gw__mcp_server_subscribe(struct gw_mcp_exchange *ex,
                                const struct gw_rpc *rpc, bool *started)
{
    struct gw_mcp_client *cl = ex->cl;
    bool on = strcmp(rpc->method, "resources/subscribe") == 0;
    const char *uri = string_param(rpc->params, "uri");
    char label[GW_MCP_LABEL_LEN + 1];
    struct gw__mcp_pending *p;
    struct gw_device *dev;
    const char *own;
    cJSON *err;

    if (uri == NULL) {
        return gw__mcp_server_refuse(cl, rpc, GW_RPC_INVALID_PARAMS,
                                     on ? "resources/subscribe needs a uri"
                                        : "resources/unsubscribe needs a uri");
    }
    if ((own = own_name(cl, uri, true, label)) == NULL) {
        return unknown(cl, rpc, "resource", uri);
    }
    if ((dev = gw__mcp_server_target(cl, rpc, label, rpc->method, &err)) ==
        NULL) {
        return err;
    }
    if ((p = gw__mcp_server_pending_add(ex, rpc->id, dev->client_id)) == NULL) {
        return gw_rpc_error(rpc->id, GW_RPC_INTERNAL_ERROR, "out of memory");
    }
    p->method = on ? "resources/subscribe" : "resources/unsubscribe";
    /* Per session: the device holds one subscription for all of them. */
    gw_mcp_subscribe(cl->srv->env.devices, dev, &cl->peer, own, on,
                     GW_MCP_FROM_CLIENT, gw__mcp_server_pending_reply, p,
                     &p->handle);
    *started = true;
    return NULL;
}

/* ---- prompts/get ---- */

cJSON *gw__mcp_server_prompts_get(struct gw_mcp_exchange *ex,
                                  const struct gw_rpc *rpc, bool *started)
{
    static const char *const keep[] = {"_meta", "arguments", NULL};
    struct gw_mcp_client *cl = ex->cl;
    const char *name = string_param(rpc->params, "name");
    const cJSON *args =
        cJSON_GetObjectItemCaseSensitive(rpc->params, "arguments");
    char label[GW_MCP_LABEL_LEN + 1];
    struct gw_device *dev;
    const char *own;
    cJSON *err;

    if (name == NULL) {
        return gw__mcp_server_refuse(cl, rpc, GW_RPC_INVALID_PARAMS,
                                     "prompts/get needs a prompt name");
    }
    if (args != NULL && !cJSON_IsObject(args)) {
        return gw__mcp_server_refuse(cl, rpc, GW_RPC_INVALID_PARAMS,
                                     "prompts/get arguments must be an object");
    }
    if ((own = own_name(cl, name, false, label)) == NULL) {
        return unknown(cl, rpc, "prompt", name);
    }
    if ((dev = gw__mcp_server_target(cl, rpc, label, rpc->method, &err)) ==
        NULL) {
        return err;
    }
    return gw__mcp_server_forward(ex, rpc, dev, "prompts/get",
                                  params_with(rpc, keep, "name", own), 0, NULL,
                                  started);
}

/* ---- completion/complete ---- */

cJSON *gw__mcp_server_complete(struct gw_mcp_exchange *ex,
                               const struct gw_rpc *rpc, bool *started)
{
    static const char *const keep[] = {"_meta", "argument", "context", NULL};
    struct gw_mcp_client *cl = ex->cl;
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(rpc->params, "ref");
    const char *type = string_param(ref, "type");
    char label[GW_MCP_LABEL_LEN + 1];
    bool by_uri;
    const char *key, *name, *own;
    struct gw_device *dev;
    cJSON *params, *copy, *err;

    if (!cJSON_IsObject(ref) || type == NULL ||
        (strcmp(type, "ref/prompt") != 0 &&
         strcmp(type, "ref/resource") != 0)) {
        return gw__mcp_server_refuse(cl, rpc, GW_RPC_INVALID_PARAMS,
                                     "completion/complete needs a ref of type "
                                     "ref/prompt or ref/resource");
    }
    if (!cJSON_IsObject(
            cJSON_GetObjectItemCaseSensitive(rpc->params, "argument"))) {
        return gw__mcp_server_refuse(cl, rpc, GW_RPC_INVALID_PARAMS,
                                     "completion/complete needs an argument");
    }
    by_uri = strcmp(type, "ref/resource") == 0;
    key = by_uri ? "uri" : "name";
    if ((name = string_param(ref, key)) == NULL) {
        return gw__mcp_server_refuse(cl, rpc, GW_RPC_INVALID_PARAMS,
                                     by_uri ? "ref/resource needs a uri"
                                            : "ref/prompt needs a name");
    }
    if ((own = own_name(cl, name, by_uri, label)) == NULL) {
        return unknown(cl, rpc, by_uri ? "resource" : "prompt", name);
    }
    if ((dev = gw__mcp_server_target(cl, rpc, label, rpc->method, &err)) ==
        NULL) {
        return err;
    }
    params = gw__mcp_server_params_pick(rpc->params, keep);
    copy = cJSON_Duplicate(ref, true);
    if (params == NULL || copy == NULL ||
        !cJSON_ReplaceItemInObjectCaseSensitive(copy, key,
                                                cJSON_CreateString(own)) ||
        !cJSON_AddItemToObject(params, "ref", copy)) {
        cJSON_Delete(copy);
        cJSON_Delete(params);
        params = NULL;
    }
    return gw__mcp_server_forward(ex, rpc, dev, "completion/complete", params,
                                  0, NULL, started);
}

/* ---- logging/setLevel ---- */

cJSON *gw__mcp_server_set_level(struct gw_mcp_exchange *ex,
                                const struct gw_rpc *rpc, bool *started)
{
    struct gw_mcp_client *cl = ex->cl;
    const char *name = string_param(rpc->params, "level");
    enum gw_mcp_log_level level;
    struct gw_device *dev = NULL;
    struct gw__mcp_pending *p;
    cJSON *err;

    if (name == NULL || gw_mcp_log_level_parse(name, &level) != 0) {
        return gw__mcp_server_refuse(cl, rpc, GW_RPC_INVALID_PARAMS,
                                     "logging/setLevel needs a level of debug, "
                                     "info, notice, warning, error, critical, "
                                     "alert or emergency");
    }
    /* On /mcp the level is the session's for every device (dev NULL). */
    if (!aggregated(cl) && (dev = gw__mcp_server_target(
                                cl, rpc, NULL, rpc->method, &err)) == NULL) {
        return err;
    }
    p = gw__mcp_server_pending_add(
        ex, rpc->id, dev != NULL ? dev->client_id : "every device");
    if (p == NULL) {
        return gw_rpc_error(rpc->id, GW_RPC_INTERNAL_ERROR, "out of memory");
    }
    p->method = "logging/setLevel";
    gw_mcp_set_level(cl->srv->env.devices, dev, &cl->peer, level,
                     GW_MCP_FROM_CLIENT, gw__mcp_server_pending_reply, p,
                     &p->handle);
    *started = true;
    return NULL;
}

/* ---- device notifications for a session ---- */

/* Renames, in place, what a device notification names for /mcp. */
static int rename_notification(const char *method, cJSON *params,
                               const char *label)
{
    const char *key;
    cJSON *v;

    if (strcmp(method, "notifications/resources/updated") == 0) {
        key = "uri";
    } else if (strcmp(method, "notifications/tasks/status") == 0) {
        key = "taskId";
    } else if (strcmp(method, "notifications/message") == 0) {
        key = "logger";
    } else {
        return 0;
    }
    v = cJSON_GetObjectItemCaseSensitive(params, key);
    if (key[0] == 'l' && !cJSON_IsString(v)) {
        /* a message without a logger: the device's label says whose */
        return cJSON_AddStringToObject(params, "logger", label) != NULL
                   ? 0
                   : GW_ENOMEM;
    }
    return gw_mcp_rename_member(params, key, label);
}

static void peer_notify(struct gw_mcp_peer *peer, const struct gw_device *dev,
                        const char *method, const cJSON *params)
{
    struct gw_mcp_client *cl =
        GW_CONTAINER_OF(peer, struct gw_mcp_client, peer);
    cJSON *copy =
        params != NULL ? cJSON_Duplicate(params, true) : cJSON_CreateObject();
    cJSON *msg;

    if (copy == NULL || !cJSON_IsObject(copy) ||
        (aggregated(cl) &&
         rename_notification(method, copy, dev->label) != 0)) {
        cJSON_Delete(copy);
        return;
    }
    if ((msg = gw_rpc_notification(method, copy)) == NULL) {
        return;
    }
    cl->srv->stats.notifications++;
    if (!gw__mcp_server_notify(cl, msg)) {
        gw_log_peer(GW_LOG_DEBUG, NULL, cl->subject,
                    "%s from %s dropped: no stream", method, dev->client_id);
    }
    cJSON_Delete(msg);
}

const struct gw_mcp_peer_ops gw__mcp_server_peer_ops = {.notify = peer_notify};
