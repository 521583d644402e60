/*
 * The MCP server's sessions (see mcp_server_int.h): the table with its
 * limit, GET streams and their keepalives, requests waiting for a device,
 * and the POSTs whose answers wait for those requests (as JSON, or as an
 * event stream when progress is to come first).
 */

#include "gateway/mcp/mcp_server_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "codec/hex.h"
#include "codec/jsonrpc.h"
#include "codec/mcp_items.h"
#include "common/log.h"
#include "gateway/device/device_table.h"

/* Proxies and clients drop a silent connection; a comment keeps it up. */
#define KEEPALIVE_MS 15000
#define SWEEP_MAX_MS 1000
#define SWEEP_MIN_MS 50

static const char KEEPALIVE_COMMENT[] = ": keepalive\n\n";

static uint64_t now_ms(const struct gw_mcp_server *srv)
{
    return uv_now(srv->env.loop);
}

/* ---- answers ---- */

void gw_mcp_respond(struct gw_http_req *req, const struct gw_mcp_client *cl,
                    int status, const cJSON *msg)
{
    char header[sizeof("Mcp-Session-Id: ") + GW_MCP_SESSION_ID_LEN];
    const char *headers[2] = {NULL, NULL};
    char *body = NULL;

    if (cl != NULL) {
        snprintf(header, sizeof(header), "Mcp-Session-Id: %s", cl->id);
        headers[0] = header;
    }
    if (msg == NULL) {
        (void)gw_http_respond(req, status, NULL, headers, "", 0);
        return;
    }
    body = cJSON_PrintUnformatted(msg);
    if (body == NULL) {
        static const char oom[] = "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":"
                                  "{\"code\":-32603,\"message\":"
                                  "\"out of memory\"}}";
        (void)gw_http_respond(req, 500, "application/json", headers, oom,
                              sizeof(oom) - 1);
        return;
    }
    (void)gw_http_respond(req, status, "application/json", headers, body,
                          strlen(body));
    cJSON_free(body);
}

void gw_mcp_reject(struct gw_mcp_server *srv, struct gw_http_req *req,
                   const char *subject, const struct gw_mcp_client *cl,
                   int status, int code, const char *message)
{
    cJSON *msg = gw_rpc_error(NULL, code, message);

    gw_log(GW_LOG_WARN, subject, "%s %s refused with %d: %s",
           gw_http_req_method(req), gw_http_req_path(req), status, message);
    srv->stats.rejected++;
    gw_mcp_respond(req, cl, status, msg);
    cJSON_Delete(msg);
}

/* ---- exchanges: a POST and the replies of its messages ---- */

struct gw_mcp_exchange *gw_mcp_exchange_create(struct gw_mcp_client *cl,
                                               struct gw_http_req *req,
                                               bool batch)
{
    struct gw_mcp_exchange *ex = calloc(1, sizeof(*ex));

    if (ex == NULL || (ex->replies = cJSON_CreateArray()) == NULL) {
        free(ex);
        return NULL;
    }
    ex->cl = cl;
    ex->req = req;
    ex->batch = batch;
    ex->dispatching = true;
    return ex;
}

/* One server-sent event of msg (free() it); NULL on OOM. */
static char *event_of(const cJSON *msg, size_t *len)
{
    char *json = cJSON_PrintUnformatted(msg);
    size_t n;
    char *ev;

    if (json == NULL) {
        return NULL;
    }
    n = strlen(json) + sizeof("event: message\ndata: \n\n");
    if ((ev = malloc(n)) != NULL) {
        *len = (size_t)snprintf(ev, n, "event: message\ndata: %s\n\n", json);
    }
    cJSON_free(json);
    return ev;
}

/* A write error ends the stream in the HTTP server, which reports it gone
 * later, from the loop: req stays valid until then. */
static void event_write(struct gw_http_req *req, const cJSON *msg)
{
    size_t len = 0;
    char *ev = event_of(msg, &len);

    if (ev != NULL) {
        (void)gw_http_stream_write(req, ev, len);
    }
    free(ev);
}

static void exchange_send(struct gw_mcp_exchange *ex)
{
    int n = cJSON_GetArraySize(ex->replies);

    if (ex->streaming) {
        if (n > 0) {
            event_write(ex->req, ex->batch
                                     ? ex->replies
                                     : cJSON_GetArrayItem(ex->replies, 0));
        }
        gw_http_stream_end(ex->req);
    } else if (n == 0) {
        gw_mcp_respond(ex->req, ex->cl, 202, NULL);
    } else if (ex->batch) {
        gw_mcp_respond(ex->req, ex->cl, 200, ex->replies);
    } else {
        gw_mcp_respond(ex->req, ex->cl, 200,
                       cJSON_GetArrayItem(ex->replies, 0));
    }
    cJSON_Delete(ex->replies);
    free(ex);
}

void gw_mcp_exchange_put(struct gw_mcp_exchange *ex, cJSON *reply)
{
    if (reply == NULL) {
        reply = gw_rpc_error(NULL, GW_RPC_INTERNAL_ERROR, "out of memory");
    }
    if (reply != NULL && !cJSON_AddItemToArray(ex->replies, reply)) {
        cJSON_Delete(reply);
    }
}

/* The client went away: its calls are abandoned, the device's answers
 * will be dropped. */
static void exchange_gone(struct gw_http_req *req, void *arg)
{
    struct gw_mcp_exchange *ex = arg;
    struct gw_mcp_client *cl = ex->cl;
    struct gw_mcp_call *call, *next;

    (void)req;
    for (call = cl->calls; call != NULL; call = next) {
        next = call->next;
        if (call->ex != ex) {
            continue;
        }
        gw_mcp_abandon(gw_device_table_links(cl->srv->env.devices),
                       call->handle);
        call->ex = NULL;
        gw_mcp_call_finish(call, NULL);
    }
    GW_LOG(GW_LOG_DEBUG, cl->subject, "client went away before the answer");
    cJSON_Delete(ex->replies);
    free(ex);
}

/* A request of ex carries a progress token and the client takes event
 * streams: the answer becomes one, progress first, then the replies. */
static void exchange_stream(struct gw_mcp_exchange *ex)
{
    char id_header[sizeof("Mcp-Session-Id: ") + GW_MCP_SESSION_ID_LEN];
    const char *headers[] = {"Cache-Control: no-cache", id_header, NULL};
    int rc;

    snprintf(id_header, sizeof(id_header), "Mcp-Session-Id: %s", ex->cl->id);
    rc = gw_http_stream_begin(ex->req, 200, "text/event-stream", headers);
    if (rc != 0) {
        /* The request is being dropped, without a gone report (nothing
         * is owed to it any more): its requests go now, as if it left. */
        gw_log(GW_LOG_WARN, ex->cl->subject, "cannot stream the answer: %s",
               gw_strerror(rc));
        exchange_gone(ex->req, ex);
        return;
    }
    ex->streaming = true;
}

void gw_mcp_exchange_dispatched(struct gw_mcp_exchange *ex)
{
    ex->dispatching = false;
    if (ex->waiting == 0) {
        exchange_send(ex);
        return;
    }
    gw_http_req_on_gone(ex->req, exchange_gone, ex);
    if (ex->progress && ex->sse_ok) {
        exchange_stream(ex);
    }
}

/* ---- requests to devices ---- */

struct gw_mcp_call *gw_mcp_call_add(struct gw_mcp_exchange *ex, const cJSON *id,
                                    const char *client_id)
{
    struct gw_mcp_client *cl = ex->cl;
    struct gw_mcp_call *call = calloc(1, sizeof(*call));

    if (call == NULL) {
        return NULL;
    }
    if ((call->id = cJSON_Duplicate(id, true)) == NULL) {
        free(call);
        return NULL;
    }
    snprintf(call->client_id, sizeof(call->client_id), "%s", client_id);
    call->cl = cl;
    call->ex = ex;
    call->next = cl->calls;
    if (cl->calls != NULL) {
        cl->calls->prev = call;
    }
    cl->calls = call;
    cl->n_calls++;
    ex->waiting++;
    return call;
}

/* Ends a call; answered: reply (moved) joins its exchange's replies. */
static void call_end(struct gw_mcp_call *call, cJSON *reply, bool answered)
{
    struct gw_mcp_client *cl = call->cl;
    struct gw_mcp_exchange *ex = call->ex;

    if (call->prev != NULL) {
        call->prev->next = call->next;
    } else {
        cl->calls = call->next;
    }
    if (call->next != NULL) {
        call->next->prev = call->prev;
    }
    cl->n_calls--;
    gw_mcp_client_touch(cl);
    cJSON_Delete(call->id);
    free(call);
    if (ex == NULL) {
        cJSON_Delete(reply);
        return;
    }
    if (answered) {
        gw_mcp_exchange_put(ex, reply);
    }
    if (--ex->waiting == 0 && !ex->dispatching) {
        exchange_send(ex);
    }
}

void gw_mcp_call_finish(struct gw_mcp_call *call, cJSON *reply)
{
    call_end(call, reply, true);
}

bool gw_mcp_call_cancel(struct gw_mcp_client *cl, const cJSON *request_id)
{
    struct gw_mcp_call *call;

    if (request_id == NULL) {
        return false;
    }
    for (call = cl->calls; call != NULL; call = call->next) {
        if (call->ex != NULL && cJSON_Compare(call->id, request_id, true)) {
            break;
        }
    }
    if (call == NULL) {
        return false;
    }
    GW_LOG(GW_LOG_INFO, cl->subject, "%s to %s cancelled by client",
           call->method, call->client_id);
    gw_mcp_abandon(gw_device_table_links(cl->srv->env.devices), call->handle);
    /* MCP: a cancelled request gets no response. Its POST still ends:
     * 202 when nothing else of it has an answer, or its stream ends. */
    call_end(call, NULL, false);
    return true;
}

void gw_mcp_call_reply(void *arg, const struct gw_mcp_reply *reply)
{
    struct gw_mcp_call *call = arg;
    cJSON *body, *msg = NULL;

    if (call->shape != NULL) {
        gw_mcp_call_finish(call, call->shape(call, reply));
        return;
    }
    if (reply->outcome == GW_MCP_OK) {
        if ((body = cJSON_Duplicate(reply->result, true)) != NULL) {
            msg = gw_rpc_result(call->id, body);
        }
    } else {
        if (reply->outcome != GW_MCP_ERROR) {
            gw_log(GW_LOG_INFO, call->cl->subject, "%s to %s: %s", call->method,
                   call->client_id, gw_mcp_outcome_name(reply->outcome));
        }
        if ((body = cJSON_Duplicate(reply->error, true)) != NULL) {
            msg = gw_rpc_error_with(call->id, body);
        }
    }
    gw_mcp_call_finish(call, msg);
}

/* Progress of a call (params with the client's own token): on the
 * answer's event stream when it is one, else on the session's GET
 * stream. */
static void call_progress(void *arg, const cJSON *params)
{
    struct gw_mcp_call *call = arg;
    struct gw_mcp_client *cl = call->cl;
    cJSON *copy = cJSON_Duplicate(params, true);
    cJSON *msg = copy != NULL
                     ? gw_rpc_notification("notifications/progress", copy)
                     : NULL;

    if (msg == NULL) {
        return;
    }
    cl->srv->stats.progress++;
    if (call->ex != NULL && call->ex->streaming) {
        event_write(call->ex->req, msg);
    } else if (!gw_mcp_client_notify(cl, msg)) {
        GW_LOG(GW_LOG_DEBUG, cl->subject,
               "progress of %s dropped: no stream to carry it", call->method);
    }
    cJSON_Delete(msg);
}

cJSON *gw_mcp_forward(struct gw_mcp_exchange *ex, const struct gw_rpc *rpc,
                      struct gw_device *dev, const char *method, cJSON *params,
                      uint32_t timeout_ms, gw_mcp_shape_cb shape, bool *started)
{
    struct gw_mcp_client *cl = ex->cl;
    struct gw_mcp_opts opts = {.timeout_ms = timeout_ms};
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
    struct gw_mcp_call *call;

    if (params == NULL ||
        (call = gw_mcp_call_add(ex, rpc->id, dev->client_id)) == NULL) {
        cJSON_Delete(params);
        return gw_rpc_error(rpc->id, GW_RPC_INTERNAL_ERROR, "out of memory");
    }
    call->method = method;
    call->shape = shape;
    if (cl->client_id[0] == '\0') {
        snprintf(call->label, sizeof(call->label), "%.*s", GW_MCP_LABEL_LEN,
                 dev->label);
    }
    if (gw_mcp_progress_token_valid(
            cJSON_GetObjectItemCaseSensitive(meta, "progressToken"))) {
        call->progress = true;
        ex->progress = true;
        opts.on_progress = call_progress;
    }
    if (strcmp(method, "tools/call") != 0) { /* that one says which tool */
        GW_LOG(GW_LOG_DEBUG, cl->subject, "%s to %s", method, dev->client_id);
    }
    gw_mcp_request_with(gw_device_table_links(cl->srv->env.devices), &dev->link,
                        method, params, &opts, GW_MCP_FROM_CLIENT,
                        gw_mcp_call_reply, call, &call->handle);
    *started = true;
    return NULL;
}

cJSON *gw_mcp_refuse_rpc(struct gw_mcp_client *cl, const struct gw_rpc *rpc,
                         int code, const char *message)
{
    gw_log(GW_LOG_WARN, cl->subject, "%s refused (%d): %s", rpc->method, code,
           message);
    cl->srv->stats.refused++;
    return gw_rpc_error(rpc->id, code, message);
}

/* ---- streams ---- */

static void stream_unlink(struct gw_mcp_stream *st)
{
    struct gw_mcp_client *cl = st->cl;

    if (st->prev != NULL) {
        st->prev->next = st->next;
    } else {
        cl->streams = st->next;
    }
    if (st->next != NULL) {
        st->next->prev = st->prev;
    }
    cl->n_streams--;
    cl->srv->stats.streams_open--;
}

static void stream_gone(struct gw_http_req *req, void *arg)
{
    struct gw_mcp_stream *st = arg;
    struct gw_mcp_client *cl = st->cl;

    (void)req;
    stream_unlink(st);
    free(st);
    /* idle time counts from the end of the last stream */
    gw_mcp_client_touch(cl);
    GW_LOG(GW_LOG_DEBUG, cl->subject, "stream closed (%zu left)",
           cl->n_streams);
}

/* A write error ends the stream in the HTTP server, which then reports it
 * gone (possibly at once): st must not be used after a failed write. */
static void stream_write(struct gw_mcp_stream *st, const char *data, size_t len)
{
    st->last_write_ms = now_ms(st->cl->srv);
    (void)gw_http_stream_write(st->req, data, len);
}

void gw_mcp_stream_open(struct gw_mcp_client *cl, struct gw_http_req *req)
{
    char id_header[sizeof("Mcp-Session-Id: ") + GW_MCP_SESSION_ID_LEN];
    const char *headers[] = {"Cache-Control: no-cache", id_header, NULL};
    struct gw_mcp_stream *st = calloc(1, sizeof(*st));
    int rc;

    if (st == NULL) {
        cJSON *msg = gw_rpc_error(NULL, GW_RPC_INTERNAL_ERROR, "out of memory");
        gw_mcp_respond(req, cl, 500, msg);
        cJSON_Delete(msg);
        return;
    }
    snprintf(id_header, sizeof(id_header), "Mcp-Session-Id: %s", cl->id);
    if ((rc = gw_http_stream_begin(req, 200, "text/event-stream", headers)) !=
        0) {
        gw_log(GW_LOG_WARN, cl->subject, "cannot open stream: %s",
               gw_strerror(rc));
        free(st);
        return;
    }
    st->cl = cl;
    st->req = req;
    st->last_write_ms = now_ms(cl->srv);
    st->next = cl->streams;
    if (cl->streams != NULL) {
        cl->streams->prev = st;
    }
    cl->streams = st;
    cl->n_streams++;
    cl->srv->stats.streams_open++;
    gw_http_req_on_gone(req, stream_gone, st);
    gw_mcp_client_touch(cl);
    GW_LOG(GW_LOG_DEBUG, cl->subject, "stream opened (%zu open)",
           cl->n_streams);
}

bool gw_mcp_client_notify(struct gw_mcp_client *cl, const cJSON *msg)
{
    struct gw_mcp_stream *st = cl->streams;
    size_t len = 0;
    char *ev;

    /* One stream only: the transport forbids sending one message on
     * several streams of a session. The newest is the one in use. */
    if (st == NULL || (ev = event_of(msg, &len)) == NULL) {
        return false;
    }
    stream_write(st, ev, len);
    free(ev);
    return true;
}

void gw_mcp_clients_lists_changed(struct gw_mcp_server *srv,
                                  const char *client_id, unsigned caps)
{
    static const struct {
        unsigned cap;
        const char *method;
    } lists[] = {
        {GW_MCP_CAP_TOOLS, "notifications/tools/list_changed"},
        {GW_MCP_CAP_RESOURCES, "notifications/resources/list_changed"},
        {GW_MCP_CAP_PROMPTS, "notifications/prompts/list_changed"},
    };
    struct gw_mcp_client *cl, *tmp;

    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        cJSON *msg;
        if (!(caps & lists[i].cap) ||
            (msg = gw_rpc_notification(lists[i].method, NULL)) == NULL) {
            continue;
        }
        HASH_ITER(hh, srv->clients, cl, tmp)
        {
            if (cl->streams == NULL || !(cl->caps & lists[i].cap) ||
                (cl->client_id[0] != '\0' &&
                 strcmp(cl->client_id, client_id) != 0)) {
                continue;
            }
            (void)gw_mcp_client_notify(cl, msg);
        }
        cJSON_Delete(msg);
    }
}

/* ---- sessions ---- */

struct gw_mcp_client *gw_mcp_client_find(struct gw_mcp_server *srv,
                                         const char *id)
{
    struct gw_mcp_client *cl = NULL;
    size_t len = strlen(id);

    if (len != GW_MCP_SESSION_ID_LEN) {
        return NULL;
    }
    HASH_FIND(hh, srv->clients, id, len, cl);
    return cl;
}

void gw_mcp_client_touch(struct gw_mcp_client *cl)
{
    cl->last_used_ms = now_ms(cl->srv);
}

void gw_mcp_client_end(struct gw_mcp_client *cl, const char *why)
{
    struct gw_mcp_server *srv = cl->srv;
    struct gw_mcp_stream *st;
    struct gw_mcp_call *call;

    gw_log(GW_LOG_INFO, cl->subject, "session ended: %s", why);
    gw_mcp_asks_client_gone(cl);
    gw_mcp_peer_leave(srv->env.devices, &cl->peer);
    while ((call = cl->calls) != NULL) {
        if (call->ex != NULL) {
            gw_mcp_abandon(gw_device_table_links(srv->env.devices),
                           call->handle);
        }
        gw_mcp_call_finish(
            call, gw_rpc_error(call->id, GW_RPC_CANCELLED, "session ended"));
    }
    while ((st = cl->streams) != NULL) {
        stream_unlink(st);
        gw_http_stream_end(st->req);
        free(st);
    }
    HASH_DEL(srv->clients, cl);
    srv->n_clients--;
    free(cl);
}

static int new_session_id(struct gw_mcp_server *srv,
                          char out[GW_MCP_SESSION_ID_LEN + 1])
{
    uint8_t raw[GW_MCP_SESSION_ID_LEN / 2];

    do {
        if (RAND_bytes(raw, sizeof(raw)) != 1) {
            return GW_ECRYPTO;
        }
        if (gw_hex_encode(raw, sizeof(raw), out, GW_MCP_SESSION_ID_LEN + 1) !=
            0) {
            return GW_ENOSPC;
        }
    } while (gw_mcp_client_find(srv, out) != NULL);
    return 0;
}

int gw_mcp_client_create(struct gw_mcp_server *srv, const char *client_id,
                         const char *version, struct gw_mcp_client **out)
{
    const struct gw_config *cfg = gw_config_live_get(srv->env.config);
    struct gw_mcp_client *cl;
    int rc;

    /* A full table refuses the newcomer: evicting would let anyone who
     * may initialize end the sessions of everyone else. */
    if (cfg->mcp.max_sessions > 0 &&
        srv->n_clients >= (size_t)cfg->mcp.max_sessions) {
        srv->stats.sessions_refused++;
        return GW_ELIMIT;
    }
    if ((cl = calloc(1, sizeof(*cl))) == NULL) {
        return GW_ENOMEM;
    }
    if ((rc = new_session_id(srv, cl->id)) != 0) {
        free(cl);
        return rc;
    }
    cl->srv = srv;
    cl->seq = ++srv->next_seq;
    snprintf(cl->subject, sizeof(cl->subject), "mcp sid=%.8s", cl->id);
    gw_mcp_peer_init(&cl->peer, &gw_mcp_server_peer_ops, cl->subject,
                     client_id[0] == '\0');
    snprintf(cl->client_id, sizeof(cl->client_id), "%s", client_id);
    snprintf(cl->version, sizeof(cl->version), "%s", version);
    cl->last_used_ms = now_ms(srv);
    HASH_ADD(hh, srv->clients, id, GW_MCP_SESSION_ID_LEN, cl);
    if (!GW_HASH_ADDED(cl, hh)) { /* the table could not grow */
        free(cl);
        return GW_ENOMEM;
    }
    srv->n_clients++;
    srv->stats.sessions_opened++;
    *out = cl;
    return 0;
}

/* ---- the sweep: idle expiry and keepalives ---- */

static uint64_t sweep_interval(const struct gw_config *cfg)
{
    uint64_t ms = cfg->mcp.session_idle_timeout_ms > 0
                      ? (uint64_t)cfg->mcp.session_idle_timeout_ms / 4
                      : SWEEP_MAX_MS;

    return ms < SWEEP_MIN_MS ? SWEEP_MIN_MS
                             : (ms > SWEEP_MAX_MS ? SWEEP_MAX_MS : ms);
}

static void sweep_streams(struct gw_mcp_client *cl, uint64_t now)
{
    struct gw_mcp_stream *st, *next;

    for (st = cl->streams; st != NULL; st = next) {
        next = st->next;
        if (now - st->last_write_ms >= KEEPALIVE_MS) {
            stream_write(st, KEEPALIVE_COMMENT, sizeof(KEEPALIVE_COMMENT) - 1);
        }
    }
}

static void on_sweep(uv_timer_t *timer)
{
    struct gw_mcp_server *srv = timer->data;
    const struct gw_config *cfg = gw_config_live_get(srv->env.config);
    uint64_t now = now_ms(srv);
    uint64_t idle = cfg->mcp.session_idle_timeout_ms > 0
                        ? (uint64_t)cfg->mcp.session_idle_timeout_ms
                        : UINT64_MAX;
    struct gw_mcp_client *cl, *tmp;

    HASH_ITER(hh, srv->clients, cl, tmp)
    {
        if (cl->n_streams == 0 && cl->n_calls == 0 &&
            now - cl->last_used_ms >= idle) {
            srv->stats.sessions_expired++;
            gw_mcp_client_end(cl, "idle");
            continue;
        }
        sweep_streams(cl, now);
    }
    (void)uv_timer_start(&srv->timer, on_sweep, sweep_interval(cfg), 0);
}

static void on_timer_closed(uv_handle_t *handle)
{
    struct gw_mcp_server *srv = handle->data;

    if (srv->close_cb != NULL) {
        srv->close_cb(srv, srv->close_arg);
    }
    free(srv);
}

/* On failure srv is freed (at once, or from the close callback). */
int gw_mcp_clients_start(struct gw_mcp_server *srv)
{
    const struct gw_config *cfg = gw_config_live_get(srv->env.config);
    int rc;

    if ((rc = uv_timer_init(srv->env.loop, &srv->timer)) != 0) {
        free(srv);
        return rc;
    }
    srv->timer.data = srv;
    if ((rc = uv_timer_start(&srv->timer, on_sweep, sweep_interval(cfg), 0)) !=
        0) {
        uv_close((uv_handle_t *)&srv->timer, on_timer_closed);
        return rc;
    }
    return 0;
}

void gw_mcp_clients_stop(struct gw_mcp_server *srv)
{
    struct gw_mcp_client *cl, *tmp;

    HASH_ITER(hh, srv->clients, cl, tmp)
    {
        gw_mcp_client_end(cl, "server stopping");
    }
    (void)uv_timer_stop(&srv->timer);
    uv_close((uv_handle_t *)&srv->timer, on_timer_closed);
}
