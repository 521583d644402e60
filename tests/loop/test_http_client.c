/*
 * gateway/http/http_client.c on a real loop against a small HTTP server of the
 * test's own on 127.0.0.1: a response in pieces, a cancel and a new
 * request from inside a data callback, refused connections, timeouts, a
 * refusal of more data, and a close with requests open. Every test ends
 * with every handle closed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include "fixture.h"
#include "gateway/http/http_client.h"

/* ---- the server: answers by the request's path ---- */

struct conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    char buf[8192];
    size_t len;
    int step; /* pieces of /pieces written */
    bool answered;
    int open; /* handles still to close */
};

struct server {
    uv_tcp_t listener;
    int port;
    int requests;
    char last_body[256];
    char last_auth[256];
};

static struct {
    struct gw_fixture fx;
    struct server srv;
    struct gw_http_client *client;
    bool client_closed;
} T;

static void on_conn_closed(uv_handle_t *h)
{
    struct conn *c = h->data;

    if (--c->open == 0) {
        free(c);
    }
}

static void conn_close(struct conn *c)
{
    if (!uv_is_closing((uv_handle_t *)&c->tcp)) {
        uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
        uv_close((uv_handle_t *)&c->timer, on_conn_closed);
    }
}

static void on_written(uv_write_t *w, int status)
{
    (void)status;
    free(w->data);
    free(w);
}

static void conn_write(struct conn *c, const char *text)
{
    uv_write_t *w = malloc(sizeof(*w));
    char *copy = strdup(text);
    uv_buf_t b = uv_buf_init(copy, (unsigned)strlen(copy));

    assert_non_null(w);
    assert_non_null(copy);
    w->data = copy;
    assert_int_equal(uv_write(w, (uv_stream_t *)&c->tcp, &b, 1, on_written), 0);
}

static const char *const pieces[] = {
    "event: message\ndata: one\n\n",
    "event: message\ndata: two\n\n",
    "event: message\ndata: three\n\n",
};

static void on_piece_timer(uv_timer_t *t)
{
    struct conn *c = t->data;

    if (c->step < 3) {
        conn_write(c, pieces[c->step++]);
        uv_timer_start(&c->timer, on_piece_timer, 30, 0);
    } else {
        conn_close(c);
    }
}

/* A whole request is in: its head, and Content-Length bytes of body. */
static void maybe_answer(struct conn *c)
{
    char *end = strstr(c->buf, "\r\n\r\n");
    const char *cl, *auth;
    size_t body_len = 0;

    if (end == NULL || c->answered) {
        return;
    }
    if ((cl = strcasestr(c->buf, "content-length:")) != NULL && cl < end) {
        body_len = (size_t)atoi(cl + 15);
    }
    if (c->len < (size_t)(end + 4 - c->buf) + body_len) {
        return;
    }
    c->answered = true;
    T.srv.requests++;
    snprintf(T.srv.last_body, sizeof(T.srv.last_body), "%.*s", (int)body_len,
             end + 4);
    T.srv.last_auth[0] = '\0';
    if ((auth = strcasestr(c->buf, "\r\nx-test:")) != NULL && auth < end) {
        sscanf(auth + 9, " %255[^\r]", T.srv.last_auth);
    }
    if (strncmp(c->buf, "POST /json ", 11) == 0) {
        conn_write(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      "X-Thing:   spaced  \r\nContent-Length: 11\r\n"
                      "Connection: close\r\n\r\n{\"ok\":true}");
        conn_close(c);
    } else if (strncmp(c->buf, "POST /pieces ", 13) == 0) {
        conn_write(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                      "Connection: close\r\n\r\n");
        uv_timer_start(&c->timer, on_piece_timer, 10, 0);
    } else if (strncmp(c->buf, "DELETE /gone ", 13) == 0) {
        conn_write(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n"
                      "Connection: close\r\n\r\n");
        conn_close(c);
    }
    /* /slow: no answer, ever */
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    struct conn *c = h->data;

    (void)hint;
    *b = uv_buf_init(c->buf + c->len, (unsigned)(sizeof(c->buf) - 1 - c->len));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct conn *c = s->data;

    (void)b;
    if (n < 0) {
        conn_close(c);
        return;
    }
    c->len += (size_t)n;
    c->buf[c->len] = '\0';
    maybe_answer(c);
}

static void on_connection(uv_stream_t *server, int status)
{
    struct conn *c = calloc(1, sizeof(*c));

    assert_int_equal(status, 0);
    assert_non_null(c);
    uv_tcp_init(server->loop, &c->tcp);
    uv_timer_init(server->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->open = 2;
    assert_int_equal(uv_accept(server, (uv_stream_t *)&c->tcp), 0);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

/* Connections still open at the end are the client's to close: they
 * close when it does, and their reads end. */
static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (h->type == UV_TCP && h != (uv_handle_t *)&T.srv.listener &&
        h->data != NULL && !uv_is_closing(h)) {
        conn_close(h->data);
    }
}

static int setup(void **state)
{
    struct sockaddr_in addr;

    (void)state;
    memset(&T, 0, sizeof(T));
    gw_fixture_loop_init(&T.fx);
    T.srv.port = gw_fixture_free_port(SOCK_STREAM);
    uv_ip4_addr("127.0.0.1", T.srv.port, &addr);
    uv_tcp_init(&T.fx.loop, &T.srv.listener);
    assert_int_equal(
        uv_tcp_bind(&T.srv.listener, (const struct sockaddr *)&addr, 0), 0);
    assert_int_equal(
        uv_listen((uv_stream_t *)&T.srv.listener, 16, on_connection), 0);
    assert_int_equal(gw_http_client_init(&T.fx.loop, &T.client), 0);
    return 0;
}

static void on_client_closed(struct gw_http_client *c, void *arg)
{
    (void)c;
    (void)arg;
    T.client_closed = true;
}

static int teardown(void **state)
{
    (void)state;
    if (T.client != NULL) {
        gw_http_client_close(T.client, on_client_closed, NULL);
        GW_FIXTURE_RUN_UNTIL(&T.fx, T.client_closed);
    }
    uv_walk(&T.fx.loop, close_walk, NULL);
    uv_close((uv_handle_t *)&T.srv.listener, NULL);
    gw_fixture_loop_close(&T.fx);
    return 0;
}

/* ---- what a request saw ---- */

struct seen {
    char content_type[128];
    char thing[64];
    char data[512];
    size_t data_len;
    int data_calls;
    bool done;
    enum gw_http_result result;
    int status;
    char detail[256];
    /* behaviour */
    bool cancel_on_data;
    bool refuse_data;
    bool start_on_data;
    struct gw_http_req *self;
    struct seen *started; /* what the request started from data sees */
};

static void on_header(void *arg, const char *name, const char *value)
{
    struct seen *s = arg;

    if (strcasecmp(name, "content-type") == 0) {
        snprintf(s->content_type, sizeof(s->content_type), "%s", value);
    } else if (strcasecmp(name, "x-thing") == 0) {
        snprintf(s->thing, sizeof(s->thing), "[%s]", value);
    }
}

static void on_done(void *arg, enum gw_http_result result, int status,
                    const char *detail)
{
    struct seen *s = arg;

    assert_false(s->done); /* once */
    s->done = true;
    s->result = result;
    s->status = status;
    snprintf(s->detail, sizeof(s->detail), "%s", detail);
}

static int start(const char *method, const char *path, long timeout_ms,
                 struct seen *s, int port);

static bool on_data(void *arg, const char *buf, size_t len)
{
    struct seen *s = arg;

    assert_true(s->data_len + len < sizeof(s->data));
    memcpy(s->data + s->data_len, buf, len);
    s->data_len += len;
    s->data_calls++;
    if (s->start_on_data && s->started != NULL) {
        s->start_on_data = false;
        assert_int_equal(start("POST", "/json", 5000, s->started, T.srv.port),
                         0);
    }
    if (s->cancel_on_data) {
        gw_http_cancel(s->self);
        return true; /* the cancel alone must stop it */
    }
    return !s->refuse_data;
}

static int start(const char *method, const char *path, long timeout_ms,
                 struct seen *s, int port)
{
    static const char *const headers[] = {
        "X-Test: abc", "Content-Type: application/json", NULL};
    char url[128];
    struct gw_http_options o = {
        .method = method,
        .url = url,
        .headers = headers,
        .body = "{\"q\":1}",
        .body_len = 7,
        .timeout_ms = timeout_ms,
    };
    struct gw_http_callbacks cbs = {on_header, on_data, on_done, s};

    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
    return gw_http_request(T.client, &o, &cbs, &s->self);
}

/* ---- the tests ---- */

static void test_json_answer(void **state)
{
    struct seen s = {0};

    (void)state;
    assert_int_equal(start("POST", "/json", 5000, &s, T.srv.port), 0);
    assert_int_equal(gw_http_client_active(T.client), 1);
    GW_FIXTURE_RUN_UNTIL(&T.fx, s.done);
    assert_int_equal(s.result, GW_HTTP_OK);
    assert_int_equal(s.status, 200);
    assert_string_equal(s.content_type, "application/json");
    assert_string_equal(s.thing, "[spaced]"); /* value trimmed */
    assert_string_equal(s.data, "{\"ok\":true}");
    assert_string_equal(s.detail, "");
    assert_string_equal(T.srv.last_body, "{\"q\":1}");
    assert_string_equal(T.srv.last_auth, "abc");
    assert_int_equal(gw_http_client_active(T.client), 0);
}

static void test_pieces_in_order(void **state)
{
    struct seen s = {0};

    (void)state;
    assert_int_equal(start("POST", "/pieces", 5000, &s, T.srv.port), 0);
    GW_FIXTURE_RUN_UNTIL(&T.fx, s.done);
    assert_int_equal(s.result, GW_HTTP_OK);
    assert_string_equal(s.content_type, "text/event-stream");
    assert_string_equal(s.data, "event: message\ndata: one\n\n"
                                "event: message\ndata: two\n\n"
                                "event: message\ndata: three\n\n");
    assert_true(s.data_calls >= 3); /* as they came, not at the end */
}

static void test_cancel_and_start_inside_data(void **state)
{
    struct seen s = {.cancel_on_data = true, .start_on_data = true};
    struct seen second = {0};

    (void)state;
    s.started = &second;
    assert_int_equal(start("POST", "/pieces", 5000, &s, T.srv.port), 0);
    GW_FIXTURE_RUN_UNTIL(&T.fx, s.data_calls == 1 && second.done);
    assert_false(s.done); /* cancelled: never told */
    assert_int_equal(second.result, GW_HTTP_OK);
    assert_string_equal(second.data, "{\"ok\":true}");
    /* Nothing more arrives for the cancelled one. */
    GW_FIXTURE_RUN_UNTIL(&T.fx, gw_http_client_active(T.client) == 0);
    assert_int_equal(s.data_calls, 1);
}

static void test_refused_connection(void **state)
{
    struct seen s = {0};
    int port = gw_fixture_free_port(SOCK_STREAM);

    (void)state;
    assert_int_equal(start("POST", "/json", 5000, &s, port), 0);
    GW_FIXTURE_RUN_UNTIL(&T.fx, s.done);
    assert_int_equal(s.result, GW_HTTP_CONNECT);
    assert_int_equal(s.status, 0);
    assert_true(strlen(s.detail) > 0);
}

static void test_timeout(void **state)
{
    struct seen s = {0};
    uint64_t t0 = uv_now(&T.fx.loop);

    (void)state;
    assert_int_equal(start("POST", "/slow", 300, &s, T.srv.port), 0);
    GW_FIXTURE_RUN_UNTIL(&T.fx, s.done);
    assert_int_equal(s.result, GW_HTTP_TIMEOUT);
    assert_true(uv_now(&T.fx.loop) - t0 >= 250);
}

static void test_refuse_data_and_status(void **state)
{
    struct seen s = {.refuse_data = true};
    struct seen d = {0};

    (void)state;
    assert_int_equal(start("POST", "/pieces", 5000, &s, T.srv.port), 0);
    GW_FIXTURE_RUN_UNTIL(&T.fx, s.done);
    assert_int_equal(s.result, GW_HTTP_ABORTED);
    assert_int_equal(s.data_calls, 1);
    /* A DELETE with a 404: a complete response, the status says it. */
    assert_int_equal(start("DELETE", "/gone", 5000, &d, T.srv.port), 0);
    GW_FIXTURE_RUN_UNTIL(&T.fx, d.done);
    assert_int_equal(d.result, GW_HTTP_OK);
    assert_int_equal(d.status, 404);
}

static void test_close_with_requests_open(void **state)
{
    struct seen a = {0}, b = {0};

    (void)state;
    assert_int_equal(start("POST", "/slow", 30000, &a, T.srv.port), 0);
    GW_FIXTURE_RUN_UNTIL(&T.fx, T.srv.requests == 1);
    assert_int_equal(start("POST", "/slow", 30000, &b, T.srv.port), 0);
    gw_http_client_close(T.client, on_client_closed, NULL);
    /* Told at once, inside the close. */
    assert_true(a.done && b.done);
    assert_int_equal(a.result, GW_HTTP_SHUTDOWN);
    assert_int_equal(b.result, GW_HTTP_SHUTDOWN);
    GW_FIXTURE_RUN_UNTIL(&T.fx, T.client_closed);
    T.client = NULL;
}

static void test_bad_arguments(void **state)
{
    struct seen s = {0};
    struct gw_http_options o = {
        .method = "POST", .url = "http://x/", .timeout_ms = 0};
    struct gw_http_callbacks cbs = {NULL, NULL, on_done, &s};

    (void)state;
    assert_int_equal(gw_http_request(T.client, &o, &cbs, NULL), GW_EINVAL);
    o.timeout_ms = 100;
    o.url = NULL;
    assert_int_equal(gw_http_request(T.client, &o, &cbs, NULL), GW_EINVAL);
    assert_false(s.done);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_json_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pieces_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_and_start_inside_data,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_connection, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuse_data_and_status, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_close_with_requests_open, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
    };
    gw_fixture_filter();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
