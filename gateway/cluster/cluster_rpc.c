/* Requests and catalogs carried between instances; see cluster_rpc.h. */
#include "gateway/cluster/cluster_rpc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/instance_msg.h"
#include "codec/jsonrpc.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/ratelimit.h"
#include "gateway/cluster/cluster_int.h"

#define SUBJECT "cluster"
/* (from, client id, id): the key of a request served for another. */
#define KEY_MAX (GW_INSTANCE_NAME_MAX + GW_CLIENT_ID_MAX + 16)
/* What a packet needs besides its payload: the topic (under 256 bytes)
 * and the header; the shipped brokers' limits leave 1 KiB for it. */
#define PACKET_RESERVE 1024
/* Warnings a peer (or a device, through a peer) can cause: a burst, then
 * one every 10 s. */
static const struct gw_bucket_rate warn_rate = {0.1, 5};

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

const struct gw_config *gw__cluster_rpc_config(const struct gw_cluster_rpc *r)
{
    return gw_config_live_get(r->env.config);
}

static void make_key(char *out, const char *from, const char *cid, uint32_t id)
{
    snprintf(out, KEY_MAX, "%s/%s/%u", from, cid, id);
}

uint64_t gw__cluster_rpc_now(const struct gw_cluster_rpc *r)
{
    return uv_now(gw_device_table_links(r->env.devices)->loop);
}

/* A warning line, within warn_rate over all of them. */
void gw__cluster_rpc_warn(struct gw_cluster_rpc *r, const char *fmt, ...)
{
    char line[512];
    uint64_t skipped = 0;
    va_list ap;

    if (!gw_bucket_take(&r->warn_bucket, &warn_rate, gw__cluster_rpc_now(r),
                        &skipped)) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (skipped > 0) {
        gw_log(GW_LOG_WARN, SUBJECT, "%s (%llu such lines left out)", line,
               (unsigned long long)skipped);
    } else {
        gw_log(GW_LOG_WARN, SUBJECT, "%s", line);
    }
}

/* The largest payload a publish may carry: what fits the broker's packet
 * limit (mqtt.max_packet_bytes) and a peer's parser. */
size_t gw__cluster_rpc_payload_max(const struct gw_cluster_rpc *r)
{
    size_t max = (size_t)gw__cluster_rpc_config(r)->mqtt.max_packet_bytes -
                 PACKET_RESERVE;

    return max < GW_INSTANCE_MSG_MAX_LEN ? max : GW_INSTANCE_MSG_MAX_LEN;
}

/*
 * Sends text to <prefix>/<to><leaf>; one over the broker's limit is never
 * sent (the broker would cut this instance off, its will saying "gone"):
 * refused, counted, logged. kind names it in the log.
 */
int gw__cluster_rpc_send_text(struct gw_cluster_rpc *r, const char *to,
                              const char *leaf, const char *kind,
                              const char *text, size_t len)
{
    if (len > gw__cluster_rpc_payload_max(r)) {
        r->stats.oversize++;
        gw__cluster_rpc_warn(
            r,
            "%s message of %zu bytes for %s not sent: over the broker's "
            "packet limit (mqtt.max_packet_bytes %d)",
            kind, len, to != NULL ? to : "every instance",
            gw__cluster_rpc_config(r)->mqtt.max_packet_bytes);
        return GW_ETOOBIG;
    }
    return gw__cluster_send(r->env.cluster, to, leaf, text, len);
}

/* Prints and sends msg (freed) to <prefix>/<to><leaf>. */
static int send_msg(struct gw_cluster_rpc *r, const char *to, const char *leaf,
                    cJSON *msg)
{
    char *text = msg != NULL ? cJSON_PrintUnformatted(msg) : NULL;
    char kind[GW_INSTANCE_WORD_MAX + 1];
    int rc;

    snprintf(kind, sizeof(kind), "%s",
             text != NULL ? cJSON_GetStringValue(
                                cJSON_GetObjectItemCaseSensitive(msg, "t"))
                          : "");
    cJSON_Delete(msg);
    if (text == NULL) {
        return GW_ENOMEM;
    }
    rc = gw__cluster_rpc_send_text(r, to, leaf, kind, text, strlen(text));
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
        if (rc == GW_ETOOBIG) {
            /* The asker hears why at once instead of at its timer. */
            m = gw_instance_msg_new(GW_IMSG_REPLY,
                                    gw_cluster_name(r->env.cluster),
                                    in->client_id, in->id);
            cJSON *err = cJSON_CreateObject();
            if (m == NULL || err == NULL ||
                cJSON_AddNumberToObject(err, "code", GW_RPC_INTERNAL_ERROR) ==
                    NULL ||
                cJSON_AddStringToObject(
                    err, "message",
                    "the device's answer is too large to carry between "
                    "instances (mqtt.max_packet_bytes)") == NULL ||
                cJSON_AddStringToObject(m, "outcome", "error") == NULL ||
                !cJSON_AddItemToObject(m, "error", err)) {
                cJSON_Delete(err);
                cJSON_Delete(m);
            } else {
                rc = send_msg(r, in->from, "/rpc", m);
            }
        }
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

/*
 * The rules a local caller of this origin meets (docs/protocol.md
 * section 7.4): the device must offer the method, and a tool call must
 * be one its caller may make. false with why and a JSON-RPC code.
 */
static bool may_serve(struct gw_cluster_rpc *r, const struct gw_instance_msg *m,
                      enum gw_mcp_origin origin, const struct gw_device *dev,
                      char *why, size_t cap, int *code)
{
    enum gw_tool_caller caller;

    *code = GW_RPC_METHOD_NOT_FOUND;
    if (!gw_mcp_catalog_allows(&dev->catalog, dev->client_id, m->method, why,
                               cap)) {
        return false;
    }
    if (strcmp(m->method, "tools/call") != 0) {
        return true;
    }
    *code = GW_RPC_INVALID_PARAMS;
    switch (origin) {
    case GW_MCP_FROM_BACKEND:
        caller = GW_TOOLS_FOR_BACKEND;
        break;
    case GW_MCP_FROM_CLIENT:
        caller = GW_TOOLS_FOR_CLIENT;
        break;
    case GW_MCP_FROM_API:
        caller = GW_TOOLS_FOR_OPERATOR;
        break;
    default:
        /* Discovery calls no tool, and runs at the owner only. */
        snprintf(why, cap, "tools/call is not carried for origin %s",
                 gw_mcp_origin_name(origin));
        return false;
    }
    return gw_tool_cache_may_call(
        &dev->tools, caller,
        cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(m->params, "name")),
        gw__cluster_rpc_config(r)->mcp.expose_user_tools, why, cap);
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
    char why[256];
    int code;
    if (dev != NULL && !may_serve(r, m, origin, dev, why, sizeof(why), &code)) {
        /* Decided here, by this instance's own lists, as for a local
         * caller: the carrier's word is not enough. */
        r->stats.requests_refused++;
        gw__cluster_rpc_warn(r, "%s from %s for %s (origin %s) refused: %s",
                             m->method, m->from, m->client_id, m->origin, why);
        gw_mcp_refuse(gw_device_table_links(r->env.devices), origin, code, why,
                      on_inbound_reply, in, &in->handle);
        return;
    }
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

void gw_cluster_rpc_on_message(struct gw_cluster_rpc *r, const char *sender,
                               const uint8_t *payload, size_t len)
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
    if (strcmp(m.from, gw_cluster_name(r->env.cluster)) == 0 &&
        (sender == NULL || strcmp(sender, m.from) == 0)) {
        gw_instance_msg_free(&m); /* our own catalog, back from the broker */
        return;
    }
    if (sender != NULL && m.kind != GW_IMSG_CATALOG) {
        /* A catalog topic carries catalogs only. */
        r->stats.refused++;
        gw__cluster_rpc_warn(r,
                             "%s message from %s on %s's catalog topic refused",
                             gw_instance_msg_kind_name(m.kind), m.from, sender);
        gw_instance_msg_free(&m);
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
        gw__cluster_catalog_take(r, sender, &m, len);
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
    gw__cluster_catalog_close(r);
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
