/*
 * Devices as MCP clients of configured servers; see mcp_outbound.h.
 *
 * A session belongs to one (device, server) pair. Its calls wait in
 * `waiting` until the session is initialized, then each is one POST (an
 * xfer) whose response, JSON or an event stream, carries the answer and
 * any notifications before it. Calls and sessions free their memory in
 * their timer's close callback; an xfer goes with its transfer's end, or
 * at once when its owner lets go of it outside the transfer's callbacks.
 */
#include "gateway/mcp/mcp_outbound.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "codec/client_id.h"
#include "codec/jsonrpc.h"
#include "codec/sse.h"
#include "common/hash.h"
#include "common/list.h"
#include "common/log.h"
#include "common/ratelimit.h"
#include "gateway/core/version.h"
#include "gateway/http/http_client.h"

#define PROTOCOL_VERSION "2025-11-25"
#define NAME_MAX_LEN     64
#define KEY_MAX          (GW_CLIENT_ID_MAX + 1 + NAME_MAX_LEN + 1)
#define SID_MAX          256
#define VERSION_MAX      31

/* Log lines about one device's requests: as the dispatcher's. */
static const struct gw_bucket_rate log_per_device = {0.1, 5};
static const struct gw_bucket_rate log_all = {5, 50};
#define LOG_KEYS_MAX 4096

enum session_state { SS_IDLE, SS_INITIALIZING, SS_READY };
enum call_kind { CALL_FORWARD, CALL_INITIALIZE };
enum xfer_kind { X_INIT, X_CALL, X_NOTIFY, X_DELETE };

struct stats_rec {
    UT_hash_handle hh; /* by st.name */
    struct gw_outbound_server_stats st;
};

struct ob_session;
struct ob_call;

struct ob_xfer {
    struct gw_list node; /* in ob->posts (notify, delete) */
    struct gw_mcp_outbound *ob;
    struct gw_http_req *req;
    enum xfer_kind kind;
    struct ob_session *s; /* X_INIT: the session, NULL once let go */
    struct ob_call *call; /* X_CALL: the call, NULL once let go */
    uint32_t want_id;     /* the answer that ends it */
    char server[NAME_MAX_LEN + 1];
    bool sse;
    bool in_cb;     /* inside a callback of its transfer */
    bool abandoned; /* let go of inside a callback */
    bool answered;
    char *sid;      /* Mcp-Session-Id of the response */
    char *sent_sid; /* the one the request carried, or NULL */
    char *body;
    size_t body_len, body_cap;
    size_t total; /* bytes of the response body */
    bool sse_ready;
    struct gw_sse_parser parser;
    bool failed; /* fail/reason set while reading */
    enum gw_outbound_failure fail;
    char reason[160];
};

struct ob_call {
    struct gw_list node; /* in its session's waiting or sent */
    struct gw_mcp_outbound *ob;
    struct ob_session *s; /* NULL once ended */
    enum call_kind kind;
    cJSON *dev_id; /* the device's id, as it wrote it */
    cJSON *msg;    /* the device's request */
    char method[48];
    uint32_t gw_id; /* toward the server, once sent */
    struct ob_xfer *x;
    uv_timer_t timer;
    bool retried; /* re-sent after a new session */
    bool sent;
};

struct ob_session {
    UT_hash_handle hh; /* in ob->sessions by key */
    char key[KEY_MAX];
    struct gw_mcp_outbound *ob;
    char client_id[GW_CLIENT_ID_MAX + 1];
    char server[NAME_MAX_LEN + 1];
    enum session_state state;
    char *sid;
    char version[VERSION_MAX + 1];
    cJSON *init_result;
    struct ob_xfer *init;
    struct gw_list waiting;
    struct gw_list sent;
    unsigned n_calls;
    uint32_t next_id;
    uv_timer_t idle;
    bool ended;
};

struct gw_mcp_outbound {
    uv_loop_t *loop;
    const struct gw_config_live *config;
    struct gw_publisher *pub;
    struct gw_device_table *devices;
    struct gw_http_client *http;
    struct ob_session *sessions;
    size_t n_sessions;
    struct stats_rec *stats;
    struct gw_list posts;
    struct gw_ratelimit log_limit;
    uint64_t refused; /* envelopes refused unanswered */
    int handles;      /* timers still to close */
    bool http_open;
    bool closing;
    void (*close_cb)(struct gw_mcp_outbound *ob, void *arg);
    void *close_arg;
};

static const char *const outcome_names[GW_OUTBOUND_OUTCOME_COUNT_] = {
#define XX(name, text) [GW_OUTBOUND_##name] = text,
    GW_OUTBOUND_OUTCOME_MAP(XX)
#undef XX
};
static const char *const failure_names[GW_OUTBOUND_FAILURE_COUNT_] = {
#define XX(name, text) [GW_OUTBOUND_FAIL_##name] = text,
    GW_OUTBOUND_FAILURE_MAP(XX)
#undef XX
};

const char *gw_outbound_outcome_name(enum gw_outbound_outcome o)
{
    return (unsigned)o < GW_OUTBOUND_OUTCOME_COUNT_ ? outcome_names[o] : "?";
}

const char *gw_outbound_failure_name(enum gw_outbound_failure f)
{
    return (unsigned)f < GW_OUTBOUND_FAILURE_COUNT_ ? failure_names[f] : "?";
}

/* ---- small helpers ---- */

static const struct gw_config *config_of(const struct gw_mcp_outbound *ob)
{
    return gw_config_live_get(ob->config);
}

static struct gw_outbound_server_stats *stats_of(struct gw_mcp_outbound *ob,
                                                 const char *server)
{
    static struct gw_outbound_server_stats spare; /* out of memory */
    struct stats_rec *r;

    HASH_FIND_STR(ob->stats, server, r);
    if (r == NULL) {
        r = calloc(1, sizeof(*r));
        if (r == NULL) {
            return &spare;
        }
        snprintf(r->st.name, sizeof(r->st.name), "%s", server);
        HASH_ADD_STR(ob->stats, st.name, r);
        if (!GW_HASH_ADDED(r, hh)) {
            free(r);
            return &spare;
        }
    }
    return &r->st;
}

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static void
log_dev(struct gw_mcp_outbound *ob, enum gw_log_level level,
        const char *client_id, const char *fmt, ...)
{
    char subject[GW_CLIENT_ID_MAX + 16], text[512];
    uint64_t skipped = 0;
    va_list ap;

    if (level > gw_log_get_level()) {
        return;
    }
    if (level <= GW_LOG_INFO &&
        !gw_ratelimit_take(&ob->log_limit, client_id, uv_now(ob->loop),
                           &skipped)) {
        return;
    }
    snprintf(subject, sizeof(subject), "dev=%s mcp-out", client_id);
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (skipped > 0) {
        gw_log(level, subject, "%s (%llu more not logged before this)", text,
               (unsigned long long)skipped);
    } else {
        gw_log(level, subject, "%s", text);
    }
}

static bool list_has(char *const *list, size_t n, const char *s, size_t len)
{
    for (size_t i = 0; i < n; i++) {
        if (strlen(list[i]) == len && memcmp(list[i], s, len) == 0) {
            return true;
        }
    }
    return false;
}

/* The server named so that this device may use, or NULL (both cases look
 * the same to the device). */
static const struct gw_mcp_server_config *
allowed_server(const struct gw_config *cfg, const char *name,
               const char *client_id)
{
    struct gw_client_id id;

    if (gw_client_id_parse(client_id, strlen(client_id), &id) != 0) {
        return NULL;
    }
    for (size_t i = 0; i < cfg->n_mcp_servers; i++) {
        const struct gw_mcp_server_config *ms = &cfg->mcp_servers[i];
        if (strcmp(ms->name, name) != 0) {
            continue;
        }
        if (ms->allow.n_groups > 0 &&
            !list_has(ms->allow.groups, ms->allow.n_groups, id.group,
                      id.group_len)) {
            return NULL;
        }
        if (ms->allow.n_macs > 0 && !list_has(ms->allow.macs, ms->allow.n_macs,
                                              id.mac, strlen(id.mac))) {
            return NULL;
        }
        if (ms->allow.n_client_ids > 0 &&
            !list_has(ms->allow.client_ids, ms->allow.n_client_ids, client_id,
                      strlen(client_id))) {
            return NULL;
        }
        return ms;
    }
    return NULL;
}

static bool ids_equal(const cJSON *a, const cJSON *b)
{
    if (cJSON_IsNumber(a) && cJSON_IsNumber(b)) {
        return a->valuedouble == b->valuedouble;
    }
    if (cJSON_IsString(a) && cJSON_IsString(b)) {
        return strcmp(a->valuestring, b->valuestring) == 0;
    }
    return false;
}

/* ---- to the device ---- */

/* GW_ETOOBIG with *len set when the message would be too large. */
static int publish_to(struct gw_mcp_outbound *ob, const char *client_id,
                      const char *endpoint, const cJSON *payload,
                      size_t *len_out)
{
    const struct gw_device *dev = gw_device_find(ob->devices, client_id);
    const char *sid =
        dev != NULL && dev->link.session_id != NULL ? dev->link.session_id : "";
    char *text = gw_envelope_print_mcp_endpoint(sid, endpoint, payload);
    size_t len;
    int rc;

    if (text == NULL) {
        return GW_ENOMEM;
    }
    len = strlen(text);
    if (len_out != NULL) {
        *len_out = len;
    }
    /* What the firmware accepts in one message (docs/protocol.md
     * section 2). */
    rc = len > GW_ENVELOPE_DEVICE_MAX
             ? GW_ETOOBIG
             : gw_publish_json(ob->pub, client_id, text, len);
    cJSON_free(text);
    return rc;
}

static void reply_error(struct gw_mcp_outbound *ob, const char *client_id,
                        const char *endpoint, const cJSON *id, int code,
                        const char *message)
{
    cJSON *msg = gw_rpc_error(id, code, message);

    if (msg != NULL) {
        (void)publish_to(ob, client_id, endpoint, msg, NULL);
        cJSON_Delete(msg);
    }
}

/* A message for the device under its own id; too large: -32602. */
static enum gw_outbound_outcome reply_message(struct gw_mcp_outbound *ob,
                                              const char *client_id,
                                              const char *endpoint, cJSON *msg,
                                              const cJSON *dev_id,
                                              enum gw_outbound_outcome outcome)
{
    char text[128];
    size_t len = 0;
    int rc;

    rc = publish_to(ob, client_id, endpoint, msg, &len);
    if (rc == GW_ETOOBIG) {
        snprintf(text, sizeof(text),
                 "the answer is too large for the device (%zu bytes, limit "
                 "%d)",
                 len, GW_ENVELOPE_DEVICE_MAX);
        log_dev(ob, GW_LOG_WARN, client_id, "%s: %s", endpoint, text);
        reply_error(ob, client_id, endpoint, dev_id, GW_RPC_INVALID_PARAMS,
                    text);
        return GW_OUTBOUND_TOO_LARGE;
    }
    return outcome;
}

/* ---- transfers ---- */

static void xfer_free(struct ob_xfer *x)
{
    gw_list_unlink(&x->node);
    if (x->sse_ready) {
        gw_sse_free(&x->parser);
    }
    free(x->sid);
    free(x->sent_sid);
    free(x->body);
    free(x);
}

/* The owner no longer wants x: its transfer ends now, or as soon as its
 * callback returns. */
static void xfer_abandon(struct ob_xfer *x)
{
    x->call = NULL;
    x->s = NULL;
    if (x->in_cb) {
        x->abandoned = true;
        return;
    }
    gw_http_cancel(x->req);
    xfer_free(x);
}

static void xfer_on_header(void *arg, const char *name, const char *value)
{
    struct ob_xfer *x = arg;

    if (strcasecmp(name, "content-type") == 0) {
        x->sse = strncasecmp(value, "text/event-stream", 17) == 0;
    } else if (strcasecmp(name, "mcp-session-id") == 0) {
        free(x->sid);
        x->sid = strdup(value);
    }
}

static void xfer_fail(struct ob_xfer *x, enum gw_outbound_failure why,
                      const char *reason)
{
    if (!x->failed) {
        x->failed = true;
        x->fail = why;
        snprintf(x->reason, sizeof(x->reason), "%s", reason);
    }
}

static void on_answer(struct ob_xfer *x, const cJSON *msg,
                      const struct gw_rpc *rpc);
static void on_server_message(struct ob_xfer *x, const cJSON *msg);

/* One JSON-RPC message of a response, JSON body or event. */
static void xfer_message(struct ob_xfer *x, const char *text, size_t len)
{
    cJSON *msg = cJSON_ParseWithLength(text, len);
    struct gw_rpc rpc;
    uint32_t id;

    if (msg == NULL || gw_rpc_classify(msg, &rpc) != 0) {
        xfer_fail(x, GW_OUTBOUND_FAIL_BODY, "the answer is not JSON-RPC");
        cJSON_Delete(msg);
        return;
    }
    if (rpc.kind == GW_RPC_RESPONSE) {
        if (x->answered || !gw_rpc_id_u32(rpc.id, &id) || id != x->want_id) {
            xfer_fail(x, GW_OUTBOUND_FAIL_BODY,
                      "the answer has an id the gateway did not send");
        } else {
            x->answered = true;
            on_answer(x, msg, &rpc);
        }
    } else {
        on_server_message(x, msg);
    }
    cJSON_Delete(msg);
}

static int on_sse_event(void *arg, const struct gw_sse_event *ev)
{
    struct ob_xfer *x = arg;

    if (strcmp(ev->event, "message") != 0) {
        return 0; /* the transport defines no other event */
    }
    xfer_message(x, ev->data, ev->data_len);
    return x->failed || x->abandoned ? 1 : 0;
}

static size_t max_response(const struct gw_mcp_outbound *ob)
{
    return (size_t)config_of(ob)->mcp.outbound_max_response_bytes;
}

static bool xfer_on_data(void *arg, const char *buf, size_t len)
{
    struct ob_xfer *x = arg;
    struct gw_mcp_outbound *ob = x->ob;
    size_t limit = max_response(ob);
    char text[160];

    /* Every body counts against the limit, also those nobody reads. */
    x->total += len;
    if (x->total > limit) {
        snprintf(text, sizeof(text),
                 "the answer is over mcp.outbound_max_response_bytes (%zu)",
                 limit);
        xfer_fail(x, GW_OUTBOUND_FAIL_TOO_BIG, text);
        return false;
    }
    if (x->kind == X_NOTIFY || x->kind == X_DELETE ||
        gw_http_req_status(x->req) != 200) {
        return true; /* nothing to read in it */
    }
    x->in_cb = true;
    if (x->sse) {
        if (!x->sse_ready) {
            gw_sse_init(&x->parser, limit, limit);
            x->sse_ready = true;
        }
        int rc = gw_sse_feed(&x->parser, buf, len, on_sse_event, x);
        if (rc < 0 && !x->failed) {
            xfer_fail(x, GW_OUTBOUND_FAIL_BODY, "bad event stream");
        }
    } else {
        if (x->body_len + len + 1 > x->body_cap) {
            size_t cap = x->body_cap ? x->body_cap : 1024;
            while (cap < x->body_len + len + 1) {
                cap *= 2;
            }
            char *grown = realloc(x->body, cap);
            if (grown == NULL) {
                xfer_fail(x, GW_OUTBOUND_FAIL_BODY, "out of memory");
                x->in_cb = false;
                return false;
            }
            x->body = grown;
            x->body_cap = cap;
        }
        memcpy(x->body + x->body_len, buf, len);
        x->body_len += len;
    }
    x->in_cb = false;
    /* Answered: the rest of the stream is of no interest. */
    return !(x->failed || x->abandoned || x->answered);
}

static const char *const *
build_headers(const struct gw_mcp_server_config *ms, const struct ob_session *s,
              bool with_session, char *auth, size_t auth_cap, char *sidh,
              size_t sid_cap, char *verh, size_t ver_cap, const char *out[6])
{
    size_t n = 0;

    out[n++] = "Content-Type: application/json";
    out[n++] = "Accept: application/json, text/event-stream";
    if (ms->auth.scheme == GW_AUTH_BEARER) {
        snprintf(auth, auth_cap, "Authorization: Bearer %s", ms->auth.token);
        out[n++] = auth;
    }
    if (with_session && s->sid != NULL) {
        snprintf(sidh, sid_cap, "Mcp-Session-Id: %s", s->sid);
        out[n++] = sidh;
    }
    if (with_session && s->version[0] != '\0') {
        snprintf(verh, ver_cap, "MCP-Protocol-Version: %s", s->version);
        out[n++] = verh;
    }
    out[n] = NULL;
    return out;
}

static void xfer_on_done(void *arg, enum gw_http_result result, int status,
                         const char *detail);

/* Starts one request of session s (or of a session that is ending:
 * notifications and DELETE, fire and forget). */
static struct ob_xfer *xfer_start(struct gw_mcp_outbound *ob,
                                  const struct gw_mcp_server_config *ms,
                                  struct ob_session *s, enum xfer_kind kind,
                                  const cJSON *msg, uint32_t want_id,
                                  bool with_session)
{
    char auth[1024], sidh[SID_MAX + 32], verh[64];
    const char *headers[6];
    struct ob_xfer *x = calloc(1, sizeof(*x));
    char *body = NULL;
    int rc;

    if (x == NULL) {
        return NULL;
    }
    x->ob = ob;
    x->kind = kind;
    x->want_id = want_id;
    gw_list_init(&x->node);
    snprintf(x->server, sizeof(x->server), "%s", ms->name);
    if ((msg != NULL && (body = cJSON_PrintUnformatted(msg)) == NULL) ||
        (with_session && s->sid != NULL &&
         (x->sent_sid = strdup(s->sid)) == NULL)) {
        cJSON_free(body);
        free(x);
        return NULL;
    }
    struct gw_http_options opts = {
        .method = kind == X_DELETE ? "DELETE" : "POST",
        .url = ms->url,
        .headers = build_headers(ms, s, with_session, auth, sizeof(auth), sidh,
                                 sizeof(sidh), verh, sizeof(verh), headers),
        .body = body,
        .body_len = body != NULL ? strlen(body) : 0,
        /* the call's own timer ends it first; this only backs it up */
        .timeout_ms = (long)ms->timeout_ms + 1000,
        .ca_file = ms->ca_file,
    };
    struct gw_http_callbacks cbs = {
        .on_header = xfer_on_header,
        .on_data = xfer_on_data,
        .on_done = xfer_on_done,
        .arg = x,
    };
    if (kind == X_INIT) {
        opts.timeout_ms = ms->timeout_ms;
    }
    rc = gw_http_request(ob->http, &opts, &cbs, &x->req);
    cJSON_free(body);
    if (rc != 0) {
        xfer_free(x);
        return NULL;
    }
    if (kind == X_NOTIFY || kind == X_DELETE) {
        gw_list_insert_tail(&ob->posts, &x->node);
    }
    return x;
}

/* ---- sessions and calls ---- */

static void maybe_done(struct gw_mcp_outbound *ob);

static void on_call_closed(uv_handle_t *h)
{
    struct ob_call *c = h->data;
    struct gw_mcp_outbound *ob = c->ob;

    cJSON_Delete(c->dev_id);
    cJSON_Delete(c->msg);
    free(c);
    ob->handles--;
    if (ob->closing) {
        maybe_done(ob);
    }
}

static void session_idle_start(struct ob_session *s);

/* Ends c: out of its session, its transfer let go, its memory freed. The
 * outcome is counted here; the device was answered by the caller. */
static void call_end(struct ob_call *c, enum gw_outbound_outcome outcome)
{
    struct ob_session *s = c->s;

    if (s == NULL) {
        return;
    }
    stats_of(c->ob, s->server)->requests[outcome]++;
    gw_list_unlink(&c->node);
    s->n_calls--;
    c->s = NULL;
    if (c->x != NULL) {
        struct ob_xfer *x = c->x;
        c->x = NULL;
        xfer_abandon(x);
    }
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, on_call_closed);
    if (s->n_calls == 0 && !s->ended) {
        session_idle_start(s);
    }
}

/* Answers c with an error and ends it. */
static void call_fail(struct ob_call *c, enum gw_outbound_outcome outcome,
                      int code, const char *message)
{
    struct ob_session *s = c->s;

    if (s == NULL) {
        return;
    }
    reply_error(c->ob, s->client_id, s->server, c->dev_id, code, message);
    call_end(c, outcome);
}

static void call_fail_server(struct ob_call *c, enum gw_outbound_failure why,
                             const char *reason)
{
    struct ob_session *s = c->s;
    char text[256];

    if (s == NULL) {
        return;
    }
    stats_of(c->ob, s->server)->failures[why]++;
    snprintf(text, sizeof(text), "MCP server %s failed: %s", s->server, reason);
    log_dev(c->ob, GW_LOG_WARN, s->client_id, "%s %s: %s", c->method, s->server,
            text);
    call_fail(c, GW_OUTBOUND_FAILED, GW_RPC_SERVER_FAILED, text);
}

static void on_session_closed(uv_handle_t *h)
{
    struct ob_session *s = h->data;
    struct gw_mcp_outbound *ob = s->ob;

    free(s->sid);
    cJSON_Delete(s->init_result);
    free(s);
    ob->handles--;
    if (ob->closing) {
        maybe_done(ob);
    }
}

/* A cancellation toward the server for a request it has (fire and
 * forget). */
static void send_cancelled(struct ob_session *s, uint32_t gw_id,
                           const char *reason)
{
    const struct gw_mcp_server_config *ms =
        allowed_server(config_of(s->ob), s->server, s->client_id);
    cJSON *params = cJSON_CreateObject(), *n;

    if (ms == NULL || params == NULL ||
        cJSON_AddNumberToObject(params, "requestId", gw_id) == NULL ||
        cJSON_AddStringToObject(params, "reason", reason) == NULL) {
        cJSON_Delete(params);
        return;
    }
    n = gw_rpc_notification("notifications/cancelled", params);
    if (n != NULL) {
        (void)xfer_start(s->ob, ms, s, X_NOTIFY, n, 0, true);
        cJSON_Delete(n);
    }
}

/*
 * Ends s. Its calls end with outcome (answered with code/message unless
 * code is 0); with delete, the server hears the session end.
 */
static void session_end(struct ob_session *s, enum gw_outbound_outcome outcome,
                        int code, const char *message, bool delete)
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
                call_fail(c, outcome, code, message);
            } else {
                call_end(c, outcome);
            }
        }
    }
    if (s->init != NULL) {
        struct ob_xfer *x = s->init;
        s->init = NULL;
        xfer_abandon(x);
    }
    if (delete &&s->sid != NULL && !ob->closing) {
        const struct gw_mcp_server_config *ms =
            allowed_server(config_of(ob), s->server, s->client_id);
        if (ms != NULL) {
            (void)xfer_start(ob, ms, s, X_DELETE, NULL, 0, true);
        }
    }
    stats_of(ob, s->server)->sessions_ended++;
    HASH_DELETE(hh, ob->sessions, s);
    ob->n_sessions--;
    uv_timer_stop(&s->idle);
    uv_close((uv_handle_t *)&s->idle, on_session_closed);
}

static void on_idle(uv_timer_t *t)
{
    struct ob_session *s = t->data;

    log_dev(s->ob, GW_LOG_DEBUG, s->client_id, "%s: session idle, ended",
            s->server);
    session_end(s, GW_OUTBOUND_CANCELLED, 0, NULL, true);
}

static void session_idle_start(struct ob_session *s)
{
    uv_timer_start(&s->idle, on_idle,
                   (uint64_t)config_of(s->ob)->mcp.outbound_session_idle_ms, 0);
}

static struct ob_session *session_find(struct gw_mcp_outbound *ob,
                                       const char *client_id,
                                       const char *server)
{
    char key[KEY_MAX];
    struct ob_session *s;

    snprintf(key, sizeof(key), "%s\n%s", client_id, server);
    HASH_FIND_STR(ob->sessions, key, s);
    return s;
}

static struct ob_session *session_get(struct gw_mcp_outbound *ob,
                                      const char *client_id, const char *server)
{
    struct ob_session *s = session_find(ob, client_id, server);

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

static void session_init_start(struct ob_session *s);

/* Sends c (the session is ready). */
static void call_send(struct ob_call *c)
{
    struct ob_session *s = c->s;
    struct gw_mcp_outbound *ob = c->ob;
    const struct gw_mcp_server_config *ms =
        allowed_server(config_of(ob), s->server, s->client_id);
    cJSON *id;

    if (ms == NULL) { /* gone with a reload */
        char text[128];
        snprintf(text, sizeof(text), "no MCP server named %s for this device",
                 s->server);
        call_fail(c, GW_OUTBOUND_NO_SERVER, GW_RPC_NO_SERVER, text);
        return;
    }
    c->gw_id = next_id(s);
    id = cJSON_CreateNumber(c->gw_id);
    if (id == NULL ||
        !cJSON_ReplaceItemInObjectCaseSensitive(c->msg, "id", id)) {
        cJSON_Delete(id);
        call_fail(c, GW_OUTBOUND_FAILED, GW_RPC_INTERNAL_ERROR,
                  "out of memory");
        return;
    }
    c->x = xfer_start(ob, ms, s, X_CALL, c->msg, c->gw_id, true);
    if (c->x == NULL) {
        call_fail(c, GW_OUTBOUND_FAILED, GW_RPC_INTERNAL_ERROR,
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
        call_fail(c, GW_OUTBOUND_FAILED, GW_RPC_INTERNAL_ERROR,
                  "out of memory");
        return;
    }
    outcome = reply_message(c->ob, s->client_id, s->server, msg, c->dev_id,
                            GW_OUTBOUND_LOCAL);
    cJSON_Delete(msg);
    call_end(c, outcome);
}

static void session_flush(struct ob_session *s)
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
            call_fail(c, GW_OUTBOUND_TIMEOUT, GW_RPC_TIMEOUT, text);
        } else {
            call_fail_server(c, why, reason);
        }
    }
}

static void session_init_start(struct ob_session *s)
{
    struct gw_mcp_outbound *ob = s->ob;
    const struct gw_mcp_server_config *ms =
        allowed_server(config_of(ob), s->server, s->client_id);
    cJSON *params = cJSON_CreateObject(), *info, *msg;
    uint32_t id = next_id(s);

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
    s->init = xfer_start(ob, ms, s, X_INIT, msg, id, false);
    cJSON_Delete(msg);
    if (s->init == NULL) {
        session_init_failed(s, false, GW_OUTBOUND_FAIL_TRANSFER,
                            "out of memory");
        return;
    }
    s->init->s = s;
    stats_of(ob, s->server)->initializes++;
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
    cJSON_Delete(s->init_result);
    s->init_result = cJSON_Duplicate(rpc->result, true);
    s->sid = x->sid;
    x->sid = NULL;
    v = cJSON_GetObjectItemCaseSensitive(rpc->result, "protocolVersion");
    snprintf(s->version, sizeof(s->version), "%s",
             cJSON_IsString(v) && strlen(v->valuestring) <= VERSION_MAX
                 ? v->valuestring
                 : PROTOCOL_VERSION);
    s->state = SS_READY;
    ms = allowed_server(config_of(s->ob), s->server, s->client_id);
    n = gw_rpc_notification("notifications/initialized", NULL);
    if (ms != NULL && n != NULL) {
        (void)xfer_start(s->ob, ms, s, X_NOTIFY, n, 0, true);
    }
    cJSON_Delete(n);
    log_dev(s->ob, GW_LOG_DEBUG, s->client_id, "%s: session open (%s)",
            s->server, s->version);
    session_flush(s);
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
        call_fail(c, GW_OUTBOUND_FAILED, GW_RPC_INTERNAL_ERROR,
                  "out of memory");
        return;
    }
    /* The device's id, exactly as it wrote it. */
    cJSON *id = cJSON_Duplicate(c->dev_id, true);
    if (id == NULL || !cJSON_ReplaceItemInObjectCaseSensitive(out, "id", id)) {
        cJSON_Delete(id);
        cJSON_Delete(out);
        call_fail(c, GW_OUTBOUND_FAILED, GW_RPC_INTERNAL_ERROR,
                  "out of memory");
        return;
    }
    outcome =
        reply_message(x->ob, s->client_id, s->server, out, c->dev_id,
                      rpc->error != NULL ? GW_OUTBOUND_ERROR : GW_OUTBOUND_OK);
    cJSON_Delete(out);
    call_end(c, outcome);
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
        log_dev(x->ob, GW_LOG_INFO, s->client_id,
                "%s: server request %s dropped", s->server, rpc.method);
        return;
    }
    if (publish_to(x->ob, s->client_id, s->server, msg, &len) == GW_ETOOBIG) {
        log_dev(x->ob, GW_LOG_WARN, s->client_id,
                "%s: %s too large for the device (%zu bytes), dropped",
                s->server, rpc.method, len);
        return;
    }
    stats_of(x->ob, s->server)->notifications++;
}

static enum gw_outbound_failure failure_of(enum gw_http_result r)
{
    switch (r) {
    case GW_HTTP_CONNECT:
        return GW_OUTBOUND_FAIL_CONNECT;
    case GW_HTTP_TLS:
        return GW_OUTBOUND_FAIL_TLS;
    default:
        return GW_OUTBOUND_FAIL_TRANSFER;
    }
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
        session_flush(s);
        return true;
    }
    stats_of(c->ob, s->server)->reinitializes++;
    log_dev(c->ob, GW_LOG_INFO, s->client_id,
            "%s: the server forgot the session, initializing again", s->server);
    if (s->state != SS_INITIALIZING) {
        s->state = SS_IDLE;
        session_init_start(s);
    }
    return true;
}

static void xfer_on_done(void *arg, enum gw_http_result result, int status,
                         const char *detail)
{
    struct ob_xfer *x = arg;
    struct ob_session *s = x->kind == X_INIT ? x->s : NULL;
    struct ob_call *c = x->call;
    char text[256];

    x->in_cb = true;
    if (x->kind == X_NOTIFY || x->kind == X_DELETE) {
        if (result != GW_HTTP_OK || (status != 200 && status != 202 &&
                                     status != 204 && status != 404)) {
            gw_log(GW_LOG_DEBUG, "mcp-out", "%s %s: %s %d %s", x->server,
                   x->kind == X_DELETE ? "DELETE" : "notification",
                   gw_http_result_name(result), status, detail);
        }
        goto out;
    }
    if (x->abandoned || x->answered || (c == NULL && s == NULL)) {
        goto out;
    }
    if (x->failed) {
        snprintf(text, sizeof(text), "%s", x->reason);
    } else if (result == GW_HTTP_TIMEOUT && x->kind == X_INIT) {
        s->init = NULL;
        x->s = NULL;
        session_init_failed(s, true, GW_OUTBOUND_FAIL_TRANSFER, "timeout");
        goto out;
    } else if (result != GW_HTTP_OK) {
        x->fail = failure_of(result);
        snprintf(text, sizeof(text), "%s (%s)", gw_http_result_name(result),
                 detail);
    } else if (status == 404 && x->kind == X_CALL && c->s != NULL &&
               x->sent_sid != NULL && !c->retried) {
        c->x = NULL; /* ends with this callback; the call goes again */
        x->call = NULL;
        (void)session_lost(c, x->sent_sid);
        goto out;
    } else if (status != 200) {
        x->fail = status == 404 && x->kind == X_CALL ? GW_OUTBOUND_FAIL_SESSION
                                                     : GW_OUTBOUND_FAIL_HTTP;
        snprintf(text, sizeof(text), "HTTP status %d", status);
    } else if (x->sse) {
        x->fail = GW_OUTBOUND_FAIL_BODY;
        snprintf(text, sizeof(text), "the event stream ended with no answer");
    } else {
        xfer_message(x, x->body != NULL ? x->body : "", x->body_len);
        if (x->answered) {
            goto out;
        }
        snprintf(text, sizeof(text), "%s",
                 x->failed ? x->reason : "no answer in the body");
        x->fail = x->failed ? x->fail : GW_OUTBOUND_FAIL_BODY;
    }
    if (x->kind == X_INIT) {
        s->init = NULL;
        x->s = NULL;
        session_init_failed(s, false, x->fail, text);
    } else if (c != NULL) {
        c->x = NULL; /* ends with this callback */
        x->call = NULL;
        call_fail_server(c, x->fail, text);
    }
out:
    xfer_free(x);
}

/* ---- from the device ---- */

static void on_call_timeout(uv_timer_t *t)
{
    struct ob_call *c = t->data;
    struct ob_session *s = c->s;
    const struct gw_mcp_server_config *ms;
    char text[160];

    if (s == NULL) {
        return;
    }
    ms = allowed_server(config_of(c->ob), s->server, s->client_id);
    snprintf(text, sizeof(text), "MCP server %s did not answer within %d ms",
             s->server, ms != NULL ? ms->timeout_ms : 0);
    log_dev(c->ob, GW_LOG_WARN, s->client_id, "%s: %s", c->method, text);
    if (c->sent) {
        send_cancelled(s, c->gw_id, "timeout");
    }
    call_fail(c, GW_OUTBOUND_TIMEOUT, GW_RPC_TIMEOUT, text);
}

/* Requests of this device waiting on any server. */
static unsigned device_pending(struct gw_mcp_outbound *ob,
                               const char *client_id)
{
    const struct gw_config *cfg = config_of(ob);
    unsigned n = 0;

    for (size_t i = 0; i < cfg->n_mcp_servers; i++) {
        struct ob_session *s =
            session_find(ob, client_id, cfg->mcp_servers[i].name);
        n += s != NULL ? s->n_calls : 0;
    }
    return n;
}

static struct ob_call *find_call(struct ob_session *s, const cJSON *dev_id)
{
    struct gw_list *lists[] = {&s->waiting, &s->sent};

    for (size_t i = 0; i < 2; i++) {
        for (struct gw_list *it = lists[i]->next; it != lists[i];
             it = it->next) {
            struct ob_call *c = GW_LIST_ENTRY(it, struct ob_call, node);
            if (ids_equal(c->dev_id, dev_id)) {
                return c;
            }
        }
    }
    return NULL;
}

static void on_request(struct gw_mcp_outbound *ob, const char *client_id,
                       const char *endpoint, const cJSON *payload,
                       const struct gw_rpc *rpc)
{
    const struct gw_config *cfg = config_of(ob);
    const struct gw_mcp_server_config *ms =
        allowed_server(cfg, endpoint, client_id);
    struct ob_session *s;
    struct ob_call *c;
    char text[192];
    cJSON *msg;

    if (ms == NULL) {
        snprintf(text, sizeof(text),
                 "no MCP server named %.64s for this device", endpoint);
        log_dev(ob, GW_LOG_WARN, client_id, "%s refused: %s", rpc->method,
                text);
        reply_error(ob, client_id, endpoint, rpc->id, GW_RPC_NO_SERVER, text);
        stats_of(ob, "")->requests[GW_OUTBOUND_NO_SERVER]++;
        return;
    }
    if (strcmp(rpc->method, "ping") == 0) {
        cJSON *r = cJSON_CreateObject();
        msg = r != NULL ? gw_rpc_result(rpc->id, r) : NULL;
        if (msg != NULL) {
            (void)publish_to(ob, client_id, endpoint, msg, NULL);
        }
        cJSON_Delete(msg);
        stats_of(ob, ms->name)->requests[GW_OUTBOUND_LOCAL]++;
        return;
    }
    if (device_pending(ob, client_id) >=
        (unsigned)cfg->mcp.outbound_max_pending) {
        snprintf(text, sizeof(text),
                 "too many requests to MCP servers waiting (limit %d)",
                 cfg->mcp.outbound_max_pending);
        log_dev(ob, GW_LOG_WARN, client_id, "%s to %s refused: %s", rpc->method,
                ms->name, text);
        reply_error(ob, client_id, endpoint, rpc->id, GW_RPC_DEVICE_BUSY, text);
        stats_of(ob, ms->name)->requests[GW_OUTBOUND_BUSY]++;
        return;
    }
    s = session_get(ob, client_id, ms->name);
    if (s == NULL) {
        reply_error(ob, client_id, endpoint, rpc->id, GW_RPC_INTERNAL_ERROR,
                    "out of memory");
        return;
    }
    if (find_call(s, rpc->id) != NULL) {
        log_dev(ob, GW_LOG_WARN, client_id, "%s to %s refused: id in use",
                rpc->method, ms->name);
        reply_error(ob, client_id, endpoint, rpc->id, GW_RPC_INVALID_REQUEST,
                    "a request with this id is already waiting");
        stats_of(ob, ms->name)->requests[GW_OUTBOUND_INVALID]++;
        return;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL || (c->dev_id = cJSON_Duplicate(rpc->id, true)) == NULL ||
        (c->msg = cJSON_Duplicate(payload, true)) == NULL) {
        if (c != NULL) {
            cJSON_Delete(c->dev_id);
        }
        free(c);
        reply_error(ob, client_id, endpoint, rpc->id, GW_RPC_INTERNAL_ERROR,
                    "out of memory");
        if (s->n_calls == 0) {
            session_idle_start(s);
        }
        return;
    }
    c->ob = ob;
    c->s = s;
    c->kind =
        strcmp(rpc->method, "initialize") == 0 ? CALL_INITIALIZE : CALL_FORWARD;
    snprintf(c->method, sizeof(c->method), "%s", rpc->method);
    uv_timer_init(ob->loop, &c->timer);
    c->timer.data = c;
    ob->handles++;
    uv_timer_start(&c->timer, on_call_timeout, (uint64_t)ms->timeout_ms, 0);
    uv_timer_stop(&s->idle);
    s->n_calls++;
    gw_list_insert_tail(&s->waiting, &c->node);
    if (s->state == SS_READY) {
        session_flush(s);
    } else if (s->state == SS_IDLE) {
        session_init_start(s);
    }
}

static void on_notification(struct gw_mcp_outbound *ob, const char *client_id,
                            const char *endpoint, const cJSON *payload,
                            const struct gw_rpc *rpc)
{
    const struct gw_mcp_server_config *ms =
        allowed_server(config_of(ob), endpoint, client_id);
    struct ob_session *s =
        ms != NULL ? session_find(ob, client_id, ms->name) : NULL;

    if (ms == NULL) {
        log_dev(ob, GW_LOG_WARN, client_id,
                "%s refused: no MCP server named %.64s for this device",
                rpc->method, endpoint);
        return;
    }
    if (strcmp(rpc->method, "notifications/initialized") == 0) {
        return; /* the gateway sent its own when the session opened */
    }
    if (strcmp(rpc->method, "notifications/cancelled") == 0) {
        const cJSON *rid =
            cJSON_GetObjectItemCaseSensitive(rpc->params, "requestId");
        struct ob_call *c = s != NULL ? find_call(s, rid) : NULL;
        if (c == NULL) {
            return; /* answered already, or never sent: nothing to do */
        }
        if (c->sent) {
            const cJSON *why =
                cJSON_GetObjectItemCaseSensitive(rpc->params, "reason");
            send_cancelled(s, c->gw_id,
                           cJSON_IsString(why) ? why->valuestring
                                               : "cancelled by the device");
        }
        call_end(c, GW_OUTBOUND_CANCELLED);
        return;
    }
    if (s == NULL || s->state != SS_READY) {
        log_dev(ob, GW_LOG_DEBUG, client_id,
                "%s to %s without a session: dropped", rpc->method, ms->name);
        return;
    }
    (void)xfer_start(ob, ms, s, X_NOTIFY, payload, 0, true);
}

bool gw_mcp_outbound_on_device(struct gw_mcp_outbound *ob,
                               const char *client_id,
                               const struct gw_envelope *env)
{
    const cJSON *endpoint =
        cJSON_GetObjectItemCaseSensitive(env->root, "endpoint");
    const cJSON *payload;
    struct gw_rpc rpc;

    if (endpoint == NULL) {
        return false;
    }
    if (!cJSON_IsString(endpoint) || endpoint->valuestring[0] == '\0') {
        ob->refused++;
        log_dev(ob, GW_LOG_WARN, client_id,
                "message refused: endpoint must be a non-empty string");
        return true;
    }
    payload = cJSON_GetObjectItemCaseSensitive(env->root, "payload");
    if (gw_rpc_classify(payload, &rpc) != 0) {
        ob->refused++;
        log_dev(ob, GW_LOG_WARN, client_id,
                "message to %.64s refused: payload is not JSON-RPC",
                endpoint->valuestring);
        return true;
    }
    if (ob->closing) {
        if (rpc.kind == GW_RPC_REQUEST) {
            reply_error(ob, client_id, endpoint->valuestring, rpc.id,
                        GW_RPC_CANCELLED, "the gateway is shutting down");
        }
        return true;
    }
    switch (rpc.kind) {
    case GW_RPC_REQUEST:
        on_request(ob, client_id, endpoint->valuestring, payload, &rpc);
        break;
    case GW_RPC_NOTIFICATION:
        on_notification(ob, client_id, endpoint->valuestring, payload, &rpc);
        break;
    case GW_RPC_RESPONSE:
        /* The gateway never passes the server's requests on. */
        ob->refused++;
        log_dev(ob, GW_LOG_INFO, client_id,
                "response to %.64s dropped: nothing was asked",
                endpoint->valuestring);
        break;
    }
    return true;
}

void gw_mcp_outbound_device_gone(struct gw_mcp_outbound *ob,
                                 const char *client_id)
{
    struct ob_session *s, *tmp;

    HASH_ITER(hh, ob->sessions, s, tmp)
    {
        if (strcmp(s->client_id, client_id) == 0) {
            session_end(s, GW_OUTBOUND_CANCELLED, 0, NULL, true);
        }
    }
}

size_t gw_mcp_outbound_sessions(const struct gw_mcp_outbound *ob)
{
    return ob->n_sessions;
}

uint64_t gw_mcp_outbound_refused(const struct gw_mcp_outbound *ob)
{
    return ob->refused;
}

void gw_mcp_outbound_each_stats(
    const struct gw_mcp_outbound *ob,
    void (*cb)(void *arg, const struct gw_outbound_server_stats *st), void *arg)
{
    const struct stats_rec *r;

    for (r = ob->stats; r != NULL; r = r->hh.next) {
        cb(arg, &r->st);
    }
}

/* ---- life ---- */

int gw_mcp_outbound_init(const struct gw_mcp_outbound_env *env,
                         struct gw_mcp_outbound **out)
{
    struct gw_mcp_outbound *ob = calloc(1, sizeof(*ob));
    int rc;

    if (ob == NULL) {
        return GW_ENOMEM;
    }
    rc = gw_http_client_init(env->loop, &ob->http);
    if (rc != 0) {
        free(ob);
        return rc;
    }
    ob->loop = env->loop;
    ob->config = env->config;
    ob->pub = env->pub;
    ob->devices = env->devices;
    ob->http_open = true;
    gw_list_init(&ob->posts);
    gw_ratelimit_init(&ob->log_limit, log_per_device, log_all, LOG_KEYS_MAX);
    *out = ob;
    return 0;
}

static void maybe_done(struct gw_mcp_outbound *ob)
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

static void on_http_closed(struct gw_http_client *c, void *arg)
{
    struct gw_mcp_outbound *ob = arg;

    (void)c;
    ob->http_open = false;
    maybe_done(ob);
}

void gw_mcp_outbound_close(struct gw_mcp_outbound *ob,
                           void (*cb)(struct gw_mcp_outbound *ob, void *arg),
                           void *arg)
{
    struct ob_session *s, *tmp;

    if (ob->closing) {
        return;
    }
    ob->closing = true;
    ob->close_cb = cb;
    ob->close_arg = arg;
    HASH_ITER(hh, ob->sessions, s, tmp)
    {
        session_end(s, GW_OUTBOUND_SHUTDOWN, GW_RPC_CANCELLED,
                    "the gateway is shutting down", false);
    }
    while (!gw_list_empty(&ob->posts)) {
        xfer_abandon(
            GW_LIST_ENTRY(gw_list_first(&ob->posts), struct ob_xfer, node));
    }
    gw_http_client_close(ob->http, on_http_closed, ob);
}
