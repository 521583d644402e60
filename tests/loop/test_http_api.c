/*
 * The HTTP API of a real instance (no broker behind it): Host, Origin and
 * token checks, /healthz, /metrics in the Prometheus format, /api/devices,
 * the manager-api routes with their daily token, up to a command that
 * times out at a device that never answers, the MCP server off without a
 * token, and its session table when full.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/socket.h>

#include <cjson/cJSON.h>
#include <cmocka.h>
#include <uv.h>

#include "common/log.h"
#include "crypto/credential.h"
#include "fixture.h"
#include "gateway/api/http_api.h"
#include "gateway/instance.h"
#include "gateway/mcp/mcp_server.h"
#include "http_client.h"

#define TOKEN       "tok-123"
#define MANAGER_KEY "Manager-Key-9x"
#define DEVICE      "GID_test@@@aa_bb_cc_dd_ee_01@@@0f8e1a2b-3c4d-4e5f-8a9b"
/* The same id as a client may write it in a path. */
#define DEVICE_PATH                                                            \
    "GID_test%40%40%40aa_bb_cc_dd_ee_01@@@0f8e1a2b-3c4d-4e5f-8a9b"

static struct {
    struct gw_fixture fx;
    struct gw_instance *inst;
    bool stopped;
    int port;
    char daily[GW_CREDENTIAL_DAILY_TOKEN_LEN + 1];
    const char *token; /* http.token of the next start() */
    const char *host;  /* what ask() sends as Host */
} T;

static void start(const char *manager_key)
{
    char text[2048];
    char err[512];
    struct gw_config *cfg = NULL;
    int n;

    T.port = gw_fixture_free_port(SOCK_STREAM);
    n = snprintf(
        text, sizeof(text),
        "{\"mqtt\":{\"host\":\"127.0.0.1\",\"port\":%d},"
        "\"udp\":{\"bind\":\"127.0.0.1\",\"port\":0,"
        "\"public_host\":\"127.0.0.1\"},"
        "\"backends\":[{\"name\":\"main\",\"url\":\"ws://127.0.0.1:9/\"}],"
        "\"http\":{\"listen\":\"127.0.0.1\",\"port\":%d,\"token\":\"%s\","
        "\"manager_key\":\"%s\","
        "\"allowed_origins\":[\"https://console.example\"],"
        "\"allowed_hosts\":[\"gw.example\"]},"
        "\"mcp\":{\"discover\":false,\"call_timeout_ms\":200,"
        "\"max_sessions\":2}}",
        gw_fixture_free_port(SOCK_STREAM), T.port, T.token, manager_key);
    assert_int_equal(
        gw_config_load_string(text, (size_t)n, "test", &cfg, err, sizeof(err)),
        0);
    assert_int_equal(gw_instance_init(&T.fx.loop, cfg, &T.inst), 0);
    assert_non_null(T.inst->api);
    assert_int_equal(gw_http_api_port(T.inst->api), T.port);
    assert_int_equal(gw_credential_daily_token_make(
                         MANAGER_KEY, strlen(MANAGER_KEY), (int64_t)time(NULL),
                         T.daily, sizeof(T.daily)),
                     0);
}

static int setup(void **state)
{
    (void)state;
    memset(&T, 0, sizeof(T));
    T.token = TOKEN;
    T.host = "localhost";
    gw_fixture_loop_init(&T.fx);
    start(MANAGER_KEY);
    return 0;
}

static void on_stopped(struct gw_instance *inst, void *arg)
{
    (void)inst;
    (void)arg;
    T.stopped = true;
}

static int teardown(void **state)
{
    (void)state;
    gw_instance_close(T.inst, on_stopped, NULL);
    GW_FIXTURE_RUN_UNTIL(&T.fx, T.stopped);
    gw_fixture_loop_close(&T.fx); /* uv_loop_close() == 0 */
    return 0;
}

/* One request (Host: T.host) on a fresh connection; r gets the answer. */
static void ask(const char *method, const char *path, const char *headers,
                const char *body, struct hc_resp *r)
{
    static struct hc_client c;
    size_t cap = 4096 + (body != NULL ? strlen(body) : 0);
    char *req = malloc(cap);

    assert_non_null(req);
    snprintf(req, cap,
             "%s %s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: %zu\r\n\r\n%s",
             method, path, T.host, headers != NULL ? headers : "",
             body != NULL ? strlen(body) : 0, body != NULL ? body : "");
    hc_open(&c, &T.fx.loop, &T.fx.timed_out, "127.0.0.1", T.port);
    hc_get(&c, req, r);
    hc_close(&c);
    free(req);
}

static cJSON *json_of(const struct hc_resp *r)
{
    char v[64];
    cJSON *doc = cJSON_Parse(r->body);

    assert_non_null(doc);
    assert_string_equal(hc_header(r->head, "content-type", v, sizeof(v)),
                        "application/json");
    return doc;
}

static bool json_bool(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

    assert_true(cJSON_IsBool(v));
    return cJSON_IsTrue(v);
}

static const char *json_str(const cJSON *o, const char *name)
{
    const char *s =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, name));

    assert_non_null(s);
    return s;
}

#define AUTH       "Authorization: Bearer " TOKEN "\r\n"
#define DAILY_AUTH "Authorization: Bearer %s\r\n"

/* ---- tests ------------------------------------------------------------ */

static void test_healthz_and_origin(void **state)
{
    struct hc_resp r;
    cJSON *doc;

    (void)state;
    /* No token needed, and without it only the overall status: no
     * backend's name, failure or address. */
    ask("GET", "/healthz", NULL, NULL, &r);
    assert_int_equal(r.status, 503);
    doc = json_of(&r);
    assert_string_equal(json_str(doc, "status"), "unavailable");
    assert_int_equal(cJSON_GetArraySize(doc), 1);
    cJSON_Delete(doc);
    assert_null(strstr(r.body, "main"));
    assert_null(strstr(r.body, "127.0.0.1"));
    /* The whole document with the token. */
    ask("GET", "/healthz", AUTH, NULL, &r);
    assert_int_equal(r.status, 503);
    doc = json_of(&r);
    assert_string_equal(json_str(doc, "status"), "unavailable");
    assert_string_equal(json_str(doc, "broker"), "down");
    assert_string_equal(
        json_str(cJSON_GetArrayItem(
                     cJSON_GetObjectItemCaseSensitive(doc, "backends"), 0),
                 "name"),
        "main");
    assert_int_equal(
        cJSON_GetObjectItemCaseSensitive(doc, "sessions")->valueint, 0);
    assert_int_equal(
        cJSON_GetObjectItemCaseSensitive(doc, "devices_online")->valueint, 0);
    assert_true(
        cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(doc, "uptime_s")));
    cJSON_Delete(doc);
    ask("GET", "/healthz", "Authorization: Bearer tok-12\r\n", NULL, &r);
    assert_int_equal(r.status, 401);

    static const char *const good[] = {
        "http://localhost:5173", "https://localhost", "http://127.0.0.1:80",
        "http://[::1]:6274", "https://console.example"};
    static const char *const bad[] = {"http://evil.example",
                                      "http://localhost.evil.example",
                                      "null",
                                      "http://localhost:80x",
                                      "ftp://localhost",
                                      "https://console.example:1"};
    char h[128];
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        snprintf(h, sizeof(h), "Origin: %s\r\n", good[i]);
        ask("GET", "/healthz", h, NULL, &r);
        assert_int_equal(r.status, 503);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(h, sizeof(h), "Origin: %s\r\n", bad[i]);
        ask("GET", "/healthz", h, NULL, &r);
        assert_int_equal(r.status, 403);
        snprintf(h, sizeof(h), "Origin: %s\r\n" AUTH, bad[i]);
        ask("GET", "/metrics", h, NULL, &r);
        assert_int_equal(r.status, 403);
    }
    ask("POST", "/healthz", NULL, "", &r);
    assert_int_equal(r.status, 405);
    assert_non_null(strstr(r.head, "\r\nAllow: GET, HEAD\r\n"));
    ask("GET", "/nothing", NULL, NULL, &r);
    assert_int_equal(r.status, 404);
    ask("GET", "/mcpx", AUTH, NULL, &r);
    assert_int_equal(r.status, 404);
}

static void test_bearer_token(void **state)
{
    static const char *const paths[] = {
        "/metrics", "/api/devices", "/api/devices/x", "/mcp", "/mcp/devices/x"};
    struct hc_resp r;
    char v[64];

    (void)state;
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        ask("GET", paths[i], NULL, NULL, &r);
        assert_int_equal(r.status, 401);
        assert_non_null(hc_header(r.head, "www-authenticate", v, sizeof(v)));
        assert_int_equal(strncmp(v, "Bearer", 6), 0);
        ask("GET", paths[i], "Authorization: Bearer tok-12\r\n", NULL, &r);
        assert_int_equal(r.status, 401);
        ask("GET", paths[i], "Authorization: Basic dG9rLTEyMw==\r\n", NULL, &r);
        assert_int_equal(r.status, 401);
    }
    ask("GET", "/api/devices", AUTH, NULL, &r);
    assert_int_equal(r.status, 200);
    ask("GET", "/mcp", AUTH, NULL, &r);
    assert_true(r.status != 401 && r.status != 404);
    assert_int_equal(gw_http_api_responses(T.inst->api, 401), 15);
}

/* Every line is a HELP, a TYPE or a sample of a family declared before. */
static void check_exposition(const char *text)
{
    char typed[128][80];
    size_t n_typed = 0, samples = 0;

    for (const char *line = text; *line != '\0';) {
        const char *end = strchr(line, '\n');
        char name[80];
        size_t len;
        assert_non_null(end);
        if (strncmp(line, "# HELP ", 7) == 0) {
            line = end + 1;
            continue;
        }
        if (strncmp(line, "# TYPE ", 7) == 0) {
            assert_int_equal(sscanf(line + 7, "%79s", typed[n_typed]), 1);
            assert_true(++n_typed < 128);
            line = end + 1;
            continue;
        }
        len = strspn(line, "abcdefghijklmnopqrstuvwxyz_0123456789");
        assert_true(len > 0 && len < sizeof(name));
        memcpy(name, line, len);
        name[len] = '\0';
        assert_true(line[len] == ' ' || line[len] == '{');
        const char *value =
            line[len] == ' ' ? line + len + 1 : strstr(line + len, "} ") + 2;
        char *after;
        strtod(value, &after);
        assert_ptr_equal(after, end);
        bool found = false;
        for (size_t i = 0; i < n_typed && !found; i++) {
            size_t tl = strlen(typed[i]);
            found = strcmp(typed[i], name) == 0 ||
                    (strncmp(typed[i], name, tl) == 0 &&
                     (strcmp(name + tl, "_bucket") == 0 ||
                      strcmp(name + tl, "_sum") == 0 ||
                      strcmp(name + tl, "_count") == 0));
        }
        assert_true(found);
        samples++;
        line = end + 1;
    }
    assert_true(samples > 50);
}

static void test_metrics(void **state)
{
    struct hc_resp r;
    char v[64];

    (void)state;
    T.inst->counters.sessions_started = 7;
    T.inst->devices.links.stats.latency_le[0] = 2;
    T.inst->devices.links.stats.latency_le[GW_MCP_LATENCY_BUCKETS] = 1;
    T.inst->devices.links.stats.latency_sum_ms = 40010;
    ask("GET", "/nothing", NULL, NULL, &r);
    ask("GET", "/metrics", AUTH, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(hc_header(r.head, "content-type", v, sizeof(v)),
                        "text/plain; version=0.0.4; charset=utf-8");
    check_exposition(r.body);
    assert_non_null(strstr(r.body, "# TYPE hybridgw_sessions gauge\n"
                                   "hybridgw_sessions 0\n"));
    assert_non_null(strstr(r.body, "\nhybridgw_sessions_started_total 7\n"));
    assert_non_null(strstr(
        r.body, "\nhybridgw_sessions_ended_total{reason=\"shutdown\"} 0\n"));
    assert_non_null(strstr(r.body,
                           "\nhybridgw_messages_relayed_total{direction="
                           "\"device_to_backend\"} 0\n"));
    assert_non_null(strstr(
        r.body, "\nhybridgw_mcp_requests_total{origin=\"api\",outcome="));
    assert_non_null(strstr(
        r.body, "\nhybridgw_mcp_request_duration_seconds_bucket{le=\"0.005\"} "
                "2\n"));
    assert_non_null(strstr(
        r.body, "\nhybridgw_mcp_request_duration_seconds_bucket{le=\"30\"} "
                "2\n"
                "hybridgw_mcp_request_duration_seconds_bucket{le=\"+Inf\"} 3\n"
                "hybridgw_mcp_request_duration_seconds_sum 40.010000\n"
                "hybridgw_mcp_request_duration_seconds_count 3\n"));
    assert_non_null(strstr(r.body, "\nhybridgw_udp_drops_total{reason="));
    assert_non_null(strstr(r.body, "\n# TYPE hybridgw_udp_relay_seconds "
                                   "histogram\n"
                                   "hybridgw_udp_relay_seconds_bucket{le="
                                   "\"5e-05\"} 0\n"));
    assert_non_null(strstr(r.body, "\nhybridgw_udp_relay_seconds_bucket{le="
                                   "\"0.002\"} 0\n"));
    assert_non_null(strstr(r.body, "\nhybridgw_backend_connects_total 0\n"));
    assert_non_null(strstr(r.body, "\nhybridgw_mcp_server_streams 0\n"));
    /* The loop holds handles (the HTTP listener at least). The heap gauge
     * is glibc's figure: 0 under ASan, whose allocator glibc cannot see. */
    assert_non_null(strstr(r.body, "\nhybridgw_loop_handles "));
    assert_null(strstr(r.body, "\nhybridgw_loop_handles 0\n"));
    assert_non_null(strstr(r.body, "\nhybridgw_loop_active_timers "));
    assert_non_null(strstr(r.body, "\nhybridgw_heap_in_use_bytes "));
    assert_non_null(
        strstr(r.body, "\nhybridgw_http_responses_total{code=\"404\"} 1\n"));
    ask("GET", "/metrics", AUTH, NULL, &r);
    assert_non_null(
        strstr(r.body, "\nhybridgw_http_responses_total{code=\"200\"} 1\n"));
    /* This request's own connection is the one open; no body is held. */
    assert_non_null(strstr(r.body, "\nhybridgw_http_connections 1\n"));
    assert_non_null(strstr(r.body, "\nhybridgw_http_body_bytes 0\n"));
    assert_non_null(
        strstr(r.body, "\nhybridgw_http_connections_refused_total 0\n"));
}

/* The broker says DEVICE is online (as the plugin's presence would). */
static void device_online(void)
{
    struct gw_presence p = {.online = true};

    assert_true(gw_device_on_presence(&T.inst->devices, DEVICE, &p) >= 0);
}

static void test_devices(void **state)
{
    struct hc_resp r;
    cJSON *doc;
    const cJSON *dev;

    (void)state;
    device_online();
    ask("GET", "/api/devices", AUTH, NULL, &r);
    assert_int_equal(r.status, 200);
    doc = json_of(&r);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(doc, "count")->valueint,
                     1);
    dev =
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "devices"), 0);
    assert_string_equal(json_str(dev, "client_id"), DEVICE);
    assert_true(json_bool(dev, "online"));
    assert_true(strlen(json_str(dev, "label")) > 0);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(dev, "session")));
    const cJSON *mcp = cJSON_GetObjectItemCaseSensitive(dev, "mcp");
    assert_string_equal(json_str(mcp, "state"), "idle");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(mcp, "tools")->valueint,
                     0);
    assert_false(json_bool(mcp, "complete"));
    cJSON_Delete(doc);

    ask("GET", "/api/devices/" DEVICE_PATH, AUTH, NULL, &r);
    assert_int_equal(r.status, 200);
    doc = json_of(&r);
    assert_string_equal(json_str(doc, "client_id"), DEVICE);
    cJSON_Delete(doc);
    ask("GET", "/api/devices/nobody", AUTH, NULL, &r);
    assert_int_equal(r.status, 404);
    ask("POST", "/api/devices/" DEVICE "/refresh", AUTH, "", &r);
    assert_int_equal(r.status, 202);
    ask("POST", "/api/devices/nobody/refresh", AUTH, "", &r);
    assert_int_equal(r.status, 404);
    ask("GET", "/api/devices/" DEVICE "/refresh", AUTH, NULL, &r);
    assert_int_equal(r.status, 405);
    assert_non_null(strstr(r.head, "\r\nAllow: POST\r\n"));
    ask("DELETE", "/api/devices", AUTH, NULL, &r);
    assert_int_equal(r.status, 405);
    ask("GET", "/api/devices/" DEVICE "/other", AUTH, NULL, &r);
    assert_int_equal(r.status, 404);
}

static void test_manager_status(void **state)
{
    struct hc_resp r;
    char h[256];
    cJSON *doc;
    const cJSON *o;

    (void)state;
    device_online();
    ask("POST", "/api/devices/status", NULL, "{\"clientIds\":[]}", &r);
    assert_int_equal(r.status, 401);
    doc = json_of(&r);
    assert_false(json_bool(doc, "success"));
    cJSON_Delete(doc);
    /* The operator's token is not the manager's. */
    ask("POST", "/api/devices/status", AUTH, "{\"clientIds\":[]}", &r);
    assert_int_equal(r.status, 401);

    snprintf(h, sizeof(h), DAILY_AUTH, T.daily);
    ask("POST", "/api/devices/status", h,
        "{\"clientIds\":[\"" DEVICE "\",\"GID_x@@@00_00_00_00_00_00\"]}", &r);
    assert_int_equal(r.status, 200);
    doc = json_of(&r);
    o = cJSON_GetObjectItemCaseSensitive(doc, DEVICE);
    assert_false(json_bool(o, "isAlive"));
    assert_true(json_bool(o, "exists"));
    o = cJSON_GetObjectItemCaseSensitive(doc, "GID_x@@@00_00_00_00_00_00");
    assert_false(json_bool(o, "isAlive"));
    assert_false(json_bool(o, "exists"));
    cJSON_Delete(doc);

    ask("POST", "/api/devices/status", h, "{\"clientIds\":\"x\"}", &r);
    assert_int_equal(r.status, 400);
    ask("POST", "/api/devices/status", h, "[1,2", &r);
    assert_int_equal(r.status, 400);
    doc = json_of(&r);
    assert_false(json_bool(doc, "success"));
    cJSON_Delete(doc);
}

static void test_manager_command(void **state)
{
    struct hc_resp r;
    char h[256];
    cJSON *doc;

    (void)state;
    device_online();
    snprintf(h, sizeof(h), DAILY_AUTH, T.daily);
    ask("POST", "/api/commands/" DEVICE_PATH, NULL, "{}", &r);
    assert_int_equal(r.status, 401);
    ask("GET", "/api/commands/" DEVICE, h, NULL, &r);
    assert_int_equal(r.status, 405);
    assert_non_null(strstr(r.head, "\r\nAllow: POST\r\n"));
    ask("POST", "/api/commands/" DEVICE, h,
        "{\"type\":\"other\",\"payload\":{}}", &r);
    assert_int_equal(r.status, 400);
    ask("POST", "/api/commands/" DEVICE, h, "{\"type\":\"mcp\"}", &r);
    assert_int_equal(r.status, 400);
    doc = json_of(&r);
    assert_false(json_bool(doc, "success"));
    cJSON_Delete(doc);

    /* Not online: -32002 at once. */
    ask("POST", "/api/commands/GID_x@@@00_00_00_00_00_00", h,
        "{\"type\":\"mcp\",\"payload\":{\"method\":\"tools/list\"}}", &r);
    assert_int_equal(r.status, 500);
    doc = json_of(&r);
    assert_false(json_bool(doc, "success"));
    assert_true(strlen(json_str(doc, "error")) > 0);
    cJSON_Delete(doc);

    /* Online, but no broker: the device never answers (call_timeout). */
    ask("POST", "/api/commands/" DEVICE_PATH, h,
        "{\"type\":\"mcp\",\"payload\":{\"method\":\"tools/list\","
        "\"params\":{\"withUserTools\":true,\"cursor\":\"\"}}}",
        &r);
    assert_int_equal(r.status, 500);
    doc = json_of(&r);
    assert_false(json_bool(doc, "success"));
    cJSON_Delete(doc);
    assert_int_equal(
        T.inst->devices.links.stats.requests[GW_MCP_FROM_API][GW_MCP_TIMEOUT],
        1);
}

/* The client leaves while its command waits: the device call is let go. */
static void test_command_client_leaves(void **state)
{
    static struct hc_client c;
    char req[512];

    (void)state;
    device_online();
    static const char body[] =
        "{\"type\":\"mcp\",\"payload\":{\"method\":\"tools/call\","
        "\"params\":{\"name\":\"self.get_device_status\"}}}";
    snprintf(req, sizeof(req),
             "POST /api/commands/" DEVICE " HTTP/1.1\r\nHost: localhost\r\n"
             "Authorization: Bearer %s\r\nContent-Length: %zu\r\n\r\n%s",
             T.daily, strlen(body), body);
    hc_open(&c, &T.fx.loop, &T.fx.timed_out, "127.0.0.1", T.port);
    hc_send(&c, req);
    HC_RUN_UNTIL(&c,
                 gw_device_find(&T.inst->devices, DEVICE)->link.n_pending > 0);
    hc_close(&c);
    /* The call the device runs keeps its turn until the timeout; then it
     * ends unreported, counted as cancelled. */
    const struct gw_mcp_stats *st = &T.inst->devices.links.stats;
    HC_RUN_UNTIL(&c, st->requests[GW_MCP_FROM_API][GW_MCP_CANCELLED] == 1);
    assert_int_equal(st->requests[GW_MCP_FROM_API][GW_MCP_TIMEOUT], 0);
}

/* Stopping with a command in flight: the request is let go cleanly. */
static void test_stop_while_waiting(void **state)
{
    static struct hc_client c;
    char req[512];

    (void)state;
    device_online();
    static const char body[] =
        "{\"type\":\"mcp\",\"payload\":{\"method\":\"tools/list\"}}";
    snprintf(req, sizeof(req),
             "POST /api/commands/" DEVICE " HTTP/1.1\r\nHost: localhost\r\n"
             "Authorization: Bearer %s\r\nContent-Length: %zu\r\n\r\n%s",
             T.daily, strlen(body), body);
    hc_open(&c, &T.fx.loop, &T.fx.timed_out, "127.0.0.1", T.port);
    hc_send(&c, req);
    HC_RUN_UNTIL(&c,
                 gw_device_find(&T.inst->devices, DEVICE)->link.n_pending > 0);
    gw_instance_close(T.inst, on_stopped, NULL);
    HC_RUN_UNTIL(&c, T.stopped && c.eof);
    hc_close(&c);
    T.inst = NULL;
    T.stopped = false;
    start(MANAGER_KEY); /* for teardown */
}

static void test_manager_routes_off(void **state)
{
    struct hc_resp r;
    char h[256];

    (void)state;
    gw_instance_close(T.inst, on_stopped, NULL);
    GW_FIXTURE_RUN_UNTIL(&T.fx, T.stopped);
    T.stopped = false;
    start("");
    snprintf(h, sizeof(h), DAILY_AUTH, T.daily);
    ask("POST", "/api/commands/" DEVICE, h,
        "{\"type\":\"mcp\",\"payload\":{\"method\":\"tools/list\"}}", &r);
    assert_int_equal(r.status, 404);
    ask("POST", "/api/devices/status", h, "{\"clientIds\":[]}", &r);
    assert_int_equal(r.status, 404);
}

static void test_host_header(void **state)
{
    static const char *const good[] = {
        "localhost",   "localhost:8007", "LocalHost.",  "app.localhost:3000",
        "127.0.0.1",   "127.0.0.1:80",   "[::1]:8007",  "[::1]",
        "192.0.2.7:1", "gw.example",     "GW.EXAMPLE:8"};
    static const char *const bad[] = {"evil.example",
                                      "localhost.evil.example",
                                      "127.0.0.1.nip.io",
                                      "gw.example.evil",
                                      "[::1",
                                      "localhost:x",
                                      "localhost:123456",
                                      ":80",
                                      "gw.example:"};
    struct hc_resp r;
    uint64_t before = gw_http_api_responses(T.inst->api, 421);

    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        T.host = good[i];
        ask("GET", "/api/devices", AUTH, NULL, &r);
        assert_int_equal(r.status, 200);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        T.host = bad[i];
        ask("GET", "/api/devices", AUTH, NULL, &r);
        assert_int_equal(r.status, 421);
        ask("GET", "/healthz", NULL, NULL, &r);
        assert_int_equal(r.status, 421);
        /* Refused before a body is read, even with the right token. */
        ask("POST", "/mcp", AUTH "Content-Type: application/json\r\n",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", &r);
        assert_int_equal(r.status, 421);
        assert_non_null(strstr(r.body, "host not allowed"));
    }
    assert_int_equal(gw_http_api_responses(T.inst->api, 421) - before,
                     3 * (sizeof(bad) / sizeof(bad[0])));
}

#define INIT_BODY                                                              \
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"     \
    "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},"                  \
    "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}"
#define MCP_HEADERS                                                            \
    AUTH "Content-Type: application/json\r\n"                                  \
         "Accept: application/json, text/event-stream\r\n"

static void test_mcp_off_without_token(void **state)
{
    struct hc_resp r;

    (void)state;
    gw_instance_close(T.inst, on_stopped, NULL);
    GW_FIXTURE_RUN_UNTIL(&T.fx, T.stopped);
    T.stopped = false;
    T.token = "";
    start(MANAGER_KEY);
    ask("POST", "/mcp", MCP_HEADERS, INIT_BODY, &r);
    assert_int_equal(r.status, 403);
    assert_non_null(strstr(r.body, "set http.token"));
    ask("GET", "/mcp/devices/" DEVICE_PATH, NULL, NULL, &r);
    assert_int_equal(r.status, 403);
    /* The rest of the operator's API stays as it was without a token. */
    ask("GET", "/api/devices", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    ask("GET", "/healthz", NULL, NULL, &r);
    assert_int_equal(r.status, 503);
    assert_non_null(strstr(r.body, "\"backends\":[{\"name\":\"main\""));
    /* Open to anyone now, so it holds no body. */
    ask("POST", "/api/devices/" DEVICE_PATH "/refresh", NULL, "{}", &r);
    assert_int_equal(r.status, 413);
}

/* initialize on /mcp: the status, and the session id into sid. */
static int mcp_initialize(char sid[64])
{
    struct hc_resp r;

    ask("POST", "/mcp", MCP_HEADERS, INIT_BODY, &r);
    if (hc_header(r.head, "mcp-session-id", sid, 64) == NULL) {
        sid[0] = '\0';
    }
    return r.status;
}

/* A ping in session sid: the HTTP status. */
static int mcp_ping(const char *sid)
{
    struct hc_resp r;
    char h[512];

    snprintf(h, sizeof(h),
             MCP_HEADERS "Mcp-Session-Id: %s\r\n"
                         "MCP-Protocol-Version: 2025-11-25\r\n",
             sid);
    ask("POST", "/mcp", h, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}",
        &r);
    return r.status;
}

static void test_mcp_sessions_full(void **state)
{
    char a[64], b[64], c[64];
    struct hc_resp r;
    struct gw_mcp_server_stats st;
    cJSON *doc;

    (void)state;
    assert_int_equal(mcp_initialize(a), 200);
    assert_int_equal(mcp_initialize(b), 200);
    assert_true(a[0] != '\0' && b[0] != '\0');
    /* mcp.max_sessions is 2: the third is refused, nobody is evicted. */
    ask("POST", "/mcp", MCP_HEADERS, INIT_BODY, &r);
    assert_int_equal(r.status, 503);
    assert_null(hc_header(r.head, "mcp-session-id", c, sizeof(c)));
    doc = cJSON_Parse(r.body);
    assert_non_null(doc);
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(doc, "error");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(err, "code")->valueint,
                     -32005);
    assert_non_null(strstr(json_str(err, "message"), "mcp.max_sessions 2"));
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(doc, "id")->valueint, 1);
    cJSON_Delete(doc);
    assert_int_equal(mcp_ping(a), 200);
    assert_int_equal(mcp_ping(b), 200);
    gw_mcp_server_get_stats(T.inst->mcp_server, &st);
    assert_int_equal(st.sessions_refused, 1);
    assert_int_equal(st.sessions_expired, 0);
    ask("GET", "/metrics", AUTH, NULL, &r);
    assert_non_null(
        strstr(r.body, "\nhybridgw_mcp_server_sessions_refused_total 1\n"));
    /* A session that ends makes room. */
    char h[512];
    snprintf(h, sizeof(h), AUTH "Mcp-Session-Id: %s\r\n", a);
    ask("DELETE", "/mcp", h, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(mcp_initialize(c), 200);
    assert_int_equal(mcp_ping(b), 200);
}

/* {"clientIds":["d00000",..]} with n ids, every 'dup'th a repeat. */
static char *status_body(int n, int dup)
{
    char *body = malloc((size_t)n * 12 + 32);
    size_t len;

    assert_non_null(body);
    len = (size_t)sprintf(body, "{\"clientIds\":[");
    for (int i = 0; i < n; i++) {
        len += (size_t)sprintf(body + len, "%s\"d%05d\"", i > 0 ? "," : "",
                               dup > 0 && i % dup == dup - 1 ? 0 : i);
    }
    memcpy(body + len, "]}", 3);
    return body;
}

static void test_manager_status_bounded(void **state)
{
    struct hc_resp r;
    char h[256];
    char *body;
    cJSON *doc;
    uint64_t t0, ms;

    (void)state;
    snprintf(h, sizeof(h), DAILY_AUTH "Content-Type: application/json\r\n",
             T.daily);
    /* Over the cap: refused, saying what the cap is. */
    body = status_body(4097, 0);
    ask("POST", "/api/devices/status", h, body, &r);
    free(body);
    assert_int_equal(r.status, 413);
    doc = json_of(&r);
    assert_false(json_bool(doc, "success"));
    assert_string_equal(json_str(doc, "error"),
                        "at most 4096 clientIds per request");
    cJSON_Delete(doc);
    /* At the cap, with repeats: one lookup each, a repeat answered once. */
    body = status_body(4096, 4);
    t0 = uv_hrtime();
    ask("POST", "/api/devices/status", h, body, &r);
    ms = (uv_hrtime() - t0) / 1000000;
    free(body);
    print_message("4096 ids answered in %llu ms\n", (unsigned long long)ms);
    assert_int_equal(r.status, 200);
    doc = json_of(&r);
    assert_int_equal(cJSON_GetArraySize(doc), 4096 - 4096 / 4);
    assert_false(
        json_bool(cJSON_GetObjectItemCaseSensitive(doc, "d00000"), "exists"));
    cJSON_Delete(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_healthz_and_origin, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_bearer_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metrics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_devices, setup, teardown),
        cmocka_unit_test_setup_teardown(test_manager_status, setup, teardown),
        cmocka_unit_test_setup_teardown(test_manager_command, setup, teardown),
        cmocka_unit_test_setup_teardown(test_command_client_leaves, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_stop_while_waiting, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_manager_routes_off, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_host_header, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mcp_off_without_token, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_mcp_sessions_full, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_manager_status_bounded, setup,
                                        teardown),
    };

    if (getenv("GW_TEST_FILTER") != NULL) {
        cmocka_set_test_filter(getenv("GW_TEST_FILTER"));
    }
    gw_log_set_level(getenv("GW_TEST_LOG") != NULL ? GW_LOG_DEBUG
                                                   : GW_LOG_ERROR);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
