/*
 * Device records and each device's MCP link. Every request toward a
 * device gets a fresh numeric id and a loop timer; the answer (or the
 * timer, or the device leaving) ends it exactly once, toward its origin.
 */
#include "gateway/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "codec/jsonrpc.h"
#include "codec/mcp_tools.h"
#include "gateway/instance.h"
#include "common/log.h"
#include "version.h"

/* Pages one discovery may read: the cap on tools normally ends it first. */
#define DISCOVER_MAX_PAGES 64
/* What the firmware accepts in one message (PROTOCOL.md section 2). */
#define DEVICE_PAYLOAD_MAX GW_ENVELOPE_DEVICE_MAX

struct gw_mcp_pending {
    UT_hash_handle hh;        /* in dev->pending, by dev_id */
    UT_hash_handle hh_handle; /* in devs->by_handle, by handle */
    struct gw_devices *devs;
    struct gw_device *dev; /* NULL once the request ended */
    uint64_t handle;
    uint32_t dev_id;
    cJSON *msg; /* the request, until sent */
    enum gw_mcp_origin origin;
    gw_mcp_reply_cb cb; /* NULL once abandoned */
    void *arg;
    uint64_t started_ms;
    uv_timer_t timer;
    enum gw_mcp_outcome fail; /* what the timer means */
    bool is_call;             /* tools/call: one at a time */
    bool sent;
    bool done;
    struct gw_mcp_pending *next_call; /* in the device's call queue */
};

static const char *const state_names[] = {
    [GW_MCP_IDLE] = "idle",       [GW_MCP_INITIALIZING] = "initializing",
    [GW_MCP_LISTING] = "listing", [GW_MCP_READY] = "ready",
    [GW_MCP_FAILED] = "failed",
};
static const char *const origin_names[GW_MCP_ORIGIN_COUNT_] = {
    [GW_MCP_FROM_GATEWAY] = "gateway",
    [GW_MCP_FROM_BACKEND] = "backend",
    [GW_MCP_FROM_API] = "api",
    [GW_MCP_FROM_CLIENT] = "client",
};
static const char *const outcome_names[GW_MCP_OUTCOME_COUNT_] = {
    [GW_MCP_OK] = "ok",           [GW_MCP_ERROR] = "error",
    [GW_MCP_TIMEOUT] = "timeout", [GW_MCP_OFFLINE] = "offline",
    [GW_MCP_BUSY] = "busy",       [GW_MCP_CANCELLED] = "cancelled",
};

const char *gw_mcp_state_name(enum gw_mcp_state state)
{
    return (unsigned)state <= GW_MCP_FAILED ? state_names[state] : "?";
}

const char *gw_mcp_origin_name(enum gw_mcp_origin origin)
{
    return (unsigned)origin < GW_MCP_ORIGIN_COUNT_ ? origin_names[origin] : "?";
}

const char *gw_mcp_outcome_name(enum gw_mcp_outcome outcome)
{
    return (unsigned)outcome < GW_MCP_OUTCOME_COUNT_ ? outcome_names[outcome]
                                                     : "?";
}

static const struct gw_config *config_of(const struct gw_devices *devs)
{
    return gw_instance_config(devs->inst);
}

static void subject_of(const char *client_id, char *out, size_t cap)
{
    snprintf(out, cap, "dev=%s mcp", client_id);
}

/* ---- the table ---- */

void gw_devices_init(struct gw_devices *devs, struct gw_instance *inst)
{
    memset(devs, 0, sizeof(*devs));
    devs->inst = inst;
}

void gw_devices_set_listener(struct gw_devices *devs, gw_devices_changed_cb cb,
                             void *arg)
{
    devs->on_changed = cb;
    devs->on_changed_arg = arg;
}

struct gw_device *gw_devices_find(const struct gw_devices *devs,
                                  const char *client_id)
{
    struct gw_device *d = NULL;

    HASH_FIND_STR(devs->table, client_id, d);
    return d;
}

struct gw_device *gw_devices_find_label(const struct gw_devices *devs,
                                        const char *label)
{
    for (struct gw_device *d = devs->table; d != NULL; d = d->hh.next) {
        if (strcmp(d->label, label) == 0) {
            return d;
        }
    }
    return NULL;
}

size_t gw_devices_online_count(const struct gw_devices *devs)
{
    size_t n = 0;

    for (struct gw_device *d = devs->table; d != NULL; d = d->hh.next) {
        n += d->online;
    }
    return n;
}

static void changed(struct gw_devices *devs, const struct gw_device *d)
{
    if (devs->on_changed != NULL) {
        devs->on_changed(devs->on_changed_arg, d);
    }
}

/* ---- sending ---- */

/* {"session_id":..,"type":"mcp","payload":msg} to the device. */
static int publish_rpc(struct gw_devices *devs, const struct gw_device *d,
                       const cJSON *msg)
{
    struct gw_session *s = NULL;
    cJSON *env = cJSON_CreateObject();
    char *text = NULL;
    int rc = GW_ENOMEM;

    HASH_FIND_STR(devs->inst->sessions, d->client_id, s);
    if (env == NULL ||
        cJSON_AddStringToObject(env, "session_id",
                                s != NULL ? s->session_id : "") == NULL ||
        cJSON_AddStringToObject(env, "type", "mcp") == NULL ||
        !cJSON_AddItemReferenceToObject(env, "payload", (cJSON *)msg) ||
        (text = cJSON_PrintUnformatted(env)) == NULL) {
        goto out;
    }
    size_t len = strlen(text);
    rc = len > DEVICE_PAYLOAD_MAX
             ? GW_ETOOBIG
             : gw_instance_publish_device(devs->inst, d->client_id, text, len);
out:
    cJSON_free(text);
    cJSON_Delete(env);
    return rc;
}

static void send_cancelled(struct gw_devices *devs, const struct gw_device *d,
                           uint32_t id, const char *reason)
{
    cJSON *params = cJSON_CreateObject();

    if (params == NULL ||
        cJSON_AddNumberToObject(params, "requestId", id) == NULL ||
        cJSON_AddStringToObject(params, "reason", reason) == NULL) {
        cJSON_Delete(params);
        return;
    }
    cJSON *n = gw_rpc_notification("notifications/cancelled", params);
    if (n != NULL) {
        (void)publish_rpc(devs, d, n);
        cJSON_Delete(n);
    }
}

/* ---- ending a request ---- */

static void on_pending_closed(uv_handle_t *handle)
{
    struct gw_mcp_pending *p = handle->data;

    cJSON_Delete(p->msg);
    free(p);
}

static void record_stats(struct gw_devices *devs, struct gw_mcp_pending *p,
                         enum gw_mcp_outcome outcome)
{
    static const unsigned bounds[] = GW_MCP_LATENCY_BOUNDS;
    struct gw_mcp_stats *st = &devs->stats;
    uint64_t ms = uv_now(devs->inst->loop) - p->started_ms;
    size_t b = 0;

    st->requests[p->origin][outcome]++;
    if (outcome != GW_MCP_OK && outcome != GW_MCP_ERROR) {
        return; /* latency of answers only */
    }
    while (b < GW_MCP_LATENCY_BUCKETS && ms > bounds[b]) {
        b++;
    }
    st->latency_le[b]++;
    st->latency_sum_ms += ms;
    st->latency_count++;
}

static void send_next_call(struct gw_device *d);

/*
 * Ends p: out of every table, its origin told (unless it left), its timer
 * closed (memory goes with it). The next queued tool call goes out.
 */
static void finish(struct gw_mcp_pending *p, enum gw_mcp_outcome outcome,
                   const cJSON *result, const cJSON *error)
{
    struct gw_devices *devs = p->devs;
    struct gw_device *d = p->dev;
    bool was_call_in_flight = false;

    if (p->done) {
        return;
    }
    p->done = true;
    HASH_DELETE(hh_handle, devs->by_handle, p);
    if (d != NULL) {
        HASH_DELETE(hh, d->pending, p);
        d->n_pending--;
        if (d->call_in_flight == p) {
            d->call_in_flight = NULL;
            was_call_in_flight = true;
        } else if (p->is_call) {
            struct gw_mcp_pending **q = &d->calls_head;
            while (*q != NULL && *q != p) {
                q = &(*q)->next_call;
            }
            if (*q == p) {
                *q = p->next_call;
                if (d->calls_tail == p) {
                    d->calls_tail = NULL;
                    for (struct gw_mcp_pending *t = d->calls_head; t != NULL;
                         t = t->next_call) {
                        d->calls_tail = t;
                    }
                }
            }
        }
        p->dev = NULL;
    }
    uv_timer_stop(&p->timer);
    uv_close((uv_handle_t *)&p->timer, on_pending_closed);
    record_stats(devs, p, p->cb != NULL ? outcome : GW_MCP_CANCELLED);
    if (p->cb != NULL) {
        struct gw_mcp_reply reply = {outcome, result, error};
        gw_mcp_reply_cb cb = p->cb;
        p->cb = NULL;
        cb(p->arg, &reply);
    }
    if (was_call_in_flight && d != NULL && !d->dying) {
        send_next_call(d);
    }
}

static const char *fail_text(enum gw_mcp_outcome outcome, int *code)
{
    switch (outcome) {
    case GW_MCP_TIMEOUT:
        *code = GW_RPC_TIMEOUT;
        return "the device did not answer in time";
    case GW_MCP_OFFLINE:
        *code = GW_RPC_DEVICE_OFFLINE;
        return "the device is offline";
    case GW_MCP_BUSY:
        *code = GW_RPC_DEVICE_BUSY;
        return "too many requests are waiting for the device";
    case GW_MCP_ERROR:
        *code = GW_RPC_INVALID_PARAMS;
        return "the request is too large for the device";
    default:
        *code = GW_RPC_CANCELLED;
        return "the gateway is shutting down";
    }
}

/* Ends p with a gateway error of its own. */
static void fail(struct gw_mcp_pending *p, enum gw_mcp_outcome outcome)
{
    int code;
    const char *text = fail_text(outcome, &code);
    cJSON *err = cJSON_CreateObject();

    if (err != NULL) {
        cJSON_AddNumberToObject(err, "code", code);
        cJSON_AddStringToObject(err, "message", text);
    }
    finish(p, outcome, NULL, err);
    cJSON_Delete(err);
}

static void on_pending_timer(uv_timer_t *timer)
{
    struct gw_mcp_pending *p = timer->data;
    char subject[GW_CLIENT_ID_MAX + 16];

    if (p->fail == GW_MCP_TIMEOUT && p->dev != NULL) {
        subject_of(p->dev->client_id, subject, sizeof(subject));
        gw_log(GW_LOG_WARN, subject, "request %u from %s timed out", p->dev_id,
               gw_mcp_origin_name(p->origin));
        if (p->sent) {
            /* Devices ignore notifications today; the spec asks for it. */
            send_cancelled(p->devs, p->dev, p->dev_id, "timed out");
        }
    }
    fail(p, p->fail);
}

/* ---- sending a request ---- */

static void send_now(struct gw_device *d, struct gw_mcp_pending *p)
{
    int rc = publish_rpc(d->owner, d, p->msg);

    p->sent = true;
    cJSON_Delete(p->msg);
    p->msg = NULL;
    if (rc == GW_ETOOBIG) {
        /* From the loop, like every other end (the caller may be inside
         * gw_devices_request). */
        p->fail = GW_MCP_ERROR;
        uv_timer_start(&p->timer, on_pending_timer, 0, 0);
    } else if (rc != 0) {
        /* The broker link is down: the timer ends it, as if lost. */
        char subject[GW_CLIENT_ID_MAX + 16];
        subject_of(d->client_id, subject, sizeof(subject));
        gw_log(GW_LOG_WARN, subject, "request %u not sent: %s", p->dev_id,
               gw_strerror(rc));
    }
}

static void send_next_call(struct gw_device *d)
{
    struct gw_mcp_pending *p = d->calls_head;

    if (p == NULL || d->call_in_flight != NULL) {
        return;
    }
    d->calls_head = p->next_call;
    if (d->calls_head == NULL) {
        d->calls_tail = NULL;
    }
    p->next_call = NULL;
    d->call_in_flight = p;
    send_now(d, p);
}

static uint32_t next_device_id(struct gw_device *d)
{
    uint32_t id = d->next_id;
    struct gw_mcp_pending *clash = NULL;

    do {
        id = id >= GW_RPC_ID_MAX ? 1 : id + 1;
        HASH_FIND(hh, d->pending, &id, sizeof(id), clash);
    } while (clash != NULL);
    d->next_id = id;
    return id;
}

void gw_devices_request(struct gw_devices *devs, const char *client_id,
                        const char *method, cJSON *params, uint32_t timeout_ms,
                        enum gw_mcp_origin origin, gw_mcp_reply_cb cb,
                        void *arg, uint64_t *handle)
{
    const struct gw_config *cfg = config_of(devs);
    struct gw_device *d = gw_devices_find(devs, client_id);
    struct gw_mcp_pending *p = calloc(1, sizeof(*p));

    if (p == NULL) {
        cJSON_Delete(params);
        abort(); /* the contract promises one callback; no way to keep it */
    }
    p->devs = devs;
    p->origin = origin;
    p->cb = cb;
    p->arg = arg;
    p->handle = ++devs->next_handle;
    p->started_ms = uv_now(devs->inst->loop);
    p->is_call = strcmp(method, "tools/call") == 0;
    uv_timer_init(devs->inst->loop, &p->timer);
    p->timer.data = p;
    HASH_ADD(hh_handle, devs->by_handle, handle, sizeof(p->handle), p);
    if (handle != NULL) {
        *handle = p->handle;
    }
    /* Refusals still answer from the loop, never from inside this call. */
    if (d == NULL || !d->online || d->dying) {
        cJSON_Delete(params);
        p->fail = GW_MCP_OFFLINE;
        uv_timer_start(&p->timer, on_pending_timer, 0, 0);
        return;
    }
    if (d->n_pending >= (size_t)cfg->mcp.max_pending) {
        cJSON_Delete(params);
        p->fail = GW_MCP_BUSY;
        uv_timer_start(&p->timer, on_pending_timer, 0, 0);
        return;
    }
    p->dev = d;
    p->dev_id = next_device_id(d);
    p->msg = gw_rpc_request(p->dev_id, method, params);
    HASH_ADD(hh, d->pending, dev_id, sizeof(p->dev_id), p);
    d->n_pending++;
    p->fail = GW_MCP_TIMEOUT;
    uv_timer_start(
        &p->timer, on_pending_timer,
        timeout_ms > 0 ? timeout_ms : (uint64_t)cfg->mcp.call_timeout_ms, 0);
    if (p->msg == NULL) {
        p->fail = GW_MCP_CANCELLED;
        uv_timer_start(&p->timer, on_pending_timer, 0, 0);
    } else if (p->is_call) {
        if (d->calls_tail != NULL) {
            d->calls_tail->next_call = p;
        } else {
            d->calls_head = p;
        }
        d->calls_tail = p;
        send_next_call(d);
    } else {
        send_now(d, p);
    }
}

void gw_devices_abandon(struct gw_devices *devs, uint64_t handle)
{
    struct gw_mcp_pending *p = NULL;

    HASH_FIND(hh_handle, devs->by_handle, &handle, sizeof(handle), p);
    if (p == NULL || p->done) {
        return;
    }
    p->cb = NULL;
    p->arg = NULL;
    if (!p->sent) {
        finish(p, GW_MCP_CANCELLED, NULL, NULL);
        return;
    }
    /* A call the device runs keeps its turn until it answers (or the
     * timer ends it): the next one must not overlap it. */
    if (p->dev != NULL) {
        send_cancelled(devs, p->dev, p->dev_id, "the client went away");
    }
}

/* ---- discovery: initialize, notifications/initialized, tools/list ---- */

static void discover_start(struct gw_device *d);

/* Ends a discovery (ok or not) and lets a waiting device have the slot. */
static void discover_end(struct gw_device *d, enum gw_mcp_state state)
{
    struct gw_devices *devs = d->owner;

    d->mcp = state;
    cJSON_Delete(d->list_acc);
    d->list_acc = NULL;
    if (d->discovering) {
        d->discovering = false;
        devs->discovering--;
    }
    if (state == GW_MCP_READY && d->rediscover && !d->dying) {
        d->rediscover = false;
        discover_start(d);
    }
    while (devs->discover_head != NULL &&
           devs->discovering <
               (unsigned)config_of(devs)->mcp.discover_concurrency) {
        struct gw_device *next = devs->discover_head;
        devs->discover_head = next->discover_next;
        if (devs->discover_head == NULL) {
            devs->discover_tail = NULL;
        }
        next->discover_next = NULL;
        next->discover_queued = false;
        discover_start(next);
    }
}

static void request_page(struct gw_device *d, const char *cursor);

static void on_list_reply(void *arg, const struct gw_mcp_reply *reply)
{
    struct gw_device *d = arg;
    const struct gw_config *cfg = config_of(d->owner);
    char subject[GW_CLIENT_ID_MAX + 16];
    const char *next = NULL;
    int rc = GW_EPROTO;

    subject_of(d->client_id, subject, sizeof(subject));
    if (reply->outcome == GW_MCP_OK) {
        rc = gw_mcp_tools_page_parse(reply->result, d->list_acc, &next);
    }
    if (rc != 0) {
        gw_log(GW_LOG_WARN, subject, "tools/list page %u failed: %s",
               d->list_pages + 1,
               reply->outcome == GW_MCP_OK
                   ? "malformed page"
                   : gw_mcp_outcome_name(reply->outcome));
        discover_end(d, GW_MCP_FAILED);
        return;
    }
    d->list_pages++;
    int n = cJSON_GetArraySize(d->list_acc);
    if (n >= cfg->mcp.max_tools || d->list_pages >= DISCOVER_MAX_PAGES) {
        while (cJSON_GetArraySize(d->list_acc) > cfg->mcp.max_tools) {
            cJSON_DeleteItemFromArray(d->list_acc,
                                      cJSON_GetArraySize(d->list_acc) - 1);
        }
        if (next != NULL) {
            gw_log(GW_LOG_WARN, subject,
                   "more tools than mcp.max_tools (%d): the rest is ignored",
                   cfg->mcp.max_tools);
        }
        next = NULL;
    }
    if (next != NULL) {
        request_page(d, next);
        return;
    }
    cJSON_Delete(d->tools);
    d->tools = d->list_acc;
    d->list_acc = NULL;
    d->tools_complete = true;
    d->tools_serial++;
    d->owner->stats.discoveries++;
    gw_log(GW_LOG_INFO, subject, "%d tools in %u page%s",
           cJSON_GetArraySize(d->tools), d->list_pages,
           d->list_pages == 1 ? "" : "s");
    discover_end(d, GW_MCP_READY);
    changed(d->owner, d);
}

static void request_page(struct gw_device *d, const char *cursor)
{
    cJSON *params = cJSON_CreateObject();

    /* Every tool, so the cache knows the user-only ones and can hide
     * them; the firmware lists them only when asked. */
    if (params != NULL) {
        cJSON_AddBoolToObject(params, "withUserTools", 1);
        if (cursor != NULL) {
            cJSON_AddStringToObject(params, "cursor", cursor);
        }
    }
    gw_devices_request(d->owner, d->client_id, "tools/list", params, 0,
                       GW_MCP_FROM_GATEWAY, on_list_reply, d, NULL);
}

static void copy_info(const cJSON *result, const char *key, char *out,
                      size_t cap)
{
    const cJSON *info = cJSON_GetObjectItemCaseSensitive(result, "serverInfo");
    const char *v =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(info, key));

    snprintf(out, cap, "%s", v != NULL ? v : "");
}

static void on_init_reply(void *arg, const struct gw_mcp_reply *reply)
{
    struct gw_device *d = arg;
    char subject[GW_CLIENT_ID_MAX + 16];

    subject_of(d->client_id, subject, sizeof(subject));
    if (reply->outcome != GW_MCP_OK || !cJSON_IsObject(reply->result)) {
        gw_log(GW_LOG_WARN, subject, "initialize failed: %s",
               gw_mcp_outcome_name(reply->outcome));
        discover_end(d, GW_MCP_FAILED);
        return;
    }
    copy_info(reply->result, "name", d->server_name, sizeof(d->server_name));
    copy_info(reply->result, "version", d->server_version,
              sizeof(d->server_version));
    cJSON *n = gw_rpc_notification("notifications/initialized", NULL);
    if (n != NULL) {
        (void)publish_rpc(d->owner, d, n);
        cJSON_Delete(n);
    }
    d->mcp = GW_MCP_LISTING;
    d->list_pages = 0;
    cJSON_Delete(d->list_acc);
    d->list_acc = cJSON_CreateArray();
    if (d->list_acc == NULL) {
        discover_end(d, GW_MCP_FAILED);
        return;
    }
    request_page(d, NULL);
}

/* Starts now if a slot is free, else waits in line. */
static void discover_start(struct gw_device *d)
{
    struct gw_devices *devs = d->owner;

    if (d->discovering || d->discover_queued) {
        d->rediscover = d->discovering;
        return;
    }
    if (devs->discovering >=
        (unsigned)config_of(devs)->mcp.discover_concurrency) {
        d->discover_queued = true;
        if (devs->discover_tail != NULL) {
            devs->discover_tail->discover_next = d;
        } else {
            devs->discover_head = d;
        }
        devs->discover_tail = d;
        return;
    }
    d->discovering = true;
    devs->discovering++;
    d->mcp = GW_MCP_INITIALIZING;
    cJSON *params = cJSON_CreateObject();
    cJSON *info = cJSON_CreateObject();
    if (params != NULL && info != NULL) {
        cJSON_AddStringToObject(params, "protocolVersion", "2024-11-05");
        cJSON_AddItemToObject(params, "capabilities", cJSON_CreateObject());
        cJSON_AddStringToObject(info, "name", "hybridgw");
        cJSON_AddStringToObject(info, "version", GW_VERSION);
        cJSON_AddItemToObject(params, "clientInfo", info);
        info = NULL;
    }
    cJSON_Delete(info);
    gw_devices_request(devs, d->client_id, "initialize", params, 0,
                       GW_MCP_FROM_GATEWAY, on_init_reply, d, NULL);
}

int gw_devices_refresh(struct gw_devices *devs, const char *client_id)
{
    struct gw_device *d = gw_devices_find(devs, client_id);

    if (d == NULL || !d->online) {
        return GW_ENOENT;
    }
    d->tools_complete = false;
    discover_start(d);
    return 0;
}

/* ---- records ---- */

void gw_devices_online(struct gw_devices *devs, const char *client_id)
{
    struct gw_device *d = gw_devices_find(devs, client_id);
    size_t len = strlen(client_id);

    if (d == NULL) {
        d = calloc(1, sizeof(*d));
        if (d == NULL || len > GW_CLIENT_ID_MAX ||
            gw_mcp_device_label(client_id, len, d->label) != 0) {
            free(d);
            return;
        }
        memcpy(d->client_id, client_id, len + 1);
        d->owner = devs;
        /* A random start keeps answers to a previous instance (a device
         * still answering after a restart) from matching new requests. */
        if (RAND_bytes((unsigned char *)&d->next_id, sizeof(d->next_id)) != 1) {
            d->next_id = 0;
        }
        d->next_id &= 0x3fffffffu;
        HASH_ADD_STR(devs->table, client_id, d);
    }
    bool was_online = d->online;
    d->online = true;
    if (config_of(devs)->mcp.discover &&
        (d->mcp == GW_MCP_IDLE || d->mcp == GW_MCP_FAILED) &&
        !d->discover_queued) {
        discover_start(d);
    }
    if (!was_online) {
        changed(devs, d);
    }
}

/* Takes d out of the table and frees it, ending its requests first. */
static void device_remove(struct gw_devices *devs, struct gw_device *d,
                          enum gw_mcp_outcome why)
{
    struct gw_mcp_pending *p, *tmp;

    d->dying = true;
    d->online = false;
    if (d->discover_queued) {
        struct gw_device **q = &devs->discover_head;
        while (*q != d) {
            q = &(*q)->discover_next;
        }
        *q = d->discover_next;
        devs->discover_tail = NULL;
        for (struct gw_device *t = devs->discover_head; t != NULL;
             t = t->discover_next) {
            devs->discover_tail = t;
        }
        d->discover_queued = false;
    }
    HASH_ITER(hh, d->pending, p, tmp)
    {
        fail(p, why); /* discovery callbacks see it and stop */
    }
    if (d->discovering) {
        discover_end(d, GW_MCP_FAILED);
    }
    HASH_DEL(devs->table, d);
    changed(devs, d); /* online is false: listeners drop it */
    cJSON_Delete(d->tools);
    cJSON_Delete(d->list_acc);
    free(d);
}

void gw_devices_offline(struct gw_devices *devs, const char *client_id)
{
    struct gw_device *d = gw_devices_find(devs, client_id);

    if (d != NULL) {
        char subject[GW_CLIENT_ID_MAX + 16];
        subject_of(client_id, subject, sizeof(subject));
        GW_LOG(GW_LOG_DEBUG, subject, "offline: %zu request%s failed",
               d->n_pending, d->n_pending == 1 ? "" : "s");
        device_remove(devs, d, GW_MCP_OFFLINE);
    }
}

void gw_devices_destroy(struct gw_devices *devs)
{
    struct gw_device *d, *tmp;
    struct gw_mcp_pending *p, *ptmp;

    devs->on_changed = NULL;
    HASH_ITER(hh, devs->table, d, tmp)
    {
        device_remove(devs, d, GW_MCP_CANCELLED);
    }
    /* Refusals that wait on a zero timer have no device. */
    HASH_ITER(hh_handle, devs->by_handle, p, ptmp)
    {
        fail(p, GW_MCP_CANCELLED);
    }
}

/* ---- from the device ---- */

static void on_response(struct gw_devices *devs, struct gw_device *d,
                        const struct gw_rpc *rpc, const char *subject)
{
    struct gw_mcp_pending *p = NULL;
    uint32_t id;

    if (d != NULL && gw_rpc_id_u32(rpc->id, &id)) {
        HASH_FIND(hh, d->pending, &id, sizeof(id), p);
    }
    if (p == NULL || !p->sent) {
        devs->stats.unsolicited++;
        GW_LOG(GW_LOG_DEBUG, subject, "response nobody waits for: dropped");
        return;
    }
    if (rpc->error != NULL) {
        cJSON *err = gw_rpc_error_normalise(rpc->error);
        finish(p, GW_MCP_ERROR, NULL, err);
        cJSON_Delete(err);
    } else {
        finish(p, GW_MCP_OK, rpc->result, NULL);
    }
}

bool gw_devices_on_device_mcp(struct gw_devices *devs, const char *client_id,
                              const struct gw_envelope *env)
{
    const cJSON *payload =
        cJSON_GetObjectItemCaseSensitive(env->root, "payload");
    struct gw_device *d = gw_devices_find(devs, client_id);
    char subject[GW_CLIENT_ID_MAX + 16];
    struct gw_rpc rpc;

    subject_of(client_id, subject, sizeof(subject));
    if (gw_rpc_classify(payload, &rpc) != 0) {
        devs->stats.refused++;
        gw_log(GW_LOG_WARN, subject, "mcp payload is not JSON-RPC: dropped");
        return true;
    }
    if (rpc.kind == GW_RPC_RESPONSE) {
        on_response(devs, d, &rpc, subject);
        return true;
    }
    if (rpc.kind == GW_RPC_NOTIFICATION &&
        strcmp(rpc.method, "notifications/tools/list_changed") == 0) {
        devs->stats.list_changed++;
        if (d != NULL && d->online) {
            gw_log(GW_LOG_INFO, subject, "tools changed: reading them again");
            (void)gw_devices_refresh(devs, client_id);
        }
    }
    return false; /* the backend may want it too */
}
