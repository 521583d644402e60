/*
 * The HTTP server against raw TCP clients on the same loop: requests with
 * queries, headers and bodies, refusals, deferred answers, keep-alive,
 * streams, clients that leave, closing the server under load, refusals
 * from the head before any body is read, bodies that grow as they arrive,
 * connection limits, and what 200 unauthorised clients make it hold.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>
#include <uv.h>

#include "common/log.h"
#include "fixture.h"
#include "gateway/http/http_server.h"
#include "http_client.h"

#define MAX_BODY  1024
#define BIG_BODY  (256 * 1024) /* announced by the memory test's clients */
#define N_IDLE    200          /* its connections */
#define IDLE_SENT (200 * 1024) /* body bytes each of them sends */

static struct {
    struct gw_fixture fx;
    uv_timer_t work;
    struct gw_http_server *srv;
    bool srv_closed;
    int port;
    int requests;
    struct gw_http_req *pending; /* deferred, held or streaming */
    int gone;
    struct gw_http_req *gone_req;
    int events_sent;
    int burst_writes, burst_rc;
    char late_sid[64]; /* Mcp-Session-Id read after the handler returned */
    bool late_xtest_null;
    int heads;                        /* requests on_head saw */
    struct gw_http_server_stats peak; /* highest body_bytes seen by a poll */
} T;

#define RUN_UNTIL(cond) GW_FIXTURE_RUN_UNTIL(&T.fx, cond)

static const char *nz(const char *s)
{
    return s != NULL ? s : "-";
}

/* ---- the handler ------------------------------------------------------ */

static void on_gone(struct gw_http_req *req, void *arg)
{
    assert_ptr_equal(arg, &T);
    T.gone++;
    T.gone_req = req;
    if (req == T.pending) {
        T.pending = NULL;
        uv_timer_stop(&T.work);
    }
}

static void echo(struct gw_http_req *req)
{
    char out[2048];
    size_t blen;
    const char *body = gw_http_req_body(req, &blen);
    static const char *const extra[] = {"X-Reply: yes", NULL};
    int n = snprintf(
        out, sizeof(out),
        "method=%s\npath=%s\nquery=%s\nx-test=%s\nsid=%s\nversion=%s\n"
        "auth=%s\norigin=%s\naccept=%s\nctype=%s\npeer=%s\nbody=%zu:%s\n",
        gw_http_req_method(req), gw_http_req_path(req), gw_http_req_query(req),
        nz(gw_http_req_header(req, "X-Test")),
        nz(gw_http_req_header(req, "MCP-SESSION-ID")),
        nz(gw_http_req_header(req, "mcp-protocol-version")),
        nz(gw_http_req_header(req, "Authorization")),
        nz(gw_http_req_header(req, "origin")),
        nz(gw_http_req_header(req, "Accept")),
        nz(gw_http_req_header(req, "content-type")), gw_http_req_peer(req),
        blen, body);

    assert_int_equal(
        gw_http_respond(req, 200, "text/plain", extra, out, (size_t)n), 0);
}

static void on_work_timer(uv_timer_t *timer)
{
    struct gw_http_req *req = T.pending;
    const char *path = gw_http_req_path(req);

    (void)timer;
    if (strcmp(path, "/defer") == 0) {
        /* Kept for later: the MCP header; not kept: one never looked up. */
        snprintf(T.late_sid, sizeof(T.late_sid), "%s",
                 nz(gw_http_req_header(req, "mcp-session-id")));
        T.late_xtest_null = gw_http_req_header(req, "x-other") == NULL;
        T.pending = NULL;
        assert_int_equal(
            gw_http_respond(req, 200, "text/plain", NULL, "late", 4), 0);
        return;
    }
    if (T.events_sent < 3) {
        char ev[32];
        int n = snprintf(ev, sizeof(ev), "data: %d\n\n", T.events_sent++);
        assert_int_equal(gw_http_stream_write(req, ev, (size_t)n), 0);
        return;
    }
    uv_timer_stop(&T.work);
    T.pending = NULL;
    gw_http_stream_end(req);
}

static void burst(struct gw_http_req *req)
{
    static char piece[64 * 1024];
    int rc = 0;

    memset(piece, 'x', sizeof(piece));
    assert_int_equal(
        gw_http_stream_begin(req, 200, "application/octet-stream", NULL), 0);
    /* 2 MiB at once: more than a stream may hold for its reader. */
    for (int i = 0; i < 32 && rc == 0; i++) {
        rc = gw_http_stream_write(req, piece, sizeof(piece));
        T.burst_writes += rc == 0;
    }
    T.burst_rc = rc;
    assert_int_equal(gw_http_stream_write(req, "y", 1), GW_ENOSPC);
}

static void on_request(struct gw_http_req *req, void *arg)
{
    static const char *const sse_headers[] = {"Cache-Control: no-cache", NULL};
    const char *path = gw_http_req_path(req);

    assert_ptr_equal(arg, &T);
    T.requests++;
    if (strcmp(path, "/echo") == 0 || strcmp(path, "/private") == 0) {
        echo(req);
        return;
    }
    gw_http_req_on_gone(req, on_gone, &T);
    T.pending = req;
    if (strcmp(path, "/defer") == 0) {
        (void)gw_http_req_header(req, "x-test"); /* only now */
        uv_timer_start(&T.work, on_work_timer, 20, 0);
    } else if (strcmp(path, "/sse") == 0 || strcmp(path, "/sse-hold") == 0) {
        assert_int_equal(
            gw_http_stream_begin(req, 200, "text/event-stream", sse_headers),
            0);
        T.events_sent = 0;
        if (strcmp(path, "/sse") == 0) {
            uv_timer_start(&T.work, on_work_timer, 5, 5);
        } else {
            assert_int_equal(gw_http_stream_write(req, "data: hi\n\n", 10), 0);
        }
    } else if (strcmp(path, "/burst") == 0) {
        burst(req);
    } else if (strcmp(path, "/hold") != 0) {
        T.pending = NULL;
        assert_int_equal(
            gw_http_respond(req, 404, "text/plain", NULL, "none", 4), 0);
    }
}

/* Requests to /private need "Authorization: Bearer ok" from their head. */
static void on_head(struct gw_http_req *req, void *arg)
{
    static const char *const challenge[] = {"WWW-Authenticate: Bearer", NULL};
    const char *auth = gw_http_req_header(req, "authorization");

    assert_ptr_equal(arg, &T);
    T.heads++;
    if (strncmp(gw_http_req_path(req), "/private", 8) == 0 &&
        (auth == NULL || strcmp(auth, "Bearer ok") != 0)) {
        assert_int_equal(
            gw_http_respond(req, 401, "text/plain", challenge, "no", 2), 0);
    }
}

static void open_client(struct hc_client *c, const char *ip)
{
    hc_open(c, &T.fx.loop, &T.fx.timed_out, ip, T.port);
}

/* ---- setup ------------------------------------------------------------ */

static void on_srv_closed(struct gw_http_server *srv, void *arg)
{
    assert_ptr_equal(srv, T.srv);
    assert_ptr_equal(arg, &T);
    T.srv_closed = true;
}

static void stop_server(void)
{
    gw_http_server_close(T.srv, on_srv_closed, &T);
    RUN_UNTIL(T.srv_closed);
    T.srv = NULL;
}

static void start_server_with(const char *listen, size_t max_body,
                              int max_conns, int max_per_addr)
{
    struct gw_http_server_options o = {
        .listen = listen,
        .port = 0,
        .max_body = max_body,
        .on_head = on_head,
        .on_request = on_request,
        .arg = &T,
        .max_connections = max_conns,
        .max_connections_per_address = max_per_addr,
    };

    assert_int_equal(gw_http_server_init(&T.fx.loop, &o, &T.srv), 0);
    T.port = gw_http_server_port(T.srv);
    assert_true(T.port > 0);
}

static void start_server(const char *listen)
{
    start_server_with(listen, MAX_BODY, 0, 0);
}

static void restart_server(size_t max_body, int max_conns, int max_per_addr)
{
    stop_server();
    T.srv_closed = false;
    start_server_with("127.0.0.1", max_body, max_conns, max_per_addr);
}

static int setup(void **state)
{
    (void)state;
    memset(&T, 0, sizeof(T));
    gw_fixture_loop_init(&T.fx);
    uv_timer_init(&T.fx.loop, &T.work);
    start_server("127.0.0.1");
    return 0;
}

/* Every handle closed: nothing of lws or the server is left on the loop. */
static int teardown(void **state)
{
    (void)state;
    /* Its own bound, also after a test that ran into the guard. */
    gw_fixture_guard_start(&T.fx, gw_fixture_guard_ms());
    if (T.srv != NULL) {
        stop_server();
    }
    uv_close((uv_handle_t *)&T.work, NULL);
    gw_fixture_loop_close(&T.fx);
    return 0;
}

/* ---- tests ------------------------------------------------------------ */

static void test_get_with_query_and_headers(void **state)
{
    struct hc_client c;
    struct hc_resp r;
    char v[64];

    (void)state;
    open_client(&c, "127.0.0.1");
    hc_get(&c,
           "GET /echo?a=1&b=two HTTP/1.1\r\nHost: x\r\nX-Test: hello \r\n"
           "Mcp-Session-Id: s-42\r\nMCP-Protocol-Version: 2025-11-25\r\n"
           "Authorization: Bearer t0k\r\nOrigin: http://localhost:3000\r\n"
           "Accept: application/json, text/event-stream\r\n\r\n",
           &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(hc_header(r.head, "x-reply", v, sizeof(v)), "yes");
    assert_string_equal(hc_header(r.head, "content-type", v, sizeof(v)),
                        "text/plain");
    assert_string_equal(
        r.body, "method=GET\npath=/echo\nquery=a=1&b=two\nx-test=hello\n"
                "sid=s-42\nversion=2025-11-25\nauth=Bearer t0k\n"
                "origin=http://localhost:3000\n"
                "accept=application/json, text/event-stream\nctype=-\n"
                "peer=127.0.0.1\nbody=0:\n");
    hc_get(&c, "GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    assert_int_equal(r.status, 404);
    hc_close(&c);
    assert_int_equal(gw_http_server_responses(T.srv, 200), 1);
    assert_int_equal(gw_http_server_responses(T.srv, 404), 1);
}

static void test_post_body_and_keepalive(void **state)
{
    struct hc_client c;
    struct hc_resp r;

    (void)state;
    open_client(&c, "127.0.0.1");
    hc_get(
        &c,
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: 13\r\n\r\n{\"hello\":\"w\"}",
        &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "method=POST\n"));
    assert_non_null(strstr(r.body, "ctype=application/json\n"));
    assert_non_null(strstr(r.body, "body=13:{\"hello\":\"w\"}\n"));
    /* The same connection serves the next request. */
    hc_get(&c, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    assert_int_equal(r.status, 200);
    assert_false(c.eof);
    /* An empty POST body is fine; one without a length is not. */
    hc_get(&c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
           &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "body=0:\n"));
    /* Without a length: no body, and lws would take the next request
     * for one, so the connection ends with the answer. */
    hc_get(&c, "POST /echo HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "body=0:\n"));
    assert_non_null(strstr(r.head, "\r\nConnection: close\r\n"));
    RUN_UNTIL(c.eof);
    hc_close(&c);
    /* A chunked body lws cannot read. */
    open_client(&c, "127.0.0.1");
    hc_get(&c,
           "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
           "\r\n3\r\nabc\r\n0\r\n\r\n",
           &r);
    assert_int_equal(r.status, 411);
    RUN_UNTIL(c.eof);
    hc_close(&c);
    assert_int_equal(T.requests, 4);
}

static void test_body_too_large(void **state)
{
    struct hc_client c;
    struct hc_resp r;
    char v[32];

    (void)state;
    open_client(&c, "127.0.0.1");
    hc_get(&c,
           "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1025\r\n"
           "Expect: 100-continue\r\n\r\n",
           &r);
    assert_int_equal(r.status, 413);
    assert_string_equal(hc_header(r.head, "connection", v, sizeof(v)), "close");
    RUN_UNTIL(c.eof);
    hc_close(&c);
    assert_int_equal(T.requests, 0);
    assert_int_equal(gw_http_server_responses(T.srv, 413), 1);

    /* At the limit, announced with Expect: 100 Continue first. */
    static char req[MAX_BODY + 256];
    snprintf(req, sizeof(req),
             "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
             "Expect: 100-continue\r\n\r\n",
             MAX_BODY);
    open_client(&c, "127.0.0.1");
    hc_send(&c, req);
    RUN_UNTIL(strstr(c.rx, "\r\n\r\n") != NULL);
    assert_memory_equal(c.rx, "HTTP/1.1 100 Continue\r\n\r\n", 25);
    c.used = 25;
    memset(req, 'b', MAX_BODY);
    req[MAX_BODY] = '\0';
    hc_get(&c, req, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "body=1024:bbbb"));
    hc_close(&c);
}

static void test_deferred_answer(void **state)
{
    struct hc_client c;
    struct hc_resp r;

    (void)state;
    open_client(&c, "127.0.0.1");
    hc_get(&c,
           "GET /defer HTTP/1.1\r\nHost: x\r\nMcp-Session-Id: late-1\r\n"
           "X-Test: a\r\nX-Other: b\r\n\r\n",
           &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "late");
    assert_string_equal(T.late_sid, "late-1");
    assert_true(T.late_xtest_null);
    assert_int_equal(T.gone, 0);
    /* And the connection lives on, also after a deferred POST. */
    hc_get(&c,
           "POST /defer HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
           &r);
    assert_string_equal(r.body, "late");
    hc_get(&c, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    assert_int_equal(r.status, 200);
    hc_close(&c);
}

static void test_head(void **state)
{
    struct hc_client c;
    struct hc_resp r;
    char v[32];
    const char *end;

    (void)state;
    open_client(&c, "127.0.0.1");
    hc_send(&c, "HEAD /echo HTTP/1.1\r\nHost: x\r\n\r\n");
    RUN_UNTIL((end = strstr(c.rx, "\r\n\r\n")) != NULL);
    assert_int_equal(strncmp(c.rx, "HTTP/1.1 200 OK\r\n", 17), 0);
    snprintf(r.head, sizeof(r.head), "%.*s", (int)(end + 4 - c.rx), c.rx);
    assert_true(atoi(hc_header(r.head, "content-length", v, sizeof(v))) > 0);
    c.used = (size_t)(end + 4 - c.rx);
    /* No body came: the next answer starts right after the head. */
    hc_get(&c, "GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    assert_int_equal(r.status, 404);
    assert_string_equal(r.body, "none");
    hc_close(&c);
}

static void test_stream(void **state)
{
    struct hc_client c;
    struct hc_resp r;
    char v[64];

    (void)state;
    open_client(&c, "127.0.0.1");
    hc_send(&c, "GET /sse HTTP/1.1\r\nHost: x\r\n\r\n");
    /* The head and the first event arrive before the stream ends. */
    RUN_UNTIL(hc_take(&c, &r, true) && r.body_len > 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(hc_header(r.head, "content-type", v, sizeof(v)),
                        "text/event-stream");
    assert_string_equal(hc_header(r.head, "cache-control", v, sizeof(v)),
                        "no-cache");
    assert_null(hc_header(r.head, "content-length", v, sizeof(v)));
    assert_string_equal(r.body, "data: 0\n\n");
    RUN_UNTIL(hc_take(&c, &r, false));
    assert_string_equal(r.body, "data: 0\n\ndata: 1\n\ndata: 2\n\n");
    assert_int_equal(T.gone, 0);
    hc_get(&c, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    assert_int_equal(r.status, 200);
    hc_close(&c);

    /* HTTP/1.0: the end of the connection ends the stream. */
    open_client(&c, "127.0.0.1");
    hc_send(&c, "GET /sse HTTP/1.0\r\n\r\n");
    RUN_UNTIL(c.eof);
    assert_true(hc_take(&c, &r, false));
    assert_string_equal(r.body, "data: 0\n\ndata: 1\n\ndata: 2\n\n");
    hc_close(&c);
}

static void test_client_leaves(void **state)
{
    struct hc_client c;
    struct gw_http_req *held;

    (void)state;
    open_client(&c, "127.0.0.1");
    hc_send(&c, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n");
    RUN_UNTIL(T.pending != NULL);
    held = T.pending;
    hc_close(&c);
    RUN_UNTIL(T.gone == 1);
    assert_ptr_equal(T.gone_req, held);

    /* An open stream too. */
    open_client(&c, "127.0.0.1");
    hc_send(&c, "GET /sse-hold HTTP/1.1\r\nHost: x\r\n\r\n");
    RUN_UNTIL(strstr(c.rx, "data: hi") != NULL);
    hc_close(&c);
    RUN_UNTIL(T.gone == 2);
    assert_null(T.pending);
}

static void test_pipelined_requests_wait(void **state)
{
    struct hc_client c;
    struct hc_resp r;

    (void)state;
    open_client(&c, "127.0.0.1");
    hc_send(&c, "GET /defer HTTP/1.1\r\nHost: x\r\n\r\n"
                "GET /echo?second HTTP/1.1\r\nHost: x\r\n\r\n");
    RUN_UNTIL(hc_take(&c, &r, false));
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "late");
    RUN_UNTIL(hc_take(&c, &r, false));
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "query=second\n"));
    assert_int_equal(T.requests, 2);
    assert_int_equal(T.gone, 0);
    hc_close(&c);
}

static void test_upgrade_refused(void **state)
{
    struct hc_client c;

    (void)state;
    open_client(&c, "127.0.0.1");
    hc_send(&c, "GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n");
    RUN_UNTIL(c.eof);
    assert_int_equal(c.rx_len, 0);
    hc_close(&c);
    open_client(&c, "127.0.0.1");
    hc_send(&c, "CONNECT example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n");
    RUN_UNTIL(c.eof);
    hc_close(&c);
    assert_int_equal(T.requests, 0);
}

static void test_slow_reader_is_dropped(void **state)
{
    struct hc_client c;

    (void)state;
    open_client(&c, "127.0.0.1");
    uv_read_stop((uv_stream_t *)&c.tcp);
    hc_send(&c, "GET /burst HTTP/1.1\r\nHost: x\r\n\r\n");
    RUN_UNTIL(T.gone == 1);
    assert_int_equal(T.burst_rc, GW_ENOSPC);
    assert_true(T.burst_writes >= 15 && T.burst_writes <= 16);
    hc_close(&c);
}

static void test_close_with_open_requests(void **state)
{
    struct hc_client a, b, idle;
    struct hc_resp r;

    (void)state;
    open_client(&idle, "127.0.0.1");
    hc_get(&idle, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    open_client(&a, "127.0.0.1");
    hc_send(&a, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n");
    RUN_UNTIL(T.pending != NULL);
    open_client(&b, "127.0.0.1");
    hc_send(&b, "GET /sse-hold HTTP/1.1\r\nHost: x\r\n\r\n");
    RUN_UNTIL(strstr(b.rx, "data: hi") != NULL);
    gw_http_server_close(T.srv, on_srv_closed, &T);
    assert_int_equal(T.gone, 2); /* before close returns */
    RUN_UNTIL(T.srv_closed);
    T.srv = NULL;
    RUN_UNTIL(a.eof && b.eof && idle.eof);
    hc_close(&a);
    hc_close(&b);
    hc_close(&idle);
}

static void test_ipv6(void **state)
{
    struct hc_client c;
    struct hc_resp r;

    (void)state;
    stop_server();
    T.srv_closed = false;
    start_server("::1");
    open_client(&c, "::1");
    hc_get(&c, "GET /echo?x HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "peer=::1\n"));
    assert_non_null(strstr(r.body, "query=x\n"));
    hc_close(&c);
}

static void test_bind_fails(void **state)
{
    struct gw_http_server *other = NULL;
    struct gw_http_server_options o = {
        .listen = "127.0.0.1",
        .port = T.port, /* taken by the server of setup() */
        .max_body = MAX_BODY,
        .on_request = on_request,
    };

    (void)state;
    assert_int_equal(gw_http_server_init(&T.fx.loop, &o, &other), GW_ECONFIG);
    assert_null(other);
}

/* ---- what clients can make the server hold ---------------------------- */

/* A small client for many connections at once (hc_client is 256 KiB). */
struct lite {
    uv_tcp_t tcp;
    uv_connect_t connect;
    uv_write_t head_w, body_w;
    char rx[512];
    size_t rx_len;
    bool connected, written, eof, closed;
};

static struct lite lites[N_IDLE];
static char idle_body[IDLE_SENT];

static void lite_alloc(uv_handle_t *h, size_t size, uv_buf_t *buf)
{
    struct lite *l = h->data;

    (void)size;
    buf->base = l->rx + l->rx_len;
    buf->len = sizeof(l->rx) - 1 - l->rx_len;
}

static void lite_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct lite *l = s->data;

    (void)buf;
    if (n > 0) {
        l->rx_len += (size_t)n;
        l->rx[l->rx_len] = '\0';
    }
    if (n < 0 || l->rx_len + 1 >= sizeof(l->rx)) {
        l->eof = true;
        uv_read_stop(s);
    }
}

static void lite_connected(uv_connect_t *req, int status)
{
    struct lite *l = req->data;

    assert_int_equal(status, 0);
    l->connected = true;
    uv_read_start((uv_stream_t *)&l->tcp, lite_alloc, lite_read);
}

static void lite_written(uv_write_t *w, int status)
{
    (void)status; /* a refused connection may fail its write */
    ((struct lite *)w->data)->written = true;
}

/* A connection to the server from the loopback address ip. */
static void lite_open(struct lite *l, const char *ip)
{
    struct sockaddr_in sa, from;

    memset(l, 0, sizeof(*l));
    assert_int_equal(uv_ip4_addr("127.0.0.1", T.port, &sa), 0);
    assert_int_equal(uv_ip4_addr(ip, 0, &from), 0);
    uv_tcp_init(&T.fx.loop, &l->tcp);
    assert_int_equal(uv_tcp_bind(&l->tcp, (struct sockaddr *)&from, 0), 0);
    l->tcp.data = l;
    l->connect.data = l;
    assert_int_equal(uv_tcp_connect(&l->connect, &l->tcp,
                                    (struct sockaddr *)&sa, lite_connected),
                     0);
}

/* Sends head and, from the shared buffer, body bytes (not copied). */
static void lite_send(struct lite *l, const char *head, size_t body_len)
{
    uv_buf_t hb = uv_buf_init((char *)head, (unsigned)strlen(head));
    uv_buf_t bb = uv_buf_init(idle_body, (unsigned)body_len);

    l->head_w.data = l;
    l->body_w.data = l;
    assert_int_equal(uv_write(&l->head_w, (uv_stream_t *)&l->tcp, &hb, 1,
                              body_len > 0 ? NULL : lite_written),
                     0);
    if (body_len > 0) {
        assert_int_equal(
            uv_write(&l->body_w, (uv_stream_t *)&l->tcp, &bb, 1, lite_written),
            0);
    }
}

static void lite_on_closed(uv_handle_t *h)
{
    ((struct lite *)h->data)->closed = true;
}

static bool all_lites(int n, size_t field)
{
    for (int i = 0; i < n; i++) {
        if (!*(bool *)((char *)&lites[i] + field)) {
            return false;
        }
    }
    return true;
}

#define ALL(n, field) all_lites(n, offsetof(struct lite, field))

static void lites_close(int n)
{
    for (int i = 0; i < n; i++) {
        uv_close((uv_handle_t *)&lites[i].tcp, lite_on_closed);
    }
    RUN_UNTIL(ALL(n, closed));
}

static uint64_t server_stat(size_t field)
{
    struct gw_http_server_stats st;

    gw_http_server_get_stats(T.srv, &st);
    if (st.body_bytes > T.peak.body_bytes) {
        T.peak.body_bytes = st.body_bytes;
    }
    return *(uint64_t *)((char *)&st + field);
}

#define STAT(field) server_stat(offsetof(struct gw_http_server_stats, field))

/* Resident set of this process (server and clients), in KiB. */
static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;

    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "VmRSS:", 6) == 0) {
            kib = strtol(line + 6, NULL, 10);
        }
    }
    fclose(f);
    return kib;
}

static void test_refused_from_the_head(void **state)
{
    struct hc_client c;
    struct hc_resp r;
    char v[32];
    static char req[512];

    (void)state;
    /* Unauthorised, announcing a body that never comes: the answer comes
     * at once from the head, and the connection ends with it. */
    open_client(&c, "127.0.0.1");
    hc_send(&c, "POST /private HTTP/1.1\r\nHost: x\r\nContent-Length: 1000"
                "\r\n\r\n0123456789");
    RUN_UNTIL(hc_take(&c, &r, false));
    assert_int_equal(r.status, 401);
    assert_string_equal(r.body, "no");
    assert_string_equal(hc_header(r.head, "connection", v, sizeof(v)), "close");
    RUN_UNTIL(c.eof);
    hc_close(&c);
    assert_int_equal(T.requests, 0);
    assert_int_equal(STAT(body_bytes), 0);
    assert_int_equal(T.peak.body_bytes, 0);
    assert_int_equal(gw_http_server_responses(T.srv, 401), 1);

    /* Authorised: the body comes, and the connection lives on. */
    snprintf(req, sizeof(req),
             "POST /private HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ok"
             "\r\nContent-Length: 5\r\n\r\nhello");
    open_client(&c, "127.0.0.1");
    hc_get(&c, req, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "body=5:hello\n"));
    hc_get(&c, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    assert_int_equal(r.status, 200);
    assert_false(c.eof);
    hc_close(&c);
    assert_int_equal(T.requests, 2);
    assert_int_equal(T.heads, 3);
}

/* GET and HEAD read no body: one announced is refused from the head. */
static void test_get_with_a_body_refused(void **state)
{
    static const char *const reqs[] = {
        "GET /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n01234",
        "HEAD /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n",
        "GET /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
        "\r\n3\r\nabc\r\n",
    };
    struct hc_client c;
    struct hc_resp r;

    (void)state;
    for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
        open_client(&c, "127.0.0.1");
        hc_send(&c, reqs[i]);
        /* A HEAD answer's length has no body after it: read the head. */
        RUN_UNTIL(strstr(c.rx, "\r\n\r\n") != NULL);
        assert_memory_equal(c.rx, "HTTP/1.1 400 ", 13);
        assert_non_null(strstr(c.rx, "\r\nConnection: close\r\n"));
        RUN_UNTIL(c.eof);
        hc_close(&c);
    }
    assert_int_equal(T.requests, 0);
    assert_int_equal(T.heads, 0);
    assert_int_equal(STAT(body_bytes), 0);
    assert_int_equal(gw_http_server_responses(T.srv, 400), 3);
    /* Content-Length: 0 is no body. */
    open_client(&c, "127.0.0.1");
    hc_get(&c, "GET /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
           &r);
    assert_int_equal(r.status, 200);
    hc_close(&c);
}

static void test_body_grows_as_it_arrives(void **state)
{
    struct hc_client c;
    static char head[256];

    (void)state;
    restart_server(BIG_BODY, 0, 0);
    memset(idle_body, 'b', sizeof(idle_body));
    snprintf(head, sizeof(head),
             "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n",
             BIG_BODY);
    open_client(&c, "127.0.0.1");
    hc_send(&c, head);
    hc_send(&c, "0123456789");
    /* Ten bytes of 256 KiB came: the server holds one small buffer. */
    RUN_UNTIL(STAT(body_bytes) > 0);
    assert_true(STAT(body_bytes) <= 4096);
    assert_int_equal(T.requests, 0);
    hc_close(&c);
    RUN_UNTIL(STAT(connections) == 0);
    assert_int_equal(STAT(body_bytes), 0);
    assert_int_equal(T.requests, 0);
}

static void test_idle_connections_hold_no_memory(void **state)
{
    static char head[256];
    long rss0, rss1;
    int answered = 0;

    (void)state;
    restart_server(BIG_BODY, 0, 0);
    memset(idle_body, ' ', sizeof(idle_body));
    snprintf(head, sizeof(head),
             "POST /private HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n",
             BIG_BODY);
    rss0 = rss_kib();
    for (int i = 0; i < N_IDLE; i++) {
        lite_open(&lites[i], "127.0.0.1");
    }
    RUN_UNTIL(ALL(N_IDLE, connected));
    for (int i = 0; i < N_IDLE; i++) {
        lite_send(&lites[i], head, IDLE_SENT);
    }
    /* Each is refused from its head and closed: the bodies stay unread. */
    RUN_UNTIL(ALL(N_IDLE, eof));
    rss1 = rss_kib();
    for (int i = 0; i < N_IDLE; i++) {
        answered += strncmp(lites[i].rx, "HTTP/1.1 401 ", 13) == 0;
    }
    print_message("%d connections announcing %d bytes, sending %d: RSS "
                  "%ld -> %ld KiB, body buffers at most %llu bytes\n",
                  N_IDLE, BIG_BODY, IDLE_SENT, rss0, rss1,
                  (unsigned long long)T.peak.body_bytes);
    assert_int_equal(answered, N_IDLE);
    assert_int_equal(T.requests, 0);
    assert_int_equal(T.peak.body_bytes, 0);
    /* Bodies held would be 40 MB; lws's own per-connection state is not. */
    assert_true(rss1 - rss0 < 16 * 1024);
    lites_close(N_IDLE);
    RUN_UNTIL(STAT(connections) == 0);
}

static void test_connection_limits(void **state)
{
    static const char get[] = "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n";

    (void)state;
    restart_server(MAX_BODY, 5, 3);
    /* Three from one address are served; the fourth is closed unread. */
    for (int i = 0; i < 3; i++) {
        lite_open(&lites[i], "127.0.0.1");
    }
    RUN_UNTIL(ALL(3, connected) && STAT(connections) == 3);
    lite_open(&lites[3], "127.0.0.1");
    RUN_UNTIL(lites[3].eof);
    assert_int_equal(lites[3].rx_len, 0);
    assert_int_equal(STAT(connections_refused), 1);
    /* Other addresses have room up to the total of five. */
    lite_open(&lites[4], "127.0.0.2");
    lite_open(&lites[5], "127.0.0.3");
    RUN_UNTIL(lites[4].connected && lites[5].connected &&
              STAT(connections) == 5);
    lite_open(&lites[6], "127.0.0.4");
    RUN_UNTIL(lites[6].eof);
    assert_int_equal(STAT(connections_refused), 2);
    /* Those admitted work. */
    lite_send(&lites[0], get, 0);
    lite_send(&lites[4], get, 0);
    RUN_UNTIL(strstr(lites[0].rx, "\r\n\r\n") != NULL &&
              strstr(lites[4].rx, "\r\n\r\n") != NULL);
    assert_int_equal(strncmp(lites[0].rx, "HTTP/1.1 200 ", 13), 0);
    assert_int_equal(strncmp(lites[4].rx, "HTTP/1.1 200 ", 13), 0);
    /* Leaving gives the room back. */
    uv_close((uv_handle_t *)&lites[1].tcp, lite_on_closed);
    RUN_UNTIL(lites[1].closed && STAT(connections) == 4);
    lite_open(&lites[1], "127.0.0.1");
    RUN_UNTIL(lites[1].connected && STAT(connections) == 5);
    lite_send(&lites[1], get, 0);
    RUN_UNTIL(strstr(lites[1].rx, "\r\n\r\n") != NULL);
    assert_int_equal(strncmp(lites[1].rx, "HTTP/1.1 200 ", 13), 0);
    assert_int_equal(STAT(connections_refused), 2);
    lites_close(7);
    RUN_UNTIL(STAT(connections) == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_get_with_query_and_headers, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_post_body_and_keepalive, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_body_too_large, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deferred_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_head, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_leaves, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipelined_requests_wait, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_upgrade_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slow_reader_is_dropped, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_close_with_open_requests, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ipv6, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bind_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_from_the_head, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_get_with_a_body_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_body_grows_as_it_arrives, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_idle_connections_hold_no_memory,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_connection_limits, setup,
                                        teardown),
    };

    gw_fixture_filter();
    gw_log_set_level(getenv("GW_TEST_LOG") != NULL ? GW_LOG_DEBUG
                                                   : GW_LOG_ERROR);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
