/*
 * Backend WebSockets on libwebsockets, driven by the instance's libuv loop.
 * lws reaches a connection through its wsi's user pointer; a connection
 * unhooks itself from the wsi the moment it is finished, so lws never calls
 * into freed memory, and it reports on_close from the close callback of its
 * own timer, which by construction never runs inside an API call.
 */
#include "gateway/backend_ws.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libwebsockets.h>
#include <openssl/x509.h>

#include "codec/audio_frame.h"
#include "crypto/credential.h"
#include "gateway/log.h"

#define PROTOCOL_NAME "gw-backend"
#define RX_CHUNK      4096 /* lws reads a message in pieces of this size */
#define TX_MAX_MSGS   256
#define TX_MAX_BYTES  (1024 * 1024)
/* Pooled buffers fit any audio frame and most JSON messages. */
#define POOL_PAYLOAD                                                           \
    (GW_AUDIO_FRAME_MAX_HEADER_LEN + GW_AUDIO_FRAME_MAX_PAYLOAD)
#define POOL_KEEP           8 /* spare buffers kept per connection */
#define DEFAULT_MAX_MESSAGE (64 * 1024)
#define CLOSE_LINGER_MS     3000 /* bound on our close handshake */
#define SHUTDOWN_GRACE_MS   1000 /* for open connections to close cleanly */
#define DESTROY_WAIT_MS     5000 /* for lws's own handles to close */
#define TICK_MS             1
/* lws's own stage timeouts stay above any connect_timeout_ms (<= 120 s),
 * so that ours, which count the whole connect, always fire first. */
#define LWS_STAGE_TIMEOUT_S 130
#define REASON_MAX          128
#define AUTH_MAX            2048 /* "Bearer <token>" */

/* One queued outgoing message, LWS_PRE bytes of headroom in front. */
struct tx_msg {
    struct tx_msg *next; /* queue or free list */
    size_t len;          /* message bytes at buf + LWS_PRE */
    size_t cap;          /* room for the message */
    bool binary;         /* audio frame, else text */
    uint8_t buf[];       /* LWS_PRE headroom, then the message */
};

enum conn_state {
    CONN_CONNECTING, /* TCP, TLS and upgrade under way; timer = timeout */
    CONN_OPEN,       /* upgraded */
    CONN_CLOSING,    /* our close frame is queued or sent; timer = linger */
    CONN_DONE        /* unhooked from lws; on_close is pending */
};

struct gw_backend_conn {
    struct gw_backend_ws *bws;
    struct gw_backend_conn *prev, *next; /* bws->conns */
    struct lws *wsi;                     /* NULL once unhooked */
    uv_timer_t timer; /* connect timeout, close linger; its close is ours */
    enum conn_state state;
    bool close_requested; /* by gw_backend_conn_close or shutdown */
    bool close_sent;      /* lws is sending our close frame */
    struct gw_backend_events ev;
    void *owner;
    enum gw_framing framing;
    int connect_timeout_ms;
    size_t max_message;
    uint64_t started_ms; /* loop time of gw_backend_conn_open */
    /* Strings copied at open; all point into the same allocation. */
    const char *name;      /* backend name, for logs */
    const char *subject;   /* the owner's log prefix (owner's memory) */
    const char *device_id; /* header values */
    const char *client_id;
    const char *forwarded_for; /* NULL when unknown */
    const char *authorization; /* "Bearer ...", NULL for scheme none */
    const char *address;       /* what to connect to */
    const char *host;          /* Host header; TLS name (up to ':') */
    const char *path;          /* verbatim from the url */
    int port;
    bool tls;
    /* A message arriving in pieces; unused when it comes in one. */
    uint8_t *rx_buf;
    size_t rx_len, rx_cap;
    bool rx_binary;
    uint64_t bad_frames; /* this connection's, for rate-limited logs */
    struct tx_msg *tx_head, *tx_tail, *spare;
    size_t tx_count, tx_bytes, spare_count;
    char reason[REASON_MAX]; /* the first cause of the end wins */
};

/* Extra client vhosts, one per distinct backend ca_file. */
struct ca_vhost {
    struct ca_vhost *next;
    struct lws_vhost *vh;
    char name[16]; /* lws keeps the pointer */
    char path[];
};

enum bws_phase {
    BWS_RUNNING,
    BWS_DRAINING,   /* connections closing, up to SHUTDOWN_GRACE_MS */
    BWS_DESTROYING, /* lws context half destroyed, its handles closing */
    BWS_CLOSED
};

struct gw_backend_ws {
    uv_loop_t *loop;
    struct lws_context *ctx; /* lws writes NULL here when it frees it */
    void *ctx_tag;           /* lws's own uv handles carry this in ->data */
    struct ca_vhost *ca;     /* per-backend CA vhosts */
    unsigned n_ca;
    struct gw_backend_conn *conns; /* every connection not yet freed */
    uv_timer_t timer;              /* shutdown steps */
    enum bws_phase phase;
    uint64_t deadline_ms;
    gw_backend_ws_close_cb close_cb;
    void *close_arg;
    struct gw_backend_ws_stats stats;
    unsigned in_lws; /* depth of lws callbacks running now */
};

static int on_lws(struct lws *wsi, enum lws_callback_reasons reason, void *user,
                  void *in, size_t len);
static void on_shutdown_tick(uv_timer_t *timer);

static const struct lws_protocols protocols[] = {
    {PROTOCOL_NAME, on_lws, 0, RX_CHUNK, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

/*
 * lws's warnings and errors go to our log as warnings (its "errors" are
 * mostly one peer's trouble, e.g. a certificate that does not verify);
 * its chatter stays off.
 */
static void lws_log_line(int level, const char *line)
{
    char buf[256];
    size_t n = strnlen(line, sizeof(buf) - 1);

    memcpy(buf, line, n);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) {
        n--;
    }
    buf[n] = '\0';
    (void)level;
    gw_log(GW_LOG_WARN, "lws", "%s", buf);
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
set_reason(struct gw_backend_conn *conn, const char *fmt, ...)
{
    va_list ap;

    if (conn->reason[0] != '\0') {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(conn->reason, sizeof(conn->reason), fmt, ap);
    va_end(ap);
}

/* ---- buffers ---------------------------------------------------------- */

static struct tx_msg *msg_get(struct gw_backend_conn *conn, size_t len)
{
    struct tx_msg *msg;

    if (len <= POOL_PAYLOAD && conn->spare != NULL) {
        msg = conn->spare;
        conn->spare = msg->next;
        conn->spare_count--;
    } else {
        size_t cap = len <= POOL_PAYLOAD ? POOL_PAYLOAD : len;
        msg = malloc(sizeof(*msg) + LWS_PRE + cap);
        if (msg == NULL) {
            return NULL;
        }
        msg->cap = cap;
    }
    msg->next = NULL;
    msg->len = 0;
    return msg;
}

static void msg_put(struct gw_backend_conn *conn, struct tx_msg *msg)
{
    if (msg->cap == POOL_PAYLOAD && conn->spare_count < POOL_KEEP) {
        msg->next = conn->spare;
        conn->spare = msg;
        conn->spare_count++;
        return;
    }
    free(msg);
}

static void msg_list_free(struct tx_msg *msg)
{
    while (msg != NULL) {
        struct tx_msg *next = msg->next;
        free(msg);
        msg = next;
    }
}

/* ---- connection end --------------------------------------------------- */

static void on_conn_closed(uv_handle_t *handle)
{
    struct gw_backend_conn *conn = handle->data;
    struct gw_backend_ws *bws = conn->bws;

    if (conn->prev != NULL) {
        conn->prev->next = conn->next;
    } else {
        bws->conns = conn->next;
    }
    if (conn->next != NULL) {
        conn->next->prev = conn->prev;
    }
    bws->stats.live--;
    gw_log(GW_LOG_INFO, conn->subject, "backend %s closed after %llu ms: %s",
           conn->name,
           (unsigned long long)(uv_now(bws->loop) - conn->started_ms),
           conn->reason);
    if (conn->ev.on_close != NULL) {
        conn->ev.on_close(conn, conn->reason, conn->owner);
    }
    msg_list_free(conn->tx_head);
    msg_list_free(conn->spare);
    free(conn->rx_buf);
    free(conn);
    if (bws->phase == BWS_DRAINING && bws->conns == NULL) {
        uv_timer_start(&bws->timer, on_shutdown_tick, 0, TICK_MS);
    }
}

/*
 * Ends the connection as far as the owner is concerned. kill: lws still
 * holds a live wsi that must be torn down (otherwise lws is closing it and
 * is calling us from that close).
 */
static void finish(struct gw_backend_conn *conn, const char *reason, bool kill)
{
    if (conn->state == CONN_DONE) {
        return;
    }
    if (conn->state == CONN_CONNECTING && !conn->close_requested) {
        conn->bws->stats.connect_errors++;
    }
    conn->state = CONN_DONE;
    set_reason(conn, "%s", reason);
    if (conn->wsi != NULL) {
        lws_set_wsi_user(conn->wsi, NULL);
        if (kill) {
            lws_set_timeout(conn->wsi, PENDING_TIMEOUT_USER_OK,
                            LWS_TO_KILL_ASYNC);
        }
        conn->wsi = NULL;
    }
    uv_timer_stop(&conn->timer);
    uv_close((uv_handle_t *)&conn->timer, on_conn_closed);
}

static void on_conn_timer(uv_timer_t *timer)
{
    struct gw_backend_conn *conn = timer->data;

    if (conn->state == CONN_CONNECTING) {
        finish(conn, "connect timeout", true);
    } else if (conn->state == CONN_CLOSING) {
        /* The backend never answered our close: drop the socket. */
        finish(conn, "closed by gateway", true);
    }
}

/* Queues the close frame behind whatever is still queued. */
static void begin_close(struct gw_backend_conn *conn)
{
    conn->close_requested = true;
    set_reason(conn, "closed by gateway");
    if (conn->state == CONN_CONNECTING) {
        finish(conn, conn->reason, true);
        return;
    }
    if (conn->state != CONN_OPEN) {
        return;
    }
    conn->state = CONN_CLOSING;
    uv_timer_start(&conn->timer, on_conn_timer, CLOSE_LINGER_MS, 0);
    lws_callback_on_writable(conn->wsi);
}

/* ---- lws callbacks ---------------------------------------------------- */

static int append_headers(struct gw_backend_conn *conn, struct lws *wsi,
                          void *in, size_t len)
{
    unsigned char **p = in;
    unsigned char *end = *p + len;
    const char *names[] = {"device-id:", "client-id:", "protocol-version:",
                           "authorization:", "x-forwarded-for:"};
    const char *values[] = {conn->device_id, conn->client_id, "2",
                            conn->authorization, conn->forwarded_for};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (values[i] == NULL) {
            continue;
        }
        if (lws_add_http_header_by_name(wsi, (const unsigned char *)names[i],
                                        (const unsigned char *)values[i],
                                        (int)strlen(values[i]), p, end)) {
            set_reason(conn, "connect failed: upgrade headers too long");
            return -1;
        }
    }
    return 0;
}

/*
 * Starts lws's closing handshake. Not by returning -1 from the callback at
 * hand, as lws documents: the Debian build of 4.1.6 has _DEBUG, whose
 * libuv "repeat test" in the service loop then closes the wsi a second
 * time at once, dropping the socket before the close frame goes out. A
 * close asked for from the wsi's timer callback takes the normal path.
 */
static void close_with(struct gw_backend_conn *conn, struct lws *wsi,
                       enum lws_close_status code)
{
    conn->close_sent = true;
    lws_close_reason(wsi, code, NULL, 0);
    lws_set_timer_usecs(wsi, 0);
}

static void on_established(struct gw_backend_conn *conn)
{
    conn->state = CONN_OPEN;
    conn->bws->stats.connects++;
    uv_timer_stop(&conn->timer);
    gw_log(GW_LOG_DEBUG, conn->subject, "backend %s connected in %llu ms",
           conn->name,
           (unsigned long long)(uv_now(conn->bws->loop) - conn->started_ms));
    if (conn->ev.on_open != NULL) {
        conn->ev.on_open(conn, conn->owner);
    }
    if (conn->state == CONN_OPEN && conn->tx_head != NULL) {
        lws_callback_on_writable(conn->wsi);
    }
}

static void deliver(struct gw_backend_conn *conn, const uint8_t *buf,
                    size_t len, bool binary)
{
    struct gw_backend_ws *bws = conn->bws;
    const uint8_t *opus;
    size_t opus_len;
    uint32_t ts;

    if (!binary) {
        bws->stats.rx_text++;
        if (conn->ev.on_text != NULL) {
            conn->ev.on_text(conn, (const char *)buf, len, conn->owner);
        }
        return;
    }
    int rc =
        gw_audio_frame_decode(conn->framing, buf, len, &ts, &opus, &opus_len);
    if (rc != 0) {
        bws->stats.rx_bad_frames++;
        conn->bad_frames++;
        /* 1st, 2nd, 4th, 8th...: a broken backend cannot flood the log. */
        if ((conn->bad_frames & (conn->bad_frames - 1)) == 0) {
            GW_LOG(GW_LOG_DEBUG, conn->subject,
                   "backend %s: dropped binary message of %zu bytes: %s "
                   "(%llu so far)",
                   conn->name, len, gw_strerror(rc),
                   (unsigned long long)conn->bad_frames);
        }
        return;
    }
    bws->stats.rx_audio++;
    if (conn->ev.on_audio != NULL) {
        conn->ev.on_audio(conn, ts, opus, opus_len, conn->owner);
    }
}

static int on_receive(struct gw_backend_conn *conn, struct lws *wsi,
                      const uint8_t *in, size_t len)
{
    bool first = lws_is_first_fragment(wsi);
    bool final = lws_is_final_fragment(wsi);

    if (conn->state != CONN_OPEN) {
        return 0; /* closing: the owner has stopped listening */
    }
    if (first) {
        conn->rx_len = 0;
        conn->rx_binary = lws_frame_is_binary(wsi);
    }
    if (len > conn->max_message - conn->rx_len) {
        set_reason(conn, "message too big");
        conn->close_requested = true;
        conn->state = CONN_CLOSING;
        uv_timer_start(&conn->timer, on_conn_timer, CLOSE_LINGER_MS, 0);
        close_with(conn, wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE);
        return 0;
    }
    if (first && final) {
        deliver(conn, in, len, conn->rx_binary); /* the common case: no copy */
        return 0;
    }
    if (conn->rx_len + len > conn->rx_cap) {
        size_t cap = conn->rx_cap > 0 ? conn->rx_cap * 2 : RX_CHUNK * 2;
        while (cap < conn->rx_len + len) {
            cap *= 2;
        }
        cap = cap < conn->max_message ? cap : conn->max_message;
        uint8_t *grown = realloc(conn->rx_buf, cap);
        if (grown == NULL) {
            set_reason(conn, "out of memory");
            return -1;
        }
        conn->rx_buf = grown;
        conn->rx_cap = cap;
    }
    memcpy(conn->rx_buf + conn->rx_len, in, len);
    conn->rx_len += len;
    if (final) {
        size_t n = conn->rx_len;
        conn->rx_len = 0;
        deliver(conn, conn->rx_buf, n, conn->rx_binary);
    }
    return 0;
}

/*
 * Hands one message to lws and recycles its buffer. lws keeps whatever
 * the socket does not take and sends it first, before any later write.
 */
static int write_msg(struct gw_backend_conn *conn, struct lws *wsi,
                     struct tx_msg *msg)
{
    size_t len = msg->len;
    int n = lws_write(wsi, msg->buf + LWS_PRE, len,
                      msg->binary ? LWS_WRITE_BINARY : LWS_WRITE_TEXT);

    if (msg->binary) {
        conn->bws->stats.tx_audio++;
    } else {
        conn->bws->stats.tx_text++;
    }
    msg_put(conn, msg);
    if (n < 0 || (size_t)n < len) {
        set_reason(conn, "write failed");
        return -1;
    }
    return 0;
}

/* One message per writable event; the close frame goes after the last. */
static int on_writeable(struct gw_backend_conn *conn, struct lws *wsi)
{
    struct tx_msg *msg = conn->tx_head;

    if (msg == NULL) {
        if (conn->state == CONN_CLOSING && !conn->close_sent) {
            close_with(conn, wsi, LWS_CLOSE_STATUS_NORMAL);
        }
        return 0;
    }
    conn->tx_head = msg->next;
    if (conn->tx_head == NULL) {
        conn->tx_tail = NULL;
    }
    conn->tx_count--;
    conn->tx_bytes -= msg->len;
    if (write_msg(conn, wsi, msg) < 0) {
        return -1;
    }
    if (conn->tx_head != NULL || conn->state == CONN_CLOSING) {
        lws_callback_on_writable(wsi);
    }
    return 0;
}

static void on_connect_error(struct gw_backend_conn *conn, struct lws *wsi,
                             const char *in)
{
    char what[96] = "unknown error";
    int status = lws_http_client_http_response(wsi);

    if (in != NULL && in[0] != '\0') {
        size_t n = strnlen(in, sizeof(what) - 1);
        memcpy(what, in, n);
        while (n > 0 && (what[n - 1] == '\n' || what[n - 1] == ' ')) {
            n--;
        }
        what[n] = '\0';
    }
    if (status > 0 && status != 101) {
        set_reason(conn, "connect failed: %s (HTTP %d)", what, status);
    } else {
        set_reason(conn, "connect failed: %s", what);
    }
    finish(conn, conn->reason, false);
}

/* The reasons whose user pointer is the wsi's (ours: a connection). */
static bool per_connection(enum lws_callback_reasons reason)
{
    switch (reason) {
    case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER:
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
    case LWS_CALLBACK_CLIENT_RECEIVE:
    case LWS_CALLBACK_CLIENT_WRITEABLE:
    case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
    case LWS_CALLBACK_CLIENT_CLOSED:
    case LWS_CALLBACK_WSI_DESTROY:
    case LWS_CALLBACK_TIMER:
        return true;
    default:
        return false;
    }
}

/*
 * Called for each certificate of the chain with OpenSSL's verdict, which
 * stands (0 = no objection). lws reports a failure only as "SSL err 1";
 * the verifier's own words make a better reason.
 */
static int on_cert_verify(struct lws *wsi, X509_STORE_CTX *store, size_t ok)
{
    struct gw_backend_conn *conn = lws_wsi_user(wsi);
    int err = X509_STORE_CTX_get_error(store);

    if (!ok && conn != NULL && conn->state == CONN_CONNECTING &&
        err != X509_V_OK) {
        set_reason(conn, "connect failed: certificate: %s",
                   X509_verify_cert_error_string(err));
    }
    return 0;
}

static int handle_lws(struct lws *wsi, enum lws_callback_reasons reason,
                      void *user, void *in, size_t len)
{
    /*
     * Other reasons pass other things as user (the TLS callbacks pass an
     * SSL_CTX). Unhooked connections have a NULL user: lws is tearing
     * the wsi down and nobody is listening any more.
     */
    struct gw_backend_conn *conn = per_connection(reason) ? user : NULL;

    if (reason == LWS_CALLBACK_OPENSSL_PERFORM_SERVER_CERT_VERIFICATION) {
        return on_cert_verify(wsi, user, len);
    }

    if (conn == NULL || conn->state == CONN_DONE) {
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    }
    conn->wsi = wsi;
    switch (reason) {
    case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER:
        return append_headers(conn, wsi, in, len);
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
        on_established(conn);
        return 0;
    case LWS_CALLBACK_CLIENT_RECEIVE:
        return on_receive(conn, wsi, in, len);
    case LWS_CALLBACK_CLIENT_WRITEABLE:
        return on_writeable(conn, wsi);
    case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE: {
        const uint8_t *code = in;
        set_reason(conn, "closed by backend %d",
                   len >= 2 ? (code[0] << 8) | code[1] : 1005);
        return 0;
    }
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
        on_connect_error(conn, wsi, in);
        return 0;
    case LWS_CALLBACK_TIMER:
        return conn->close_sent ? -1 : 0; /* see close_with() */
    default:                              /* CLIENT_CLOSED, WSI_DESTROY */
        finish(conn,
               conn->close_requested ? "closed by gateway" : "connection lost",
               false);
        return 0;
    }
}

/* Every lws callback passes here: see can_write_now(). */
static int on_lws(struct lws *wsi, enum lws_callback_reasons reason, void *user,
                  void *in, size_t len)
{
    struct gw_backend_ws *bws = lws_context_user(lws_get_context(wsi));
    int rc;

    if (bws != NULL) {
        bws->in_lws++;
    }
    rc = handle_lws(wsi, reason, user, in, len);
    if (bws != NULL) {
        bws->in_lws--;
    }
    return rc;
}

/* ---- opening ---------------------------------------------------------- */

/* A url split in place: ws[s]://host[:port][/path][?query]. */
struct url_parts {
    bool tls;
    const char *host; /* without IPv6 brackets */
    size_t host_len;
    const char *authority; /* host[:port] as written, for Host */
    size_t authority_len;
    int port;
    const char *path; /* verbatim, may be empty or start with '?' */
    size_t path_len;
};

static int parse_port(const char *s, const char *end, int *port)
{
    int v = 0;

    if (s == end) {
        return GW_EINVAL;
    }
    for (; s < end; s++) {
        if (*s < '0' || *s > '9' || v > 6553) {
            return GW_EINVAL;
        }
        v = v * 10 + (*s - '0');
    }
    if (v < 1 || v > 65535) {
        return GW_EINVAL;
    }
    *port = v;
    return 0;
}

static int parse_url(const char *url, struct url_parts *u)
{
    const char *p, *end, *port_sep = NULL;

    if (strncmp(url, "ws://", 5) == 0) {
        u->tls = false;
        u->port = 80;
        p = url + 5;
    } else if (strncmp(url, "wss://", 6) == 0) {
        u->tls = true;
        u->port = 443;
        p = url + 6;
    } else {
        return GW_EINVAL;
    }
    end = p + strcspn(p, "/?#");
    u->authority = p;
    u->authority_len = (size_t)(end - p);
    if (memchr(p, '@', u->authority_len) != NULL) {
        return GW_EINVAL; /* credentials in the url are not supported */
    }
    if (*p == '[') {
        const char *close = memchr(p, ']', u->authority_len);
        if (close == NULL || (close + 1 != end && close[1] != ':')) {
            return GW_EINVAL;
        }
        u->host = p + 1;
        u->host_len = (size_t)(close - p - 1);
        port_sep = close + 1 != end ? close + 1 : NULL;
    } else {
        port_sep = memchr(p, ':', u->authority_len);
        u->host = p;
        u->host_len =
            port_sep != NULL ? (size_t)(port_sep - p) : u->authority_len;
    }
    if (u->host_len == 0 ||
        (port_sep != NULL && parse_port(port_sep + 1, end, &u->port) != 0)) {
        return GW_EINVAL;
    }
    /* The path goes out exactly as configured: the xiaozhi server picks
     * its framing from the query. Only a fragment, never sent, is cut. */
    u->path = end;
    u->path_len = strcspn(end, "#");
    for (size_t i = 0; i < u->path_len; i++) {
        if ((unsigned char)end[i] <= 0x20 || (unsigned char)end[i] >= 0x7f) {
            return GW_EINVAL;
        }
    }
    return 0;
}

/* Header values are peer- or config-supplied: no CR, LF or controls. */
static bool header_safe(const char *s)
{
    for (; *s != '\0'; s++) {
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f) {
            return false;
        }
    }
    return true;
}

static int make_authorization(const struct gw_backend_connect *params,
                              const char *client_id, char *out, size_t cap)
{
    const struct gw_backend_config *be = params->backend;
    char token[GW_CREDENTIAL_BACKEND_TOKEN_MAX];
    int rc;

    switch (be->auth.scheme) {
    case GW_AUTH_NONE:
        out[0] = '\0';
        return 0;
    case GW_AUTH_BEARER:
        if (be->auth.token == NULL || be->auth.token[0] == '\0' ||
            !header_safe(be->auth.token) ||
            (size_t)snprintf(out, cap, "Bearer %s", be->auth.token) >= cap) {
            return GW_EINVAL;
        }
        return 0;
    case GW_AUTH_XIAOZHI_HMAC:
        if (be->auth.secret == NULL) {
            return GW_EINVAL;
        }
        rc = gw_credential_backend_token_make(
            be->auth.secret, strlen(be->auth.secret), client_id,
            strlen(client_id), params->device_id, strlen(params->device_id),
            (int64_t)time(NULL), token, sizeof(token));
        if (rc != 0) {
            return rc;
        }
        snprintf(out, cap, "Bearer %s", token);
        return 0;
    }
    return GW_EINVAL;
}

/* Copies n bytes and a NUL to *arena, returns the copy. */
static const char *arena_put(char **arena, const char *s, size_t n)
{
    char *copy = *arena;

    memcpy(copy, s, n);
    copy[n] = '\0';
    *arena += n + 1;
    return copy;
}

static struct gw_backend_conn *
conn_create(const struct gw_backend_connect *params, const struct url_parts *u,
            const char *client_id, const char *authorization)
{
    const struct gw_backend_config *be = params->backend;
    const char *fwd = params->forwarded_for;
    bool bare = u->path_len == 0 || u->path[0] == '?'; /* needs a '/' */
    size_t need = strlen(be->name) + strlen(params->device_id) +
                  strlen(client_id) + (fwd != NULL ? strlen(fwd) : 0) +
                  strlen(authorization) + u->host_len + u->authority_len +
                  u->path_len + 1 + 9;
    struct gw_backend_conn *conn = calloc(1, sizeof(*conn) + need);
    char *arena;

    if (conn == NULL) {
        return NULL;
    }
    arena = (char *)(conn + 1);
    conn->name = arena_put(&arena, be->name, strlen(be->name));
    /* Not copied: the owner updates it once the session has its id. */
    conn->subject =
        params->log_subject != NULL ? params->log_subject : "backend";
    conn->device_id =
        arena_put(&arena, params->device_id, strlen(params->device_id));
    conn->client_id = arena_put(&arena, client_id, strlen(client_id));
    if (fwd != NULL && fwd[0] != '\0') {
        conn->forwarded_for = arena_put(&arena, fwd, strlen(fwd));
    }
    if (authorization[0] != '\0') {
        conn->authorization =
            arena_put(&arena, authorization, strlen(authorization));
    }
    conn->address = arena_put(&arena, u->host, u->host_len);
    conn->host = arena_put(&arena, u->authority, u->authority_len);
    /* A url with no path, or only a query, still needs the leading '/'. */
    conn->path = arena;
    if (bare) {
        *arena++ = '/';
    }
    memcpy(arena, u->path, u->path_len);
    arena[u->path_len] = '\0';
    conn->port = u->port;
    conn->tls = u->tls;
    conn->framing = be->framing;
    conn->connect_timeout_ms =
        be->connect_timeout_ms > 0 ? be->connect_timeout_ms : 5000;
    conn->max_message = params->max_message_bytes > 0
                            ? params->max_message_bytes
                            : DEFAULT_MAX_MESSAGE;
    return conn;
}

/* The client vhost trusting ca_file, created on first use. */
static struct lws_vhost *ca_vhost(struct gw_backend_ws *bws,
                                  const char *ca_file)
{
    struct lws_context_creation_info info;
    struct ca_vhost *ca;

    for (ca = bws->ca; ca != NULL; ca = ca->next) {
        if (strcmp(ca->path, ca_file) == 0) {
            return ca->vh;
        }
    }
    ca = calloc(1, sizeof(*ca) + strlen(ca_file) + 1);
    if (ca == NULL) {
        return NULL;
    }
    strcpy(ca->path, ca_file);
    snprintf(ca->name, sizeof(ca->name), "ca-%u", bws->n_ca);
    memset(&info, 0, sizeof(info));
    info.options = LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
    info.port = CONTEXT_PORT_NO_LISTEN;
    info.protocols = protocols;
    info.vhost_name = ca->name;
    info.client_ssl_ca_filepath = ca->path;
    info.connect_timeout_secs = LWS_STAGE_TIMEOUT_S;
    ca->vh = lws_create_vhost(bws->ctx, &info);
    if (ca->vh == NULL) {
        free(ca);
        return NULL;
    }
    ca->next = bws->ca;
    bws->ca = ca;
    bws->n_ca++;
    return ca->vh;
}

static void conn_start(struct gw_backend_conn *conn, struct lws_vhost *vh)
{
    struct gw_backend_ws *bws = conn->bws;
    struct lws_client_connect_info ci;

    memset(&ci, 0, sizeof(ci));
    ci.context = bws->ctx;
    ci.vhost = vh;
    ci.address = conn->address;
    ci.port = conn->port;
    ci.path = conn->path;
    ci.host = conn->host;
    ci.ssl_connection = conn->tls ? LCCSCF_USE_SSL : 0;
    ci.local_protocol_name = PROTOCOL_NAME;
    ci.userdata = conn;
    ci.pwsi = &conn->wsi;
    /*
     * lws resolves the name synchronously here (this build has no async
     * DNS): configs name backends by IP or a local name. Any callback
     * lws makes from inside this call can only finish() the connection,
     * which defers on_close to the loop.
     */
    if (lws_client_connect_via_info(&ci) == NULL) {
        finish(conn, "connect failed: could not start", false);
    }
}

int gw_backend_conn_open(struct gw_backend_ws *bws,
                         const struct gw_backend_connect *params,
                         const struct gw_backend_events *ev, void *owner,
                         struct gw_backend_conn **out)
{
    char authorization[AUTH_MAX]; /* static tokens may be long JWTs */
    struct lws_vhost *vh = NULL;
    struct gw_backend_conn *conn;
    struct url_parts url;
    const char *client_id;
    int rc;

    if (bws == NULL || params == NULL || params->backend == NULL ||
        params->backend->url == NULL || params->backend->name == NULL ||
        ev == NULL || out == NULL || params->device_id == NULL ||
        params->device_id[0] == '\0') {
        return GW_EINVAL;
    }
    if (bws->phase != BWS_RUNNING) {
        return GW_EPROTO;
    }
    client_id = params->client_id != NULL && params->client_id[0] != '\0'
                    ? params->client_id
                    : GW_CREDENTIAL_DEFAULT_CLIENT_ID;
    if (!header_safe(params->device_id) || !header_safe(client_id) ||
        (params->forwarded_for != NULL &&
         !header_safe(params->forwarded_for)) ||
        parse_url(params->backend->url, &url) != 0) {
        return GW_EINVAL;
    }
    rc = make_authorization(params, client_id, authorization,
                            sizeof(authorization));
    if (rc != 0) {
        return rc;
    }
    if (url.tls && params->backend->ca_file != NULL &&
        params->backend->ca_file[0] != '\0') {
        vh = ca_vhost(bws, params->backend->ca_file);
        if (vh == NULL) {
            return GW_ECONFIG;
        }
    }
    conn = conn_create(params, &url, client_id, authorization);
    if (conn == NULL) {
        return GW_ENOMEM;
    }
    conn->bws = bws;
    conn->ev = *ev;
    conn->owner = owner;
    conn->state = CONN_CONNECTING;
    /* The loop's clock is as old as this loop turn: the timeout counts
     * from now, whatever ran before us in the turn. */
    uv_update_time(bws->loop);
    conn->started_ms = uv_now(bws->loop);
    conn->next = bws->conns;
    if (bws->conns != NULL) {
        bws->conns->prev = conn;
    }
    bws->conns = conn;
    bws->stats.live++;
    uv_timer_init(bws->loop, &conn->timer);
    conn->timer.data = conn;
    uv_timer_start(&conn->timer, on_conn_timer,
                   (uint64_t)conn->connect_timeout_ms, 0);
    conn_start(conn, vh);
    *out = conn;
    return 0;
}

/* ---- sending ---------------------------------------------------------- */

/* Reserves a queue slot for len bytes, or counts a drop. */
static int queue_reserve(struct gw_backend_conn *conn, size_t len,
                         struct tx_msg **out)
{
    if (conn->close_requested || conn->state == CONN_DONE) {
        return GW_EPROTO;
    }
    if (conn->tx_count >= TX_MAX_MSGS || len > TX_MAX_BYTES - conn->tx_bytes) {
        conn->bws->stats.tx_dropped++;
        return GW_ELIMIT;
    }
    *out = msg_get(conn, len);
    return *out != NULL ? 0 : GW_ENOMEM;
}

/*
 * Whether a message may go to lws at once instead of through a writable
 * callback. Asking lws for a writable callback per message costs two
 * epoll_ctl calls each way on the libuv backend (uv_poll_start re-arms
 * the descriptor) plus a loop turn, several times the write itself; so
 * when nothing is queued before it, the socket took everything so far
 * and no lws callback is running (lws does not expect writes from inside
 * its service), the message is written right away. Anything lws could
 * not send stays in its own buffer, lws_partial_buffered() says so, and
 * later messages then queue here behind it, bounded as before.
 */
static bool can_write_now(const struct gw_backend_conn *conn)
{
    return conn->state == CONN_OPEN && conn->tx_head == NULL &&
           conn->bws->in_lws == 0 && !lws_partial_buffered(conn->wsi);
}

static void queue_push(struct gw_backend_conn *conn, struct tx_msg *msg)
{
    if (can_write_now(conn)) {
        if (write_msg(conn, conn->wsi, msg) < 0) {
            /* Not inside a callback, so it cannot return -1: lws closes
             * the connection from its loop, and on_close follows. */
            lws_set_timeout(conn->wsi, PENDING_TIMEOUT_KILLED_BY_PARENT,
                            LWS_TO_KILL_ASYNC);
        }
        return;
    }
    if (conn->tx_tail != NULL) {
        conn->tx_tail->next = msg;
    } else {
        conn->tx_head = msg;
    }
    conn->tx_tail = msg;
    conn->tx_count++;
    conn->tx_bytes += msg->len;
    /*
     * A non-empty queue always has a write request pending (on_writeable
     * renews it; on_established makes the first after connecting), so
     * only the first message of an empty queue asks.
     */
    if (conn->state == CONN_OPEN && conn->tx_count == 1) {
        lws_callback_on_writable(conn->wsi);
    }
}

int gw_backend_conn_send_text(struct gw_backend_conn *conn, const char *text,
                              size_t len)
{
    struct tx_msg *msg;
    int rc;

    if (conn == NULL || (text == NULL && len > 0)) {
        return GW_EINVAL;
    }
    rc = queue_reserve(conn, len, &msg);
    if (rc != 0) {
        return rc;
    }
    if (len > 0) {
        memcpy(msg->buf + LWS_PRE, text, len);
    }
    msg->len = len;
    msg->binary = false;
    queue_push(conn, msg);
    return 0;
}

int gw_backend_conn_send_audio(struct gw_backend_conn *conn, uint32_t timestamp,
                               const uint8_t *opus, size_t len)
{
    struct tx_msg *msg;
    size_t framed;
    int rc;

    if (conn == NULL || (opus == NULL && len > 0)) {
        return GW_EINVAL;
    }
    if (len > GW_AUDIO_FRAME_MAX_PAYLOAD) {
        return GW_ETOOBIG;
    }
    rc = queue_reserve(conn, gw_audio_frame_header_len(conn->framing) + len,
                       &msg);
    if (rc != 0) {
        return rc;
    }
    /* Header and payload are written straight into the queued buffer. */
    rc = gw_audio_frame_encode(conn->framing, timestamp, opus, len,
                               msg->buf + LWS_PRE, msg->cap, &framed);
    if (rc != 0) {
        msg_put(conn, msg);
        return rc;
    }
    msg->len = framed;
    msg->binary = true;
    queue_push(conn, msg);
    return 0;
}

void gw_backend_conn_close(struct gw_backend_conn *conn)
{
    if (conn == NULL || conn->close_requested || conn->state == CONN_DONE) {
        return;
    }
    begin_close(conn);
}

/* ---- the context ------------------------------------------------------ */

/*
 * With no CA file of our own, name the system bundle explicitly: lws
 * loads the default paths either way, but otherwise also probes a
 * directory that does not exist on Debian and logs an error about it.
 */
static const char *default_ca_file(void)
{
    const char *path = X509_get_default_cert_file();

    return path != NULL && access(path, R_OK) == 0 ? path : NULL;
}

int gw_backend_ws_init(uv_loop_t *loop, const char *ca_file,
                       struct gw_backend_ws **out)
{
    struct lws_context_creation_info info;
    void *loops[1] = {loop};
    struct gw_backend_ws *bws;

    if (loop == NULL || out == NULL) {
        return GW_EINVAL;
    }
    bws = calloc(1, sizeof(*bws));
    if (bws == NULL) {
        return GW_ENOMEM;
    }
    lws_set_log_level(LLL_ERR | LLL_WARN, lws_log_line);
    memset(&info, 0, sizeof(info));
    info.options =
        LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
    info.foreign_loops = loops;
    info.port = CONTEXT_PORT_NO_LISTEN;
    info.protocols = protocols;
    info.gid = -1;
    info.uid = -1;
    info.client_ssl_ca_filepath =
        ca_file != NULL && ca_file[0] != '\0' ? ca_file : default_ca_file();
    info.timeout_secs = LWS_STAGE_TIMEOUT_S;
    info.connect_timeout_secs = LWS_STAGE_TIMEOUT_S;
    info.pcontext = &bws->ctx;
    info.user = bws; /* on_lws finds bws through the context */
    /* No info.extensions: permessage-deflate is never offered. */
    bws->ctx = lws_create_context(&info);
    if (bws->ctx == NULL) {
        gw_log(GW_LOG_ERROR, "backend",
               "cannot create the WebSocket context (is the libuv event "
               "library of libwebsockets installed?)");
        free(bws);
        return GW_ECONFIG;
    }
    bws->ctx_tag = bws->ctx;
    bws->loop = loop;
    uv_timer_init(loop, &bws->timer);
    bws->timer.data = bws;
    *out = bws;
    return 0;
}

static void find_tagged(uv_handle_t *handle, void *arg)
{
    void **tag = arg;

    if (handle->data == *tag) {
        *tag = NULL;
    }
}

/* Whether any of lws's own uv handles (timer, idle) is still open. */
static bool lws_handles_left(struct gw_backend_ws *bws)
{
    void *tag = bws->ctx_tag;

    uv_walk(bws->loop, find_tagged, &tag);
    return tag == NULL;
}

static void on_bws_closed(uv_handle_t *handle)
{
    struct gw_backend_ws *bws = handle->data;

    while (bws->ca != NULL) {
        struct ca_vhost *next = bws->ca->next;
        free(bws->ca);
        bws->ca = next;
    }
    if (bws->close_cb != NULL) {
        bws->close_cb(bws, bws->close_arg);
    }
    free(bws);
}

/*
 * Shutdown, one step per tick: wait for the connections (forcing them
 * after the grace period), destroy the context (first phase: lws closes
 * its uv handles), wait until those handles are gone from the loop, then
 * destroy again (second phase: lws frees the context).
 */
static void on_shutdown_tick(uv_timer_t *timer)
{
    struct gw_backend_ws *bws = timer->data;

    if (bws->phase == BWS_DRAINING) {
        if (bws->conns != NULL) {
            for (struct gw_backend_conn *c = bws->conns; c != NULL;
                 c = c->next) {
                finish(c, "closed by gateway", true);
            }
            return; /* their close callbacks come next */
        }
        bws->phase = BWS_DESTROYING;
        bws->deadline_ms = uv_now(bws->loop) + DESTROY_WAIT_MS;
        lws_context_destroy(bws->ctx);
        return;
    }
    if (bws->phase != BWS_DESTROYING) {
        return;
    }
    if (lws_handles_left(bws)) {
        if (uv_now(bws->loop) < bws->deadline_ms) {
            return;
        }
        gw_log(GW_LOG_ERROR, "backend",
               "WebSocket context did not finish closing; leaking it");
    } else if (bws->ctx != NULL) {
        lws_context_destroy(bws->ctx);
    }
    bws->phase = BWS_CLOSED;
    uv_timer_stop(timer);
    uv_close((uv_handle_t *)timer, on_bws_closed);
}

void gw_backend_ws_close(struct gw_backend_ws *bws, gw_backend_ws_close_cb cb,
                         void *arg)
{
    if (bws == NULL || bws->phase != BWS_RUNNING) {
        return;
    }
    bws->phase = BWS_DRAINING;
    bws->close_cb = cb;
    bws->close_arg = arg;
    for (struct gw_backend_conn *c = bws->conns; c != NULL; c = c->next) {
        if (!c->close_requested && c->state != CONN_DONE) {
            begin_close(c);
        }
    }
    uv_timer_start(&bws->timer, on_shutdown_tick,
                   bws->conns != NULL ? SHUTDOWN_GRACE_MS : 0, TICK_MS);
}

void gw_backend_ws_get_stats(const struct gw_backend_ws *bws,
                             struct gw_backend_ws_stats *out)
{
    *out = bws->stats;
}
