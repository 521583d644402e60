/*
 * Backend WebSockets on libwebsockets, driven by the instance's libuv loop.
 * lws reaches a connection through its wsi's user pointer; a connection
 * unhooks itself from the wsi the moment it is finished, so lws never calls
 * into freed memory, and it reports on_close from the close callback of its
 * own timer, which by construction never runs inside an API call.
 * This file: the context and its shutdown, the end of a connection and
 * the dispatch of lws callbacks; opening is in backend_open.c, a
 * connection's traffic in backend_io.c.
 */
#include "gateway/backend/backend_ws.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libwebsockets.h>
#include <openssl/x509.h>

#include "common/log.h"
#include "gateway/backend/backend_ws_int.h"

#define SHUTDOWN_GRACE_MS 1000 /* for open connections to close cleanly */
#define TICK_MS           1

static int on_lws(struct lws *wsi, enum lws_callback_reasons reason, void *user,
                  void *in, size_t len);
static void on_shutdown_tick(uv_timer_t *timer);

const struct lws_protocols gw__backend_protocols[] = {
    {PROTOCOL_NAME, on_lws, 0, RX_CHUNK, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

void gw__backend_set_reason(struct gw_backend_conn *conn, const char *fmt, ...)
{
    va_list ap;

    if (conn->reason[0] != '\0') {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(conn->reason, sizeof(conn->reason), fmt, ap);
    va_end(ap);
}

/* ---- connection end --------------------------------------------------- */

static void on_conn_closed(uv_handle_t *handle)
{
    struct gw_backend_conn *conn = handle->data;
    struct gw_backend_ws *bws = conn->bws;

    gw_list_unlink(&conn->link);
    gw_list_unlink(&conn->held);
    gw__backend_burst_forget(conn);
    bws->stats.live--;
    gw_log(GW_LOG_INFO, conn->subject, "backend %s closed after %llu ms: %s",
           conn->name,
           (unsigned long long)(uv_now(bws->loop) - conn->started_ms),
           conn->reason);
    if (conn->ev.on_close != NULL) {
        conn->ev.on_close(conn, conn->reason, conn->owner);
    }
    gw__backend_io_release(conn);
    free(conn);
    if (bws->phase == BWS_DRAINING && gw_list_empty(&bws->conns)) {
        uv_timer_start(&bws->timer, on_shutdown_tick, 0, TICK_MS);
    }
}

/*
 * Ends the connection as far as the owner is concerned. kill: lws still
 * holds a live wsi that must be torn down (otherwise lws is closing it and
 * is calling us from that close).
 */
void gw__backend_finish(struct gw_backend_conn *conn, const char *reason,
                        bool kill)
{
    if (conn->state == CONN_DONE) {
        return;
    }
    if (conn->state == CONN_CONNECTING && !conn->close_requested) {
        conn->bws->stats.connect_errors++;
    }
    conn->state = CONN_DONE;
    gw__backend_set_reason(conn, "%s", reason);
    gw__backend_alive_stop(conn);
    /* Still resolving: the answer must not reach a connection gone. */
    gw_dns_cancel(conn->dns_req);
    conn->dns_req = NULL;
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

void gw__backend_on_timer(uv_timer_t *timer)
{
    struct gw_backend_conn *conn = timer->data;

    if (conn->state == CONN_CONNECTING) {
        gw__backend_finish(conn, "connect timeout", true);
    } else if (conn->state == CONN_CLOSING) {
        /* The backend never answered our close: drop the socket. */
        gw__backend_finish(conn, "closed by gateway", true);
    }
}

/* Queues the close frame behind whatever is still queued. */
static void begin_close(struct gw_backend_conn *conn)
{
    conn->close_requested = true;
    gw__backend_set_reason(conn, "closed by gateway");
    if (conn->state == CONN_CONNECTING) {
        gw__backend_finish(conn, conn->reason, true);
        return;
    }
    if (conn->state != CONN_OPEN) {
        return;
    }
    conn->state = CONN_CLOSING;
    uv_timer_start(&conn->timer, gw__backend_on_timer, CLOSE_LINGER_MS, 0);
    lws_callback_on_writable(conn->wsi);
}

void gw_backend_conn_close(struct gw_backend_conn *conn)
{
    if (conn == NULL || conn->close_requested || conn->state == CONN_DONE) {
        return;
    }
    begin_close(conn);
}

/* ---- lws callbacks ---------------------------------------------------- */

/*
 * Starts lws's closing handshake. Not by returning -1 from the callback at
 * hand, as lws documents: the Debian build of 4.1.6 has _DEBUG, whose
 * libuv "repeat test" in the service loop then closes the wsi a second
 * time at once, dropping the socket before the close frame goes out. A
 * close asked for from the wsi's timer callback takes the normal path.
 */
void gw__backend_close_with(struct gw_backend_conn *conn, struct lws *wsi,
                            enum lws_close_status code)
{
    conn->close_sent = true;
    lws_close_reason(wsi, code, NULL, 0);
    lws_set_timer_usecs(wsi, 0);
}

static void on_established(struct gw_backend_conn *conn)
{
    conn->state = CONN_OPEN;
    conn->fd = lws_get_socket_fd(conn->wsi);
    conn->bws->stats.connects++;
    uv_timer_stop(&conn->timer);
    gw_log(GW_LOG_DEBUG, conn->subject, "backend %s connected in %llu ms",
           conn->name,
           (unsigned long long)(uv_now(conn->bws->loop) - conn->started_ms));
    gw__backend_alive_start(conn);
    if (conn->ev.on_open != NULL) {
        conn->ev.on_open(conn, conn->owner);
    }
    if (conn->state == CONN_OPEN && conn->tx_head != NULL) {
        lws_callback_on_writable(conn->wsi);
    }
}

/* The reasons whose user pointer is the wsi's (ours: a connection). */
static bool per_connection(enum lws_callback_reasons reason)
{
    switch (reason) {
    case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER:
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
    case LWS_CALLBACK_CLIENT_RECEIVE:
    case LWS_CALLBACK_CLIENT_RECEIVE_PONG:
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
        gw__backend_set_reason(conn, "connect failed: certificate: %s",
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
        return gw__backend_append_headers(conn, wsi, in, len);
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
        on_established(conn);
        return 0;
    case LWS_CALLBACK_CLIENT_RECEIVE:
        return gw__backend_on_receive(conn, wsi, in, len);
    case LWS_CALLBACK_CLIENT_RECEIVE_PONG:
        gw__backend_alive_pong(conn);
        return 0;
    case LWS_CALLBACK_CLIENT_WRITEABLE:
        return gw__backend_on_writeable(conn, wsi);
    case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE: {
        const uint8_t *code = in;
        gw__backend_set_reason(conn, "closed by backend %d",
                               len >= 2 ? (code[0] << 8) | code[1] : 1005);
        return 0;
    }
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
        gw__backend_on_connect_error(conn, wsi, in);
        return 0;
    case LWS_CALLBACK_TIMER:
        return conn->close_sent ? -1 : 0; /* see gw__backend_close_with() */
    default:                              /* CLIENT_CLOSED, WSI_DESTROY */
        gw__backend_finish(conn,
                           conn->close_requested ? "closed by gateway"
                                                 : "connection lost",
                           false);
        return 0;
    }
}

/* Every lws callback passes here: see can_write_now() in backend_io.c. */
static int on_lws(struct lws *wsi, enum lws_callback_reasons reason, void *user,
                  void *in, size_t len)
{
    struct gw_backend_ws *bws = lws_context_user(lws_get_context(wsi));
    int rc;

    if (bws != NULL) {
        bws->in_lws++;
        if (reason == LWS_CALLBACK_CLIENT_RECEIVE_PONG) {
            bws->stats.rx_pongs++;
        }
    }
    rc = handle_lws(wsi, reason, user, in, len);
    if (bws != NULL) {
        bws->in_lws--;
    }
    return rc;
}

/* ---- the context ------------------------------------------------------ */

void gw_backend_ws_set_ping(struct gw_backend_ws *bws, unsigned secs)
{
    secs = secs > 30000 ? 30000 : secs;
    bws->ping_ms = secs * 1000u;
}

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
    struct gw_backend_ws *bws;

    if (loop == NULL || out == NULL) {
        return GW_EINVAL;
    }
    bws = calloc(1, sizeof(*bws));
    if (bws == NULL) {
        return GW_ENOMEM;
    }
    gw_list_init(&bws->conns);
    gw_list_init(&bws->held);
    gw_list_init(&bws->quiet);
    if (gw_dns_create(loop, NULL, &bws->dns) != 0) {
        free(bws);
        return GW_ENOMEM;
    }
    memset(&info, 0, sizeof(info));
    info.options = LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
    info.port = CONTEXT_PORT_NO_LISTEN;
    info.protocols = gw__backend_protocols;
    info.client_ssl_ca_filepath =
        ca_file != NULL && ca_file[0] != '\0' ? ca_file : default_ca_file();
    info.timeout_secs = LWS_STAGE_TIMEOUT_S;
    info.connect_timeout_secs = LWS_STAGE_TIMEOUT_S;
    info.user = bws; /* on_lws finds bws through the context */
    gw_backend_ws_set_ping(bws, 30);
    /* No info.extensions: permessage-deflate is never offered. */
    if (gw_lws_uv_create(&bws->lws, loop, &info, "backend", "WebSocket") != 0) {
        gw_dns_close(bws->dns);
        free(bws);
        return GW_ECONFIG;
    }
    bws->loop = loop;
    uv_timer_init(loop, &bws->timer);
    bws->timer.data = bws;
    *out = bws;
    return 0;
}

static void on_bws_closed(uv_handle_t *handle)
{
    struct gw_backend_ws *bws = handle->data;

    while (bws->ca != NULL) {
        struct ca_vhost *next = bws->ca->next;
        free(bws->ca);
        bws->ca = next;
    }
    gw_dns_close(bws->dns);
    gw__backend_drops_free(bws);
    if (bws->close_cb != NULL) {
        bws->close_cb(bws, bws->close_arg);
    }
    free(bws);
}

/*
 * Shutdown, one step per tick: wait for the connections (forcing them
 * after the grace period), then tear the context down (gw_lws_uv_teardown
 * takes the ticks it needs).
 */
static void on_shutdown_tick(uv_timer_t *timer)
{
    struct gw_backend_ws *bws = timer->data;
    struct gw_list *it, *tmp;

    if (bws->phase == BWS_DRAINING) {
        if (!gw_list_empty(&bws->conns)) {
            GW_LIST_FOREACH_SAFE(it, tmp, &bws->conns)
            {
                gw__backend_finish(
                    GW_LIST_ENTRY(it, struct gw_backend_conn, link),
                    "closed by gateway", true);
            }
            return; /* their close callbacks come next */
        }
        bws->phase = BWS_DESTROYING;
    }
    if (bws->phase != BWS_DESTROYING || !gw_lws_uv_teardown(&bws->lws)) {
        return;
    }
    bws->phase = BWS_CLOSED;
    uv_close((uv_handle_t *)timer, on_bws_closed);
}

void gw_backend_ws_close(struct gw_backend_ws *bws, gw_backend_ws_close_cb cb,
                         void *arg)
{
    struct gw_list *it, *tmp;

    if (bws == NULL || bws->phase != BWS_RUNNING) {
        return;
    }
    bws->phase = BWS_DRAINING;
    bws->close_cb = cb;
    bws->close_arg = arg;
    GW_LIST_FOREACH_SAFE(it, tmp, &bws->conns)
    {
        struct gw_backend_conn *c =
            GW_LIST_ENTRY(it, struct gw_backend_conn, link);
        if (!c->close_requested && c->state != CONN_DONE) {
            begin_close(c);
        }
    }
    uv_timer_start(&bws->timer, on_shutdown_tick,
                   gw_list_empty(&bws->conns) ? 0 : SHUTDOWN_GRACE_MS, TICK_MS);
}

void gw_backend_ws_get_stats(const struct gw_backend_ws *bws,
                             struct gw_backend_ws_stats *out)
{
    *out = bws->stats;
}

void gw_backend_ws_get_dns_stats(const struct gw_backend_ws *bws,
                                 struct gw_dns_stats *out)
{
    gw_dns_get_stats(bws->dns, out);
}
