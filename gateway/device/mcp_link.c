/*
 * Each device's MCP link; see mcp_link.h. A request is in the links'
 * handle table from start to end, and in its link's pending table while
 * the device may answer it. Its memory goes with its timer's close
 * callback, so nothing up the stack ever holds a freed request.
 */
#include "gateway/device/mcp_link.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "codec/envelope.h"
#include "codec/hello.h"
#include "codec/mcp_items.h"
#include "common/assert.h"
#include "common/log.h"
#include "gateway/device/mcp_link_int.h"
#include "gateway/device/publish_int.h"

struct gw_mcp_request {
    UT_hash_handle hh;        /* in link->pending, by dev_id */
    UT_hash_handle hh_handle; /* in links->by_handle, by handle */
    struct gw_list call_node; /* in link->calls while queued */
    struct gw_mcp_links *links;
    struct gw_mcp_link *link; /* NULL once the request ended */
    uint64_t handle;
    uint32_t dev_id;
    cJSON *msg; /* the request, until sent */
    enum gw_mcp_origin origin;
    gw_mcp_reply_cb cb; /* NULL once abandoned */
    void *arg;
    uint64_t started_ms;
    uv_timer_t timer;
    enum gw_mcp_outcome fail; /* what the timer means */
    int refuse_code;          /* GW_MCP_REFUSED: the caller's error */
    char *refuse_text;
    cJSON *answer;                  /* gw_mcp_answer's result */
    cJSON *progress_token;          /* the origin's own, when it hears */
    gw_mcp_progress_cb on_progress; /* progress */
    void (*on_end)(void *end_arg, enum gw_mcp_outcome outcome);
    void *end_arg;
    bool is_call; /* tools/call: one at a time */
    bool is_init; /* initialize: the link completes the handshake */
    bool carried; /* in link->carried: the owner (another instance) asks */
    char *owner;  /* carried: the owner's name, for a cancel */
    bool sent;
    bool done;
};

static const char *const origin_names[GW_MCP_ORIGIN_COUNT_] = {
#define XX(name, text) [GW_MCP_FROM_##name] = text,
    GW_MCP_ORIGIN_MAP(XX)
#undef XX
};
static const char *const outcome_names[GW_MCP_OUTCOME_COUNT_] = {
#define XX(name, text) [GW_MCP_##name] = text,
    GW_MCP_OUTCOME_MAP(XX)
#undef XX
};

const char *gw_mcp_origin_name(enum gw_mcp_origin origin)
{
    return (unsigned)origin < GW_MCP_ORIGIN_COUNT_ ? origin_names[origin] : "?";
}

const char *gw_mcp_outcome_name(enum gw_mcp_outcome outcome)
{
    return (unsigned)outcome < GW_MCP_OUTCOME_COUNT_ ? outcome_names[outcome]
                                                     : "?";
}

static void subject_of(const struct gw_mcp_link *link, char *out, size_t cap)
{
    snprintf(out, cap, "dev=%s mcp", link->client_id);
}

/* ---- the links ---- */

void gw__device_links_init(struct gw_mcp_links *links, uv_loop_t *loop,
                           struct gw_publisher *pub,
                           const struct gw_config_live *config)
{
    memset(links, 0, sizeof(*links));
    links->loop = loop;
    links->pub = pub;
    links->config = config;
}

void gw_mcp_links_set_remote(struct gw_mcp_links *links,
                             const struct gw_mcp_remote *remote)
{
    links->remote = remote;
}

void gw_mcp_links_unset_remote(struct gw_mcp_links *links,
                               const struct gw_mcp_remote *remote)
{
    if (links->remote == remote) {
        links->remote = NULL;
    }
}

void gw__device_link_open(struct gw_mcp_link *link, struct gw_mcp_links *links,
                          const char *client_id)
{
    memset(link, 0, sizeof(*link));
    link->links = links;
    link->client_id = client_id;
    link->session_id = "";
    link->open = true;
    gw_list_init(&link->calls);
    if (RAND_bytes((unsigned char *)&link->next_id, sizeof(link->next_id)) !=
        1) {
        link->next_id = 0;
    }
    link->next_id &= 0x3fffffffu;
}

/* ---- sending ---- */

static int publish_rpc(struct gw_mcp_link *link, const cJSON *msg)
{
    return gw__device_publish_mcp(link->links->pub, link->client_id,
                                  link->session_id, msg);
}

int gw__device_link_notify(struct gw_mcp_link *link, const char *method,
                           cJSON *params)
{
    cJSON *n = gw_rpc_notification(method, params);
    int rc;

    if (n == NULL) {
        return GW_ENOMEM;
    }
    rc = publish_rpc(link, n);
    cJSON_Delete(n);
    return rc;
}

static void send_cancelled(struct gw_mcp_link *link, uint32_t id,
                           const char *reason)
{
    cJSON *params = cJSON_CreateObject();

    if (params == NULL ||
        cJSON_AddNumberToObject(params, "requestId", id) == NULL ||
        cJSON_AddStringToObject(params, "reason", reason) == NULL) {
        cJSON_Delete(params);
        return;
    }
    (void)gw__device_link_notify(link, "notifications/cancelled", params);
}

/* ---- ending a request ---- */

static void on_request_closed(uv_handle_t *handle)
{
    struct gw_mcp_request *p = handle->data;

    cJSON_Delete(p->msg);
    cJSON_Delete(p->answer);
    cJSON_Delete(p->progress_token);
    free(p->refuse_text);
    free(p->owner);
    free(p);
}

static void record_stats(struct gw_mcp_links *links, struct gw_mcp_request *p,
                         enum gw_mcp_outcome outcome)
{
    static const unsigned bounds[] = GW_MCP_LATENCY_BOUNDS;
    struct gw_mcp_stats *st = &links->stats;
    uint64_t ms = uv_now(links->loop) - p->started_ms;
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

static void send_next_call(struct gw_mcp_link *link);

/* Takes p off its link's tables; true if it was the call in flight. */
static bool unlink_request(struct gw_mcp_request *p)
{
    struct gw_mcp_link *link = p->link;
    bool was_in_flight = false;

    if (link == NULL) {
        return false;
    }
    if (p->carried) {
        HASH_DELETE(hh, link->carried, p);
        link->n_carried--;
    } else if (p->dev_id != 0) {
        HASH_DELETE(hh, link->pending, p);
        link->n_pending--;
    }
    if (link->call_in_flight == p) {
        link->call_in_flight = NULL;
        was_in_flight = true;
    }
    gw_list_unlink(&p->call_node);
    p->link = NULL;
    return was_in_flight;
}

/*
 * Ends p: out of every table, its origin told (unless it left), its timer
 * closed (the memory goes with it). The next queued tool call goes out.
 * The link outlives this call whatever the callback does: links live in
 * device records, which are only freed by the table's reaper.
 */
static void finish(struct gw_mcp_request *p, enum gw_mcp_outcome outcome,
                   const cJSON *result, const cJSON *error)
{
    struct gw_mcp_links *links = p->links;
    struct gw_mcp_link *link = p->link;
    bool was_in_flight;

    if (p->done) {
        return;
    }
    p->done = true;
    HASH_DELETE(hh_handle, links->by_handle, p);
    was_in_flight = unlink_request(p);
    uv_timer_stop(&p->timer);
    uv_close((uv_handle_t *)&p->timer, on_request_closed);
    record_stats(links, p, p->cb != NULL ? outcome : GW_MCP_CANCELLED);
    if (p->on_end != NULL) {
        p->on_end(p->end_arg, outcome);
    }
    if (p->cb != NULL) {
        struct gw_mcp_reply reply = {outcome, result, error};
        gw_mcp_reply_cb cb = p->cb;
        p->cb = NULL;
        cb(p->arg, &reply);
    }
    if (was_in_flight && link->open) {
        send_next_call(link);
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
static void fail(struct gw_mcp_request *p, enum gw_mcp_outcome outcome)
{
    int code;
    const char *text = fail_text(outcome, &code);
    cJSON *err = cJSON_CreateObject();

    if (outcome == GW_MCP_REFUSED) {
        code = p->refuse_code;
        text = p->refuse_text != NULL ? p->refuse_text : "refused";
    }
    if (err != NULL) {
        cJSON_AddNumberToObject(err, "code", code);
        cJSON_AddStringToObject(err, "message", text);
    }
    finish(p, outcome, NULL, err);
    cJSON_Delete(err);
}

/* Tells whoever has p (the device, or the owner of a carried one) that
 * nobody waits for it any more. */
static void cancel_sent(struct gw_mcp_request *p, const char *reason)
{
    const struct gw_mcp_remote *r = p->links->remote;

    if (p->carried) {
        if (r != NULL) {
            r->cancel(r->arg, p->owner, p->link->client_id, p->dev_id);
        }
        return;
    }
    send_cancelled(p->link, p->dev_id, reason);
}

static void on_request_timer(uv_timer_t *timer)
{
    struct gw_mcp_request *p = timer->data;
    char subject[GW_CLIENT_ID_MAX + 16];

    /* An abandoned request was already cancelled toward the device. */
    if (p->fail == GW_MCP_TIMEOUT && p->link != NULL && p->cb != NULL) {
        subject_of(p->link, subject, sizeof(subject));
        gw_log_peer(GW_LOG_WARN, NULL, subject,
                    "request %u from %s timed out%s%s", p->dev_id,
                    gw_mcp_origin_name(p->origin),
                    p->carried ? ": no word from its owner " : "",
                    p->carried ? p->owner : "");
        if (p->sent) {
            /* Devices ignore notifications today; the spec asks for it. */
            cancel_sent(p, "timed out");
        }
    }
    if (p->fail == GW_MCP_OK) {
        finish(p, GW_MCP_OK, p->answer, NULL);
        return;
    }
    fail(p, p->fail);
}

/* Ends p from the loop, never from inside the caller's call. */
static void fail_soon(struct gw_mcp_request *p, enum gw_mcp_outcome why)
{
    p->fail = why;
    uv_timer_start(&p->timer, on_request_timer, 0, 0);
}

/* ---- sending a request ---- */

static void send_now(struct gw_mcp_link *link, struct gw_mcp_request *p)
{
    int rc = publish_rpc(link, p->msg);

    p->sent = true;
    cJSON_Delete(p->msg);
    p->msg = NULL;
    if (rc == GW_ETOOBIG) {
        fail_soon(p, GW_MCP_ERROR);
    } else if (rc != 0) {
        /* The broker link is down: the timer ends it, as if lost. */
        char subject[GW_CLIENT_ID_MAX + 16];
        subject_of(link, subject, sizeof(subject));
        gw_log(GW_LOG_WARN, subject, "request %u not sent: %s", p->dev_id,
               gw_strerror(rc));
    }
}

static void send_next_call(struct gw_mcp_link *link)
{
    struct gw_list *first = gw_list_first(&link->calls);
    struct gw_mcp_request *p;

    if (first == NULL || link->call_in_flight != NULL) {
        return;
    }
    p = GW_LIST_ENTRY(first, struct gw_mcp_request, call_node);
    gw_list_unlink(first);
    link->call_in_flight = p;
    send_now(link, p);
}

static uint32_t next_device_id(struct gw_mcp_link *link)
{
    uint32_t id = link->next_id;
    struct gw_mcp_request *clash = NULL;

    do {
        id = id >= GW_RPC_ID_MAX ? 1 : id + 1;
        HASH_FIND(hh, link->pending, &id, sizeof(id), clash);
        if (clash == NULL) {
            HASH_FIND(hh, link->carried, &id, sizeof(id), clash);
        }
    } while (clash != NULL);
    link->next_id = id;
    return id;
}

/* A request in the handle table with its timer, not yet on a link; NULL
 * when memory is short (the caller then cannot keep its promise of a
 * callback, and says so). */
static struct gw_mcp_request *request_new(struct gw_mcp_links *links,
                                          enum gw_mcp_origin origin,
                                          gw_mcp_reply_cb cb, void *arg,
                                          uint64_t *handle)
{
    struct gw_mcp_request *p = calloc(1, sizeof(*p));

    if (p == NULL) {
        return NULL;
    }
    p->links = links;
    p->origin = origin;
    p->cb = cb;
    p->arg = arg;
    p->handle = ++links->next_handle;
    p->started_ms = uv_now(links->loop);
    gw_list_init(&p->call_node);
    uv_timer_init(links->loop, &p->timer);
    p->timer.data = p;
    HASH_ADD(hh_handle, links->by_handle, handle, sizeof(p->handle), p);
    if (!GW_HASH_ADDED(p, hh_handle)) {
        uv_close((uv_handle_t *)&p->timer, on_request_closed);
        return NULL;
    }
    if (handle != NULL) {
        *handle = p->handle;
    }
    return p;
}

/* Out of memory before a request exists: the answer still comes from the
 * loop, through a timer of its own. */
struct oom_reply {
    uv_timer_t timer;
    gw_mcp_reply_cb cb;
    void *arg;
};

static void on_oom_closed(uv_handle_t *handle)
{
    free(handle->data);
}

static void on_oom_timer(uv_timer_t *timer)
{
    struct oom_reply *o = timer->data;
    cJSON *err = cJSON_CreateObject();
    struct gw_mcp_reply reply = {GW_MCP_CANCELLED, NULL, err};

    if (err != NULL) {
        cJSON_AddNumberToObject(err, "code", GW_RPC_INTERNAL_ERROR);
        cJSON_AddStringToObject(err, "message", "out of memory");
    }

    uv_close((uv_handle_t *)&o->timer, on_oom_closed);
    o->cb(o->arg, &reply);
    cJSON_Delete(err);
}

/* The last resort when not even a request fits: a static answer keeps
 * the promise of one callback without the request's memory. */
static void reply_oom(struct gw_mcp_links *links, gw_mcp_reply_cb cb, void *arg)
{
    struct oom_reply *o = calloc(1, sizeof(*o));

    gw_log(GW_LOG_ERROR, "mcp", "out of memory: request refused");
    if (o == NULL) {
        /* Nothing left to defer with: answer now. Callers tolerate it
         * only in this case, which the allocator decides, not a peer. */
        static const struct gw_mcp_reply none = {GW_MCP_CANCELLED, NULL, NULL};
        cb(arg, &none);
        return;
    }
    o->cb = cb;
    o->arg = arg;
    uv_timer_init(links->loop, &o->timer);
    o->timer.data = o;
    uv_timer_start(&o->timer, on_oom_timer, 0, 0);
}

/*
 * The origin's _meta.progressToken: kept on p and replaced by the
 * request's own id when the origin hears progress, taken out otherwise.
 * Device ids are unique on the link while pending, so the device's
 * progress finds its request by token alone, whoever asked.
 */
static void map_progress_token(struct gw_mcp_request *p, cJSON *params,
                               const struct gw_mcp_opts *opts)
{
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
    cJSON *tok = cJSON_GetObjectItemCaseSensitive(meta, "progressToken");
    cJSON *mine;

    if (tok == NULL) {
        return;
    }
    if (opts == NULL || opts->on_progress == NULL ||
        !gw_mcp_progress_token_valid(tok) ||
        (p->progress_token = cJSON_Duplicate(tok, 1)) == NULL ||
        (mine = cJSON_CreateNumber(p->dev_id)) == NULL) {
        cJSON_Delete(p->progress_token);
        p->progress_token = NULL;
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "progressToken");
        if (cJSON_GetArraySize(meta) == 0) {
            cJSON_DeleteItemFromObjectCaseSensitive(params, "_meta");
        }
        return;
    }
    cJSON_ReplaceItemInObjectCaseSensitive(meta, "progressToken", mine);
    p->on_progress = opts->on_progress;
}

/*
 * Whether the request would fit what the device takes once its owner
 * sends it (the owner's session id unknown here: room for the longest),
 * so that one too large is refused here as at the owner, never carried.
 */
static bool fits_device(uint32_t id, const char *method, const cJSON *params)
{
    cJSON *copy = params != NULL ? cJSON_Duplicate(params, 1) : NULL;
    cJSON *msg = gw_rpc_request(id, method, copy);
    char *text = msg != NULL ? gw_envelope_print_mcp("", msg) : NULL;
    bool fits = text != NULL &&
                strlen(text) + GW_SESSION_ID_MAX <= GW_ENVELOPE_DEVICE_MAX;

    cJSON_free(text);
    cJSON_Delete(msg);
    return fits;
}

/*
 * A request for a device another instance owns: carried there under an
 * id of this link's (unique among its requests, sent or carried), with
 * the same timeout; this side waits a little longer, so the owner's own
 * end comes first. Tool calls queue at the owner, not here.
 */
static void carry(struct gw_mcp_request *p, struct gw_mcp_link *link,
                  const char *owner, const char *method, cJSON *params,
                  const struct gw_mcp_opts *opts, uint32_t timeout_ms)
{
    const struct gw_mcp_remote *r = p->links->remote;
    char subject[GW_CLIENT_ID_MAX + 16];
    uint32_t id = next_device_id(link);
    int rc;

    p->is_call = false;
    p->dev_id = id;
    map_progress_token(p, params, opts);
    if (!fits_device(id, method, params)) {
        /* The same -32602 as a local request too large for the device. */
        cJSON_Delete(params);
        p->dev_id = 0;
        fail_soon(p, GW_MCP_ERROR);
        return;
    }
    p->owner = strdup(owner);
    if (p->owner == NULL) {
        cJSON_Delete(params);
        p->dev_id = 0;
        fail_soon(p, GW_MCP_CANCELLED);
        return;
    }
    p->carried = true;
    p->link = link;
    HASH_ADD(hh, link->carried, dev_id, sizeof(p->dev_id), p);
    if (!GW_HASH_ADDED(p, hh)) {
        cJSON_Delete(params);
        p->carried = false;
        p->link = NULL;
        p->dev_id = 0;
        fail_soon(p, GW_MCP_CANCELLED);
        return;
    }
    link->n_carried++;
    p->fail = GW_MCP_TIMEOUT;
    uv_timer_start(&p->timer, on_request_timer,
                   (uint64_t)timeout_ms + GW_MCP_REMOTE_SLACK_MS, 0);
    rc = r->send(r->arg, owner, link->client_id, id, method, params, timeout_ms,
                 p->origin, p->on_progress != NULL);
    cJSON_Delete(params);
    p->sent = true;
    subject_of(link, subject, sizeof(subject));
    if (rc != 0) {
        /* The broker link is down: the timer ends it, as if lost. */
        gw_log(GW_LOG_WARN, subject, "request %u for %s not carried: %s", id,
               owner, gw_strerror(rc));
    } else {
        GW_LOG(GW_LOG_DEBUG, subject, "%s %u carried to %s", method, id, owner);
    }
}

void gw_mcp_request(struct gw_mcp_links *links, struct gw_mcp_link *link,
                    const char *method, cJSON *params, uint32_t timeout_ms,
                    enum gw_mcp_origin origin, gw_mcp_reply_cb cb, void *arg,
                    uint64_t *handle)
{
    struct gw_mcp_opts opts = {.timeout_ms = timeout_ms};

    gw_mcp_request_with(links, link, method, params, &opts, origin, cb, arg,
                        handle);
}

void gw_mcp_request_with(struct gw_mcp_links *links, struct gw_mcp_link *link,
                         const char *method, cJSON *params,
                         const struct gw_mcp_opts *opts,
                         enum gw_mcp_origin origin, gw_mcp_reply_cb cb,
                         void *arg, uint64_t *handle)
{
    const struct gw_config *cfg = gw_config_live_get(links->config);
    uint32_t timeout_ms = opts != NULL ? opts->timeout_ms : 0;
    struct gw_mcp_request *p = request_new(links, origin, cb, arg, handle);

    if (p == NULL) {
        cJSON_Delete(params);
        if (handle != NULL) {
            *handle = 0;
        }
        if (opts != NULL && opts->on_end != NULL) {
            opts->on_end(opts->end_arg, GW_MCP_CANCELLED);
        }
        reply_oom(links, cb, arg);
        return;
    }
    p->is_call = strcmp(method, "tools/call") == 0;
    p->is_init = strcmp(method, "initialize") == 0;
    if (opts != NULL) {
        p->on_end = opts->on_end;
        p->end_arg = opts->end_arg;
    }
    if (links->closed) {
        cJSON_Delete(params);
        fail_soon(p, GW_MCP_CANCELLED);
        return;
    }
    if (link == NULL || !link->open) {
        cJSON_Delete(params);
        fail_soon(p, GW_MCP_OFFLINE);
        return;
    }
    if (link->n_pending + link->n_carried >= (size_t)cfg->mcp.max_pending) {
        cJSON_Delete(params);
        fail_soon(p, GW_MCP_BUSY);
        return;
    }
    if (timeout_ms == 0) {
        timeout_ms = (uint32_t)cfg->mcp.call_timeout_ms;
    }
    const struct gw_mcp_remote *r = links->remote;
    const char *owner = r != NULL && (opts == NULL || !opts->here)
                            ? r->owner(r->arg, link->client_id)
                            : NULL;
    if (owner != NULL) {
        carry(p, link, owner, method, params, opts, timeout_ms);
        return;
    }
    uint32_t id = next_device_id(link);
    p->dev_id = id;
    map_progress_token(p, params, opts);
    p->dev_id = 0;
    p->msg = gw_rpc_request(id, method, params);
    if (p->msg == NULL) {
        fail_soon(p, GW_MCP_CANCELLED);
        return;
    }
    p->link = link;
    p->dev_id = id;
    HASH_ADD(hh, link->pending, dev_id, sizeof(p->dev_id), p);
    if (!GW_HASH_ADDED(p, hh)) {
        p->dev_id = 0; /* not in the pending table */
        p->link = NULL;
        fail_soon(p, GW_MCP_CANCELLED);
        return;
    }
    link->n_pending++;
    p->fail = GW_MCP_TIMEOUT;
    uv_timer_start(&p->timer, on_request_timer, timeout_ms, 0);
    if (p->is_call) {
        gw_list_insert_tail(&link->calls, &p->call_node);
        send_next_call(link);
    } else {
        send_now(link, p);
    }
}

void gw_mcp_answer(struct gw_mcp_links *links, enum gw_mcp_origin origin,
                   cJSON *result, gw_mcp_reply_cb cb, void *arg,
                   uint64_t *handle)
{
    struct gw_mcp_request *p = request_new(links, origin, cb, arg, handle);

    if (p == NULL) {
        cJSON_Delete(result);
        reply_oom(links, cb, arg);
        return;
    }
    p->answer = result != NULL ? result : cJSON_CreateObject();
    fail_soon(p, p->answer != NULL ? GW_MCP_OK : GW_MCP_CANCELLED);
}

void gw_mcp_refuse(struct gw_mcp_links *links, enum gw_mcp_origin origin,
                   int code, const char *message, gw_mcp_reply_cb cb, void *arg,
                   uint64_t *handle)
{
    struct gw_mcp_request *p = request_new(links, origin, cb, arg, handle);

    if (p == NULL) {
        reply_oom(links, cb, arg);
        return;
    }
    p->refuse_code = code;
    p->refuse_text = strdup(message);
    fail_soon(p, GW_MCP_REFUSED);
}

void gw_mcp_abandon(struct gw_mcp_links *links, uint64_t handle)
{
    struct gw_mcp_request *p = NULL;

    HASH_FIND(hh_handle, links->by_handle, &handle, sizeof(handle), p);
    if (p == NULL || p->done) {
        return;
    }
    p->cb = NULL;
    p->arg = NULL;
    if (!p->sent) {
        finish(p, GW_MCP_CANCELLED, NULL, NULL);
        return;
    }
    /*
     * The device is told to stop. A device that honours it never answers
     * (MCP: no response to a cancelled request), so the call gives up its
     * turn now rather than at its timer; one that ignores it (the
     * firmware) runs calls on its main loop one after the other anyway.
     * The request stays pending, so a late answer is dropped quietly.
     */
    if (p->link != NULL) {
        struct gw_mcp_link *link = p->link;
        cancel_sent(p, "the client went away");
        if (link->call_in_flight == p) {
            link->call_in_flight = NULL;
            if (link->open) {
                send_next_call(link);
            }
        }
    }
}

void gw__device_link_close(struct gw_mcp_link *link, enum gw_mcp_outcome why)
{
    link->open = false;
    /* Closed first: no queued call goes out while the others end. Always
     * the head: a callback may end other requests of the link too. */
    while (link->pending != NULL) {
        fail(link->pending, why);
    }
    while (link->carried != NULL) {
        fail(link->carried, why);
    }
    GW_ASSERT(link->n_pending == 0);
    GW_ASSERT(link->n_carried == 0);
    GW_ASSERT(gw_list_empty(&link->calls));
    GW_ASSERT(link->call_in_flight == NULL);
}

void gw__device_links_close(struct gw_mcp_links *links)
{
    links->closed = true;
    /* Refusals waiting on a zero timer belong to no link. */
    while (links->by_handle != NULL) {
        fail(links->by_handle, GW_MCP_CANCELLED);
    }
}

/* ---- from the device ---- */

bool gw__device_link_on_response(struct gw_mcp_link *link,
                                 const struct gw_rpc *rpc)
{
    struct gw_mcp_request *p = NULL;
    bool init;
    uint32_t id;

    if (gw_rpc_id_u32(rpc->id, &id)) {
        HASH_FIND(hh, link->pending, &id, sizeof(id), p);
    }
    if (p == NULL || !p->sent) {
        char subject[GW_CLIENT_ID_MAX + 16];
        subject_of(link, subject, sizeof(subject));
        link->links->stats.unsolicited++;
        gw_log_peer(GW_LOG_DEBUG, NULL, subject,
                    "response nobody waits for: dropped");
        return false;
    }
    if (rpc->error != NULL) {
        cJSON *err = gw_rpc_error_normalise(rpc->error);
        finish(p, GW_MCP_ERROR, NULL, err);
        cJSON_Delete(err);
        return false;
    }
    /*
     * Every initialize the device accepts, whoever asked (discovery, a
     * backend's relayed one), is followed at once by
     * notifications/initialized: esp-mcp refuses every request but ping
     * until it comes and resets that on each initialize, and a xiaozhi
     * backend often never sends it. Sent before the origin hears the
     * answer, so it precedes whatever the origin asks next; a second one
     * (a backend that sends its own) only sets the same flag.
     */
    init = p->is_init;
    if (init) {
        (void)gw__device_link_notify(link, "notifications/initialized", NULL);
    }
    finish(p, GW_MCP_OK, rpc->result, NULL);
    return init;
}

/* Progress params (token: the request's id) to p's origin, under the
 * origin's own token. */
static void tell_progress(struct gw_mcp_request *p, const cJSON *in)
{
    cJSON *params = cJSON_Duplicate(in, 1);

    if (params == NULL ||
        !cJSON_ReplaceItemInObjectCaseSensitive(
            params, "progressToken", cJSON_Duplicate(p->progress_token, 1))) {
        cJSON_Delete(params);
        return;
    }
    p->on_progress(p->arg, params);
    cJSON_Delete(params);
}

bool gw__device_link_on_progress(struct gw_mcp_link *link,
                                 const struct gw_rpc *rpc)
{
    const cJSON *tok =
        cJSON_GetObjectItemCaseSensitive(rpc->params, "progressToken");
    struct gw_mcp_request *p = NULL;
    uint32_t id;

    /* The token as sent, or as esp-mcp echoes it: a string. */
    if (!gw_rpc_token_u32(tok, &id)) {
        return false;
    }
    HASH_FIND(hh, link->pending, &id, sizeof(id), p);
    if (p == NULL || p->on_progress == NULL || p->cb == NULL) {
        /* Late, or for a request whose origin hears none: dropped. */
        char subject[GW_CLIENT_ID_MAX + 16];
        subject_of(link, subject, sizeof(subject));
        gw_log_peer(GW_LOG_DEBUG, NULL, subject,
                    "progress nobody waits for: dropped");
        return p != NULL;
    }
    tell_progress(p, rpc->params);
    return true;
}

void gw_mcp_link_on_remote_progress(struct gw_mcp_link *link, uint32_t id,
                                    const cJSON *params)
{
    struct gw_mcp_request *p = NULL;

    HASH_FIND(hh, link->carried, &id, sizeof(id), p);
    if (p != NULL && p->on_progress != NULL && p->cb != NULL) {
        tell_progress(p, params);
    }
}

void gw_mcp_link_on_remote_reply(struct gw_mcp_link *link, uint32_t id,
                                 enum gw_mcp_outcome outcome,
                                 const cJSON *result, const cJSON *error)
{
    struct gw_mcp_request *p = NULL;

    HASH_FIND(hh, link->carried, &id, sizeof(id), p);
    if (p == NULL) {
        char subject[GW_CLIENT_ID_MAX + 16];
        subject_of(link, subject, sizeof(subject));
        link->links->stats.unsolicited++;
        gw_log_peer(GW_LOG_DEBUG, NULL, subject,
                    "carried reply nobody waits for");
        return;
    }
    finish(p, outcome, outcome == GW_MCP_OK ? result : NULL,
           outcome == GW_MCP_OK ? NULL : error);
}

/* The index of name in names[0..n), or -1. */
static int name_index(const char *const *names, int n, const char *name)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(name, names[i]) == 0) {
            return i;
        }
    }
    return -1;
}

bool gw_mcp_outcome_parse(const char *name, enum gw_mcp_outcome *out)
{
    int i = name_index(outcome_names, GW_MCP_OUTCOME_COUNT_, name);

    if (i >= 0) {
        *out = (enum gw_mcp_outcome)i;
    }
    return i >= 0;
}

bool gw_mcp_origin_parse(const char *name, enum gw_mcp_origin *out)
{
    int i = name_index(origin_names, GW_MCP_ORIGIN_COUNT_, name);

    if (i >= 0) {
        *out = (enum gw_mcp_origin)i;
    }
    return i >= 0;
}

int gw_mcp_link_respond(struct gw_mcp_link *link, const cJSON *id,
                        cJSON *result, cJSON *error)
{
    cJSON *msg = error != NULL ? gw_rpc_error_with(id, error)
                               : gw_rpc_result(id, result);
    int rc;

    if (error != NULL) {
        cJSON_Delete(result);
    }
    if (msg == NULL) {
        return GW_ENOMEM;
    }
    rc = publish_rpc(link, msg);
    cJSON_Delete(msg);
    return rc;
}

int gw_mcp_link_respond_error(struct gw_mcp_link *link, const cJSON *id,
                              int code, const char *message)
{
    cJSON *err = cJSON_CreateObject();

    if (err == NULL || cJSON_AddNumberToObject(err, "code", code) == NULL ||
        cJSON_AddStringToObject(err, "message", message) == NULL) {
        cJSON_Delete(err);
        return GW_ENOMEM;
    }
    return gw_mcp_link_respond(link, id, NULL, err);
}
