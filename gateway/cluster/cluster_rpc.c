/* Requests and catalogs carried between instances; see cluster_rpc.h. */
#include "gateway/cluster/cluster_rpc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/instance_msg.h"
#include "codec/jsonrpc.h"
#include "codec/mcp_caps.h"
#include "codec/mcp_items.h"
#include "codec/mcp_tools.h"
#include "common/hash.h"
#include "common/log.h"
#include "gateway/cluster/cluster_int.h"

#define SUBJECT "cluster"
/* (from, client id, id): the key of a request served for another. */
#define KEY_MAX (GW_INSTANCE_NAME_MAX + GW_CLIENT_ID_MAX + 16)

/* A request carried here, until its end goes back. */
struct inbound {
    UT_hash_handle hh; /* in r->inbound, by key */
    struct gw_cluster_rpc *r;
    char key[KEY_MAX];
    char from[GW_INSTANCE_NAME_MAX + 1];
    char client_id[GW_CLIENT_ID_MAX + 1];
    uint32_t id;
    uint64_t handle;
};

struct gw_cluster_rpc {
    struct gw_cluster_rpc_env env;
    struct gw_mcp_remote remote;
    struct inbound *inbound;
    bool applying; /* a peer's catalog goes in: not ours to publish */
    bool closed;
    struct gw_cluster_rpc_stats stats;
};

static const struct gw_config *config_of(const struct gw_cluster_rpc *r)
{
    return gw_config_live_get(r->env.config);
}

static void make_key(char *out, const char *from, const char *cid, uint32_t id)
{
    snprintf(out, KEY_MAX, "%s/%s/%u", from, cid, id);
}

/* Prints and sends msg (freed) to <prefix>/<to><leaf>. */
static int send_msg(struct gw_cluster_rpc *r, const char *to, const char *leaf,
                    cJSON *msg)
{
    char *text = msg != NULL ? cJSON_PrintUnformatted(msg) : NULL;
    int rc;

    cJSON_Delete(msg);
    if (text == NULL) {
        return GW_ENOMEM;
    }
    size_t len = strlen(text);
    rc = len > GW_INSTANCE_MSG_MAX_LEN
             ? GW_ETOOBIG
             : gw__cluster_send(r->env.cluster, to, leaf, text, len);
    free(text);
    return rc;
}

/* ---- asking: the links' way to another owner ---- */

static const char *remote_owner(void *arg, const char *client_id)
{
    struct gw_cluster_rpc *r = arg;

    return r->closed ? NULL : gw_cluster_owner(r->env.cluster, client_id);
}

static int remote_send(void *arg, const char *owner, const char *client_id,
                       uint32_t id, const char *method, const cJSON *params,
                       uint32_t timeout_ms, enum gw_mcp_origin origin,
                       bool progress)
{
    struct gw_cluster_rpc *r = arg;
    const char *self = gw_cluster_name(r->env.cluster);
    cJSON *m = gw_instance_msg_new(GW_IMSG_REQUEST, self, client_id, id);
    cJSON *p = params != NULL ? cJSON_Duplicate(params, 1) : NULL;

    if (m == NULL || (params != NULL && p == NULL) ||
        cJSON_AddStringToObject(m, "method", method) == NULL ||
        (p != NULL && !cJSON_AddItemToObject(m, "params", p)) ||
        cJSON_AddNumberToObject(m, "timeout_ms", timeout_ms) == NULL ||
        cJSON_AddStringToObject(m, "origin", gw_mcp_origin_name(origin)) ==
            NULL ||
        cJSON_AddBoolToObject(m, "progress", progress) == NULL) {
        if (p != NULL && cJSON_GetObjectItemCaseSensitive(m, "params") != p) {
            cJSON_Delete(p);
        }
        cJSON_Delete(m);
        return GW_ENOMEM;
    }
    r->stats.carried_out++;
    return send_msg(r, owner, "/rpc", m);
}

static void remote_cancel(void *arg, const char *owner, const char *client_id,
                          uint32_t id)
{
    struct gw_cluster_rpc *r = arg;
    const char *self = gw_cluster_name(r->env.cluster);

    (void)send_msg(r, owner, "/rpc",
                   gw_instance_msg_new(GW_IMSG_CANCEL, self, client_id, id));
}

/* ---- serving: requests carried here ---- */

static void inbound_free(struct gw_cluster_rpc *r, struct inbound *in)
{
    HASH_DEL(r->inbound, in);
    free(in);
}

/* The device's progress, under the asker's own id as token. */
static void on_inbound_progress(void *arg, const cJSON *params)
{
    struct inbound *in = arg;
    struct gw_cluster_rpc *r = in->r;
    cJSON *m =
        gw_instance_msg_new(GW_IMSG_PROGRESS, gw_cluster_name(r->env.cluster),
                            in->client_id, in->id);
    cJSON *p = cJSON_Duplicate(params, 1);

    if (m == NULL || p == NULL || !cJSON_AddItemToObject(m, "params", p)) {
        cJSON_Delete(p);
        cJSON_Delete(m);
        return;
    }
    (void)send_msg(r, in->from, "/rpc", m);
}

static void on_inbound_reply(void *arg, const struct gw_mcp_reply *reply)
{
    struct inbound *in = arg;
    struct gw_cluster_rpc *r = in->r;
    cJSON *m = gw_instance_msg_new(
        GW_IMSG_REPLY, gw_cluster_name(r->env.cluster), in->client_id, in->id);
    bool ok = reply->outcome == GW_MCP_OK;
    const cJSON *body = ok ? reply->result : reply->error;
    cJSON *copy = body != NULL ? cJSON_Duplicate(body, 1) : NULL;

    if (copy == NULL) {
        /* Out of memory here, or an end without an error object. */
        copy = ok ? cJSON_CreateObject() : gw_rpc_error_normalise(NULL);
    }
    if (m == NULL || copy == NULL ||
        cJSON_AddStringToObject(m, "outcome",
                                gw_mcp_outcome_name(reply->outcome)) == NULL ||
        !cJSON_AddItemToObject(m, ok ? "result" : "error", copy)) {
        cJSON_Delete(copy);
        cJSON_Delete(m);
        m = NULL;
    }
    if (m != NULL) {
        int rc = send_msg(r, in->from, "/rpc", m);
        if (rc != 0) {
            gw_log(GW_LOG_WARN, SUBJECT,
                   "end of %s's request %u for %s not sent: %s", in->from,
                   in->id, in->client_id, gw_strerror(rc));
        } else {
            r->stats.replies_out++;
        }
    }
    inbound_free(r, in);
}

static void serve_request(struct gw_cluster_rpc *r,
                          const struct gw_instance_msg *m)
{
    enum gw_mcp_origin origin;
    struct inbound *in;
    char key[KEY_MAX];

    if (!gw_mcp_origin_parse(m->origin, &origin)) {
        r->stats.refused++;
        gw_log(GW_LOG_WARN, SUBJECT, "request from %s: unknown origin %s",
               m->from, m->origin);
        return;
    }
    make_key(key, m->from, m->client_id, m->id);
    HASH_FIND_STR(r->inbound, key, in);
    if (in != NULL) {
        return; /* the same request twice: one answer */
    }
    if ((in = calloc(1, sizeof(*in))) == NULL) {
        return; /* the asker times out */
    }
    in->r = r;
    memcpy(in->key, key, sizeof(key));
    memcpy(in->from, m->from, sizeof(in->from));
    memcpy(in->client_id, m->client_id, sizeof(in->client_id));
    in->id = m->id;
    HASH_ADD_STR(r->inbound, key, in);
    if (!GW_HASH_ADDED(in, hh)) {
        free(in);
        return;
    }
    r->stats.carried_in++;
    struct gw_device *dev = gw_device_find(r->env.devices, m->client_id);
    struct gw_mcp_opts opts = {
        .timeout_ms = m->timeout_ms,
        .on_progress = m->progress ? on_inbound_progress : NULL,
        .here = true,
    };
    cJSON *params = m->params != NULL ? cJSON_Duplicate(m->params, 1) : NULL;
    /* Not known here: the same -32002 the asker would give itself. */
    gw_mcp_request_with(gw_device_table_links(r->env.devices),
                        dev != NULL ? &dev->link : NULL, m->method, params,
                        &opts, origin, on_inbound_reply, in, &in->handle);
}

static void serve_cancel(struct gw_cluster_rpc *r,
                         const struct gw_instance_msg *m)
{
    char key[KEY_MAX];
    struct inbound *in;

    make_key(key, m->from, m->client_id, m->id);
    HASH_FIND_STR(r->inbound, key, in);
    if (in != NULL) {
        uint64_t handle = in->handle;
        inbound_free(r, in);
        gw_mcp_abandon(gw_device_table_links(r->env.devices), handle);
    }
}

/* ---- the asker's side of the end ---- */

static void take_reply(struct gw_cluster_rpc *r,
                       const struct gw_instance_msg *m)
{
    struct gw_device *dev = gw_device_find(r->env.devices, m->client_id);
    enum gw_mcp_outcome outcome;

    if (!gw_mcp_outcome_parse(m->outcome, &outcome) ||
        (outcome == GW_MCP_OK) != (m->result != NULL)) {
        r->stats.refused++;
        gw_log(GW_LOG_WARN, SUBJECT, "reply from %s: unknown outcome %s",
               m->from, m->outcome);
        return;
    }
    if (dev != NULL) {
        gw_mcp_link_on_remote_reply(&dev->link, m->id, outcome, m->result,
                                    m->error);
    }
}

static void take_progress(struct gw_cluster_rpc *r,
                          const struct gw_instance_msg *m)
{
    struct gw_device *dev = gw_device_find(r->env.devices, m->client_id);

    if (dev != NULL) {
        gw_mcp_link_on_remote_progress(&dev->link, m->id, m->params);
    }
}

/* ---- catalogs ---- */

/* {"state":..., "<member>":[...]}: a list page, so the page parsers of
 * discovery check it again on the way in. */
static cJSON *list_json(enum gw_tool_list_state state, const cJSON *items,
                        const char *member)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *copy =
        items != NULL ? cJSON_Duplicate(items, 1) : cJSON_CreateArray();

    if (o == NULL || copy == NULL ||
        cJSON_AddStringToObject(o, "state", gw_tool_list_state_name(state)) ==
            NULL ||
        !cJSON_AddItemToObject(o, member, copy)) {
        cJSON_Delete(copy);
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* What an initialize result said, as one, for gw_mcp_server_info_parse. */
static cJSON *info_json(const struct gw_mcp_server_info *info)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *caps = gw_mcp_caps_json(info->caps);
    cJSON *si = cJSON_CreateObject();

    if (o == NULL || caps == NULL || si == NULL ||
        !cJSON_AddItemToObject(o, "capabilities", caps)) {
        cJSON_Delete(o);
        cJSON_Delete(caps);
        cJSON_Delete(si);
        return NULL;
    }
    if (!cJSON_AddItemToObject(o, "serverInfo", si)) {
        cJSON_Delete(si);
        cJSON_Delete(o);
        return NULL;
    }
    if ((info->version[0] != '\0' &&
         cJSON_AddStringToObject(o, "protocolVersion", info->version) ==
             NULL) ||
        cJSON_AddStringToObject(si, "name", info->name) == NULL ||
        cJSON_AddStringToObject(si, "version", info->server_ver) == NULL) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *catalog_json(const struct gw_device *dev)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *part;

    if (o == NULL) {
        return NULL;
    }
    if (dev->catalog.known) {
        part = info_json(&dev->catalog.info);
        if (part == NULL || !cJSON_AddItemToObject(o, "info", part)) {
            cJSON_Delete(part);
            goto oom;
        }
    }
    part = list_json(dev->tools.state, dev->tools.tools, "tools");
    if (part == NULL || !cJSON_AddItemToObject(o, "tools", part)) {
        cJSON_Delete(part);
        goto oom;
    }
    for (int k = 0; k < GW_MCP_LIST_COUNT_; k++) {
        const struct gw_mcp_list *l = &dev->catalog.lists[k];
        const char *member = gw_mcp_list_member((enum gw_mcp_list_kind)k);
        part = list_json(l->state, l->items, member);
        if (part == NULL || !cJSON_AddItemToObject(o, member, part)) {
            cJSON_Delete(part);
            goto oom;
        }
    }
    return o;
oom:
    cJSON_Delete(o);
    return NULL;
}

static void publish_catalog(struct gw_cluster_rpc *r,
                            const struct gw_device *dev, const char *to)
{
    cJSON *m = gw_instance_msg_new(
        GW_IMSG_CATALOG, gw_cluster_name(r->env.cluster), dev->client_id, 0);
    cJSON *cat = catalog_json(dev);
    int rc;

    if (m == NULL || cat == NULL || !cJSON_AddItemToObject(m, "catalog", cat)) {
        cJSON_Delete(cat);
        cJSON_Delete(m);
        return;
    }
    /* To one instance: on its request topic; to all: on our catalog. */
    rc = to != NULL ? send_msg(r, to, "/rpc", m)
                    : send_msg(r, NULL, "/catalog", m);
    if (rc != 0) {
        gw_log(GW_LOG_WARN, SUBJECT, "catalog of %s not sent: %s",
               dev->client_id, gw_strerror(rc));
        return;
    }
    r->stats.catalogs_out++;
}

static bool state_parse(const char *s, enum gw_tool_list_state *out)
{
    for (int i = 0; i < GW_TOOL_LIST_COUNT_; i++) {
        if (s != NULL && strcmp(s, gw_tool_list_state_name(i)) == 0) {
            *out = (enum gw_tool_list_state)i;
            return true;
        }
    }
    return false;
}

/*
 * One list of a peer's catalog, checked as discovery checks a page:
 * *items a new array (NULL for none), *state its state. GW_EPROTO for a
 * list that breaks the rules or holds more than max.
 */
static int read_list(const cJSON *cat, const char *member, int kind, int max,
                     enum gw_tool_list_state *state, cJSON **items)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(cat, member);
    const char *next = NULL;
    int rc;

    *items = NULL;
    if (!cJSON_IsObject(o) ||
        !state_parse(
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "state")),
            state)) {
        return GW_EPROTO;
    }
    if ((*items = cJSON_CreateArray()) == NULL) {
        return GW_ENOMEM;
    }
    rc = kind < 0 ? gw_mcp_tools_page_parse(o, *items, &next)
                  : gw_mcp_list_page_parse((enum gw_mcp_list_kind)kind, o,
                                           *items, &next);
    if (rc == 0 && (next != NULL || cJSON_GetArraySize(*items) > max)) {
        rc = GW_EPROTO;
    }
    if (rc != 0) {
        cJSON_Delete(*items);
        *items = NULL;
    }
    return rc;
}

/* A list into the cache or catalog, by its state. */
static void apply_tools(struct gw_tool_cache *c, enum gw_tool_list_state st,
                        cJSON *items)
{
    if (st == GW_TOOL_LIST_COMPLETE || st == GW_TOOL_LIST_TRUNCATED) {
        gw_tool_cache_set(c, items, st == GW_TOOL_LIST_TRUNCATED);
        return;
    }
    cJSON_Delete(items);
    if (st == GW_TOOL_LIST_PENDING) {
        gw_tool_cache_begin(c);
    } else {
        gw_tool_cache_fail(c); /* none or failed: nothing callable */
        c->state = st;
    }
}

static void apply_list(struct gw_mcp_catalog *c, enum gw_mcp_list_kind k,
                       enum gw_tool_list_state st, cJSON *items)
{
    if (st == GW_TOOL_LIST_COMPLETE || st == GW_TOOL_LIST_TRUNCATED) {
        gw_mcp_catalog_set(c, k, items, st == GW_TOOL_LIST_TRUNCATED);
        return;
    }
    cJSON_Delete(items);
    if (st == GW_TOOL_LIST_FAILED) {
        gw_mcp_catalog_fail(c, k);
    } else if (st == GW_TOOL_LIST_PENDING) {
        gw_mcp_catalog_begin(c, k);
    } else {
        gw_mcp_catalog_clear_list(c, k);
    }
}

/* A device's catalog from its owner: all of it checked before any goes in. */
static void take_catalog(struct gw_cluster_rpc *r,
                         const struct gw_instance_msg *m)
{
    const struct gw_config *cfg = config_of(r);
    struct gw_device *dev = gw_device_find(r->env.devices, m->client_id);
    const cJSON *info = cJSON_GetObjectItemCaseSensitive(m->catalog, "info");
    struct gw_mcp_server_info si;
    enum gw_tool_list_state states[1 + GW_MCP_LIST_COUNT_];
    cJSON *items[1 + GW_MCP_LIST_COUNT_] = {NULL};
    int rc = 0;

    if (dev == NULL || gw_cluster_owns(r->env.cluster, m->client_id)) {
        return; /* not online here (yet), or ours to know */
    }
    if (info != NULL && gw_mcp_server_info_parse(info, &si) != 0) {
        rc = GW_EPROTO;
    }
    for (int k = -1; rc == 0 && k < GW_MCP_LIST_COUNT_; k++) {
        const char *member =
            k < 0 ? "tools" : gw_mcp_list_member((enum gw_mcp_list_kind)k);
        rc = read_list(m->catalog, member, k,
                       k < 0 ? cfg->mcp.max_tools : cfg->mcp.max_list_items,
                       &states[k + 1], &items[k + 1]);
    }
    if (rc != 0) {
        for (int i = 0; i <= GW_MCP_LIST_COUNT_; i++) {
            cJSON_Delete(items[i]);
        }
        r->stats.refused++;
        gw_log(GW_LOG_WARN, SUBJECT, "catalog of %s from %s refused: %s",
               m->client_id, m->from, gw_strerror(rc));
        return;
    }
    if (info != NULL) {
        gw_mcp_catalog_set_info(&dev->catalog, &si);
    }
    apply_tools(&dev->tools, states[0], items[0]);
    for (int k = 0; k < GW_MCP_LIST_COUNT_; k++) {
        apply_list(&dev->catalog, (enum gw_mcp_list_kind)k, states[k + 1],
                   items[k + 1]);
    }
    r->stats.catalogs_in++;
    GW_LOG(GW_LOG_DEBUG, SUBJECT, "catalog of %s from %s: %d tools",
           m->client_id, m->from, gw_tool_cache_count(&dev->tools));
    r->applying = true;
    gw_device_table_notify(r->env.devices, dev,
                           GW_DEVICE_CHANGED_TOOLS |
                               GW_DEVICE_CHANGED_RESOURCES |
                               GW_DEVICE_CHANGED_PROMPTS);
    r->applying = false;
}

void gw_cluster_rpc_device_changed(struct gw_cluster_rpc *r,
                                   const struct gw_device *dev, unsigned what)
{
    if (r == NULL || r->closed || r->applying ||
        (what & ~GW_DEVICE_CHANGED_PRESENCE) == 0 ||
        dev->state != GW_DEVICE_KNOWN ||
        !gw_cluster_owns(r->env.cluster, dev->client_id)) {
        return;
    }
    publish_catalog(r, dev, NULL);
}

void gw_cluster_rpc_peer_joined(struct gw_cluster_rpc *r, const char *name)
{
    unsigned n = 0;

    if (r == NULL || r->closed) {
        return;
    }
    struct gw_device *d;
    GW_DEVICE_FOREACH(r->env.devices, d)
    {
        if (d->presence.online && d->tools.state != GW_TOOL_LIST_NONE &&
            gw_cluster_owns(r->env.cluster, d->client_id)) {
            publish_catalog(r, d, name);
            n++;
        }
    }
    if (n > 0) {
        gw_log(GW_LOG_INFO, SUBJECT, "catalogs of %u device%s sent to %s", n,
               n == 1 ? "" : "s", name);
    }
}

/* ---- device messages (mode shared) ---- */

void gw_cluster_rpc_carry(struct gw_cluster_rpc *r, const char *owner,
                          const char *client_id, const cJSON *msg)
{
    cJSON *m, *copy;
    int rc;

    if (r == NULL || r->closed) {
        return;
    }
    m = gw_instance_msg_new(GW_IMSG_UP, gw_cluster_name(r->env.cluster),
                            client_id, 0);
    copy = cJSON_Duplicate(msg, 1);
    if (m == NULL || copy == NULL ||
        !cJSON_AddItemToObject(m, "message", copy)) {
        cJSON_Delete(copy);
        cJSON_Delete(m);
        return;
    }
    if ((rc = send_msg(r, owner, "/rpc", m)) != 0) {
        gw_log(GW_LOG_WARN, SUBJECT, "message of %s not carried to %s: %s",
               client_id, owner, gw_strerror(rc));
        return;
    }
    r->stats.up_out++;
}

static void take_up(struct gw_cluster_rpc *r, const struct gw_instance_msg *m)
{
    char *text;

    if (r->env.on_carried == NULL ||
        (text = cJSON_PrintUnformatted(m->message)) == NULL) {
        return;
    }
    r->stats.up_in++;
    r->env.on_carried(r->env.arg, m->client_id, text, strlen(text));
    free(text);
}

/* ---- the way in ---- */

void gw_cluster_rpc_on_message(struct gw_cluster_rpc *r, const uint8_t *payload,
                               size_t len)
{
    struct gw_instance_msg m;
    int rc;

    if (r == NULL || r->closed) {
        return;
    }
    if ((rc = gw_instance_msg_parse((const char *)payload, len, &m)) != 0) {
        r->stats.refused++;
        gw_log(GW_LOG_WARN, SUBJECT, "message from an instance refused: %s",
               gw_strerror(rc));
        return;
    }
    if (strcmp(m.from, gw_cluster_name(r->env.cluster)) == 0) {
        gw_instance_msg_free(&m); /* our own catalog, back from the broker */
        return;
    }
    switch (m.kind) {
    case GW_IMSG_REQUEST:
        serve_request(r, &m);
        break;
    case GW_IMSG_REPLY:
        take_reply(r, &m);
        break;
    case GW_IMSG_PROGRESS:
        take_progress(r, &m);
        break;
    case GW_IMSG_CANCEL:
        serve_cancel(r, &m);
        break;
    case GW_IMSG_CATALOG:
        take_catalog(r, &m);
        break;
    case GW_IMSG_UP:
        take_up(r, &m);
        break;
    default:
        break;
    }
    gw_instance_msg_free(&m);
}

/* ---- life ---- */

int gw_cluster_rpc_init(const struct gw_cluster_rpc_env *env,
                        struct gw_cluster_rpc **out)
{
    struct gw_cluster_rpc *r;

    if (env == NULL || env->cluster == NULL || env->devices == NULL ||
        env->config == NULL) {
        return GW_EINVAL;
    }
    if ((r = calloc(1, sizeof(*r))) == NULL) {
        return GW_ENOMEM;
    }
    r->env = *env;
    r->remote = (struct gw_mcp_remote){
        .owner = remote_owner,
        .send = remote_send,
        .cancel = remote_cancel,
        .arg = r,
    };
    gw_mcp_links_set_remote(gw_device_table_links(env->devices), &r->remote);
    *out = r;
    return 0;
}

void gw_cluster_rpc_get_stats(const struct gw_cluster_rpc *r,
                              struct gw_cluster_rpc_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (r != NULL) {
        *out = r->stats;
    }
}

void gw_cluster_rpc_close(struct gw_cluster_rpc *r)
{
    struct inbound *in, *tmp;

    if (r == NULL) {
        return;
    }
    r->closed = true;
    /* Requests already carried out end at their timers (links close). */
    HASH_ITER(hh, r->inbound, in, tmp)
    {
        uint64_t handle = in->handle;
        inbound_free(r, in);
        gw_mcp_abandon(gw_device_table_links(r->env.devices), handle);
    }
    gw_mcp_links_unset_remote(gw_device_table_links(r->env.devices),
                              &r->remote);
    free(r);
}
