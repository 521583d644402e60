/*
 * The outbound's sessions, one per (device, server), and their calls: a
 * session opens with initialize on first use (its Mcp-Session-Id and
 * protocol version then go with every request), opens again when the
 * server answers 404 to its id, and ends with a DELETE once idle. Calls
 * wait in `waiting` until the session is ready, then each is one
 * transfer whose answer goes to the device under its own id. Calls and
 * sessions free their memory in their timer's close callback, and the
 * outbound is freed after the last of them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/jsonrpc.h"
#include "common/log.h"
#include "common/ratelimit.h"
#include "gateway/core/version.h"
#include "gateway/mcp/mcp_outbound_int.h"

#define PROTOCOL_VERSION "2025-11-25"

/* ---- handles: calls' and sessions' timers ---- */

void gw__mcp_outbound_maybe_done(struct gw_mcp_outbound *ob)
{
    struct stats_rec *r, *tmp;

    if (ob->http_open || ob->handles > 0) {
        return;
    }
    if (ob->close_cb != NULL) {
        ob->close_cb(ob, ob->close_arg); /* the stats are still there */
    }
    HASH_ITER(hh, ob->stats, r, tmp)
    {
        HASH_DEL(ob->stats, r);
        free(r);
    }
    gw_ratelimit_free(&ob->log_limit);
    free(ob);
}

static void on_call_closed(uv_handle_t *h)
{
    struct ob_call *c = h->data;
    struct gw_mcp_outbound *ob = c->ob;

    cJSON_Delete(c->dev_id);
    cJSON_Delete(c->msg);
    free(c);
    ob->handles--;
    if (ob->closing) {
        gw__mcp_outbound_maybe_done(ob);
    }
}

/* ---- calls ---- */

void gw__mcp_outbound_call_end(struct ob_call *c,
                               enum gw_outbound_outcome outcome)
{
    struct ob_session *s = c->s;

    if (s == NULL) {
        return;
    }
    gw__mcp_outbound_stats(c->ob, s->server)->requests[outcome]++;
    gw_list_unlink(&c->node);
    s->n_calls--;
    c->s = NULL;
    if (c->x != NULL) {
        struct ob_xfer *x = c->x;
        c->x = NULL;
        gw__mcp_outbound_xfer_abandon(x);
    }
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, on_call_closed);
    if (s->n_calls == 0 && !s->ended) {
        gw__mcp_outbound_session_idle_start(s);
    }
}

void gw__mcp_outbound_call_fail(struct ob_call *c,
                                enum gw_outbound_outcome outcome, int code,
                                const char *message)
{
    struct ob_session *s = c->s;

    if (s == NULL) {
        return;
    }
    gw__mcp_outbound_reply_error(c->ob, s->client_id, s->server, c->dev_id,
                                 code, message);
    gw__mcp_outbound_call_end(c, outcome);
}

static void call_fail_server(struct ob_call *c, enum gw_outbound_failure why,
                             const char *reason)
{
    struct ob_session *s = c->s;
    char text[256];

    if (s == NULL) {
        return;
    }
    gw__mcp_outbound_stats(c->ob, s->server)->failures[why]++;
    snprintf(text, sizeof(text), "MCP server %s failed: %s", s->server, reason);
    gw__mcp_outbound_log(c->ob, GW_LOG_WARN, s->client_id, "%s %s: %s",
                         c->method, s->server, text);
    gw__mcp_outbound_call_fail(c, GW_OUTBOUND_FAILED, GW_RPC_SERVER_FAILED,
                               text);
}

/* The server has max_connections transfers open: -32003, as over the
 * device's own outbound_max_pending. */
static void call_refuse_busy(struct ob_call *c,
                             const struct gw_mcp_server_config *ms)
{
    struct ob_session *s = c->s;
    char text[160];

    if (s == NULL) {
        return;
    }
    snprintf(text, sizeof(text),
             "too many connections to MCP server %s open (limit %d)", ms->name,
             ms->max_connections);
    gw__mcp_outbound_log(c->ob, GW_LOG_WARN, s->client_id, "%s refused: %s",
                         c->method, text);
    gw__mcp_outbound_call_fail(c, GW_OUTBOUND_BUSY, GW_RPC_DEVICE_BUSY, text);
}

/* ---- sessions ---- */

static void on_session_closed(uv_handle_t *h)
{
    struct ob_session *s = h->data;
    struct gw_mcp_outbound *ob = s->ob;

    free(s->sid);
    cJSON_Delete(s->init_result);
    free(s);
    ob->handles--;
    if (ob->closing) {
        gw__mcp_outbound_maybe_done(ob);
    }
}

void gw__mcp_outbound_send_cancelled(struct ob_session *s, uint32_t gw_id,
                                     const char *reason)
{
    const struct gw_mcp_server_config *ms =
        gw__mcp_outbound_server(s->ob, s->server, s->client_id);
    cJSON *params = cJSON_CreateObject(), *n;

    if (ms == NULL || params == NULL ||
        cJSON_AddNumberToObject(params, "requestId", gw_id) == NULL ||
        cJSON_AddStringToObject(params, "reason", reason) == NULL) {
        cJSON_Delete(params);
        return;
    }
    n = gw_rpc_notification("notifications/cancelled", params);
    if (n != NULL) {
        (void)gw__mcp_outbound_xfer_start(s->ob, ms, s, X_NOTIFY, n, 0, NULL,
                                          NULL);
        cJSON_Delete(n);
    }
}

void gw__mcp_outbound_session_end(struct ob_session *s,
                                  enum gw_outbound_outcome outcome, int code,
                                  const char *message, bool delete)
{
    struct gw_mcp_outbound *ob = s->ob;
    struct gw_list *lists[] = {&s->waiting, &s->sent};

    if (s->ended) {
        return;
    }
    s->ended = true;
    for (size_t i = 0; i < 2; i++) {
        while (!gw_list_empty(lists[i])) {
            struct ob_call *c =
                GW_LIST_ENTRY(gw_list_first(lists[i]), struct ob_call, node);
            if (code != 0) {
                gw__mcp_outbound_call_fail(c, outcome, code, message);
            } else {
                gw__mcp_outbound_call_end(c, outcome);
            }
        }
    }
    if (s->init != NULL) {
        struct ob_xfer *x = s->init;
        s->init = NULL;
        gw__mcp_outbound_xfer_abandon(x);
    }
    if (delete &&s->sid != NULL && !ob->closing) {
        const struct gw_mcp_server_config *ms =
            gw__mcp_outbound_server(ob, s->server, s->client_id);
        if (ms != NULL) {
            (void)gw__mcp_outbound_xfer_start(ob, ms, s, X_DELETE, NULL, 0,
                                              NULL, NULL);
        }
    }
    gw__mcp_outbound_stats(ob, s->server)->sessions_ended++;
    HASH_DELETE(hh, ob->sessions, s);
    ob->n_sessions--;
    uv_timer_stop(&s->idle);
    uv_close((uv_handle_t *)&s->idle, on_session_closed);
}

static void on_idle(uv_timer_t *t)
{
    struct ob_session *s = t->data;

    gw__mcp_outbound_log(s->ob, GW_LOG_DEBUG, s->client_id,
                         "%s: session idle, ended", s->server);
    gw__mcp_outbound_session_end(s, GW_OUTBOUND_CANCELLED, 0, NULL, true);
}

void gw__mcp_outbound_session_idle_start(struct ob_session *s)
{
    uv_timer_start(
        &s->idle, on_idle,
        (uint64_t)gw__mcp_outbound_config(s->ob)->mcp.outbound_session_idle_ms,
        0);
}

struct ob_session *gw__mcp_outbound_session_find(struct gw_mcp_outbound *ob,
                                                 const char *client_id,
                                                 const char *server)
{
    char key[KEY_MAX];
    struct ob_session *s;

    snprintf(key, sizeof(key), "%s\n%s", client_id, server);
    HASH_FIND_STR(ob->sessions, key, s);
    return s;
}

struct ob_session *gw__mcp_outbound_session_get(struct gw_mcp_outbound *ob,
                                                const char *client_id,
                                                const char *server)
{
    struct ob_session *s = gw__mcp_outbound_session_find(ob, client_id, server);

    if (s != NULL) {
        return s;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    snprintf(s->key, sizeof(s->key), "%s\n%s", client_id, server);
    snprintf(s->client_id, sizeof(s->client_id), "%s", client_id);
    snprintf(s->server, sizeof(s->server), "%s", server);
    s->ob = ob;
    s->next_id = 1;
    gw_list_init(&s->waiting);
    gw_list_init(&s->sent);
    HASH_ADD_STR(ob->sessions, key, s);
    if (!GW_HASH_ADDED(s, hh)) {
        free(s);
        return NULL;
    }
    uv_timer_init(ob->loop, &s->idle);
    s->idle.data = s;
    ob->handles++;
    ob->n_sessions++;
    return s;
}

static uint32_t next_id(struct ob_session *s)
{
    uint32_t id = s->next_id;

    s->next_id = s->next_id >= GW_RPC_ID_MAX ? 1 : s->next_id + 1;
    return id;
}

/* What the session hears of its transfers (mcp_outbound_http.c). */
static void on_answer(struct ob_xfer *x, const cJSON *msg,
                      const struct gw_rpc *rpc);
static void on_server_message(struct ob_xfer *x, const cJSON *msg);
static void on_xfer_failed(struct ob_xfer *x, const struct ob_xfer_end *end);

static const struct ob_xfer_ops xfer_ops = {
    .on_answer = on_answer,
    .on_message = on_server_message,
    .on_failed = on_xfer_failed,
};

/* Sends c (the session is ready). */
static void call_send(struct ob_call *c)
{
    struct ob_session *s = c->s;
    struct gw_mcp_outbound *ob = c->ob;
    const struct gw_mcp_server_config *ms =
        gw__mcp_outbound_server(ob, s->server, s->client_id);
    cJSON *id;
    int rc;

    if (ms == NULL) { /* gone with a reload */
        char text[128];
        snprintf(text, sizeof(text), "no MCP server named %s for this device",
                 s->server);
        gw__mcp_outbound_call_fail(c, GW_OUTBOUND_NO_SERVER, GW_RPC_NO_SERVER,
                                   text);
        return;
    }
    c->gw_id = next_id(s);
    id = cJSON_CreateNumber(c->gw_id);
    if (id == NULL ||
        !cJSON_ReplaceItemInObjectCaseSensitive(c->msg, "id", id)) {
        cJSON_Delete(id);
        gw__mcp_outbound_call_fail(c, GW_OUTBOUND_FAILED, GW_RPC_INTERNAL_ERROR,
                                   "out of memory");
        return;
    }
    rc = gw__mcp_outbound_xfer_start(ob, ms, s, X_CALL, c->msg, c->gw_id,
                                     &xfer_ops, &c->x);
    if (rc == GW_ELIMIT) {
        call_refuse_busy(c, ms);
        return;
    }
    if (rc != 0) {
        gw__mcp_outbound_call_fail(c, GW_OUTBOUND_FAILED, GW_RPC_INTERNAL_ERROR,
                                   "out of memory");
        return;
    }
    c->x->call = c;
    c->sent = true;
    gw_list_unlink(&c->node);
    gw_list_insert_tail(&s->sent, &c->node);
}

/* The device's own initialize: the session's initialize result. */
static void call_answer_init(struct ob_call *c)
{
    struct ob_session *s = c->s;
    cJSON *result = cJSON_Duplicate(s->init_result, true);
    cJSON *msg = result != NULL ? gw_rpc_result(c->dev_id, result) : NULL;
    enum gw_outbound_outcome outcome;

    if (msg == NULL) {
        gw__mcp_outbound_call_fail(c, GW_OUTBOUND_FAILED, GW_RPC_INTERNAL_ERROR,
                                   "out of memory");
        return;
    }
    outcome = gw__mcp_outbound_reply_message(c->ob, s->client_id, s->server,
                                             msg, c->dev_id, GW_OUTBOUND_LOCAL);
    cJSON_Delete(msg);
    gw__mcp_outbound_call_end(c, outcome);
}

void gw__mcp_outbound_session_flush(struct ob_session *s)
{
    while (!gw_list_empty(&s->waiting) && s->state == SS_READY && !s->ended) {
        struct ob_call *c =
            GW_LIST_ENTRY(gw_list_first(&s->waiting), struct ob_call, node);
        if (c->kind == CALL_INITIALIZE) {
            call_answer_init(c);
        } else {
            call_send(c);
        }
    }
}

/* Every waiting call fails with the session's initialize. */
static void session_init_failed(struct ob_session *s, bool timeout,
                                enum gw_outbound_failure why,
                                const char *reason)
{
    s->state = SS_IDLE;
    free(s->sid);
    s->sid = NULL;
    while (!gw_list_empty(&s->waiting) && !s->ended) {
        struct ob_call *c =
            GW_LIST_ENTRY(gw_list_first(&s->waiting), struct ob_call, node);
        if (timeout) {
            char text[160];
            snprintf(text, sizeof(text),
                     "MCP server %s did not answer initialize in time",
                     s->server);
            gw__mcp_outbound_call_fail(c, GW_OUTBOUND_TIMEOUT, GW_RPC_TIMEOUT,
                                       text);
        } else {
            call_fail_server(c, why, reason);
        }
    }
}

void gw__mcp_outbound_session_init_start(struct ob_session *s)
{
    struct gw_mcp_outbound *ob = s->ob;
    const struct gw_mcp_server_config *ms =
        gw__mcp_outbound_server(ob, s->server, s->client_id);
    cJSON *params = cJSON_CreateObject(), *info, *msg;
    uint32_t id = next_id(s);
    int rc;

    if (ms == NULL || params == NULL ||
        cJSON_AddStringToObject(params, "protocolVersion", PROTOCOL_VERSION) ==
            NULL ||
        cJSON_AddObjectToObject(params, "capabilities") == NULL ||
        (info = cJSON_AddObjectToObject(params, "clientInfo")) == NULL ||
        cJSON_AddStringToObject(info, "name", "hybridgw") == NULL ||
        cJSON_AddStringToObject(info, "version", GW_VERSION) == NULL) {
        cJSON_Delete(params);
        session_init_failed(s, false, GW_OUTBOUND_FAIL_TRANSFER,
                            ms == NULL ? "not configured" : "out of memory");
        return;
    }
    msg = gw_rpc_request(id, "initialize", params);
    if (msg == NULL) {
        session_init_failed(s, false, GW_OUTBOUND_FAIL_TRANSFER,
                            "out of memory");
        return;
    }
    free(s->sid);
    s->sid = NULL;
    s->version[0] = '\0';
    s->state = SS_INITIALIZING;
    rc = gw__mcp_outbound_xfer_start(ob, ms, s, X_INIT, msg, id, &xfer_ops,
                                     &s->init);
    cJSON_Delete(msg);
    if (rc == GW_ELIMIT) {
        s->state = SS_IDLE;
        while (!gw_list_empty(&s->waiting) && !s->ended) {
            call_refuse_busy(
                GW_LIST_ENTRY(gw_list_first(&s->waiting), struct ob_call, node),
                ms);
        }
        return;
    }
    if (rc != 0) {
        session_init_failed(s, false, GW_OUTBOUND_FAIL_TRANSFER,
                            "out of memory");
        return;
    }
    s->init->s = s;
    gw__mcp_outbound_stats(ob, s->server)->initializes++;
}

/* The MCP revisions there are; the server answers one of them. */
static const char *const versions[] = {PROTOCOL_VERSION, "2025-06-18",
                                       "2025-03-26", "2024-11-05"};

static bool version_known(const char *v)
{
    for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
        if (strcmp(v, versions[i]) == 0) {
            return true;
        }
    }
    return false;
}

/* A session id is visible ASCII (the transport's rule). */
static bool sid_ok(const char *sid)
{
    size_t n = strlen(sid);

    if (n == 0 || n > SID_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (sid[i] < 0x21 || sid[i] > 0x7e) {
            return false;
        }
    }
    return true;
}

static void on_init_answer(struct ob_xfer *x, const struct gw_rpc *rpc)
{
    struct ob_session *s = x->s;
    const struct gw_mcp_server_config *ms;
    const cJSON *v;
    cJSON *n;

    if (s == NULL) {
        return;
    }
    s->init = NULL;
    x->s = NULL;
    if (rpc->error != NULL || !cJSON_IsObject(rpc->result)) {
        const cJSON *m =
            cJSON_GetObjectItemCaseSensitive(rpc->error, "message");
        char text[160];
        snprintf(text, sizeof(text), "initialize refused: %s",
                 cJSON_IsString(m) ? m->valuestring : "no result");
        session_init_failed(s, false, GW_OUTBOUND_FAIL_BODY, text);
        return;
    }
    if (x->sid != NULL && !sid_ok(x->sid)) {
        session_init_failed(s, false, GW_OUTBOUND_FAIL_BODY,
                            "bad Mcp-Session-Id");
        return;
    }
    v = cJSON_GetObjectItemCaseSensitive(rpc->result, "protocolVersion");
    if (!cJSON_IsString(v) || !version_known(v->valuestring)) {
        /* It goes into every later request's headers: only one of ours. */
        session_init_failed(s, false, GW_OUTBOUND_FAIL_VERSION,
                            "initialize answered with a protocolVersion the "
                            "gateway does not know");
        return;
    }
    cJSON_Delete(s->init_result);
    s->init_result = cJSON_Duplicate(rpc->result, true);
    s->sid = x->sid;
    x->sid = NULL;
    snprintf(s->version, sizeof(s->version), "%s", v->valuestring);
    s->state = SS_READY;
    ms = gw__mcp_outbound_server(s->ob, s->server, s->client_id);
    n = gw_rpc_notification("notifications/initialized", NULL);
    if (ms != NULL && n != NULL) {
        (void)gw__mcp_outbound_xfer_start(s->ob, ms, s, X_NOTIFY, n, 0, NULL,
                                          NULL);
    }
    cJSON_Delete(n);
    gw__mcp_outbound_log(s->ob, GW_LOG_DEBUG, s->client_id,
                         "%s: session open (%s)", s->server, s->version);
    gw__mcp_outbound_session_flush(s);
}

static void on_answer(struct ob_xfer *x, const cJSON *msg,
                      const struct gw_rpc *rpc)
{
    struct ob_call *c = x->call;
    struct ob_session *s;
    cJSON *out;
    enum gw_outbound_outcome outcome;

    if (x->kind == X_INIT) {
        on_init_answer(x, rpc);
        return;
    }
    if (c == NULL || (s = c->s) == NULL) {
        return;
    }
    out = cJSON_Duplicate(msg, true);
    if (out == NULL) {
        gw__mcp_outbound_call_fail(c, GW_OUTBOUND_FAILED, GW_RPC_INTERNAL_ERROR,
                                   "out of memory");
        return;
    }
    /* The device's id, exactly as it wrote it. */
    cJSON *id = cJSON_Duplicate(c->dev_id, true);
    if (id == NULL || !cJSON_ReplaceItemInObjectCaseSensitive(out, "id", id)) {
        cJSON_Delete(id);
        cJSON_Delete(out);
        gw__mcp_outbound_call_fail(c, GW_OUTBOUND_FAILED, GW_RPC_INTERNAL_ERROR,
                                   "out of memory");
        return;
    }
    outcome = gw__mcp_outbound_reply_message(
        x->ob, s->client_id, s->server, out, c->dev_id,
        rpc->error != NULL ? GW_OUTBOUND_ERROR : GW_OUTBOUND_OK);
    cJSON_Delete(out);
    gw__mcp_outbound_call_end(c, outcome);
}

/* A notification (or request) of the server on a response stream. */
static void on_server_message(struct ob_xfer *x, const cJSON *msg)
{
    struct ob_session *s = x->kind == X_INIT ? x->s
                           : x->call != NULL ? x->call->s
                                             : NULL;
    struct gw_rpc rpc;
    size_t len = 0;

    if (s == NULL || gw_rpc_classify(msg, &rpc) != 0) {
        return;
    }
    if (rpc.kind == GW_RPC_REQUEST) {
        /* The gateway declared no client capabilities: nothing to ask. */
        gw__mcp_outbound_log(x->ob, GW_LOG_INFO, s->client_id,
                             "%s: server request %s dropped", s->server,
                             rpc.method);
        return;
    }
    if (gw__mcp_outbound_publish(x->ob, s->client_id, s->server, msg, &len) ==
        GW_ETOOBIG) {
        gw__mcp_outbound_log(
            x->ob, GW_LOG_WARN, s->client_id,
            "%s: %s too large for the device (%zu bytes), dropped", s->server,
            rpc.method, len);
        return;
    }
    gw__mcp_outbound_stats(x->ob, s->server)->notifications++;
}

/*
 * After a 404 on the session sent_sid: a new session and the call once
 * more. Another call's 404 may have made the new session already: then
 * the call only goes again.
 */
static bool session_lost(struct ob_call *c, const char *sent_sid)
{
    struct ob_session *s = c->s;

    if (c->retried || s == NULL) {
        return false;
    }
    c->retried = true;
    c->sent = false;
    gw_list_unlink(&c->node);
    gw_list_insert_head(&s->waiting, &c->node);
    if (s->state == SS_READY && s->sid != NULL && sent_sid != NULL &&
        strcmp(s->sid, sent_sid) != 0) {
        gw__mcp_outbound_session_flush(s);
        return true;
    }
    gw__mcp_outbound_stats(c->ob, s->server)->reinitializes++;
    gw__mcp_outbound_log(
        c->ob, GW_LOG_INFO, s->client_id,
        "%s: the server forgot the session, initializing again", s->server);
    if (s->state != SS_INITIALIZING) {
        s->state = SS_IDLE;
        gw__mcp_outbound_session_init_start(s);
    }
    return true;
}

/* An initialize fails its waiting calls; a call that met a 404 on its
 * session goes again once (session_lost), else fails. */
static void on_xfer_failed(struct ob_xfer *x, const struct ob_xfer_end *end)
{
    struct ob_session *s = x->s;
    struct ob_call *c = x->call;

    if (x->kind == X_INIT) {
        s->init = NULL;
        x->s = NULL;
        session_init_failed(s, end->timeout, end->fail, end->text);
        return;
    }
    c->x = NULL; /* ends with this callback */
    x->call = NULL;
    if (end->session_gone && c->s != NULL && !c->retried) {
        (void)session_lost(c, x->sent_sid); /* the call goes again */
        return;
    }
    call_fail_server(c, end->fail, end->text);
}
