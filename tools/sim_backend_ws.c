/*
 * The mock backend's WebSocket server: the upgrade and its checks, one
 * connection per gateway session, reassembly of what arrives and the
 * queue of what goes out, one lws_write per writeable callback.
 */
#include "tools/sim_backend_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crypto/credential.h"
#include "common/log.h"

#define HDR_MAX        256 /* longest header value kept */
#define TEXT_NO_DEVICE "port ok: no device-id"
#define TEXT_AUTH_FAIL "auth failed"

enum {
    H_DEVICE_ID,
    H_CLIENT_ID,
    H_PROTOCOL_VERSION,
    H_AUTHORIZATION,
    H_XFF,
    H_COUNT
};

/* What the upgrade request said. */
struct upgrade {
    char val[H_COUNT][HDR_MAX];
    bool present[H_COUNT];
    char path[URI_MAX], query[URI_MAX], peer[64];
};

static const char *const hdr_names[H_COUNT] = {
    "device-id", "client-id", "protocol-version", "authorization",
    "x-forwarded-for"};

static void conn_free(struct conn *c)
{
    while (c->q_head != NULL) {
        struct out_msg *q = c->q_head;
        c->q_head = q->next;
        free(q);
    }
    EVP_MD_CTX_free(c->turn_rx.sha);
    EVP_MD_CTX_free(c->all_rx.sha);
    cJSON_Delete(c->mcp_tools);
    free(c->pcm_rx);
    free(c->rx);
    free(c);
}

static void on_timer_closed(uv_handle_t *h)
{
    struct conn *c = h->data;

    if (--c->handles_open == 0) {
        conn_free(c);
    }
}

static struct conn *conn_create(struct mock *m, struct lws *wsi)
{
    struct conn *c = calloc(1, sizeof(*c));

    if (c == NULL) {
        return NULL;
    }
    c->m = m;
    c->wsi = wsi;
    c->id = ++m->next_conn;
    c->mcp_next_id = 1;
    /* A uuid4 session id, as the server uses. */
    if (gw_sim_uuid4(c->sid) != 0 ||
        gw_sim_be_rx_stats_reset(&c->turn_rx) != 0 ||
        gw_sim_be_rx_stats_reset(&c->all_rx) != 0) {
        conn_free(c);
        return NULL;
    }
    uv_timer_init(&m->loop, &c->pace_timer);
    uv_timer_init(&m->loop, &c->aux_timer);
    c->pace_timer.data = c;
    c->aux_timer.data = c;
    c->handles_open = 2;
    m->conns_open++;
    return c;
}

/* lws is done with the wsi: the timers close, then the memory goes. */
static void conn_release(struct conn *c)
{
    c->wsi = NULL;
    c->m->conns_open--;
    uv_close((uv_handle_t *)&c->pace_timer, on_timer_closed);
    uv_close((uv_handle_t *)&c->aux_timer, on_timer_closed);
}

static void queue_text(struct conn *c, const char *s, size_t len, bool tts_stop)
{
    struct out_msg *q = malloc(sizeof(*q) + LWS_PRE + len);

    if (q == NULL) {
        gw_log(GW_LOG_ERROR, c->subject, "out of memory, message dropped");
        return;
    }
    q->next = NULL;
    q->tts_stop = tts_stop;
    q->len = len;
    memcpy(q->buf + LWS_PRE, s, len);
    if (c->q_tail != NULL) {
        c->q_tail->next = q;
    } else {
        c->q_head = q;
    }
    c->q_tail = q;
    gw_sim_be_pump(c);
}

/* Serialises and frees o. */
void gw_sim_be_queue_json(struct conn *c, cJSON *o, bool tts_stop)
{
    char *s = cJSON_PrintUnformatted(o);

    if (s != NULL) {
        queue_text(c, s, strlen(s), tts_stop);
        cJSON_free(s);
    }
    cJSON_Delete(o);
}

/* {"type":T,...,"session_id":sid}: the server tags what it sends. */
cJSON *gw_sim_be_msg_new(const char *type)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddStringToObject(o, "type", type);
    return o;
}

void gw_sim_be_queue_msg(struct conn *c, cJSON *o, bool tts_stop)
{
    cJSON_AddStringToObject(o, "session_id", c->sid);
    gw_sim_be_queue_json(c, o, tts_stop);
}

static bool has_output(const struct conn *c)
{
    return c->q_head != NULL || c->close_now ||
           (c->state == ST_SPEAKING && c->tts_sent < c->tts_released);
}

void gw_sim_be_pump(struct conn *c)
{
    if (c->wsi != NULL && has_output(c)) {
        lws_callback_on_writable(c->wsi);
    }
}

/* LWS_CALLBACK_SERVER_WRITEABLE: one lws_write per call, as lws wants. */
static int on_writable(struct conn *c)
{
    struct out_msg *q = c->q_head;

    if (q != NULL) {
        bool stop = q->tts_stop;
        int n;

        c->q_head = q->next;
        if (c->q_head == NULL) {
            c->q_tail = NULL;
        }
        n = lws_write(c->wsi, q->buf + LWS_PRE, q->len, LWS_WRITE_TEXT);
        free(q);
        if (n < 0) {
            return -1;
        }
        if (stop) {
            gw_sim_be_tts_finished(c);
        }
    } else if (c->state == ST_SPEAKING && c->tts_sent < c->tts_released) {
        if (gw_sim_be_send_audio(c) != 0) {
            return -1;
        }
    } else if (c->close_now) {
        /*
         * Like the xiaozhi server: a plain close, never a goodbye. lws 4.1
         * drops the socket without a close frame when a writeable callback
         * returns -1; from the wsi timer callback it closes politely.
         */
        c->closed_by_mock = true;
        c->mock_code = LWS_CLOSE_STATUS_NORMAL;
        c->close_now = false;
        lws_close_reason(c->wsi, LWS_CLOSE_STATUS_NORMAL, NULL, 0);
        lws_set_timer_usecs(c->wsi, 1);
        return 0;
    }
    gw_sim_be_pump(c);
    return 0;
}

static void read_upgrade(struct lws *wsi, struct upgrade *u)
{
    static const enum lws_token_indexes known[H_COUNT] = {
        [H_AUTHORIZATION] = WSI_TOKEN_HTTP_AUTHORIZATION,
        [H_XFF] = WSI_TOKEN_X_FORWARDED_FOR};
    char name[32], frag[URI_MAX];
    size_t qlen = 0;

    memset(u, 0, sizeof(*u));
    for (int i = 0; i < H_COUNT; i++) {
        if (known[i] != 0) {
            u->present[i] =
                lws_hdr_total_length(wsi, known[i]) > 0 &&
                lws_hdr_copy(wsi, u->val[i], HDR_MAX, known[i]) >= 0;
            continue;
        }
        /* Unknown to lws: stored by name, lowercase, with the colon. */
        int n = snprintf(name, sizeof(name), "%s:", hdr_names[i]);
        u->present[i] =
            lws_hdr_custom_copy(wsi, u->val[i], HDR_MAX, name, n) >= 0;
    }
    if (lws_hdr_copy(wsi, u->path, sizeof(u->path), WSI_TOKEN_GET_URI) < 0) {
        u->path[0] = '\0';
    }
    for (int i = 0; lws_hdr_copy_fragment(wsi, frag, sizeof(frag),
                                          WSI_TOKEN_HTTP_URI_ARGS, i) >= 0;
         i++) {
        int n = snprintf(u->query + qlen, sizeof(u->query) - qlen, "%s%s",
                         i > 0 ? "&" : "", frag);
        if (n < 0 || (size_t)n >= sizeof(u->query) - qlen) {
            break;
        }
        qlen += (size_t)n;
    }
    lws_get_peer_simple(wsi, u->peer, sizeof(u->peer));
    if (strncmp(u->peer, "::ffff:", 7) == 0 && strchr(u->peer, '.') != NULL) {
        memmove(u->peer, u->peer + 7, strlen(u->peer + 7) + 1); /* v4 */
    }
}

static void add_upgrade(cJSON *o, const struct upgrade *u)
{
    cJSON *h;

    gw_sim_be_add_text(o, "path", u->path, strlen(u->path));
    gw_sim_be_add_text(o, "query", u->query, strlen(u->query));
    cJSON_AddStringToObject(o, "peer", u->peer);
    h = cJSON_AddObjectToObject(o, "headers");
    for (int i = 0; i < H_COUNT; i++) {
        if (u->present[i]) {
            gw_sim_be_add_text(h, hdr_names[i], u->val[i], strlen(u->val[i]));
        } else {
            cJSON_AddNullToObject(h, hdr_names[i]);
        }
    }
}

/* A header as a CSV field: "-" when absent, no separators or controls. */
static void csv_field(char *out, size_t cap, const struct upgrade *u, int h)
{
    snprintf(out, cap, "%s", u->present[h] && u->val[h][0] ? u->val[h] : "-");
    for (char *p = out; *p != '\0'; p++) {
        if (*p == ',' || (unsigned char)*p <= ' ' || *p == 0x7f) {
            *p = '_';
        }
    }
}

/* NULL when the upgrade may proceed, else why not. */
static const char *auth_check(const struct mock_opts *o,
                              const struct upgrade *u)
{
    const char *tok = u->val[H_AUTHORIZATION] + 7;
    /* The server formats a missing client-id as "None" and signs that. */
    const char *cid = u->present[H_CLIENT_ID] ? u->val[H_CLIENT_ID] : "None";
    const char *did = u->val[H_DEVICE_ID];
    int rc;

    if (o->auth == AUTH_NONE) {
        return NULL;
    }
    if (!u->present[H_AUTHORIZATION] ||
        strncmp(u->val[H_AUTHORIZATION], "Bearer ", 7) != 0) {
        return "no Bearer authorization";
    }
    if (o->auth == AUTH_BEARER) {
        return gw_credential_equal(o->auth_secret, strlen(o->auth_secret), tok,
                                   strlen(tok))
                   ? NULL
                   : "wrong token";
    }
    rc = gw_credential_backend_token_verify(
        o->auth_secret, strlen(o->auth_secret), cid, strlen(cid), did,
        strlen(did), tok, strlen(tok), (int64_t)time(NULL),
        GW_CREDENTIAL_BACKEND_MAX_AGE);
    return rc == 0               ? NULL
           : rc == GW_EMALFORMED ? "malformed token"
                                 : "bad token";
}

/* The default refusal: HTTP 401 before the upgrade. */
static int confirm_upgrade(struct mock *m, struct lws *wsi, const char *proto)
{
    struct upgrade u;
    const char *why;
    cJSON *ev;

    if (m->opt.auth == AUTH_NONE || m->opt.auth_text || proto == NULL ||
        strcmp(proto, "websocket") != 0) {
        return 0;
    }
    read_upgrade(wsi, &u);
    if ((why = auth_check(&m->opt, &u)) == NULL) {
        return 0;
    }
    ev = gw_sim_be_ev_new("auth_refused", NULL);
    cJSON_AddStringToObject(ev, "reason", why);
    add_upgrade(ev, &u);
    gw_sim_be_ev_emit(m, ev);
    gw_log(GW_LOG_INFO, "backend", "refused %s from %s: %s", u.path, u.peer,
           why);
    if (lws_return_http_status(wsi, HTTP_STATUS_UNAUTHORIZED, NULL) != 0) {
        return -1;
    }
    return 1;
}

static int on_established(struct mock *m, struct lws *wsi, struct pss *pss)
{
    struct upgrade u;
    struct conn *c;
    const char *why;
    bool gw_mode;
    cJSON *ev;

    read_upgrade(wsi, &u);
    if ((c = conn_create(m, wsi)) == NULL) {
        return -1;
    }
    pss->conn = c;
    /* The server's test: the request ends with "?from=mqtt_gateway". */
    gw_mode = strcmp(u.query, "from=mqtt_gateway") == 0;
    c->framing = m->opt.framing >= 0 ? (enum gw_framing)m->opt.framing
                 : gw_mode           ? GW_FRAMING_V2
                                     : GW_FRAMING_RAW;
    csv_field(c->dev, sizeof(c->dev), &u, H_DEVICE_ID);
    csv_field(c->cid, sizeof(c->cid), &u, H_CLIENT_ID);
    snprintf(c->subject, sizeof(c->subject), "dev=%s sid=%s", c->dev, c->sid);
    why = auth_check(&m->opt, &u); /* fails here only with --auth-fail text */
    ev = gw_sim_be_ev_new("connect", c);
    add_upgrade(ev, &u);
    cJSON_AddBoolToObject(ev, "gateway_mode", gw_mode);
    cJSON_AddStringToObject(ev, "framing", gw_sim_be_framing_names[c->framing]);
    cJSON_AddStringToObject(ev, "auth",
                            m->opt.auth == AUTH_NONE ? "none"
                            : why == NULL            ? "ok"
                                                     : why);
    gw_sim_be_ev_emit(m, ev);
    gw_log(GW_LOG_INFO, c->subject, "connected from %s to %s%s%s (%s)", u.peer,
           u.path, u.query[0] ? "?" : "", u.query,
           gw_sim_be_framing_names[c->framing]);
    if (why != NULL) {
        queue_text(c, TEXT_AUTH_FAIL, strlen(TEXT_AUTH_FAIL), false);
        c->close_now = true;
    } else if (!u.present[H_DEVICE_ID]) {
        queue_text(c, TEXT_NO_DEVICE, strlen(TEXT_NO_DEVICE), false);
        c->close_now = true;
    }
    return 0;
}

/* Small messages arrive whole; larger ones are put together here. */
static int on_receive(struct conn *c, const uint8_t *in, size_t len)
{
    bool fin = lws_is_final_fragment(c->wsi) &&
               lws_remaining_packet_payload(c->wsi) == 0;
    bool bin = lws_frame_is_binary(c->wsi);

    if (c->rx_len == 0 && fin) {
        bin ? gw_sim_be_on_binary(c, in, len)
            : gw_sim_be_on_text(c, (const char *)in, len);
        return 0;
    }
    if (len > GW_SIM_BACKEND_MAX_MESSAGE - c->rx_len) {
        c->closed_by_mock = true;
        c->mock_code = LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE;
        lws_close_reason(c->wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE, NULL, 0);
        return -1;
    }
    if (c->rx_len + len > c->rx_cap) {
        size_t cap = c->rx_len + len < 4096 ? 4096 : c->rx_len + len;
        uint8_t *p = realloc(c->rx, cap);
        if (p == NULL) {
            return -1;
        }
        c->rx = p;
        c->rx_cap = cap;
    }
    memcpy(c->rx + c->rx_len, in, len);
    c->rx_len += len;
    if (fin) {
        bin ? gw_sim_be_on_binary(c, c->rx, c->rx_len)
            : gw_sim_be_on_text(c, (const char *)c->rx, c->rx_len);
        free(c->rx); /* rare: idle connections keep no buffer */
        c->rx = NULL;
        c->rx_len = c->rx_cap = 0;
    }
    return 0;
}

static void on_peer_close(struct conn *c, const uint8_t *in, size_t len)
{
    size_t n = len > 2 ? len - 2 : 0;

    c->peer_closed = true;
    c->peer_code = len >= 2 ? (in[0] << 8) | in[1] : 1005;
    if (n >= sizeof(c->peer_reason)) {
        n = sizeof(c->peer_reason) - 1;
    }
    if (n > 0) {
        memcpy(c->peer_reason, in + 2, n);
    }
    c->peer_reason[n] = '\0';
}

static void on_closed(struct mock *m, struct conn *c)
{
    cJSON *ev, *up;
    const char *by = c->closed_by_mock ? "mock"
                     : c->peer_closed  ? "peer"
                     : m->stopping     ? "shutdown"
                                       : "peer";

    if (c->state == ST_LISTENING && c->turn_rx.frames > 0) {
        gw_sim_be_end_turn(c, "close");
    }
    ev = gw_sim_be_ev_new("close", c);
    cJSON_AddStringToObject(ev, "by", by);
    if (c->closed_by_mock || c->peer_closed) {
        cJSON_AddNumberToObject(
            ev, "code", c->closed_by_mock ? c->mock_code : c->peer_code);
    } else {
        cJSON_AddNullToObject(ev, "code"); /* no close frame */
    }
    gw_sim_be_add_text(ev, "reason", c->peer_reason, strlen(c->peer_reason));
    cJSON_AddBoolToObject(ev, "hello", c->hello_seen);
    cJSON_AddNumberToObject(ev, "turns", c->turns_done);
    cJSON_AddNumberToObject(ev, "tts_frames", c->tts_all);
    cJSON_AddNumberToObject(ev, "bad_frames", (double)c->bad_frames);
    cJSON_AddNumberToObject(ev, "bad_opus", (double)c->bad_opus);
    cJSON_AddNumberToObject(ev, "header_nonzero", (double)c->hdr_nonzero);
    cJSON_AddNumberToObject(ev, "outside_turn", (double)c->outside);
    cJSON_AddNumberToObject(ev, "before_hello", (double)c->before_hello);
    cJSON_AddBoolToObject(ev, "goodbye_text", c->goodbye_text);
    up = cJSON_AddObjectToObject(ev, "uplink");
    gw_sim_be_rx_stats_report(up, &c->all_rx);
    gw_sim_be_ev_emit(m, ev);
    gw_log(GW_LOG_INFO, c->subject, "closed by %s after %u turns", by,
           c->turns_done);
    m->conns_closed++;
    conn_release(c);
    if (m->opt.exit_after_sessions > 0 && !m->stopping &&
        m->conns_closed >= (uint64_t)m->opt.exit_after_sessions) {
        uv_timer_start(&m->stop_timer, gw_sim_be_on_stop_timer, 0, 0);
    }
}

int gw_sim_be_on_lws(struct lws *wsi, enum lws_callback_reasons reason,
                     void *user, void *in, size_t len)
{
    struct mock *m = lws_context_user(lws_get_context(wsi));
    struct pss *pss = user;
    struct conn *c = pss != NULL ? pss->conn : NULL;

    switch (reason) {
    case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
        return confirm_upgrade(m, wsi, in);
    case LWS_CALLBACK_HTTP:
        /* Not an upgrade: nothing to serve. */
        lws_return_http_status(wsi, HTTP_STATUS_NOT_FOUND, NULL);
        return -1;
    case LWS_CALLBACK_ESTABLISHED:
        return on_established(m, wsi, pss);
    case LWS_CALLBACK_RECEIVE:
        return c != NULL ? on_receive(c, in, len) : -1;
    case LWS_CALLBACK_SERVER_WRITEABLE:
        return c != NULL ? on_writable(c) : 0;
    case LWS_CALLBACK_TIMER:
        return c != NULL && c->closed_by_mock ? -1 : 0;
    case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
        if (c != NULL) {
            on_peer_close(c, in, len);
        }
        return 0;
    case LWS_CALLBACK_CLOSED:
        if (c != NULL) {
            pss->conn = NULL;
            on_closed(m, c);
        }
        return 0;
    default:
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    }
}
