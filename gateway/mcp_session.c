/*
 * The MCP server's sessions (see mcp_server_int.h): the table with its
 * least-recently-used limit, GET streams and their keepalives, tool calls
 * waiting for a device, and the POSTs whose answers wait for those calls.
 */

#include "gateway/mcp_server_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "codec/hex.h"
#include "codec/jsonrpc.h"
#include "gateway/instance.h"
#include "common/log.h"

/* Proxies and clients drop a silent connection; a comment keeps it up. */
#define KEEPALIVE_MS 15000
#define SWEEP_MAX_MS 1000
#define SWEEP_MIN_MS 50

static const char LIST_CHANGED_EVENT[] =
    "event: message\n"
    "data: {\"jsonrpc\":\"2.0\","
    "\"method\":\"notifications/tools/list_changed\"}\n\n";
static const char KEEPALIVE_COMMENT[] = ": keepalive\n\n";

static uint64_t now_ms(const struct gw_mcp_server *srv)
{
    return uv_now(srv->inst->loop);
}

/* ---- answers ---- */

void gw_mcp_respond(struct gw_http_req *req, const struct gw_mcp_session *sess,
                    int status, const cJSON *msg)
{
    char header[sizeof("Mcp-Session-Id: ") + GW_MCP_SESSION_ID_LEN];
    const char *headers[2] = {NULL, NULL};
    char *body = NULL;

    if (sess != NULL) {
        snprintf(header, sizeof(header), "Mcp-Session-Id: %s", sess->id);
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
                   const char *subject, const struct gw_mcp_session *sess,
                   int status, int code, const char *message)
{
    cJSON *msg = gw_rpc_error(NULL, code, message);

    gw_log(GW_LOG_WARN, subject, "%s %s refused with %d: %s",
           gw_http_req_method(req), gw_http_req_path(req), status, message);
    srv->stats.rejected++;
    gw_mcp_respond(req, sess, status, msg);
    cJSON_Delete(msg);
}

/* ---- exchanges: a POST and the replies of its messages ---- */

struct gw_mcp_exchange *gw_mcp_exchange_new(struct gw_mcp_session *sess,
                                            struct gw_http_req *req, bool batch)
{
    struct gw_mcp_exchange *ex = calloc(1, sizeof(*ex));

    if (ex == NULL || (ex->replies = cJSON_CreateArray()) == NULL) {
        free(ex);
        return NULL;
    }
    ex->sess = sess;
    ex->req = req;
    ex->batch = batch;
    ex->dispatching = true;
    return ex;
}

static void exchange_send(struct gw_mcp_exchange *ex)
{
    int n = cJSON_GetArraySize(ex->replies);

    if (n == 0) {
        gw_mcp_respond(ex->req, ex->sess, 202, NULL);
    } else if (ex->batch) {
        gw_mcp_respond(ex->req, ex->sess, 200, ex->replies);
    } else {
        gw_mcp_respond(ex->req, ex->sess, 200,
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
    struct gw_mcp_session *sess = ex->sess;
    struct gw_mcp_call *call, *next;

    (void)req;
    for (call = sess->calls; call != NULL; call = next) {
        next = call->next;
        if (call->ex != ex) {
            continue;
        }
        gw_devices_abandon(&sess->srv->inst->devices, call->handle);
        call->ex = NULL;
        gw_mcp_call_finish(call, NULL);
    }
    GW_LOG(GW_LOG_DEBUG, sess->subject, "client went away before the answer");
    cJSON_Delete(ex->replies);
    free(ex);
}

void gw_mcp_exchange_dispatched(struct gw_mcp_exchange *ex)
{
    ex->dispatching = false;
    if (ex->waiting == 0) {
        exchange_send(ex);
        return;
    }
    gw_http_req_on_gone(ex->req, exchange_gone, ex);
}

/* ---- tool calls ---- */

struct gw_mcp_call *gw_mcp_call_add(struct gw_mcp_exchange *ex, const cJSON *id,
                                    const char *client_id)
{
    struct gw_mcp_session *sess = ex->sess;
    struct gw_mcp_call *call = calloc(1, sizeof(*call));

    if (call == NULL) {
        return NULL;
    }
    if ((call->id = cJSON_Duplicate(id, true)) == NULL) {
        free(call);
        return NULL;
    }
    snprintf(call->client_id, sizeof(call->client_id), "%s", client_id);
    call->sess = sess;
    call->ex = ex;
    call->next = sess->calls;
    if (sess->calls != NULL) {
        sess->calls->prev = call;
    }
    sess->calls = call;
    sess->n_calls++;
    ex->waiting++;
    return call;
}

void gw_mcp_call_finish(struct gw_mcp_call *call, cJSON *reply)
{
    struct gw_mcp_session *sess = call->sess;
    struct gw_mcp_exchange *ex = call->ex;

    if (call->prev != NULL) {
        call->prev->next = call->next;
    } else {
        sess->calls = call->next;
    }
    if (call->next != NULL) {
        call->next->prev = call->prev;
    }
    sess->n_calls--;
    gw_mcp_session_touch(sess);
    cJSON_Delete(call->id);
    free(call);
    if (ex == NULL) {
        cJSON_Delete(reply);
        return;
    }
    gw_mcp_exchange_put(ex, reply);
    if (--ex->waiting == 0 && !ex->dispatching) {
        exchange_send(ex);
    }
}

bool gw_mcp_call_cancel(struct gw_mcp_session *sess, const cJSON *request_id)
{
    struct gw_mcp_call *call;

    if (request_id == NULL) {
        return false;
    }
    for (call = sess->calls; call != NULL; call = call->next) {
        if (call->ex != NULL && cJSON_Compare(call->id, request_id, true)) {
            break;
        }
    }
    if (call == NULL) {
        return false;
    }
    GW_LOG(GW_LOG_INFO, sess->subject, "tools/call to %s cancelled by client",
           call->client_id);
    gw_devices_abandon(&sess->srv->inst->devices, call->handle);
    gw_mcp_call_finish(call,
                       gw_rpc_error(call->id, -32800, "request cancelled"));
    return true;
}

/* ---- streams ---- */

static void stream_unlink(struct gw_mcp_stream *st)
{
    struct gw_mcp_session *sess = st->sess;

    if (st->prev != NULL) {
        st->prev->next = st->next;
    } else {
        sess->streams = st->next;
    }
    if (st->next != NULL) {
        st->next->prev = st->prev;
    }
    sess->n_streams--;
    sess->srv->stats.streams_open--;
}

static void stream_gone(struct gw_http_req *req, void *arg)
{
    struct gw_mcp_stream *st = arg;
    struct gw_mcp_session *sess = st->sess;

    (void)req;
    stream_unlink(st);
    free(st);
    /* idle time counts from the end of the last stream */
    gw_mcp_session_touch(sess);
    GW_LOG(GW_LOG_DEBUG, sess->subject, "stream closed (%zu left)",
           sess->n_streams);
}

/* A write error ends the stream in the HTTP server, which then reports it
 * gone (possibly at once): st must not be used after a failed write. */
static void stream_write(struct gw_mcp_stream *st, const char *data, size_t len)
{
    st->last_write_ms = now_ms(st->sess->srv);
    (void)gw_http_stream_write(st->req, data, len);
}

void gw_mcp_stream_open(struct gw_mcp_session *sess, struct gw_http_req *req)
{
    char id_header[sizeof("Mcp-Session-Id: ") + GW_MCP_SESSION_ID_LEN];
    const char *headers[] = {"Cache-Control: no-cache", id_header, NULL};
    struct gw_mcp_stream *st = calloc(1, sizeof(*st));
    int rc;

    if (st == NULL) {
        cJSON *msg = gw_rpc_error(NULL, GW_RPC_INTERNAL_ERROR, "out of memory");
        gw_mcp_respond(req, sess, 500, msg);
        cJSON_Delete(msg);
        return;
    }
    snprintf(id_header, sizeof(id_header), "Mcp-Session-Id: %s", sess->id);
    if ((rc = gw_http_stream_begin(req, 200, "text/event-stream", headers)) !=
        0) {
        gw_log(GW_LOG_WARN, sess->subject, "cannot open stream: %s",
               gw_strerror(rc));
        free(st);
        return;
    }
    st->sess = sess;
    st->req = req;
    st->last_write_ms = now_ms(sess->srv);
    st->next = sess->streams;
    if (sess->streams != NULL) {
        sess->streams->prev = st;
    }
    sess->streams = st;
    sess->n_streams++;
    sess->srv->stats.streams_open++;
    gw_http_req_on_gone(req, stream_gone, st);
    gw_mcp_session_touch(sess);
    GW_LOG(GW_LOG_DEBUG, sess->subject, "stream opened (%zu open)",
           sess->n_streams);
}

/*
 * One notification per session, on its newest stream: the transport
 * forbids sending one message on several streams of a session.
 */
void gw_mcp_sessions_tools_changed(struct gw_mcp_server *srv,
                                   const char *client_id)
{
    struct gw_mcp_session *sess, *tmp;

    HASH_ITER(hh, srv->sessions, sess, tmp)
    {
        if (sess->streams == NULL ||
            (sess->client_id[0] != '\0' &&
             strcmp(sess->client_id, client_id) != 0)) {
            continue;
        }
        stream_write(sess->streams, LIST_CHANGED_EVENT,
                     sizeof(LIST_CHANGED_EVENT) - 1);
    }
}

/* ---- sessions ---- */

struct gw_mcp_session *gw_mcp_session_find(struct gw_mcp_server *srv,
                                           const char *id)
{
    struct gw_mcp_session *sess = NULL;
    size_t len = strlen(id);

    if (len != GW_MCP_SESSION_ID_LEN) {
        return NULL;
    }
    HASH_FIND(hh, srv->sessions, id, len, sess);
    return sess;
}

void gw_mcp_session_touch(struct gw_mcp_session *sess)
{
    sess->last_used_ms = now_ms(sess->srv);
}

void gw_mcp_session_end(struct gw_mcp_session *sess, const char *why)
{
    struct gw_mcp_server *srv = sess->srv;
    struct gw_mcp_stream *st;
    struct gw_mcp_call *call;

    gw_log(GW_LOG_INFO, sess->subject, "session ended: %s", why);
    while ((call = sess->calls) != NULL) {
        if (call->ex != NULL) {
            gw_devices_abandon(&srv->inst->devices, call->handle);
        }
        gw_mcp_call_finish(
            call, gw_rpc_error(call->id, GW_RPC_CANCELLED, "session ended"));
    }
    while ((st = sess->streams) != NULL) {
        stream_unlink(st);
        gw_http_stream_end(st->req);
        free(st);
    }
    HASH_DEL(srv->sessions, sess);
    srv->n_sessions--;
    free(sess);
}

/* Idle sessions go first; among equals the one unused the longest. */
static void evict_one(struct gw_mcp_server *srv, int limit)
{
    struct gw_mcp_session *sess, *tmp, *victim = NULL;
    bool victim_busy = true;

    HASH_ITER(hh, srv->sessions, sess, tmp)
    {
        bool busy = sess->n_streams != 0 || sess->n_calls != 0;
        if (victim == NULL || (victim_busy && !busy) ||
            (busy == victim_busy &&
             sess->last_used_ms < victim->last_used_ms)) {
            victim = sess;
            victim_busy = busy;
        }
    }
    if (victim == NULL) {
        return;
    }
    gw_log(GW_LOG_WARN, victim->subject,
           "mcp.max_sessions (%d) reached: expiring the least recently "
           "used session (idle %llu ms)",
           limit, (unsigned long long)(now_ms(srv) - victim->last_used_ms));
    srv->stats.sessions_expired++;
    gw_mcp_session_end(victim, "expired to make room");
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
    } while (gw_mcp_session_find(srv, out) != NULL);
    return 0;
}

int gw_mcp_session_create(struct gw_mcp_server *srv, const char *client_id,
                          const char *version, struct gw_mcp_session **out)
{
    const struct gw_config *cfg = gw_instance_config(srv->inst);
    struct gw_mcp_session *sess;
    int rc;

    while (cfg->mcp.max_sessions > 0 &&
           srv->n_sessions >= (size_t)cfg->mcp.max_sessions &&
           srv->sessions != NULL) {
        evict_one(srv, cfg->mcp.max_sessions);
    }
    if ((sess = calloc(1, sizeof(*sess))) == NULL) {
        return GW_ENOMEM;
    }
    if ((rc = new_session_id(srv, sess->id)) != 0) {
        free(sess);
        return rc;
    }
    sess->srv = srv;
    snprintf(sess->subject, sizeof(sess->subject), "mcp sid=%.8s", sess->id);
    snprintf(sess->client_id, sizeof(sess->client_id), "%s", client_id);
    snprintf(sess->version, sizeof(sess->version), "%s", version);
    sess->last_used_ms = now_ms(srv);
    HASH_ADD(hh, srv->sessions, id, GW_MCP_SESSION_ID_LEN, sess);
    if (sess->hh.tbl == NULL) { /* the table could not grow */
        free(sess);
        return GW_ENOMEM;
    }
    srv->n_sessions++;
    srv->stats.sessions_opened++;
    *out = sess;
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

static void sweep_streams(struct gw_mcp_session *sess, uint64_t now)
{
    struct gw_mcp_stream *st, *next;

    for (st = sess->streams; st != NULL; st = next) {
        next = st->next;
        if (now - st->last_write_ms >= KEEPALIVE_MS) {
            stream_write(st, KEEPALIVE_COMMENT, sizeof(KEEPALIVE_COMMENT) - 1);
        }
    }
}

static void on_sweep(uv_timer_t *timer)
{
    struct gw_mcp_server *srv = timer->data;
    const struct gw_config *cfg = gw_instance_config(srv->inst);
    uint64_t now = now_ms(srv);
    uint64_t idle = cfg->mcp.session_idle_timeout_ms > 0
                        ? (uint64_t)cfg->mcp.session_idle_timeout_ms
                        : UINT64_MAX;
    struct gw_mcp_session *sess, *tmp;

    HASH_ITER(hh, srv->sessions, sess, tmp)
    {
        if (sess->n_streams == 0 && sess->n_calls == 0 &&
            now - sess->last_used_ms >= idle) {
            srv->stats.sessions_expired++;
            gw_mcp_session_end(sess, "idle");
            continue;
        }
        sweep_streams(sess, now);
    }
    (void)uv_timer_start(&srv->timer, on_sweep, sweep_interval(cfg), 0);
}

static void on_timer_closed(uv_handle_t *handle)
{
    free(handle->data);
}

/* On failure srv is freed (at once, or from the close callback). */
int gw_mcp_sessions_start(struct gw_mcp_server *srv)
{
    const struct gw_config *cfg = gw_instance_config(srv->inst);
    int rc;

    if ((rc = uv_timer_init(srv->inst->loop, &srv->timer)) != 0) {
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

void gw_mcp_sessions_stop(struct gw_mcp_server *srv)
{
    struct gw_mcp_session *sess, *tmp;

    HASH_ITER(hh, srv->sessions, sess, tmp)
    {
        gw_mcp_session_end(sess, "server stopping");
    }
    (void)uv_timer_stop(&srv->timer);
    uv_close((uv_handle_t *)&srv->timer, on_timer_closed);
}
