/*
 * Pushing to devices from the API (docs/protocol.md section 8.5): one
 * message to one device (POST /api/commands/{id} for the manager-api,
 * POST /api/devices/{id}/commands for operators), or to a selection
 * (POST /api/broadcast). MCP requests go through the device's MCP link,
 * bounded by http.api_timeout_ms; the other types are published as the
 * firmware reads them, to an online device whether or not it talks.
 */
#include "gateway/api/http_api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "codec/client_id.h"
#include "codec/device_command.h"
#include "codec/envelope.h"
#include "common/hash.h"
#include "common/log.h"
#include "gateway/device/publish.h"

#define SUBJECT "http"

/* The firmware takes a message of any size: the bound is the operator's
 * (limits.max_downlink_bytes, docs/protocol.md section 2.4). */
static size_t downlink_max(const struct gw_http_api_env *env, char *why,
                           size_t why_len)
{
    size_t max =
        (size_t)gw_config_live_get(env->config)->limits.max_downlink_bytes;

    snprintf(why, why_len,
             "the message exceeds %zu bytes (limits.max_downlink_bytes)", max);
    return max;
}
/* Fan-out targets handled per loop turn: the rest of the gateway runs
 * between two batches, whatever the size of the selection. */
#define FANOUT_PER_TURN 32

/* ---- shared by both forms --------------------------------------------- */

/* A body refused: logged with the client and counted. */
static void refuse_body(struct gw_push_stats *stats, struct gw_http_req *req,
                        int status, const char *why)
{
    stats->refused++;
    gw__api_refuse(req, status, true, why, NULL);
}

/* The body as a bounded JSON object, or NULL (400 already sent). */
static cJSON *body_of(struct gw_push_stats *stats, struct gw_http_req *req)
{
    size_t len;
    const char *body = gw_http_req_body(req, &len);
    cJSON *doc = NULL;
    int rc = gw_json_object_parse(body, len, len, &doc);

    if (rc != 0) {
        char why[96];
        snprintf(why, sizeof(why), "the body must be a JSON object (%s)",
                 gw_strerror(rc));
        refuse_body(stats, req, 400, why);
        return NULL;
    }
    return doc;
}

/* The manager-api gives up after 10 s: http.api_timeout_ms answers
 * before it, or mcp.call_timeout_ms when that is shorter. */
static uint32_t timeout_of(const struct gw_http_api_env *env)
{
    const struct gw_config *cfg = gw_config_live_get(env->config);

    return (uint32_t)(cfg->http.api_timeout_ms < cfg->mcp.call_timeout_ms
                          ? cfg->http.api_timeout_ms
                          : cfg->mcp.call_timeout_ms);
}

/*
 * Sends an MCP request of the API (params moved) to client_id, unless
 * the device's catalog or tool cache refuses it (tool_cache.h); cb runs
 * exactly once, later, either way.
 */
static void mcp_send(const struct gw_http_api_env *env, const char *client_id,
                     const char *method, cJSON *params, gw_mcp_reply_cb cb,
                     void *arg, uint64_t *handle)
{
    struct gw_device_table *devs = env->devices;
    struct gw_device *dev = gw_device_find(devs, client_id);
    const struct gw_config *cfg = gw_config_live_get(env->config);
    char why[256];

    if (dev != NULL && !gw_mcp_catalog_allows(&dev->catalog, client_id, method,
                                              why, sizeof(why))) {
        gw_log(GW_LOG_WARN, SUBJECT, "%s for %s refused: %s", method, client_id,
               why);
        cJSON_Delete(params);
        gw_mcp_refuse(gw_device_table_links(devs), GW_MCP_FROM_API,
                      GW_RPC_METHOD_NOT_FOUND, why, cb, arg, handle);
        return;
    }
    if (dev != NULL && strcmp(method, "tools/call") == 0 &&
        !gw_tool_cache_may_call(
            &dev->tools, GW_TOOLS_FOR_OPERATOR,
            cJSON_GetStringValue(
                cJSON_GetObjectItemCaseSensitive(params, "name")),
            cfg->mcp.expose_user_tools, why, sizeof(why))) {
        gw_log(GW_LOG_WARN, SUBJECT, "tools/call for %s refused: %s", client_id,
               why);
        cJSON_Delete(params);
        gw_mcp_refuse(gw_device_table_links(devs), GW_MCP_FROM_API,
                      GW_RPC_INVALID_PARAMS, why, cb, arg, handle);
        return;
    }
    gw_mcp_request(gw_device_table_links(devs), dev != NULL ? &dev->link : NULL,
                   method, params, timeout_of(env), GW_MCP_FROM_API, cb, arg,
                   handle);
}

/* {"success":true,"data":..} or {"success":false,"error":..} of a reply. */
static cJSON *reply_json(const struct gw_mcp_reply *reply)
{
    cJSON *doc = cJSON_CreateObject();

    if (doc == NULL) {
        return NULL;
    }
    if (reply->outcome == GW_MCP_OK) {
        cJSON_AddBoolToObject(doc, "success", true);
        cJSON_AddItemToObject(doc, "data",
                              reply->result != NULL
                                  ? cJSON_Duplicate(reply->result, true)
                                  : cJSON_CreateNull());
    } else {
        const char *msg = cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(reply->error, "message"));
        cJSON_AddBoolToObject(doc, "success", false);
        cJSON_AddStringToObject(
            doc, "error",
            msg != NULL ? msg : gw_mcp_outcome_name(reply->outcome));
    }
    return doc;
}

/* The outcome of publishing a non-MCP message. */
struct push_result {
    int status;      /* HTTP status of a single push */
    const char *why; /* the failure, or NULL */
    bool held;       /* waits in the outbox (broker link down) */
    enum gw_push_result result;
};

static struct push_result publish_rc(struct gw_publisher *pub,
                                     const char *client_id, int rc)
{
    struct push_result r = {200, NULL, false, GW_PUSH_PUBLISHED};

    if (rc == 0) {
        r.held = gw_publish_waiting(pub, client_id);
        r.result = r.held ? GW_PUSH_HELD : GW_PUSH_PUBLISHED;
        return r;
    }
    r.result = GW_PUSH_FAILED;
    if (rc == GW_ELIMIT) {
        r.status = 503;
        r.why = "the outbox is full (broker link down)";
    } else {
        r.status = 502;
        r.why = rc == GW_EINVAL ? "no topic can carry this client id"
                                : "the broker link is down";
    }
    return r;
}

/* Publishes c's text to an online device, and counts the result. */
static struct push_result publish_to(const struct gw_http_api_env *env,
                                     struct gw_push_stats *stats,
                                     enum gw_device_command_type type,
                                     const char *client_id, const char *text,
                                     size_t len)
{
    struct gw_device_table *devs = env->devices;
    struct push_result r;

    if (gw_device_find(devs, client_id) == NULL) {
        /* 500, as an MCP command to an offline device */
        r = (struct push_result){500, "the device is offline", false,
                                 GW_PUSH_OFFLINE};
    } else {
        r = publish_rc(gw_device_table_links(devs)->pub, client_id,
                       gw_publish_json(gw_device_table_links(devs)->pub,
                                       client_id, text, len));
    }
    stats->messages[type][r.result]++;
    return r;
}

static cJSON *push_json(const struct push_result *r)
{
    cJSON *doc = cJSON_CreateObject();
    cJSON *data;

    if (doc == NULL) {
        return NULL;
    }
    cJSON_AddBoolToObject(doc, "success", r->why == NULL);
    if (r->why != NULL) {
        cJSON_AddStringToObject(doc, "error", r->why);
        return doc;
    }
    data = cJSON_AddObjectToObject(doc, "data");
    cJSON_AddBoolToObject(data, "published", !r->held);
    if (r->held) {
        cJSON_AddBoolToObject(data, "held", true);
    }
    return doc;
}

/* ---- one device ---------------------------------------------------------
 */

/* An MCP command waiting for its device. */
struct command {
    const struct gw_http_api_env *env;
    struct gw_http_req *req;
    uint64_t handle;
};

static void on_command_reply(void *arg, const struct gw_mcp_reply *reply)
{
    struct command *cmd = arg;

    gw__api_send_json(cmd->req, reply->outcome == GW_MCP_OK ? 200 : 500,
                      reply_json(reply), NULL);
    free(cmd);
}

static void on_command_gone(struct gw_http_req *req, void *arg)
{
    struct command *cmd = arg;

    (void)req;
    gw_mcp_abandon(gw_device_table_links(cmd->env->devices), cmd->handle);
    free(cmd);
}

static void command_mcp(const struct gw_http_api_env *env,
                        struct gw_http_req *req, const char *client_id,
                        const struct gw_device_command *c)
{
    struct command *cmd = calloc(1, sizeof(*cmd));
    cJSON *copy = NULL;

    if (cmd == NULL || (c->params != NULL &&
                        (copy = cJSON_Duplicate(c->params, true)) == NULL)) {
        free(cmd);
        gw__api_refuse(req, 503, true, "out of memory", NULL);
        return;
    }
    cmd->env = env;
    cmd->req = req;
    GW_LOG(GW_LOG_DEBUG, SUBJECT, "%s from %s for %s", c->method,
           gw_http_req_peer(req), client_id);
    gw_http_req_on_gone(req, on_command_gone, cmd);
    mcp_send(env, client_id, c->method, copy, on_command_reply, cmd,
             &cmd->handle);
}

void gw__api_push_command(const struct gw_http_api_env *env,
                          struct gw_push_stats *stats, struct gw_http_req *req,
                          const char *client_id)
{
    cJSON *in = body_of(stats, req);
    struct gw_device_command c;
    struct push_result r;
    char why[160];
    char *text = NULL;
    size_t len = 0;
    int rc;

    if (in == NULL) {
        return;
    }
    if (gw_device_command_read(in, &c, why, sizeof(why)) != 0) {
        cJSON_Delete(in);
        refuse_body(stats, req, 400, why);
        return;
    }
    if (c.type == GW_DEVICE_COMMAND_MCP) {
        command_mcp(env, req, client_id, &c);
        cJSON_Delete(in);
        return;
    }
    rc = gw_device_command_encode(&c, downlink_max(env, why, sizeof(why)),
                                  &text, &len);
    cJSON_Delete(in);
    if (rc == GW_ETOOBIG) {
        refuse_body(stats, req, 413, why);
        return;
    }
    if (rc != 0) {
        gw__api_refuse(req, 503, true, "out of memory", NULL);
        return;
    }
    r = publish_to(env, stats, c.type, client_id, text, len);
    gw_log(r.why == NULL ? GW_LOG_INFO : GW_LOG_WARN, SUBJECT,
           "%s for %s asked by %s: %s", gw_device_command_type_name(c.type),
           client_id, gw_http_req_peer(req),
           r.why != NULL ? r.why
           : r.held      ? "held until the broker is back"
                         : "published");
    free(text);
    gw__api_send_json(req, r.status, push_json(&r), NULL);
}

/* ---- fan-out ------------------------------------------------------------
 */

struct fanout;

/* One device of a fan-out. */
struct target {
    UT_hash_handle hh; /* by id: a repeated id is served once */
    struct fanout *f;
    char id[GW_CLIENT_ID_MAX + 1];
    uint64_t handle; /* its MCP request while waiting */
    bool waiting;
    cJSON *result; /* {"success":..}, once known */
};

struct fanout {
    const struct gw_http_api_env *env;
    struct gw_push_stats *stats;
    struct gw_http_req *req; /* NULL once answered or gone */
    cJSON *doc;              /* the body: c points into it */
    struct gw_device_command c;
    char *text; /* non-MCP: the message as published */
    size_t len;
    struct target *targets, *by_id;
    size_t n, next, waiting, ok, failed;
    uv_timer_t turn; /* the next batch, on the next loop turn */
};

static void on_fanout_closed(uv_handle_t *h)
{
    struct fanout *f = h->data;

    for (size_t i = 0; i < f->n; i++) {
        cJSON_Delete(f->targets[i].result);
    }
    HASH_CLEAR(hh, f->by_id);
    free(f->targets);
    free(f->text);
    cJSON_Delete(f->doc);
    free(f);
}

static void fanout_free(struct fanout *f)
{
    uv_timer_stop(&f->turn);
    uv_close((uv_handle_t *)&f->turn, on_fanout_closed);
}

static void fanout_answer(struct fanout *f)
{
    cJSON *doc = cJSON_CreateObject();
    cJSON *results = cJSON_AddObjectToObject(doc, "results");

    for (size_t i = 0; i < f->n && results != NULL; i++) {
        struct target *t = &f->targets[i];
        if (t->result != NULL) {
            cJSON_AddItemToObject(results, t->id, t->result);
            t->result = NULL;
        }
    }
    f->stats->broadcasts++;
    cJSON_AddNumberToObject(doc, "sent", (double)f->ok);
    cJSON_AddNumberToObject(doc, "failed", (double)f->failed);
    gw_log(GW_LOG_INFO, SUBJECT,
           "%s to %zu device%s asked by %s: %zu ok, %zu failed",
           gw_device_command_type_name(f->c.type), f->n, f->n == 1 ? "" : "s",
           gw_http_req_peer(f->req), f->ok, f->failed);
    gw__api_send_json(f->req, 200, doc, NULL);
    f->req = NULL;
    fanout_free(f);
}

static void target_done(struct target *t, cJSON *result, bool ok)
{
    struct fanout *f = t->f;

    t->result = result != NULL ? result : cJSON_CreateNull();
    if (ok) {
        f->ok++;
    } else {
        f->failed++;
    }
    if (f->next == f->n && f->waiting == 0 && f->req != NULL) {
        fanout_answer(f);
    }
}

static void on_target_reply(void *arg, const struct gw_mcp_reply *reply)
{
    struct target *t = arg;

    t->waiting = false;
    t->f->waiting--;
    target_done(t, reply_json(reply), reply->outcome == GW_MCP_OK);
}

static void target_start(struct fanout *f, struct target *t)
{
    cJSON *copy = NULL;

    if (f->c.type == GW_DEVICE_COMMAND_MCP) {
        if (f->c.params != NULL &&
            (copy = cJSON_Duplicate(f->c.params, true)) == NULL) {
            struct push_result r = {503, "out of memory", false,
                                    GW_PUSH_FAILED};
            target_done(t, push_json(&r), false);
            return;
        }
        t->waiting = true;
        f->waiting++;
        mcp_send(f->env, t->id, f->c.method, copy, on_target_reply, t,
                 &t->handle);
        return;
    }
    struct push_result r =
        publish_to(f->env, f->stats, f->c.type, t->id, f->text, f->len);
    target_done(t, push_json(&r), r.why == NULL);
}

/* One batch; the next one on the next turn of the loop. */
static void on_turn(uv_timer_t *timer)
{
    struct fanout *f = timer->data;
    size_t end =
        f->next + FANOUT_PER_TURN < f->n ? f->next + FANOUT_PER_TURN : f->n;

    while (f->next < end && f->req != NULL) {
        struct target *t = &f->targets[f->next++];
        target_start(f, t);
    }
    if (f->req != NULL && f->next < f->n) {
        uv_timer_start(&f->turn, on_turn, 0, 0);
    }
}

static void on_fanout_gone(struct gw_http_req *req, void *arg)
{
    struct fanout *f = arg;

    (void)req;
    f->req = NULL;
    for (size_t i = 0; i < f->next; i++) {
        if (f->targets[i].waiting) {
            gw_mcp_abandon(gw_device_table_links(f->env->devices),
                           f->targets[i].handle);
        }
    }
    fanout_free(f);
}

/* Adds id unless it is there already. */
static int add_target(struct fanout *f, const char *id)
{
    struct target *t = &f->targets[f->n], *seen;
    size_t len = strlen(id);

    HASH_FIND(hh, f->by_id, id, len, seen);
    if (seen != NULL) {
        return 0;
    }
    memcpy(t->id, id, len + 1);
    t->f = f;
    HASH_ADD(hh, f->by_id, id, len, t);
    if (!GW_HASH_ADDED(t, hh)) {
        return GW_ENOMEM;
    }
    f->n++;
    return 0;
}

/* Whether the device's id names group as its first part. */
static bool in_group(const char *client_id, const char *group)
{
    struct gw_client_id parts;

    return gw_client_id_parse(client_id, strlen(client_id), &parts) == 0 &&
           parts.group_len == strlen(group) &&
           memcmp(parts.group, group, parts.group_len) == 0;
}

/* The selection, fixed now: devices coming later are not in it. */
static int select_targets(struct fanout *f, const struct gw_device_target *to,
                          size_t max, char *why, size_t cap)
{
    const struct gw_device_table *devs = f->env->devices;
    size_t want = 0;
    const cJSON *id;

    if (to->kind == GW_DEVICE_TARGET_IDS) {
        want = to->n_ids;
    } else {
        const struct gw_device *d;
        GW_DEVICE_FOREACH(devs, d)
        {
            want += to->kind == GW_DEVICE_TARGET_ALL ||
                    in_group(d->client_id, to->group);
        }
    }
    if (want > max) {
        snprintf(why, cap,
                 "%zu devices selected, more than http.broadcast_max_devices "
                 "(%zu)",
                 want, max);
        return GW_ELIMIT;
    }
    f->targets = calloc(want > 0 ? want : 1, sizeof(*f->targets));
    if (f->targets == NULL) {
        return GW_ENOMEM;
    }
    if (to->kind == GW_DEVICE_TARGET_IDS) {
        cJSON_ArrayForEach(id, to->ids)
        {
            if (add_target(f, id->valuestring) != 0) {
                return GW_ENOMEM;
            }
        }
        return 0;
    }
    const struct gw_device *d;
    GW_DEVICE_FOREACH(devs, d)
    {
        if ((to->kind == GW_DEVICE_TARGET_ALL ||
             in_group(d->client_id, to->group)) &&
            add_target(f, d->client_id) != 0) {
            return GW_ENOMEM;
        }
    }
    return 0;
}

void gw__api_push_broadcast(const struct gw_http_api_env *env,
                            struct gw_push_stats *stats,
                            struct gw_http_req *req)
{
    size_t max =
        (size_t)gw_config_live_get(env->config)->http.broadcast_max_devices;
    struct fanout *f;
    struct gw_device_target to;
    char why[160];
    int rc;
    cJSON *in = body_of(stats, req);

    if (in == NULL) {
        return;
    }
    f = calloc(1, sizeof(*f));
    if (f == NULL) {
        cJSON_Delete(in);
        gw__api_refuse(req, 503, true, "out of memory", NULL);
        return;
    }
    f->env = env;
    f->stats = stats;
    f->doc = in;
    rc = gw_device_broadcast_read(in, max, GW_CLIENT_ID_MAX, &to, &f->c, why,
                                  sizeof(why));
    if (rc == 0 && f->c.type != GW_DEVICE_COMMAND_MCP) {
        char too_big[sizeof(why)];
        rc = gw_device_command_encode(
            &f->c, downlink_max(env, too_big, sizeof(too_big)), &f->text,
            &f->len);
        if (rc == GW_ETOOBIG) {
            memcpy(why, too_big, sizeof(why));
        }
    }
    if (rc == 0) {
        rc = select_targets(f, &to, max, why, sizeof(why));
    }
    if (rc != 0) {
        for (size_t i = 0; i < f->n; i++) {
            cJSON_Delete(f->targets[i].result);
        }
        HASH_CLEAR(hh, f->by_id);
        free(f->targets);
        free(f->text);
        free(f);
        cJSON_Delete(in);
        if (rc == GW_ENOMEM) {
            gw__api_refuse(req, 503, true, "out of memory", NULL);
        } else {
            refuse_body(stats, req, rc == GW_EPROTO ? 400 : 413, why);
        }
        return;
    }
    GW_LOG(GW_LOG_DEBUG, SUBJECT, "fan-out of %s to %zu device%s from %s",
           gw_device_command_type_name(f->c.type), f->n, f->n == 1 ? "" : "s",
           gw_http_req_peer(req));
    f->req = req;
    uv_timer_init(env->loop, &f->turn);
    f->turn.data = f;
    gw_http_req_on_gone(req, on_fanout_gone, f);
    if (f->n == 0) {
        fanout_answer(f); /* nobody online in the selection */
        return;
    }
    uv_timer_start(&f->turn, on_turn, 0, 0);
}
