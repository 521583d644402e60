/*
 * The HTTP/1.1 server: a listening socket of our own (http_listener.c:
 * any address family, port 0 for tests) whose connections a private
 * libwebsockets context on the instance's loop adopts. lws parses
 * requests and keeps connections alive between them; this file hands
 * each request to the handler and writes its answer (queued by
 * http_request.c) while lws waits.
 */
#include "gateway/http/http_server.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <libwebsockets.h>

#include "common/log.h"
#include "gateway/http/http_server_int.h"

#define SUBJECT        "http"
#define HEADER_DATA    8192 /* request headers lws keeps */
#define KEEPALIVE_S    60   /* idle keep-alive connections */
#define BODY_TIMEOUT_S 30   /* between two pieces of a body */
#define TICK_MS        1
#define BODY_FIRST     4096 /* a body's first buffer, doubled as it grows */

static int on_lws(struct lws *wsi, enum lws_callback_reasons reason, void *user,
                  void *in, size_t len);

static const struct lws_protocols protocols[] = {
    {"gw-http", on_lws, 0, 0, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

/* ---- the connection's socket while a request is open ---- */

/*
 * Once lws 4.1 hands a request over it reads nothing from the socket
 * until the transaction completes: it would neither notice the client
 * leave nor stop polling a socket with unread input (it would spin).
 * So its input is paused from the handler's turn on, and a second
 * descriptor of the socket is watched here instead: for the peer's end
 * of stream, and for room to write the answer, which goes out from here
 * (without lws, whose writable events stop with its input).
 */
struct watch {
    uv_poll_t poll;
    int fd;
    int events; /* UV_DISCONNECT, and UV_WRITABLE while bytes wait */
    struct gw_http_server *srv;
    struct gw_http_req *req; /* NULL once the request no longer needs it */
};

static void handle_done(struct gw_http_server *srv);

void gw__http_conn_kill(struct lws *wsi)
{
    lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
    /* lws re-arms its timer only when it runs: make it run now. */
    lws_cancel_service(lws_get_context(wsi));
}

static void on_watch_closed(uv_handle_t *handle)
{
    struct watch *w = handle->data;
    struct gw_http_server *srv = w->srv;

    close(w->fd);
    free(w);
    handle_done(srv);
}

void gw__http_watch_stop(struct gw_http_req *req)
{
    struct watch *w = req->watch;

    if (w != NULL) {
        req->watch = NULL;
        w->req = NULL;
        uv_close((uv_handle_t *)&w->poll, on_watch_closed);
    }
}

/* The client left, or writing failed: on_gone if owed, then drop it. */
static void drop(struct gw_http_req *req, const char *why)
{
    struct lws *wsi = req->wsi;

    gw_log_peer(GW_LOG_DEBUG, req->peer, SUBJECT, "%s %.128s from %s: %s",
                req->method, req->path, req->peer, why);
    gw__http_req_lost(req);
    if (wsi != NULL) {
        gw__http_conn_kill(wsi);
    }
}

/* Everything is out: the connection serves its next request, or ends. */
static void complete(struct gw_http_req *req)
{
    struct lws *wsi = req->wsi;
    bool keep = req->keep_alive; /* never after a refusal */
    bool paused = req->rx_paused;

    gw__http_req_destroy(req);
    if (keep) {
        if (paused) {
            lws_rx_flow_control(wsi, 1); /* a pipelined request may wait */
        }
        if (lws_http_transaction_completed(wsi) == 0) {
            return;
        }
    }
    gw__http_conn_kill(wsi);
}

/* Writes what the socket takes: 1 when all is out, 0 for later, or -1. */
static int flush(struct gw_http_req *req, int fd)
{
    while (req->out_head != NULL) {
        struct out_buf *o = req->out_head;
        ssize_t n = send(fd, o->data + o->off, o->len - o->off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        }
        o->off += (size_t)n;
        req->out_bytes -= (size_t)n;
        if (o->off < o->len) {
            return 0;
        }
        req->out_head = o->next;
        if (req->out_head == NULL) {
            req->out_tail = NULL;
        }
        if (o->detach_after) {
            /* A stream holds no header table: lws would reclaim one held
             * for minutes by killing the connection. */
            lws_http_headers_detach(req->wsi);
        }
        free(o);
    }
    return 1;
}

static void on_watch(uv_poll_t *poll, int status, int events);

static void watch_events(struct watch *w, int events)
{
    if (w->events != events) {
        w->events = events;
        uv_poll_start(&w->poll, events, on_watch);
    }
}

static void on_watch(uv_poll_t *poll, int status, int events)
{
    struct watch *w = poll->data;
    struct gw_http_req *req = w->req;
    int rc = 1;

    if (req == NULL || req->wsi == NULL || req->killed) {
        uv_poll_stop(poll);
        return;
    }
    if (status < 0) {
        drop(req, uv_strerror(status));
        return;
    }
    if (events & UV_WRITABLE) {
        rc = flush(req, w->fd);
        if (rc < 0) {
            drop(req, strerror(errno));
            return;
        }
        if (rc > 0 && req->state == REQ_FINISHING) {
            complete(req);
            return;
        }
    }
    if (events & UV_DISCONNECT) {
        drop(req, "client left");
        return;
    }
    watch_events(w, rc > 0 ? UV_DISCONNECT : UV_DISCONNECT | UV_WRITABLE);
}

static int watch_start(struct gw_http_req *req)
{
    struct gw_http_server *srv = req->srv;
    struct watch *w = malloc(sizeof(*w));

    if (w == NULL) {
        return GW_ENOMEM;
    }
    w->fd = fcntl(lws_get_socket_fd(req->wsi), F_DUPFD_CLOEXEC, 0);
    if (w->fd < 0 || uv_poll_init_socket(srv->loop, &w->poll, w->fd) != 0) {
        if (w->fd >= 0) {
            close(w->fd);
        }
        free(w);
        return GW_ENOMEM;
    }
    w->poll.data = w;
    w->srv = srv;
    w->req = req;
    w->events = 0;
    req->watch = w;
    srv->handles_open++;
    watch_events(w, req->out_head != NULL ? UV_DISCONNECT | UV_WRITABLE
                                          : UV_DISCONNECT);
    return 0;
}

void gw__http_watch_write(struct gw_http_req *req)
{
    if (req->watch != NULL) {
        watch_events(req->watch, UV_DISCONNECT | UV_WRITABLE);
    } else if (req->wsi != NULL && !req->killed && watch_start(req) != 0) {
        gw_log_peer(GW_LOG_WARN, req->peer, SUBJECT,
                    "%s: out of descriptors; closing", req->peer);
        req->killed = true;
        gw__http_conn_kill(req->wsi);
    }
}

/* ---- the lws side ------------------------------------------------------ */

/* Ties the connection's socket to req while the handler owes an answer;
 * false (the connection is being dropped) when that fails. */
static bool hold_connection(struct gw_http_req *req)
{
    if (req->wsi == NULL) {
        return true; /* injected (gw_http_server_inject): no connection */
    }
    /* lws's content timeout would end a request that waits on a device;
     * the handler bounds its own waits. */
    lws_set_timeout(req->wsi, NO_PENDING_TIMEOUT, 0);
    lws_rx_flow_control(req->wsi, 0);
    req->rx_paused = true;
    if (watch_start(req) != 0) {
        gw_log_peer(GW_LOG_WARN, req->peer, SUBJECT,
                    "%s: out of descriptors; closing", req->peer);
        req->state = REQ_FINISHING;
        req->killed = true;
        gw__http_conn_kill(req->wsi);
        return false;
    }
    return true;
}

static void dispatch(struct gw_http_req *req)
{
    struct gw_http_server *srv = req->srv;

    if (!hold_connection(req)) {
        return;
    }
    req->state = REQ_WAITING;
    req->live_headers = true;
    srv->busy++;
    srv->on_request(req, srv->arg);
    srv->busy--;
    req->live_headers = false; /* nothing frees req inside the handler */
}

long long gw_http_content_length(const char *v)
{
    long long n = 0;

    if (v == NULL) {
        return -1;
    }
    if (*v == '\0') {
        return GW_EMALFORMED;
    }
    for (; *v != '\0'; v++) {
        if (*v < '0' || *v > '9' || n > 1000000000000LL) {
            return GW_EMALFORMED; /* also "5,5" from a repeated header */
        }
        n = n * 10 + (*v - '0');
    }
    return n;
}

/* A request answered from its head: lws reads no more of this
 * connection, so its body never comes in (and never waits to). */
static void stop_reading(struct gw_http_req *req)
{
    if (req->wsi != NULL && !req->killed) {
        lws_rx_flow_control(req->wsi, 0);
        req->rx_paused = true;
    }
}

static void refuse_head(struct gw_http_req *req, int status, const char *why)
{
    gw__http_req_refuse(req, status, why);
    stop_reading(req);
}

/*
 * The owner's look at the head, before any body is read: false when it
 * answered (refused) the request, whose body then stays unread.
 */
static bool head_ok(struct gw_http_req *req)
{
    struct gw_http_server *srv = req->srv;
    bool keep = req->keep_alive;

    if (srv->on_head == NULL) {
        return true;
    }
    req->keep_alive = false; /* a refusal's answer says Connection: close */
    req->state = REQ_WAITING;
    req->live_headers = true;
    srv->busy++;
    srv->on_head(req, srv->arg);
    srv->busy--;
    req->live_headers = false;
    if (req->state == REQ_WAITING) {
        req->state = REQ_READING;
        req->keep_alive = keep;
        return true;
    }
    stop_reading(req);
    return false;
}

/* Before the body: lws reads it, so this tiny write cannot be in its way. */
static void send_continue(struct lws *wsi)
{
    static const char line[] = "HTTP/1.1 100 Continue\r\n\r\n";

    (void)send(lws_get_socket_fd(wsi), line, sizeof(line) - 1,
               MSG_NOSIGNAL | MSG_DONTWAIT);
}

/*
 * The request's head is complete: refuse it, await its body (returns
 * true, req->body_want set), or serve it now.
 */
static bool begin(struct gw_http_req *req)
{
    const char *expect;
    long long len =
        gw_http_content_length(gw_http_req_header(req, "content-length"));
    bool chunked = gw_http_req_header(req, "transfer-encoding") != NULL;

    if (len < -1) {
        refuse_head(req, 400, "bad Content-Length");
    } else if ((len > 0 || chunked) &&
               (req->head || strcmp(req->method, "GET") == 0)) {
        /* Nothing served by GET or HEAD reads a body, and these are the
         * methods anyone may use: none is held. */
        refuse_head(req, 400, "a GET or HEAD request takes no body");
    } else if (chunked) {
        /* lws reads no chunked bodies */
        refuse_head(req, 411, "a body needs Content-Length");
    } else if (len > (long long)req->srv->max_body) {
        refuse_head(req, 413, "body too large");
    } else if (!head_ok(req)) {
        /* refused by the owner from the head alone */
    } else if (len < 0 && (strcmp(req->method, "POST") == 0 ||
                           strcmp(req->method, "PUT") == 0 ||
                           strcmp(req->method, "PATCH") == 0)) {
        /* No body ("curl -X POST"), but lws now takes whatever follows
         * for one: the connection ends with the answer. */
        req->keep_alive = false;
        dispatch(req);
    } else if (len <= 0) {
        dispatch(req);
    } else {
        /* The buffer grows with what arrives: an announced length costs
         * nothing until the bytes are there. */
        req->body_want = (size_t)len;
        expect = gw_http_req_header(req, "expect");
        if (req->wsi != NULL && expect != NULL &&
            strcasecmp(expect, "100-continue") == 0) {
            send_continue(req->wsi);
        }
        return true;
    }
    return false;
}

/* A request's head came in on wsi. */
static int on_http(struct gw_http_server *srv, struct lws *wsi,
                   struct gw_http_req *open)
{
    struct gw_http_req *req;

    if (open != NULL) {
        /* Input is paused until an answer is out: never here. */
        gw_log_peer(GW_LOG_WARN, open->peer, SUBJECT,
                    "%s: request before an answer; closing", open->peer);
        gw__http_req_lost(open);
        return -1;
    }
    if (srv->phase != SRV_RUNNING) {
        return -1;
    }
    req = gw__http_req_create(srv, wsi);
    if (req == NULL) {
        gw_log(GW_LOG_WARN, SUBJECT, "out of memory for a request; closing");
        return -1;
    }
    (void)begin(req);
    return 0;
}

/* Room for more bytes of the body (and its NUL); false on OOM. */
static bool body_reserve(struct gw_http_req *req, size_t more)
{
    size_t need = req->body_len + more;
    size_t cap = req->body_cap != 0 ? req->body_cap : BODY_FIRST;
    char *p;

    if (need <= req->body_cap && req->body != NULL) {
        return true;
    }
    while (cap < need) {
        cap *= 2;
    }
    if (cap > req->body_want) {
        cap = req->body_want;
    }
    if ((p = realloc(req->body, cap + 1)) == NULL) {
        return false;
    }
    req->srv->stats.body_bytes += cap - req->body_cap;
    req->body = p;
    req->body_cap = cap;
    return true;
}

static int on_body(struct gw_http_req *req, const void *in, size_t len)
{
    if (req == NULL || req->state != REQ_READING) {
        return 0; /* refused: lws reads what comes, we drop it */
    }
    if (len > req->body_want - req->body_len) {
        return -1; /* lws stops at Content-Length; never here */
    }
    if (!body_reserve(req, len)) {
        gw__http_req_refuse(req, 503, "out of memory");
        return 0;
    }
    memcpy(req->body + req->body_len, in, len);
    req->body_len += len;
    return 0;
}

static void on_body_done(struct gw_http_req *req)
{
    if (req != NULL && req->state == REQ_READING) {
        if (!body_reserve(req, 0)) {
            gw__http_req_refuse(req, 503, "out of memory");
            return;
        }
        req->body[req->body_len] = '\0';
        dispatch(req);
    }
}

/* Not HTTP we serve: lws closes the connection when we say so. */
static void refuse_connection(struct lws *wsi, const char *what,
                              const char *detail)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char peer[INET6_ADDRSTRLEN] = "?";

    if (getpeername(lws_get_socket_fd(wsi), (struct sockaddr *)&ss, &len) ==
        0) {
        inet_ntop(ss.ss_family,
                  ss.ss_family == AF_INET6
                      ? (void *)&((struct sockaddr_in6 *)&ss)->sin6_addr
                      : (void *)&((struct sockaddr_in *)&ss)->sin_addr,
                  peer, sizeof(peer));
    }
    gw_log_peer(GW_LOG_WARN, peer, SUBJECT,
                "%s%s%.32s from %s refused; closing", what,
                detail != NULL ? " " : "", detail != NULL ? detail : "", peer);
}

static int on_lws(struct lws *wsi, enum lws_callback_reasons reason, void *user,
                  void *in, size_t len)
{
    struct gw_http_server *srv = lws_context_user(lws_get_context(wsi));
    struct gw_http_req *req = lws_wsi_user(wsi);

    switch (reason) {
    case LWS_CALLBACK_HTTP:
        return on_http(srv, wsi, req);
    case LWS_CALLBACK_HTTP_BODY:
        return on_body(req, in, len);
    case LWS_CALLBACK_HTTP_BODY_COMPLETION:
        on_body_done(req);
        return 0;
    case LWS_CALLBACK_CLOSED_HTTP:
    case LWS_CALLBACK_WSI_DESTROY:
        if (req != NULL) {
            gw__http_req_lost(req);
        }
        if (reason == LWS_CALLBACK_WSI_DESTROY &&
            lws_get_opaque_user_data(wsi) != NULL) {
            gw__http_addr_release(srv, lws_get_opaque_user_data(wsi));
            lws_set_opaque_user_data(wsi, NULL);
        }
        return 0;
    case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE: /* WebSocket, h2c */
        refuse_connection(wsi, "upgrade", in);
        return -1;
    case LWS_CALLBACK_RAW_ADOPT: /* a CONNECT request */
        refuse_connection(wsi, "CONNECT", NULL);
        return -1;
    default:
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    }
}

/* ---- the server -------------------------------------------------------- */

static int create_context(struct gw_http_server *srv)
{
    struct lws_context_creation_info info;
    int rc;

    memset(&info, 0, sizeof(info));
    info.port = CONTEXT_PORT_NO_LISTEN_SERVER; /* we accept, lws adopts */
    info.vhost_name = "gw-http";
    info.protocols = protocols;
    info.timeout_secs = BODY_TIMEOUT_S;
    info.keepalive_timeout = KEEPALIVE_S;
    info.max_http_header_data = HEADER_DATA;
    info.user = srv; /* on_lws finds srv through the context */
    rc = gw_lws_uv_create(&srv->lws, srv->loop, &info, SUBJECT, "HTTP");
    if (rc != 0) {
        return rc;
    }
    srv->vh = lws_get_vhost_by_name(srv->lws.ctx, "gw-http");
    return 0;
}

int gw_http_server_init(uv_loop_t *loop, const struct gw_http_server_options *o,
                        struct gw_http_server **out)
{
    struct gw_http_server *srv;
    int rc;

    if (loop == NULL || o == NULL || out == NULL || o->listen == NULL ||
        o->on_request == NULL) {
        return GW_EINVAL;
    }
    srv = calloc(1, sizeof(*srv));
    if (srv == NULL) {
        return GW_ENOMEM;
    }
    srv->loop = loop;
    gw_list_init(&srv->reqs);
    srv->fd = -1;
    srv->max_body = o->max_body;
    srv->on_head = o->on_head;
    srv->on_request = o->on_request;
    srv->max_conns = o->max_connections > 0 ? (size_t)o->max_connections : 0;
    srv->max_per_addr = o->max_connections_per_address > 0
                            ? (size_t)o->max_connections_per_address
                            : 0;
    srv->arg = o->arg;
    rc = gw__http_listen(srv, o->listen, o->port);
    if (rc == 0 && (rc = create_context(srv)) != 0) {
        close(srv->fd);
    }
    if (rc != 0) {
        free(srv);
        return rc;
    }
    uv_timer_init(loop, &srv->timer);
    srv->timer.data = srv;
    srv->handles_open = 1;
    if (srv->vh == NULL ||
        uv_poll_init_socket(loop, &srv->listener, srv->fd) != 0) {
        gw_log(GW_LOG_ERROR, SUBJECT, "cannot start the HTTP listener");
        close(srv->fd);
        srv->fd = -1;
        gw_http_server_close(srv, NULL, NULL); /* lws needs the loop */
        return GW_ECONFIG;
    }
    srv->listener.data = srv;
    srv->handles_open = 2;
    srv->listening = true;
    gw__http_accept_start(srv);
    *out = srv;
    return 0;
}

int gw_http_server_init_detached(const struct gw_http_server_options *o,
                                 struct gw_http_server **out)
{
    struct gw_http_server *srv;

    if (o == NULL || out == NULL || o->on_request == NULL) {
        return GW_EINVAL;
    }
    if ((srv = calloc(1, sizeof(*srv))) == NULL) {
        return GW_ENOMEM;
    }
    gw_list_init(&srv->reqs);
    srv->fd = -1;
    srv->detached = true;
    srv->max_body = o->max_body;
    srv->on_head = o->on_head;
    srv->on_request = o->on_request;
    srv->arg = o->arg;
    *out = srv;
    return 0;
}

/* The status an answer (or stream) began with, 0 if none is queued. */
static int queued_status(const struct gw_http_req *req)
{
    const struct out_buf *o = req->out_head;

    if (o == NULL || o->len < 12 || memcmp(o->data, "HTTP/1.1 ", 9) != 0) {
        return 0;
    }
    return (o->data[9] - '0') * 100 + (o->data[10] - '0') * 10 +
           (o->data[11] - '0');
}

int gw_http_server_inject(struct gw_http_server *srv, const char *method,
                          const char *target, const char *const *headers,
                          size_t n_headers, const char *body, size_t len,
                          size_t piece)
{
    struct gw_http_req *req;
    int status;

    if (srv == NULL || !srv->detached || srv->phase != SRV_RUNNING ||
        method == NULL || target == NULL || (body == NULL && len > 0)) {
        return GW_EINVAL;
    }
    req = gw__http_req_create_detached(srv, method, target, headers, n_headers);
    if (req == NULL) {
        return GW_EPROTO;
    }
    if (begin(req)) {
        /* The body arrives in pieces, as reads from a socket would. */
        size_t off = 0;
        piece = piece > 0 ? piece : 1;
        while (req->state == REQ_READING && off < req->body_want && off < len) {
            size_t n = len - off < piece ? len - off : piece;
            n = n < req->body_want - off ? n : req->body_want - off;
            (void)on_body(req, body + off, n);
            off += n;
        }
        if (req->state == REQ_READING && off < req->body_want) {
            gw__http_req_lost(req); /* the client left mid-body */
            return 0;
        }
        on_body_done(req);
    }
    status = queued_status(req);
    if (req->state == REQ_FINISHING) {
        gw__http_req_destroy(req);
    } else {
        gw__http_req_lost(req); /* a kept request: the client leaves */
    }
    return status;
}

int gw_http_server_port(const struct gw_http_server *srv)
{
    return srv->port;
}

uint64_t gw_http_server_responses(const struct gw_http_server *srv, int status)
{
    if (srv == NULL || status < STATUS_MIN || status > STATUS_MAX) {
        return 0;
    }
    return srv->responses[status - STATUS_MIN];
}

void gw_http_server_get_stats(const struct gw_http_server *srv,
                              struct gw_http_server_stats *out)
{
    if (srv == NULL) {
        memset(out, 0, sizeof(*out));
        return;
    }
    *out = srv->stats;
}

static void handle_done(struct gw_http_server *srv)
{
    if (--srv->handles_open > 0) {
        return;
    }
    if (srv->close_cb != NULL) {
        srv->close_cb(srv, srv->close_arg);
    }
    gw__http_addrs_free(srv); /* lws destroyed every connection */
    free(srv);
}

static void on_handle_closed(uv_handle_t *handle)
{
    struct gw_http_server *srv = handle->data;

    if (handle == (uv_handle_t *)&srv->listener) {
        close(srv->fd);
        srv->fd = -1;
    }
    handle_done(srv);
}

/* Every request ends; those owed an answer or an end get on_gone. */
static void drop_all(struct gw_http_server *srv)
{
    while (!gw_list_empty(&srv->reqs)) {
        struct gw_http_req *req =
            GW_LIST_ENTRY(gw_list_first(&srv->reqs), struct gw_http_req, link);
        struct lws *wsi = req->wsi;
        gw__http_req_lost(req); /* may answer or end others */
        if (wsi != NULL) {
            gw__http_conn_kill(wsi);
        }
    }
}

/*
 * Shutdown, one step per tick: report and drop every request, then tear
 * the context down (gw_lws_uv_teardown takes the ticks it needs).
 */
static void on_shutdown_tick(uv_timer_t *timer)
{
    struct gw_http_server *srv = timer->data;

    if (srv->phase == SRV_DRAINING) {
        drop_all(srv);
        srv->phase = SRV_DESTROYING;
    }
    if (srv->phase != SRV_DESTROYING || !gw_lws_uv_teardown(&srv->lws)) {
        return;
    }
    srv->phase = SRV_CLOSED;
    uv_close((uv_handle_t *)timer, on_handle_closed);
}

void gw_http_server_close(struct gw_http_server *srv,
                          void (*cb)(struct gw_http_server *srv, void *arg),
                          void *arg)
{
    if (srv == NULL || srv->phase != SRV_RUNNING) {
        return;
    }
    srv->phase = SRV_DRAINING;
    srv->close_cb = cb;
    srv->close_arg = arg;
    if (srv->detached) {
        drop_all(srv);
        srv->phase = SRV_CLOSED;
        srv->handles_open = 1;
        handle_done(srv);
        return;
    }
    if (srv->listening) {
        srv->listening = false;
        uv_poll_stop(&srv->listener);
        uv_close((uv_handle_t *)&srv->listener, on_handle_closed);
    }
    if (srv->busy == 0) {
        /* Now, so that owners may free what on_gone still needs after
         * this returns; from inside a callback of ours, at the next tick. */
        drop_all(srv);
    }
    uv_timer_start(&srv->timer, on_shutdown_tick, 0, TICK_MS);
}
