/*
 * Backend WebSocket client against servers in the same loop: an lws server
 * for framing and closing, a raw TCP listener that records the upgrade
 * request byte for byte (or never answers it), and TLS with a CA and
 * certificates made at test time in a temporary directory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>
#include <libwebsockets.h>
#include <dlfcn.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <uv.h>

#include "common/log.h"
#include "crypto/credential.h"
#include "dns_probe.h"
#include "fixture.h"
#include "gateway/backend/backend_msg.h"
#include "gateway/backend/backend_ws.h"

#define MAX_ITEMS 16
#define ITEM_MAX  (16 * 1024)
#define MAC       "aa:bb:cc:dd:ee:01"
#define UUID      "0f8e1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b"

/* A message as one side received it. */
struct item {
    bool binary;
    uint32_t ts; /* client side audio only */
    size_t len;
    uint8_t data[ITEM_MAX];
};

/* One scripted server action, run one per writable event. */
struct action {
    int flags; /* LWS_WRITE_* (with lws_write_ws_flags for fragments) */
    const void *data;
    size_t len;
    int close_code; /* non-zero: close with this code instead */
};

static struct {
    struct gw_fixture fx;
    /* the client under test */
    struct gw_backend_ws *bws;
    bool bws_closed;
    struct gw_backend_config be;
    struct gw_backend_connect params;
    char url[256];
    struct gw_backend_conn *conn;
    void (*on_open_hook)(struct gw_backend_conn *conn);
    int opens, closes;
    char reason[128];
    struct item rx[MAX_ITEMS];
    int n_rx;
    /* the lws server */
    struct lws_context *srv;
    SSL_CTX *srv_client_ctx; /* see client_ctx_new() */
    int srv_port;
    struct action script[MAX_ITEMS];
    int n_script, script_pos;
    struct item srv_rx[MAX_ITEMS];
    int n_srv_rx;
    uint8_t srv_frag[ITEM_MAX];
    size_t srv_frag_len;
    bool srv_frag_binary;
    int srv_established;
    int srv_close_code; /* from the client's close frame */
    bool srv_closed;
    int srv_wsi_live; /* accepted connections not yet freed */
    /* Stream mode (test_backpressure): binary messages are checked
     * against stream_expect() and counted, not recorded. */
    bool srv_stream;
    struct lws *srv_wsi;
    uint32_t srv_stream_next, srv_stream_bad;
    /* the raw listener */
    uv_tcp_t raw_listen, raw_client;
    bool raw_running, raw_client_open;
    int raw_mode; /* RAW_* */
    int raw_port;
    char raw_req[8192];
    size_t raw_req_len;
    bool raw_req_done;
    uv_write_t raw_write;
    char raw_resp[256];
    uint8_t raw_after[64]; /* RAW_DEAF: the first bytes after the upgrade */
    size_t raw_after_len;
} T;

static char cert_dir[64]; /* gw_fixture_certs(), for the whole run */

#define RUN_UNTIL(cond) GW_FIXTURE_RUN_UNTIL(&T.fx, cond)

/* ---- certificates --------------------------------------------------- */

static int make_certs(void **state)
{
    (void)state;
    gw_fixture_certs(cert_dir, sizeof(cert_dir));
    return 0;
}

static int remove_certs(void **state)
{
    (void)state;
    gw_fixture_certs_remove(cert_dir);
    return 0;
}

/* ---- loop and handles ---------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    memset(&T, 0, sizeof(T));
    gw_fixture_loop_init(&T.fx);
    return 0;
}

static int free_port(void)
{
    return gw_fixture_free_port(SOCK_STREAM);
}

static void find_tagged(uv_handle_t *handle, void *arg)
{
    void **tag = arg;

    if (handle->data == *tag) {
        *tag = NULL;
    }
}

/* lws's own uv handles carry the context in ->data until closed. */
static bool lws_handles_left(struct lws_context *ctx)
{
    void *tag = ctx;

    uv_walk(&T.fx.loop, find_tagged, &tag);
    return tag == NULL;
}

/* ---- the lws server -------------------------------------------------- */

static void record(struct item *it, bool binary, const uint8_t *data,
                   size_t len)
{
    assert_true(len <= ITEM_MAX);
    it->binary = binary;
    it->len = len;
    memcpy(it->data, data, len);
}

static int srv_writeable(struct lws *wsi)
{
    static uint8_t buf[LWS_PRE + ITEM_MAX];
    struct action *a;

    if (T.script_pos >= T.n_script) {
        return 0;
    }
    a = &T.script[T.script_pos++];
    if (a->close_code != 0) {
        /* As the client does it: gw__backend_close_with(), backend_ws.c. */
        lws_close_reason(wsi, (enum lws_close_status)a->close_code, NULL, 0);
        lws_set_timer_usecs(wsi, 0);
        return 0;
    }
    memcpy(buf + LWS_PRE, a->data, a->len);
    assert_int_equal(lws_write(wsi, buf + LWS_PRE, a->len,
                               (enum lws_write_protocol)a->flags),
                     (int)a->len);
    if (T.script_pos < T.n_script) {
        lws_callback_on_writable(wsi);
    }
    return 0;
}

static void stream_check(const uint8_t *msg, size_t len);

static void srv_receive(struct lws *wsi, const uint8_t *in, size_t len)
{
    if (lws_is_first_fragment(wsi)) {
        T.srv_frag_len = 0;
        T.srv_frag_binary = lws_frame_is_binary(wsi);
    }
    assert_true(T.srv_frag_len + len <= ITEM_MAX);
    memcpy(T.srv_frag + T.srv_frag_len, in, len);
    T.srv_frag_len += len;
    if (lws_is_final_fragment(wsi) && T.srv_stream) {
        stream_check(T.srv_frag, T.srv_frag_len);
        return;
    }
    if (lws_is_final_fragment(wsi)) {
        assert_true(T.n_srv_rx < MAX_ITEMS);
        record(&T.srv_rx[T.n_srv_rx++], T.srv_frag_binary, T.srv_frag,
               T.srv_frag_len);
    }
}

static int srv_cb(struct lws *wsi, enum lws_callback_reasons reason, void *user,
                  void *in, size_t len)
{
    const uint8_t *code = in;

    switch (reason) {
    case LWS_CALLBACK_ESTABLISHED:
        T.srv_established++;
        T.srv_wsi = wsi;
        if (T.n_script > 0) {
            lws_callback_on_writable(wsi);
        }
        return 0;
    case LWS_CALLBACK_SERVER_WRITEABLE:
        return srv_writeable(wsi);
    case LWS_CALLBACK_RECEIVE:
        srv_receive(wsi, in, len);
        return 0;
    case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
        T.srv_close_code = len >= 2 ? (code[0] << 8) | code[1] : 1005;
        return 0;
    case LWS_CALLBACK_CLOSED:
        T.srv_closed = true;
        return 0;
    case LWS_CALLBACK_TIMER:
        return -1; /* only ever set to close */
    case LWS_CALLBACK_WSI_CREATE:
        T.srv_wsi_live++;
        return 0;
    case LWS_CALLBACK_WSI_DESTROY:
        T.srv_wsi_live--;
        return 0;
    default:
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    }
}

static const struct lws_protocols srv_protocols[] = {
    {"test-backend", srv_cb, 0, 4096, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

/*
 * lws 4.1.6 takes fresh OpenSSL ex_data indices for every context made
 * with DO_SSL_GLOBAL_INIT, and then fails to free a client SSL_CTX made
 * under older ones: the server's, since the client under test starts
 * after it. So the server gets a client SSL_CTX of ours, which lws leaves
 * alone. libssl is already loaded (by lws); this test does not link it.
 */
static SSL_CTX *client_ctx_new(void)
{
    SSL_CTX *(*ctx_new)(const SSL_METHOD *) =
        (SSL_CTX * (*)(const SSL_METHOD *)) dlsym(RTLD_DEFAULT, "SSL_CTX_new");
    const SSL_METHOD *(*method)(void) =
        (const SSL_METHOD *(*)(void))dlsym(RTLD_DEFAULT, "TLS_client_method");

    assert_non_null(ctx_new);
    assert_non_null(method);
    return ctx_new(method());
}

static void client_ctx_free(SSL_CTX *ctx)
{
    void (*ctx_free)(SSL_CTX *) =
        (void (*)(SSL_CTX *))dlsym(RTLD_DEFAULT, "SSL_CTX_free");

    assert_non_null(ctx_free);
    ctx_free(ctx);
}

/* Starts the server; cert NULL for ws://, else its <cert>.crt/.key. */
static void srv_start(const char *cert)
{
    struct lws_context_creation_info info;
    void *loops[1] = {&T.fx.loop};
    char crt[128], key[128];

    memset(&info, 0, sizeof(info));
    info.options = LWS_SERVER_OPTION_LIBUV;
    info.foreign_loops = loops;
    info.port = T.srv_port = free_port();
    info.iface = "127.0.0.1";
    info.protocols = srv_protocols;
    info.gid = -1;
    info.uid = -1;
    if (cert != NULL) {
        snprintf(crt, sizeof(crt), "%s/%s.crt", cert_dir, cert);
        snprintf(key, sizeof(key), "%s/%s.key", cert_dir, cert);
        info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
        info.provided_client_ssl_ctx = T.srv_client_ctx = client_ctx_new();
        /* A TLS accept the client gave up on is only freed by this
         * timeout; it would leak if the context went first. It also ends
         * a handshake still under way, so it is long enough for a busy
         * machine; refused ones are usually freed at once. */
        info.timeout_secs = 10;
        info.ssl_cert_filepath = crt;
        info.ssl_private_key_filepath = key;
    }
    T.srv = lws_create_context(&info);
    assert_non_null(T.srv);
}

/* Two-phase destroy on a foreign loop, as the client does it. */
static void srv_stop(void)
{
    if (T.srv == NULL) {
        return;
    }
    lws_context_destroy(T.srv);
    RUN_UNTIL(!lws_handles_left(T.srv));
    lws_context_destroy(T.srv);
    T.srv = NULL;
    if (T.srv_client_ctx != NULL) {
        client_ctx_free(T.srv_client_ctx);
        T.srv_client_ctx = NULL;
    }
}

static void script(int flags, const void *data, size_t len)
{
    assert_true(T.n_script < MAX_ITEMS);
    T.script[T.n_script++] = (struct action){flags, data, len, 0};
}

static void script_close(int code)
{
    assert_true(T.n_script < MAX_ITEMS);
    T.script[T.n_script++] = (struct action){0, NULL, 0, code};
}

/* ---- the raw listener ------------------------------------------------- */

static void raw_alloc(uv_handle_t *handle, size_t size, uv_buf_t *buf)
{
    static char chunk[4096];

    (void)handle;
    (void)size;
    *buf = uv_buf_init(chunk, sizeof(chunk));
}

static void raw_client_close(void)
{
    if (T.raw_client_open) {
        T.raw_client_open = false;
        uv_close((uv_handle_t *)&T.raw_client, NULL);
    }
}

/* Value of header name (case-insensitive) in the recorded request. */
static bool raw_header(const char *name, char *out, size_t cap)
{
    size_t n = strlen(name);

    for (const char *line = strstr(T.raw_req, "\r\n"); line != NULL;
         line = strstr(line + 2, "\r\n")) {
        if (strncasecmp(line + 2, name, n) == 0 && line[2 + n] == ':') {
            const char *v = line + 2 + n + 1;
            v += *v == ' ';
            size_t len = strcspn(v, "\r");
            assert_true(len < cap);
            memcpy(out, v, len);
            out[len] = '\0';
            return true;
        }
    }
    return false;
}

/* RAW_DEAF completes the upgrade, then keeps what comes and never answers
 * (a backend that hangs without closing its socket). */
enum { RAW_SILENT, RAW_UPGRADE, RAW_REFUSE, RAW_DEAF };

static void raw_answer(void)
{
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    unsigned char digest[EVP_MAX_MD_SIZE];
    char key[128], accept[64];
    unsigned int dlen;
    uv_buf_t buf;

    if (T.raw_mode == RAW_REFUSE) {
        snprintf(T.raw_resp, sizeof(T.raw_resp),
                 "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n");
    } else {
        assert_true(raw_header("sec-websocket-key", key, sizeof(key) - 40));
        strcat(key, guid);
        assert_int_equal(
            EVP_Digest(key, strlen(key), digest, &dlen, EVP_sha1(), NULL), 1);
        EVP_EncodeBlock((unsigned char *)accept, digest, (int)dlen);
        snprintf(T.raw_resp, sizeof(T.raw_resp),
                 "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                 "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
                 accept);
    }
    buf = uv_buf_init(T.raw_resp, (unsigned)strlen(T.raw_resp));
    assert_int_equal(
        uv_write(&T.raw_write, (uv_stream_t *)&T.raw_client, &buf, 1, NULL), 0);
}

static void raw_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    (void)stream;
    if (nread < 0) {
        raw_client_close();
        return;
    }
    if (T.raw_req_done && T.raw_mode == RAW_DEAF) {
        size_t room = sizeof(T.raw_after) - T.raw_after_len;
        size_t n = (size_t)nread < room ? (size_t)nread : room;
        memcpy(T.raw_after + T.raw_after_len, buf->base, n);
        T.raw_after_len += n;
        return;
    }
    if (T.raw_req_done) {
        /* Upgraded: the client's close frame; end it the crude way. */
        raw_client_close();
        return;
    }
    assert_true(T.raw_req_len + (size_t)nread < sizeof(T.raw_req));
    memcpy(T.raw_req + T.raw_req_len, buf->base, (size_t)nread);
    T.raw_req_len += (size_t)nread;
    T.raw_req[T.raw_req_len] = '\0';
    if (strstr(T.raw_req, "\r\n\r\n") != NULL) {
        T.raw_req_done = true;
        if (T.raw_mode != RAW_SILENT) {
            raw_answer();
        }
    }
}

static void raw_on_connection(uv_stream_t *server, int status)
{
    assert_int_equal(status, 0);
    assert_false(T.raw_client_open);
    uv_tcp_init(&T.fx.loop, &T.raw_client);
    assert_int_equal(uv_accept(server, (uv_stream_t *)&T.raw_client), 0);
    T.raw_client_open = true;
    uv_read_start((uv_stream_t *)&T.raw_client, raw_alloc, raw_read);
}

/* mode: complete the upgrade, refuse it, or never say a word. */
static void raw_start(int mode)
{
    struct sockaddr_in sa;
    int len = sizeof(sa);

    uv_ip4_addr("127.0.0.1", 0, &sa);
    uv_tcp_init(&T.fx.loop, &T.raw_listen);
    assert_int_equal(
        uv_tcp_bind(&T.raw_listen, (const struct sockaddr *)&sa, 0), 0);
    assert_int_equal(
        uv_listen((uv_stream_t *)&T.raw_listen, 4, raw_on_connection), 0);
    uv_tcp_getsockname(&T.raw_listen, (struct sockaddr *)&sa, &len);
    T.raw_port = ntohs(sa.sin_port);
    T.raw_mode = mode;
    T.raw_running = true;
}

static void raw_stop(void)
{
    raw_client_close();
    if (T.raw_running) {
        T.raw_running = false;
        uv_close((uv_handle_t *)&T.raw_listen, NULL);
    }
}

/* ---- the client ------------------------------------------------------- */

static void ev_open(struct gw_backend_conn *conn, void *owner)
{
    assert_ptr_equal(owner, &T);
    assert_ptr_equal(conn, T.conn);
    T.opens++;
    if (T.on_open_hook != NULL) {
        T.on_open_hook(conn);
    }
}

static void ev_text(struct gw_backend_conn *conn, const char *text, size_t len,
                    void *owner)
{
    (void)conn;
    (void)owner;
    assert_true(T.n_rx < MAX_ITEMS);
    record(&T.rx[T.n_rx++], false, (const uint8_t *)text, len);
}

static void ev_audio(struct gw_backend_conn *conn, uint32_t ts,
                     const uint8_t *opus, size_t len, void *owner)
{
    (void)conn;
    (void)owner;
    assert_true(T.n_rx < MAX_ITEMS);
    record(&T.rx[T.n_rx], true, opus, len);
    T.rx[T.n_rx++].ts = ts;
}

static void ev_close(struct gw_backend_conn *conn, const char *reason,
                     void *owner)
{
    assert_ptr_equal(owner, &T);
    assert_ptr_equal(conn, T.conn);
    T.closes++;
    snprintf(T.reason, sizeof(T.reason), "%s", reason);
    T.conn = NULL;
}

static const struct gw_backend_events events = {ev_open, ev_text, ev_audio,
                                                ev_close};

static void client_init(const char *ca_file)
{
    const char *lws_debug = getenv("GW_TEST_LWS_LOG"); /* an lws bitmask */

    assert_int_equal(gw_backend_ws_init(&T.fx.loop, ca_file, &T.bws), 0);
    if (lws_debug != NULL) {
        lws_set_log_level(atoi(lws_debug), NULL);
    }
    T.be.name = "main";
    T.be.url = T.url;
    T.be.framing = GW_FRAMING_V2;
    T.be.auth.scheme = GW_AUTH_NONE;
    T.be.auth.token = "";
    T.be.auth.secret = "";
    T.be.ca_file = "";
    /* Not under test here (see test_connect_timeout): long enough for a
     * TLS handshake and upgrade on a busy machine; the guard bounds it. */
    T.be.connect_timeout_ms = 30000;
    T.params.backend = &T.be;
    T.params.device_id = MAC;
    T.params.client_id = UUID;
    T.params.forwarded_for = NULL;
    T.params.log_subject = "dev=test";
    T.params.max_message_bytes = 8192;
}

static void client_open(void)
{
    assert_int_equal(
        gw_backend_conn_open(T.bws, &T.params, &events, &T, &T.conn), 0);
    assert_non_null(T.conn);
    /* Whatever happens, never from inside the call. */
    assert_int_equal(T.opens + T.closes, 0);
}

static void on_bws_closed(struct gw_backend_ws *bws, void *arg)
{
    assert_ptr_equal(bws, T.bws);
    assert_ptr_equal(arg, &T);
    T.bws_closed = true;
}

/* Closes everything the test opened; the loop must then close cleanly. */
static void teardown_all(void)
{
    int closes = T.closes + (T.conn != NULL ? 1 : 0);

    if (T.bws != NULL) {
        gw_backend_ws_close(T.bws, on_bws_closed, &T);
        RUN_UNTIL(T.bws_closed);
        T.bws = NULL;
        /* A connection still open got exactly one on_close on the way. */
        assert_int_equal(T.closes, closes);
        assert_null(T.conn);
    }
    srv_stop();
    raw_stop();
    gw_fixture_loop_close(&T.fx);
}

static void get_stats(struct gw_backend_ws_stats *st)
{
    gw_backend_ws_get_stats(T.bws, st);
}

/* ---- upgrade request -------------------------------------------------- */

#define HMAC_TOKEN "(hmac)" /* expect a valid xiaozhi token */

struct header_case {
    const char *path;   /* appended to ws://127.0.0.1:<port> */
    const char *target; /* expected in the request line */
    enum gw_auth_scheme scheme;
    const char *client_id;     /* as given by the session, may be NULL */
    const char *forwarded_for; /* may be NULL */
    const char *want_client_id;
    const char *want_auth; /* NULL: no header at all */
};

static const struct header_case header_cases[] = {
    {"/xiaozhi/v1/?from=mqtt_gateway", "/xiaozhi/v1/?from=mqtt_gateway",
     GW_AUTH_NONE, UUID, "192.0.2.7", UUID, NULL},
    {"/xiaozhi/mqtt_udp/v1/", "/xiaozhi/mqtt_udp/v1/", GW_AUTH_BEARER, UUID,
     NULL, UUID, "Bearer test-token"},
    {"", "/", GW_AUTH_XIAOZHI_HMAC, NULL, "10.1.2.3", "default-client-id",
     HMAC_TOKEN},
    {"?from=mqtt_gateway", "/?from=mqtt_gateway", GW_AUTH_XIAOZHI_HMAC, UUID,
     NULL, UUID, HMAC_TOKEN},
    {"/a%20b/?x=1&y=%2F&from=mqtt_gateway#frag",
     "/a%20b/?x=1&y=%2F&from=mqtt_gateway", GW_AUTH_BEARER, "", NULL,
     "default-client-id", "Bearer test-token"},
};

static void assert_line(const char *name, const char *value)
{
    char line[512];

    snprintf(line, sizeof(line), "\r\n%s: %s\r\n", name, value);
    if (strstr(T.raw_req, line) == NULL) {
        fail_msg("no \"%s: %s\" in:\n%s", name, value, T.raw_req);
    }
}

static void check_auth(const struct header_case *c)
{
    char value[256];

    if (c->want_auth == NULL) {
        assert_false(raw_header("authorization", value, sizeof(value)));
    } else if (strcmp(c->want_auth, HMAC_TOKEN) == 0) {
        assert_true(raw_header("authorization", value, sizeof(value)));
        assert_int_equal(strncmp(value, "Bearer ", 7), 0);
        assert_int_equal(gw_credential_backend_token_verify(
                             "s3cret", 6, c->want_client_id,
                             strlen(c->want_client_id), MAC, strlen(MAC),
                             value + 7, strlen(value + 7), (int64_t)time(NULL),
                             60),
                         0);
        assert_line("authorization", value);
    } else {
        assert_line("authorization", c->want_auth);
    }
}

static void test_upgrade_request(void **state)
{
    char want[512], value[256];

    (void)state;
    for (size_t i = 0; i < sizeof(header_cases) / sizeof(header_cases[0]);
         i++) {
        const struct header_case *c = &header_cases[i];

        setup(NULL);
        raw_start(RAW_UPGRADE);
        client_init(NULL);
        snprintf(T.url, sizeof(T.url), "ws://127.0.0.1:%d%s", T.raw_port,
                 c->path);
        T.be.auth.scheme = c->scheme;
        T.be.auth.token = "test-token";
        T.be.auth.secret = "s3cret";
        T.params.client_id = c->client_id;
        T.params.forwarded_for = c->forwarded_for;
        client_open();
        RUN_UNTIL(T.opens == 1);

        snprintf(want, sizeof(want), "GET %s HTTP/1.1\r\n", c->target);
        assert_int_equal(strncmp(T.raw_req, want, strlen(want)), 0);
        assert_line("device-id", MAC);
        assert_line("client-id", c->want_client_id);
        assert_line("protocol-version", "2");
        snprintf(want, sizeof(want), "127.0.0.1:%d", T.raw_port);
        assert_true(raw_header("host", value, sizeof(value)));
        assert_string_equal(value, want);
        check_auth(c);
        if (c->forwarded_for != NULL) {
            assert_line("x-forwarded-for", c->forwarded_for);
        } else {
            assert_false(raw_header("x-forwarded-for", value, sizeof(value)));
        }
        /* No compression is offered: audio does not compress. */
        assert_false(
            raw_header("sec-websocket-extensions", value, sizeof(value)));

        gw_backend_conn_close(T.conn);
        assert_int_equal(T.closes, 0);
        RUN_UNTIL(T.closes == 1);
        assert_string_equal(T.reason, "closed by gateway");
        teardown_all();
    }
}

/* backends[].headers reach the backend as written, after the gateway's. */
static void test_extra_headers(void **state)
{
    struct gw_header extra[] = {
        {"X-Api-Key", "tok 1=/+"},
        {"CF-Access-Client-Id", "abc.def"},
        {"x-empty", ""},
    };
    char value[256];

    (void)state;
    setup(NULL);
    raw_start(RAW_UPGRADE);
    client_init(NULL);
    snprintf(T.url, sizeof(T.url), "ws://127.0.0.1:%d/x/?from=mqtt_gateway",
             T.raw_port);
    T.be.headers = extra;
    T.be.n_headers = 3;
    client_open();
    RUN_UNTIL(T.opens == 1);
    assert_line("X-Api-Key", "tok 1=/+");
    assert_line("CF-Access-Client-Id", "abc.def");
    assert_true(raw_header("x-empty", value, sizeof(value)));
    assert_string_equal(value, "");
    /* the gateway's own are still there, once */
    assert_line("device-id", MAC);
    assert_line("protocol-version", "2");
    const char *mine = strstr(T.raw_req, "\r\nX-Api-Key:");
    assert_non_null(mine);
    assert_null(strstr(mine + 2, "\r\nX-Api-Key:"));
    assert_true(mine > strstr(T.raw_req, "\r\ndevice-id:"));
    gw_backend_conn_close(T.conn);
    RUN_UNTIL(T.closes == 1);
    teardown_all();
}

/* A config made in code is checked at open: no header can be injected. */
static void test_extra_headers_refused(void **state)
{
    static const struct gw_header bad[][1] = {
        {{"X-A", "v\r\nX-Evil: 1"}},
        {{"X A", "v"}},
        {{"Host", "evil"}},
        {{"device-id", "aa:bb:cc:dd:ee:ff"}},
        {{"Sec-WebSocket-Protocol", "x"}},
    };
    struct gw_backend_conn *conn = NULL;

    (void)state;
    setup(NULL);
    client_init(NULL);
    snprintf(T.url, sizeof(T.url), "ws://127.0.0.1:9/x/");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        T.be.headers = (struct gw_header *)bad[i];
        T.be.n_headers = 1;
        assert_int_equal(
            gw_backend_conn_open(T.bws, &T.params, &events, &T, &conn),
            GW_EINVAL);
    }
    /* Authorization is refused only when a scheme sends one. */
    static const struct gw_header auth[] = {{"Authorization", "Basic dTpw"}};
    T.be.headers = (struct gw_header *)auth;
    T.be.auth.scheme = GW_AUTH_BEARER;
    T.be.auth.token = "t";
    assert_int_equal(gw_backend_conn_open(T.bws, &T.params, &events, &T, &conn),
                     GW_EINVAL);
    assert_int_equal(T.opens + T.closes, 0);
    teardown_all();
}

/* ---- messages ------------------------------------------------------- */

static const char hello_down[] = "{\"type\":\"hello\",\"session_id\":\"s1\"}";
static const char hello_up[] = "{\"type\":\"hello\",\"version\":2}";

static void send_hello(struct gw_backend_conn *conn)
{
    assert_int_equal(
        gw_backend_conn_send_text(conn, hello_up, strlen(hello_up)), 0);
}

static void start_with_server(void)
{
    srv_start(NULL);
    client_init(NULL);
    snprintf(T.url, sizeof(T.url),
             "ws://127.0.0.1:%d/xiaozhi/v1/?from=mqtt_gateway", T.srv_port);
}

static void test_text_both_ways(void **state)
{
    struct gw_backend_ws_stats st;

    (void)state;
    setup(NULL);
    start_with_server();
    script(LWS_WRITE_TEXT, hello_down, strlen(hello_down));
    T.on_open_hook = send_hello;
    client_open();
    RUN_UNTIL(T.n_rx == 1 && T.n_srv_rx == 1);
    assert_false(T.rx[0].binary);
    assert_int_equal(T.rx[0].len, strlen(hello_down));
    assert_memory_equal(T.rx[0].data, hello_down, strlen(hello_down));
    assert_false(T.srv_rx[0].binary);
    assert_int_equal(T.srv_rx[0].len, strlen(hello_up));
    assert_memory_equal(T.srv_rx[0].data, hello_up, strlen(hello_up));
    get_stats(&st);
    assert_int_equal(st.connects, 1);
    assert_int_equal(st.rx_text, 1);
    assert_int_equal(st.tx_text, 1);
    assert_int_equal(st.live, 1);
    /* Shutdown with the connection open: normal closure, one on_close. */
    teardown_all();
    assert_int_equal(T.closes, 1);
    assert_string_equal(T.reason, "closed by gateway");
    assert_int_equal(T.srv_close_code, 1000);
}

static const uint8_t opus_up[] = {0xf8, 0xff, 0xfe, 0x01, 0x02};
#define TS_UP 0x11223344u

static const uint8_t v2_up[] = {0, 0,    0,    0,    0,    0,    0,
                                0, 0x11, 0x22, 0x33, 0x44, 0,    0,
                                0, 5,    0xf8, 0xff, 0xfe, 0x01, 0x02};
static const uint8_t v2_bad[] = {1, 0, 0, 4, 0, 0, 0, 1, 0, 0,
                                 0, 1, 0, 0, 0, 9, 1, 2, 3, 4};
static const uint8_t v2_down[] = {0x01, 0x00, 0x00, 0x04, 0xde, 0xad, 0xbe,
                                  0xef, 0x55, 0x66, 0x77, 0x88, 0,    0,
                                  0,    4,    0xf8, 1,    2,    3};
static const uint8_t v3_up[] = {0, 0, 0, 5, 0xf8, 0xff, 0xfe, 0x01, 0x02};
static const uint8_t v3_bad[] = {1, 0, 0, 4, 1, 2, 3, 4};
static const uint8_t v3_down[] = {0, 0x7f, 0, 4, 0xf8, 1, 2, 3};
static const uint8_t raw_down[] = {0xf8, 1, 2, 3};
static uint8_t raw_bad[GW_AUDIO_FRAME_MAX_PAYLOAD + 1]; /* over the limit */

struct audio_case {
    enum gw_framing framing;
    const uint8_t *up; /* what the server must receive */
    size_t up_len;
    const uint8_t *bad; /* undecodable: dropped, connection kept */
    size_t bad_len;
    const uint8_t *down;
    size_t down_len;
    uint32_t down_ts;
};

static const struct audio_case audio_cases[] = {
    {GW_FRAMING_V2, v2_up, sizeof(v2_up), v2_bad, sizeof(v2_bad), v2_down,
     sizeof(v2_down), 0x55667788u},
    {GW_FRAMING_V3, v3_up, sizeof(v3_up), v3_bad, sizeof(v3_bad), v3_down,
     sizeof(v3_down), 0},
    {GW_FRAMING_RAW, opus_up, sizeof(opus_up), raw_bad, sizeof(raw_bad),
     raw_down, sizeof(raw_down), 0},
};

static void send_opus(struct gw_backend_conn *conn)
{
    assert_int_equal(
        gw_backend_conn_send_audio(conn, TS_UP, opus_up, sizeof(opus_up)), 0);
}

static void test_audio_framings(void **state)
{
    struct gw_backend_ws_stats st;

    (void)state;
    for (size_t i = 0; i < sizeof(audio_cases) / sizeof(audio_cases[0]); i++) {
        const struct audio_case *c = &audio_cases[i];

        setup(NULL);
        start_with_server();
        T.be.framing = c->framing;
        script(LWS_WRITE_BINARY, c->bad, c->bad_len);
        script(LWS_WRITE_BINARY, c->down, c->down_len);
        T.on_open_hook = send_opus;
        client_open();
        RUN_UNTIL(T.n_rx == 1 && T.n_srv_rx == 1);
        assert_true(T.srv_rx[0].binary);
        assert_int_equal(T.srv_rx[0].len, c->up_len);
        assert_memory_equal(T.srv_rx[0].data, c->up, c->up_len);
        assert_true(T.rx[0].binary);
        assert_int_equal(T.rx[0].ts, c->down_ts);
        assert_int_equal(T.rx[0].len, sizeof(raw_down));
        assert_memory_equal(T.rx[0].data, raw_down, sizeof(raw_down));
        get_stats(&st);
        assert_int_equal(st.rx_bad_frames, 1);
        assert_int_equal(st.rx_audio, 1);
        assert_int_equal(st.tx_audio, 1);
        assert_int_equal(T.closes, 0);
        teardown_all();
    }
}

/* ---- frames built in place (gw_backend_conn_send_audio_held) ---------- */

/* A payload with the room before it that a held send may overwrite. */
struct held_buf {
    uint8_t room[GW_BACKEND_AUDIO_HEADROOM];
    uint8_t opus[sizeof(opus_up)];
};

static struct held_buf held[2];

/* Payload i: opus_up with its second byte i. */
static void held_fill(void)
{
    for (int i = 0; i < 2; i++) {
        memset(held[i].room, 0xaa, sizeof(held[i].room));
        memcpy(held[i].opus, opus_up, sizeof(opus_up));
        held[i].opus[1] = (uint8_t)i;
    }
}

static bool held_intact(int i)
{
    uint8_t want[sizeof(opus_up)];

    memcpy(want, opus_up, sizeof(opus_up));
    want[1] = (uint8_t)i;
    return memcmp(held[i].opus, want, sizeof(want)) == 0;
}

static void send_held(int i)
{
    assert_int_equal(gw_backend_conn_send_audio_held(
                         T.conn, TS_UP, held[i].opus, sizeof(held[i].opus)),
                     0);
}

/* Two frames in one burst. */
static void held_two(uv_timer_t *t)
{
    (void)t;
    gw_backend_ws_hold(T.bws);
    send_held(0);
    send_held(1);
    gw_backend_ws_release(T.bws);
}

/* A text between two frames moves the first to the queue. */
static void held_text_between(uv_timer_t *t)
{
    (void)t;
    gw_backend_ws_hold(T.bws);
    send_held(0);
    assert_int_equal(gw_backend_conn_send_text(T.conn, "mid", 3), 0);
    send_held(1);
    gw_backend_ws_release(T.bws);
}

/* In lws's open callback, where the release cannot write: it queues. */
static void held_in_callback(struct gw_backend_conn *conn)
{
    (void)conn;
    held_fill();
    gw_backend_ws_hold(T.bws);
    send_held(0);
    gw_backend_ws_release(T.bws);
}

/* What the server must receive for payload i under case c. */
static void assert_held_frame(const struct audio_case *c, int at, int i)
{
    uint8_t want[64];

    memcpy(want, c->up, c->up_len);
    want[c->up_len - sizeof(opus_up) + 1] = (uint8_t)i;
    assert_true(T.srv_rx[at].binary);
    assert_int_equal(T.srv_rx[at].len, c->up_len);
    assert_memory_equal(T.srv_rx[at].data, want, c->up_len);
}

/*
 * The uplink's sends: between hold and release a frame is built where
 * its payload lies (its room overwritten, the payload masked there) and
 * written at the release; a message queued after it moves it to the
 * queue first, so the order holds; a release inside an lws callback
 * queues it. Every framing, the bytes checked by the lws server.
 */
static void test_held_in_place(void **state)
{
    struct gw_backend_ws_stats st;
    uv_timer_t timer;

    (void)state;
    for (size_t k = 0; k < sizeof(audio_cases) / sizeof(audio_cases[0]); k++) {
        const struct audio_case *c = &audio_cases[k];

        setup(NULL);
        start_with_server();
        T.be.framing = c->framing;
        T.on_open_hook = held_in_callback;
        client_open();
        RUN_UNTIL(T.n_srv_rx == 1);
        assert_held_frame(c, 0, 0);
        assert_true(held_intact(0)); /* copied, not built in place */

        uv_timer_init(&T.fx.loop, &timer);
        held_fill();
        uv_timer_start(&timer, held_two, 0, 0);
        RUN_UNTIL(T.n_srv_rx == 3);
        assert_held_frame(c, 1, 0);
        assert_held_frame(c, 2, 1);
        /* Built in place: the caller's payload went out masked. */
        assert_false(held_intact(0));
        assert_false(held_intact(1));

        held_fill();
        uv_timer_start(&timer, held_text_between, 0, 0);
        RUN_UNTIL(T.n_srv_rx == 6);
        assert_held_frame(c, 3, 0);
        assert_false(T.srv_rx[4].binary);
        assert_int_equal(T.srv_rx[4].len, 3);
        assert_memory_equal(T.srv_rx[4].data, "mid", 3);
        assert_held_frame(c, 5, 1);
        assert_true(held_intact(0));
        assert_true(held_intact(1));

        get_stats(&st);
        assert_int_equal(st.tx_audio, 5);
        assert_int_equal(st.tx_text, 1);
        assert_int_equal(st.tx_dropped, 0);
        assert_int_equal(T.closes, 0);
        uv_close((uv_handle_t *)&timer, NULL);
        teardown_all();
    }
}

/* What gw_backend_ws_foreach_drops reports for one backend. */
struct drops_seen {
    const char *backend;
    int calls;
    uint64_t by_reason[GW_BACKEND_DROP_COUNT_];
};

static void on_drops(const char *backend, const uint64_t *by_reason, void *arg)
{
    struct drops_seen *seen = arg;

    if (strcmp(backend, seen->backend) == 0) {
        seen->calls++;
        memcpy(seen->by_reason, by_reason, sizeof(seen->by_reason));
    }
}

/*
 * A 60 ms wideband SILK packet (TOC 0x58), as the xiaozhi server sends
 * without ?from=mqtt_gateway: bytes 12..15 read as a v2 length of
 * 0x58585858, too big.
 */
static uint8_t bare_opus[40];

/* Every undecodable message is counted for its backend, by reason (the
 * integration test test_backend_loss adds connections up). */
static void test_drops_counted(void **state)
{
    struct drops_seen seen = {.backend = "main"};

    (void)state;
    memset(bare_opus, 0x58, sizeof(bare_opus));
    setup(NULL);
    start_with_server();
    script(LWS_WRITE_BINARY, bare_opus, sizeof(bare_opus));
    script(LWS_WRITE_BINARY, bare_opus, sizeof(bare_opus));
    script(LWS_WRITE_BINARY, v2_bad, sizeof(v2_bad));
    script(LWS_WRITE_BINARY, v2_down, sizeof(v2_down));
    client_open();
    RUN_UNTIL(T.n_rx == 1);
    gw_backend_ws_foreach_drops(T.bws, on_drops, &seen);
    assert_int_equal(seen.calls, 1);
    assert_int_equal(seen.by_reason[GW_BACKEND_DROP_BARE_OPUS], 2);
    assert_int_equal(seen.by_reason[GW_BACKEND_DROP_TRUNCATED], 1);
    assert_int_equal(seen.by_reason[GW_BACKEND_DROP_TOO_BIG], 0);
    assert_int_equal(T.closes, 0); /* the connection stays */
    assert_memory_equal(T.rx[0].data, raw_down, sizeof(raw_down));
    teardown_all();
}

static char big_text[10000];

static void test_fragmented(void **state)
{
    (void)state;
    setup(NULL);
    start_with_server();
    T.params.max_message_bytes = 16384;
    memset(big_text, 'a', sizeof(big_text));
    script(lws_write_ws_flags(LWS_WRITE_TEXT, 1, 0), "{\"type\":", 8);
    script(lws_write_ws_flags(LWS_WRITE_TEXT, 0, 0), "\"stt\",", 6);
    script(lws_write_ws_flags(LWS_WRITE_TEXT, 0, 1), "\"text\":\"hi\"}", 12);
    script(lws_write_ws_flags(LWS_WRITE_BINARY, 1, 0), v2_down, 10);
    script(lws_write_ws_flags(LWS_WRITE_BINARY, 0, 1), v2_down + 10,
           sizeof(v2_down) - 10);
    /* One frame bigger than lws's read size arrives in pieces too. */
    script(LWS_WRITE_TEXT, big_text, sizeof(big_text));
    client_open();
    RUN_UNTIL(T.n_rx == 3);
    assert_false(T.rx[0].binary);
    assert_int_equal(T.rx[0].len, 26);
    assert_memory_equal(T.rx[0].data, "{\"type\":\"stt\",\"text\":\"hi\"}", 26);
    assert_true(T.rx[1].binary);
    assert_int_equal(T.rx[1].ts, 0x55667788u);
    assert_memory_equal(T.rx[1].data, raw_down, sizeof(raw_down));
    assert_false(T.rx[2].binary);
    assert_int_equal(T.rx[2].len, sizeof(big_text));
    assert_memory_equal(T.rx[2].data, big_text, sizeof(big_text));
    teardown_all();
}

static void test_message_too_big(void **state)
{
    (void)state;
    memset(big_text, 'b', sizeof(big_text));
    for (int fragmented = 0; fragmented < 2; fragmented++) {
        setup(NULL);
        start_with_server();
        T.params.max_message_bytes = 1024;
        if (fragmented) {
            /* Each piece fits; together they do not. */
            script(lws_write_ws_flags(LWS_WRITE_TEXT, 1, 0), big_text, 700);
            script(lws_write_ws_flags(LWS_WRITE_TEXT, 0, 1), big_text, 700);
        } else {
            script(LWS_WRITE_TEXT, big_text, 2000);
        }
        client_open();
        RUN_UNTIL(T.closes == 1);
        assert_string_equal(T.reason, "message too big");
        assert_int_equal(T.n_rx, 0);
        RUN_UNTIL(T.srv_closed);
        assert_int_equal(T.srv_close_code, 1009);
        teardown_all();
        assert_int_equal(T.closes, 1);
    }
}

/* ---- closing ---------------------------------------------------------- */

static void test_backend_closes(void **state)
{
    static const int codes[] = {1000, 4000};

    (void)state;
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        char want[64];

        setup(NULL);
        start_with_server();
        script(LWS_WRITE_TEXT, hello_down, strlen(hello_down));
        script_close(codes[i]);
        client_open();
        RUN_UNTIL(T.closes == 1);
        snprintf(want, sizeof(want), "closed by backend %d", codes[i]);
        assert_string_equal(T.reason, want);
        assert_int_equal(T.opens, 1);
        assert_int_equal(T.n_rx, 1);
        teardown_all();
        assert_int_equal(T.closes, 1);
    }
}

static const uint8_t opus_small[] = {0xf8, 0x0a, 0x0b};

static void send_then_close(struct gw_backend_conn *conn)
{
    assert_int_equal(gw_backend_conn_send_text(conn, "one", 3), 0);
    assert_int_equal(
        gw_backend_conn_send_audio(conn, 7, opus_small, sizeof(opus_small)), 0);
    assert_int_equal(gw_backend_conn_send_text(conn, "three", 5), 0);
    gw_backend_conn_close(conn);
    gw_backend_conn_close(conn); /* harmless twice */
    assert_int_equal(T.closes, 0);
    assert_int_equal(gw_backend_conn_send_text(conn, "late", 4), GW_EPROTO);
}

static void test_gateway_close_flushes(void **state)
{
    (void)state;
    setup(NULL);
    start_with_server();
    T.on_open_hook = send_then_close;
    client_open();
    RUN_UNTIL(T.closes == 1 && T.srv_closed);
    assert_string_equal(T.reason, "closed by gateway");
    assert_int_equal(T.n_srv_rx, 3);
    assert_memory_equal(T.srv_rx[0].data, "one", 3);
    assert_true(T.srv_rx[1].binary);
    assert_int_equal(T.srv_rx[1].len, 16 + sizeof(opus_small));
    assert_memory_equal(T.srv_rx[1].data + 16, opus_small, sizeof(opus_small));
    assert_int_equal(T.srv_rx[2].len, 5);
    assert_memory_equal(T.srv_rx[2].data, "three", 5);
    assert_int_equal(T.srv_close_code, 1000);
    teardown_all();
    assert_int_equal(T.closes, 1);
}

static void test_close_while_connecting(void **state)
{
    struct gw_backend_ws_stats st;

    (void)state;
    for (int by_shutdown = 0; by_shutdown < 2; by_shutdown++) {
        setup(NULL);
        raw_start(RAW_SILENT);
        client_init(NULL);
        snprintf(T.url, sizeof(T.url), "ws://127.0.0.1:%d/", T.raw_port);
        client_open();
        /* Queued while connecting; dropped with the connection. */
        assert_int_equal(gw_backend_conn_send_text(T.conn, "x", 1), 0);
        RUN_UNTIL(T.raw_req_done);
        if (by_shutdown) {
            teardown_all(); /* asserts one on_close */
        } else {
            gw_backend_conn_close(T.conn);
            assert_int_equal(T.closes, 0);
            RUN_UNTIL(T.closes == 1);
            get_stats(&st);
            assert_int_equal(st.connect_errors, 0);
            assert_int_equal(st.live, 0);
            teardown_all();
        }
        assert_int_equal(T.opens, 0);
        assert_int_equal(T.closes, 1);
        assert_string_equal(T.reason, "closed by gateway");
    }
}

/* ---- connecting ------------------------------------------------------- */

static void test_connect_refused(void **state)
{
    struct gw_backend_ws_stats st;

    (void)state;
    setup(NULL);
    client_init(NULL);
    snprintf(T.url, sizeof(T.url), "ws://127.0.0.1:%d/", free_port());
    client_open();
    RUN_UNTIL(T.closes == 1);
    assert_int_equal(strncmp(T.reason, "connect failed", 14), 0);
    assert_int_equal(T.opens, 0);
    get_stats(&st);
    assert_int_equal(st.connect_errors, 1);
    assert_int_equal(st.connects, 0);
    teardown_all();
}

static void test_upgrade_refused(void **state)
{
    (void)state;
    setup(NULL);
    raw_start(RAW_REFUSE);
    client_init(NULL);
    snprintf(T.url, sizeof(T.url), "ws://127.0.0.1:%d/", T.raw_port);
    client_open();
    RUN_UNTIL(T.closes == 1);
    assert_int_equal(strncmp(T.reason, "connect failed", 14), 0);
    assert_non_null(strstr(T.reason, "(HTTP 401)"));
    teardown_all();
}

static void test_connect_timeout(void **state)
{
    struct gw_backend_ws_stats st;
    uint64_t started;

    (void)state;
    setup(NULL);
    raw_start(RAW_SILENT);
    client_init(NULL);
    snprintf(T.url, sizeof(T.url), "ws://127.0.0.1:%d/", T.raw_port);
    T.be.connect_timeout_ms = 200;
    started = uv_now(&T.fx.loop);
    client_open();
    RUN_UNTIL(T.closes == 1);
    assert_string_equal(T.reason, "connect timeout");
    assert_true(T.raw_req_done); /* it did get as far as the upgrade */
    assert_true(uv_now(&T.fx.loop) - started >= 200);
    get_stats(&st);
    assert_int_equal(st.connect_errors, 1);
    teardown_all();
}

/* ---- TLS -------------------------------------------------------------- */

#define NO_ISSUER "connect failed: certificate: unable to get local issuer"

struct tls_case {
    const char *cert;       /* the server's */
    const char *host;       /* in the url */
    const char *init_ca;    /* gw_backend_ws_init's ca_file */
    const char *backend_ca; /* the backend's own ca_file */
    const char *fails;      /* NULL: it opens; else how on_close begins */
};

static const struct tls_case tls_cases[] = {
    {"good", "localhost", "ca.crt", NULL, NULL},
    {"good", "127.0.0.1", "ca.crt", NULL, NULL},
    {"good", "localhost", NULL, "ca.crt", NULL},
    {"good", "localhost", NULL, NULL, NO_ISSUER}, /* not a system CA */
    {"wrong", "localhost", "ca.crt", NULL,
     "connect failed: certificate: hostname mismatch"},
    {"rogue", "localhost", "ca.crt", NULL, NO_ISSUER}, /* unknown CA */
    {"rogue", "127.0.0.1", NULL, "ca.crt", NO_ISSUER},
    /* Connected by IP once resolved, the name is still what is checked:
     * a certificate for the IP alone does not pass for "localhost". */
    {"iponly", "localhost", "ca.crt", NULL,
     "connect failed: certificate: hostname mismatch"},
    {"iponly", "127.0.0.1", "ca.crt", NULL, NULL},
};

static void test_tls(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(tls_cases) / sizeof(tls_cases[0]); i++) {
        const struct tls_case *c = &tls_cases[i];

        setup(NULL);
        srv_start(c->cert);
        client_init(c->init_ca != NULL ? gw_fixture_cert(cert_dir, c->init_ca)
                                       : NULL);
        if (c->backend_ca != NULL) {
            T.be.ca_file = (char *)gw_fixture_cert(cert_dir, c->backend_ca);
        }
        snprintf(T.url, sizeof(T.url), "wss://%s:%d/xiaozhi/v1/", c->host,
                 T.srv_port);
        script(LWS_WRITE_TEXT, hello_down, strlen(hello_down));
        T.on_open_hook = send_hello;
        client_open();
        if (c->fails == NULL) {
            RUN_UNTIL(T.n_rx == 1 && T.n_srv_rx == 1);
            assert_memory_equal(T.srv_rx[0].data, hello_up, strlen(hello_up));
        } else {
            RUN_UNTIL(T.closes == 1);
            if (strncmp(T.reason, c->fails, strlen(c->fails)) != 0) {
                fail_msg("case %zu: %s", i, T.reason);
            }
            assert_int_equal(T.opens, 0);
            assert_int_equal(T.srv_established, 0);
            RUN_UNTIL(T.srv_wsi_live == 0);
        }
        teardown_all();
    }
}

/* ---- host names: resolved off the loop ------------------------------ */

/* A timer ticking every TICK_MS: the longest gap between two ticks says
 * how long the loop was held. */
#define TICK_MS 5
static struct {
    uv_timer_t timer;
    uint64_t last_ns, max_gap_ns;
    unsigned ticks;
} Tick;

static void on_tick(uv_timer_t *timer)
{
    uint64_t now = uv_hrtime();

    (void)timer;
    if (Tick.last_ns != 0 && now - Tick.last_ns > Tick.max_gap_ns) {
        Tick.max_gap_ns = now - Tick.last_ns;
    }
    Tick.last_ns = now;
    Tick.ticks++;
}

static void tick_start(void)
{
    memset(&Tick, 0, sizeof(Tick));
    uv_timer_init(&T.fx.loop, &Tick.timer);
    uv_timer_start(&Tick.timer, on_tick, TICK_MS, TICK_MS);
    Tick.last_ns = uv_hrtime();
}

static void tick_stop(void)
{
    uv_close((uv_handle_t *)&Tick.timer, NULL);
}

#define SLOW_MS 1000 /* the resolver's delay for "localhost" */

/*
 * A backend named by host name while the resolver is slow: the open call
 * returns at once, the loop keeps turning during the lookup (no gap near
 * SLOW_MS), getaddrinfo never runs on the loop's thread, and the upgrade
 * carries the name in Host.
 */
static void test_resolve_off_loop(void **state)
{
    struct gw_dns_probe probe;
    char want[64], value[256];
    uint64_t t0, open_ns;

    (void)state;
    setup(NULL);
    gw_dns_probe_reset();
    raw_start(RAW_UPGRADE);
    client_init(NULL);
    snprintf(T.url, sizeof(T.url), "ws://localhost:%d/xiaozhi/v1/", T.raw_port);
    gw_dns_probe_slow("localhost", SLOW_MS);
    tick_start();
    t0 = uv_hrtime();
    client_open();
    open_ns = uv_hrtime() - t0;
    RUN_UNTIL(T.opens == 1);
    tick_stop();
    gw_dns_probe_get(&probe);
    print_message("# open call %.1f ms, %u ticks, longest loop gap %.1f ms, "
                  "names looked up on the loop %u, off it %u\n",
                  (double)open_ns / 1e6, Tick.ticks,
                  (double)Tick.max_gap_ns / 1e6, probe.names_on_loop,
                  probe.names_off_loop);
    assert_int_equal(probe.names_on_loop, 0);
    assert_true(probe.names_off_loop >= 1);
    assert_true(open_ns < (uint64_t)SLOW_MS * 1000000 / 2);
    assert_true(Tick.max_gap_ns < (uint64_t)SLOW_MS * 1000000 / 2);
    assert_true(Tick.ticks >= 10);
    snprintf(want, sizeof(want), "localhost:%d", T.raw_port);
    assert_true(raw_header("host", value, sizeof(value)));
    assert_string_equal(value, want);
    gw_backend_conn_close(T.conn);
    RUN_UNTIL(T.closes == 1);
    teardown_all();
}

/* A name that does not resolve: a connect failure naming it and the
 * resolver's error, from the loop; the second attempt comes from the
 * negative cache, without a lookup. */
static void test_resolve_fails(void **state)
{
    struct gw_backend_ws_stats st;
    struct gw_dns_probe probe;

    (void)state;
    setup(NULL);
    gw_dns_probe_reset();
    client_init(NULL);
    snprintf(T.url, sizeof(T.url), "ws://backend.invalid:%d/", free_port());
    for (int i = 1; i <= 2; i++) {
        assert_int_equal(
            gw_backend_conn_open(T.bws, &T.params, &events, &T, &T.conn), 0);
        assert_int_equal(T.closes, i - 1); /* never from inside the call */
        RUN_UNTIL(T.closes == i);
        T.conn = NULL;
        assert_string_equal(T.reason, "connect failed: cannot resolve "
                                      "backend.invalid: unknown node or "
                                      "service");
    }
    assert_int_equal(T.opens, 0);
    gw_dns_probe_get(&probe);
    assert_int_equal(probe.names_on_loop, 0);
    assert_int_equal(probe.names_off_loop, 1);
    get_stats(&st);
    assert_int_equal(st.connect_errors, 2);
    teardown_all();
}

/* The owner closes (or the client shuts down) while the name is being
 * looked up: one on_close, no connection is ever made, nothing leaks. */
static void test_close_while_resolving(void **state)
{
    struct gw_dns_probe probe;

    (void)state;
    for (int by_shutdown = 0; by_shutdown < 2; by_shutdown++) {
        setup(NULL);
        gw_dns_probe_reset();
        raw_start(RAW_SILENT);
        client_init(NULL);
        snprintf(T.url, sizeof(T.url), "ws://localhost:%d/", T.raw_port);
        gw_dns_probe_slow("localhost", 200);
        client_open();
        if (by_shutdown) {
            teardown_all(); /* asserts one on_close and an empty loop */
        } else {
            gw_backend_conn_close(T.conn);
            RUN_UNTIL(T.closes == 1);
            T.conn = NULL;
            gw_dns_probe_get(&probe);
            RUN_UNTIL((gw_dns_probe_get(&probe), probe.returned == 1));
            teardown_all();
        }
        assert_int_equal(T.opens, 0);
        assert_int_equal(T.closes, 1);
        assert_string_equal(T.reason, "closed by gateway");
        assert_int_equal(T.raw_req_len, 0);
        assert_false(T.raw_client_open);
    }
}

/* ---- limits and arguments --------------------------------------------- */

static char chunk_100k[100000];

static void test_queue_limits(void **state)
{
    struct gw_backend_ws_stats st;
    uint8_t opus_big[GW_AUDIO_FRAME_MAX_PAYLOAD + 1] = {0};

    (void)state;
    setup(NULL);
    client_init(NULL);
    /* Nothing listens: every send below happens before the refusal. */
    snprintf(T.url, sizeof(T.url), "ws://127.0.0.1:%d/", free_port());
    client_open();
    for (int i = 0; i < 256; i++) {
        assert_int_equal(gw_backend_conn_send_text(T.conn, "x", 1), 0);
    }
    assert_int_equal(gw_backend_conn_send_text(T.conn, "x", 1), GW_ELIMIT);
    assert_int_equal(
        gw_backend_conn_send_audio(T.conn, 0, opus_small, sizeof(opus_small)),
        GW_ELIMIT);
    assert_int_equal(
        gw_backend_conn_send_audio(T.conn, 0, opus_big, sizeof(opus_big)),
        GW_ETOOBIG);
    get_stats(&st);
    assert_int_equal(st.tx_dropped, 2);
    gw_backend_conn_close(T.conn);
    RUN_UNTIL(T.closes == 1);

    /* The byte bound: ten 100 kB messages fit in 1 MiB, an eleventh not. */
    assert_int_equal(
        gw_backend_conn_open(T.bws, &T.params, &events, &T, &T.conn), 0);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(
            gw_backend_conn_send_text(T.conn, chunk_100k, sizeof(chunk_100k)),
            0);
    }
    assert_int_equal(
        gw_backend_conn_send_text(T.conn, chunk_100k, sizeof(chunk_100k)),
        GW_ELIMIT);
    teardown_all();
    assert_int_equal(T.closes, 2);
}

/* ---- backpressure ----------------------------------------------------- */

#define STREAM_PAYLOAD 1000  /* bytes of each frame's "Opus" */
#define STREAM_MAX     40000 /* frames at most, about 40 MB */
#define STREAM_BURST   500   /* frames per timer turn */

static uint32_t stream_sent; /* frames the client accepted */
static bool stream_refused;  /* a send came back GW_ELIMIT */
static bool stream_held;     /* each timer turn's frames in one burst */
/* Held sends: the frames of a turn stay where they are until its release. */
static uint8_t stream_bufs[STREAM_BURST]
                          [GW_BACKEND_AUDIO_HEADROOM + STREAM_PAYLOAD];

static void stream_payload(uint32_t k, uint8_t *out)
{
    for (size_t i = 0; i < STREAM_PAYLOAD; i++) {
        out[i] = (uint8_t)(k * 7 + i * 13 + (k >> 8));
    }
    memcpy(out, &k, sizeof(k));
}

/* Frame k arrived whole and in order: it ends with payload k. */
static void stream_check(const uint8_t *msg, size_t len)
{
    uint8_t want[STREAM_PAYLOAD];

    stream_payload(T.srv_stream_next, want);
    if (len < STREAM_PAYLOAD ||
        memcmp(msg + len - STREAM_PAYLOAD, want, STREAM_PAYLOAD) != 0) {
        T.srv_stream_bad++;
    }
    T.srv_stream_next++;
}

/* Sends from a timer: outside any lws callback, as the uplink does. */
static void on_stream_timer(uv_timer_t *t)
{
    /* A held turn is one burst, as one batch of the uplink's reads. */
    int turn = stream_held ? GW_BACKEND_BURST_MAX : STREAM_BURST;

    if (stream_held) {
        gw_backend_ws_hold(T.bws);
    }
    for (int i = 0; i < turn && !stream_refused && stream_sent < STREAM_MAX;
         i++) {
        uint8_t *payload = stream_bufs[i] + GW_BACKEND_AUDIO_HEADROOM;
        int rc;

        stream_payload(stream_sent, payload);
        if (stream_held) {
            rc = gw_backend_conn_send_audio_held(T.conn, stream_sent, payload,
                                                 STREAM_PAYLOAD);
        } else {
            rc = gw_backend_conn_send_audio(T.conn, stream_sent, payload,
                                            STREAM_PAYLOAD);
        }
        if (rc == GW_ELIMIT) {
            stream_refused = true;
            break;
        }
        assert_int_equal(rc, 0);
        stream_sent++;
    }
    if (stream_held) {
        gw_backend_ws_release(T.bws);
    }
    if (stream_refused || stream_sent >= STREAM_MAX) {
        uv_timer_stop(t);
    }
}

/*
 * A backend that stops reading: the gateway writes audio frames on the
 * socket itself (plain ws://) until the kernel takes no more, hands the
 * rest of the frame it was writing to lws, queues what follows and
 * refuses past its bounds. When the backend reads again every accepted
 * frame arrives whole and in order, through an independent parser (the
 * lws server), and the connection stays up.
 */
static void backpressure(bool held_sends)
{
    struct gw_backend_ws_stats st;
    uv_timer_t timer;

    setup(NULL);
    stream_held = held_sends;
    start_with_server();
    T.srv_stream = true;
    stream_sent = 0;
    stream_refused = false;
    client_open();
    RUN_UNTIL(T.opens == 1 && T.srv_wsi != NULL);
    lws_rx_flow_control(T.srv_wsi, 0);
    uv_timer_init(&T.fx.loop, &timer);
    uv_timer_start(&timer, on_stream_timer, 1, 1);
    RUN_UNTIL(stream_refused || stream_sent >= STREAM_MAX);
    /* The queue filled, so the socket refused part of a frame first. */
    assert_true(stream_refused);
    print_message("backpressure: %u frames accepted before the refusal\n",
                  (unsigned)stream_sent);
    lws_rx_flow_control(T.srv_wsi, 1);
    RUN_UNTIL(T.srv_stream_next >= stream_sent);
    assert_int_equal(T.srv_stream_next, stream_sent);
    assert_int_equal(T.srv_stream_bad, 0);
    get_stats(&st);
    assert_int_equal(st.tx_audio, stream_sent);
    assert_int_equal(st.tx_dropped, 1);
    assert_int_equal(T.closes, 0);
    uv_close((uv_handle_t *)&timer, NULL);
    teardown_all();
}

static void test_backpressure(void **state)
{
    (void)state;
    backpressure(false);
}

/*
 * The same with the uplink's held sends: frames built in place whose
 * release finds the socket full (part of one handed to lws, the rest
 * queued behind it), and frames of a turn whose connection already has
 * a queue, copied. Still every accepted frame, whole and in order.
 */
static void test_backpressure_held(void **state)
{
    (void)state;
    backpressure(true);
}

static void test_open_refuses(void **state)
{
    static const char *const bad_urls[] = {
        "http://127.0.0.1/", "ws://",         "ws:///path",  "ws://:80/",
        "ws://h:0/",         "ws://h:65536/", "ws://h:12a/", "ws://h:/",
        "ws://user@h/",      "ws://h/pa th",  "ws://h/\x01", "ws://[::1/",
        "ws://[::1]x/",      "wss//h/",       "WS://h/",
    };
    struct gw_backend_conn *conn = NULL;

    (void)state;
    setup(NULL);
    client_init(NULL);
    for (size_t i = 0; i < sizeof(bad_urls) / sizeof(bad_urls[0]); i++) {
        T.be.url = (char *)bad_urls[i];
        if (gw_backend_conn_open(T.bws, &T.params, &events, &T, &conn) !=
            GW_EINVAL) {
            fail_msg("accepted %s", bad_urls[i]);
        }
    }
    T.be.url = "ws://127.0.0.1:1/";
    T.params.device_id = "aa:bb\r\nx-evil: 1";
    assert_int_equal(gw_backend_conn_open(T.bws, &T.params, &events, &T, &conn),
                     GW_EINVAL);
    T.params.device_id = "";
    assert_int_equal(gw_backend_conn_open(T.bws, &T.params, &events, &T, &conn),
                     GW_EINVAL);
    T.params.device_id = MAC;
    T.params.forwarded_for = "1.2.3.4\n";
    assert_int_equal(gw_backend_conn_open(T.bws, &T.params, &events, &T, &conn),
                     GW_EINVAL);
    T.params.forwarded_for = NULL;
    T.be.auth.scheme = GW_AUTH_BEARER; /* with an empty token */
    assert_int_equal(gw_backend_conn_open(T.bws, &T.params, &events, &T, &conn),
                     GW_EINVAL);
    T.be.auth.scheme = GW_AUTH_XIAOZHI_HMAC; /* with an empty secret */
    assert_int_equal(gw_backend_conn_open(T.bws, &T.params, &events, &T, &conn),
                     GW_EINVAL);
    assert_null(conn);
    assert_int_equal(T.opens + T.closes, 0);
    teardown_all();
    assert_int_equal(T.opens + T.closes, 0);
}

/* ---- keepalive -------------------------------------------------------- */

/*
 * A connection that hears nothing for the ping interval is pinged; a
 * backend that answers (lws's server pongs by itself) keeps it open.
 */
static void test_ping_answered(void **state)
{
    struct gw_backend_ws_stats st;

    (void)state;
    setup(NULL);
    start_with_server();
    gw_backend_ws_set_ping(T.bws, 1);
    client_open();
    RUN_UNTIL(T.opens == 1);
    RUN_UNTIL((get_stats(&st), st.rx_pongs >= 3));
    assert_true(st.tx_pings >= st.rx_pongs);
    assert_int_equal(st.ping_timeouts, 0);
    assert_int_equal(T.closes, 0);
    assert_non_null(T.conn);
    gw_backend_conn_close(T.conn);
    RUN_UNTIL(T.closes == 1);
    teardown_all();
}

/*
 * A backend that stops answering without closing its socket: one ping
 * after the interval, and after as long again the connection is dropped
 * as lost, with the reason.
 */
static void test_no_pong_drops(void **state)
{
    struct gw_backend_ws_stats st;
    uint64_t opened, closed;

    (void)state;
    setup(NULL);
    raw_start(RAW_DEAF);
    client_init(NULL);
    gw_backend_ws_set_ping(T.bws, 1);
    snprintf(T.url, sizeof(T.url), "ws://127.0.0.1:%d/", T.raw_port);
    client_open();
    RUN_UNTIL(T.opens == 1);
    opened = uv_now(&T.fx.loop);
    RUN_UNTIL(T.closes == 1);
    closed = uv_now(&T.fx.loop);
    assert_string_equal(T.reason, "connection lost: no pong");
    get_stats(&st);
    assert_int_equal(st.tx_pings, 1);
    assert_int_equal(st.ping_timeouts, 1);
    /* The ping on the wire: FIN + opcode 9, masked, no payload. */
    assert_true(T.raw_after_len >= 6);
    assert_int_equal(T.raw_after[0], 0x89);
    assert_int_equal(T.raw_after[1], 0x80);
    /* Two intervals, each up to a keepalive tick late. */
    assert_true(closed - opened >= 2000);
    assert_true(closed - opened <= 4500);
    teardown_all();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_upgrade_request),
        cmocka_unit_test(test_text_both_ways),
        cmocka_unit_test(test_audio_framings),
        cmocka_unit_test(test_held_in_place),
        cmocka_unit_test(test_extra_headers),
        cmocka_unit_test(test_extra_headers_refused),
        cmocka_unit_test(test_drops_counted),
        cmocka_unit_test(test_fragmented),
        cmocka_unit_test(test_message_too_big),
        cmocka_unit_test(test_backend_closes),
        cmocka_unit_test(test_gateway_close_flushes),
        cmocka_unit_test(test_close_while_connecting),
        cmocka_unit_test(test_connect_refused),
        cmocka_unit_test(test_upgrade_refused),
        cmocka_unit_test(test_connect_timeout),
        cmocka_unit_test(test_tls),
        cmocka_unit_test(test_resolve_off_loop),
        cmocka_unit_test(test_resolve_fails),
        cmocka_unit_test(test_close_while_resolving),
        cmocka_unit_test(test_queue_limits),
        cmocka_unit_test(test_backpressure),
        cmocka_unit_test(test_backpressure_held),
        cmocka_unit_test(test_open_refuses),
        cmocka_unit_test(test_ping_answered),
        cmocka_unit_test(test_no_pong_drops),
    };

    gw_fixture_filter();
    gw_log_set_level(GW_LOG_ERROR); /* lws's own warnings are expected */
    return cmocka_run_group_tests(tests, make_certs, remove_certs);
}
