/*
 * The config loader: example configs load, defaults are filled, and every
 * kind of bad config is refused with the key path (or file:line:col).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config/config.h"

#define ERR_CAP 4096

/* The one backend most inline configs need. */
#define BACKEND "\"backends\":[{\"name\":\"main\",\"url\":\"ws://h:1/x\"}]"

static struct gw_config *load_ok(const char *text)
{
    char err[ERR_CAP];
    struct gw_config *cfg = NULL;
    int rc = gw_config_load_string(text, strlen(text), "x.json", &cfg, err,
                                   sizeof(err));

    if (rc != 0) {
        print_error("unexpected failure %d:\n%s", rc, err);
    }
    assert_int_equal(rc, 0);
    assert_non_null(cfg);
    assert_string_equal(err, "");
    return cfg;
}

/* ---- the example configs ----------------------------------------------- */

static void test_examples_load(void **state)
{
    static const char *const files[] = {
        "hybridgw.json",
        "minimal.json",
        "multi-backend.json",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char path[512], err[ERR_CAP];
        struct gw_config *cfg = NULL;
        snprintf(path, sizeof(path), "%s/config/%s", GW_SOURCE_DIR, files[i]);
        int rc = gw_config_load_file(path, &cfg, err, sizeof(err));
        if (rc != 0) {
            print_error("%s: %d\n%s", files[i], rc, err);
        }
        assert_int_equal(rc, 0);
        assert_string_equal(cfg->source, path);
        assert_true(cfg->n_backends >= 1);
        assert_true(cfg->n_routes >= 1);
        gw_config_destroy(cfg);
    }
}

static void test_full_example_values(void **state)
{
    char path[512], err[ERR_CAP];
    struct gw_config *cfg = NULL;

    (void)state;
    snprintf(path, sizeof(path), "%s/config/hybridgw.json", GW_SOURCE_DIR);
    assert_int_equal(gw_config_load_file(path, &cfg, err, sizeof(err)), 0);
    assert_string_equal(cfg->mqtt.username, "hybridgw");
    assert_string_equal(cfg->mqtt.password, "secret");
    assert_string_equal(cfg->backends[0].url,
                        "ws://127.0.0.1:8000/xiaozhi/v1/?from=mqtt_gateway");
    assert_int_equal(cfg->routes[0].n_backends, 1);
    assert_int_equal(cfg->routes[0].backend_index[0], 0);
    assert_int_equal(cfg->http.port, 8007);
    gw_config_destroy(cfg);
}

static void test_multi_backend_routes(void **state)
{
    char path[512], err[ERR_CAP];
    struct gw_config *cfg = NULL;
    const struct gw_route_config *r;

    (void)state;
    snprintf(path, sizeof(path), "%s/config/multi-backend.json", GW_SOURCE_DIR);
    assert_int_equal(gw_config_load_file(path, &cfg, err, sizeof(err)), 0);
    assert_int_equal(cfg->n_backends, 3);
    assert_int_equal(cfg->backends[0].auth.scheme, GW_AUTH_XIAOZHI_HMAC);
    assert_int_equal(cfg->backends[1].auth.scheme, GW_AUTH_BEARER);
    assert_int_equal(cfg->backends[1].framing, GW_FRAMING_V3);
    assert_int_equal(cfg->backends[2].framing, GW_FRAMING_RAW);
    assert_int_equal(cfg->n_routes, 4);
    r = &cfg->routes[0];
    assert_int_equal(r->n_client_ids, 1);
    assert_int_equal(r->backend_index[0], 2);
    r = &cfg->routes[1];
    assert_int_equal(r->n_macs, 2);
    assert_string_equal(r->macs[1], "a0:85:e3:f4:49:36"); /* lowercased */
    assert_int_equal(r->backend_index[0], 1);
    assert_int_equal(r->backend_index[1], 0);
    assert_int_equal(cfg->routes[2].n_groups, 1);
    assert_string_equal(cfg->routes[2].groups[0], "GID_lab");
    assert_int_equal(cfg->routes[3].n_groups + cfg->routes[3].n_macs +
                         cfg->routes[3].n_client_ids,
                     0);
    assert_int_equal(cfg->udp.public_port, 8884); /* from udp.port */
    assert_string_equal(cfg->mqtt.client_id, "hybridgw-gw-edge-2");
    assert_int_equal(cfg->log.level, GW_LOG_DEBUG);
    assert_int_equal(cfg->log.format, GW_LOG_JSON);
    assert_int_equal(cfg->n_mcp_servers, 2);
    assert_string_equal(cfg->mcp_servers[0].name, "tools");
    assert_int_equal(cfg->mcp_servers[0].auth.scheme, GW_AUTH_BEARER);
    assert_string_equal(cfg->mcp_servers[0].auth.token, "tools-token");
    assert_int_equal(cfg->mcp_servers[0].timeout_ms, 20000);
    assert_int_equal(cfg->mcp_servers[0].allow.n_groups, 1);
    assert_string_equal(cfg->mcp_servers[0].allow.macs[0],
                        "a0:85:e3:f4:49:35"); /* lowercased */
    assert_int_equal(cfg->mcp_servers[1].auth.scheme, GW_AUTH_NONE);
    assert_int_equal(cfg->mcp_servers[1].timeout_ms, 30000);
    assert_int_equal(cfg->mcp_servers[1].allow.n_client_ids, 0);
    gw_config_destroy(cfg);
}

/* ---- defaults ---------------------------------------------------------- */

/* The cluster section: off by default; in hash mode the instance name
 * defaults to the MQTT client id. */
static void test_cluster_defaults(void **state)
{
    struct gw_config *cfg = load_ok("{" BACKEND "}");

    (void)state;
    assert_int_equal(cfg->cluster.mode, GW_CLUSTER_MODE_OFF);
    assert_string_equal(cfg->cluster.instance, "");
    assert_string_equal(cfg->cluster.topic_prefix, "hybridgw/instances");
    assert_int_equal(cfg->cluster.drain_deadline_s, 300);
    gw_config_destroy(cfg);
    cfg = load_ok("{" BACKEND ",\"cluster\":{\"mode\":\"hash\"}}");
    assert_int_equal(cfg->cluster.mode, GW_CLUSTER_MODE_HASH);
    assert_string_equal(cfg->cluster.instance, "hybridgw-gw-1");
    gw_config_destroy(cfg);
    cfg = load_ok("{" BACKEND ",\"cluster\":{\"mode\":\"hash\","
                  "\"instance\":\"gw-b\"}}");
    assert_string_equal(cfg->cluster.instance, "gw-b");
    gw_config_destroy(cfg);
}

static void test_defaults(void **state)
{
    struct gw_config *cfg = load_ok("{" BACKEND "}");

    (void)state;
    assert_string_equal(cfg->source, "x.json");
    assert_string_equal(cfg->instance, "gw-1");
    assert_string_equal(cfg->mqtt.host, "127.0.0.1");
    assert_int_equal(cfg->mqtt.port, 1883);
    assert_string_equal(cfg->mqtt.client_id, "hybridgw-gw-1");
    assert_string_equal(cfg->mqtt.username, "");
    assert_string_equal(cfg->mqtt.password, "");
    assert_int_equal(cfg->mqtt.keepalive_s, 60);
    assert_false(cfg->mqtt.tls.enabled);
    assert_string_equal(cfg->mqtt.tls.ca_file, "");
    assert_string_equal(cfg->mqtt.up_topic, "devices/+/up");
    assert_string_equal(cfg->mqtt.down_topic, "devices/{client_id}/down");
    assert_string_equal(cfg->mqtt.presence_topic, "devices/+/presence");
    assert_string_equal(cfg->udp.bind, "0.0.0.0");
    assert_int_equal(cfg->udp.port, 8884);
    assert_string_equal(cfg->udp.public_host, "127.0.0.1");
    assert_int_equal(cfg->udp.public_port, 8884);
    assert_string_equal(cfg->http.listen, "127.0.0.1");
    assert_int_equal(cfg->http.port, 8007);
    assert_string_equal(cfg->http.token, "");
    assert_string_equal(cfg->http.manager_key, "");
    assert_int_equal(cfg->http.n_allowed_origins, 0);
    assert_int_equal(cfg->http.max_body_bytes, 262144);
    assert_int_equal(cfg->http.n_allowed_hosts, 0);
    assert_int_equal(cfg->http.max_connections, 256);
    assert_int_equal(cfg->http.max_connections_per_address, 32);
    assert_int_equal(cfg->http.api_timeout_ms, 8000);
    assert_int_equal(cfg->http.broadcast_max_devices, 1024);
    assert_string_equal(cfg->mcp.client_capabilities.vision.url, "");
    assert_string_equal(cfg->mcp.client_capabilities.vision.token, "");
    assert_string_equal(cfg->http.ui_dir, "/usr/local/share/hybridgw/web");
    assert_true(cfg->mcp.discover);
    assert_int_equal(cfg->mcp.call_timeout_ms, 30000);
    assert_int_equal(cfg->mcp.max_tools, 128);
    assert_int_equal(cfg->mcp.max_pending, 32);
    assert_int_equal(cfg->mcp.discover_concurrency, 64);
    assert_int_equal(cfg->mcp.discover_retries, 5);
    assert_int_equal(cfg->mcp.discover_retry_ms, 2000);
    assert_int_equal(cfg->mcp.discover_retry_max_ms, 60000);
    assert_false(cfg->mcp.expose_user_tools);
    assert_int_equal(cfg->mcp.session_idle_timeout_ms, 1800000);
    assert_int_equal(cfg->mcp.max_sessions, 256);
    assert_int_equal(cfg->mcp.max_list_items, 128);
    assert_int_equal(cfg->mcp.max_resource_bytes, 1048576);
    assert_int_equal(cfg->mcp.task_result_timeout_ms, 300000);
    assert_int_equal(cfg->mcp.max_device_requests, 4);
    assert_int_equal(cfg->mcp.device_request_timeout_ms, 60000);
    assert_int_equal(cfg->mcp.outbound_max_pending, 8);
    assert_int_equal(cfg->mcp.outbound_max_response_bytes, 1048576);
    assert_int_equal(cfg->mcp.outbound_session_idle_ms, 600000);
    assert_int_equal(cfg->n_mcp_servers, 0);
    assert_int_equal(cfg->limits.max_sessions, 10000);
    assert_int_equal(cfg->limits.backend_hello_timeout_ms, 5000);
    assert_int_equal(cfg->limits.udp_idle_timeout_ms, 120000);
    assert_int_equal(cfg->limits.call_ring_timeout_ms, 60000);
    assert_int_equal(cfg->limits.max_message_bytes, 8192);
    assert_int_equal(cfg->limits.max_downlink_bytes, 131072);
    assert_int_equal(cfg->limits.tts_start_guard_ms, 40);
    assert_int_equal(cfg->log.level, GW_LOG_INFO);
    assert_int_equal(cfg->log.format, GW_LOG_TEXT);
    assert_int_equal(cfg->n_backends, 1);
    assert_int_equal(cfg->backends[0].framing, GW_FRAMING_V2);
    assert_int_equal(cfg->backends[0].auth.scheme, GW_AUTH_NONE);
    assert_string_equal(cfg->backends[0].auth.token, "");
    assert_string_equal(cfg->backends[0].ca_file, "");
    assert_int_equal(cfg->backends[0].connect_timeout_ms, 5000);
    /* absent routes: one catch-all to the first backend */
    assert_int_equal(cfg->n_routes, 1);
    assert_int_equal(cfg->routes[0].n_groups, 0);
    assert_int_equal(cfg->routes[0].n_macs, 0);
    assert_int_equal(cfg->routes[0].n_client_ids, 0);
    assert_int_equal(cfg->routes[0].n_backends, 1);
    assert_string_equal(cfg->routes[0].backends[0], "main");
    assert_int_equal(cfg->routes[0].backend_index[0], 0);
    gw_config_destroy(cfg);
}

/* Values at the edges of their ranges, and the explicit forms. */
static void test_edges_accepted(void **state)
{
    struct gw_config *cfg = load_ok(
        "{\"instance\":\"a.B_9-z\"," BACKEND ",\"mqtt\":{\"port\":65535,"
        "\"client_id\":\"own\",\"keepalive\":5},\"udp\":{\"port\":1,"
        "\"public_port\":2},\"http\":{\"port\":0},\"limits\":{"
        "\"max_sessions\":1e6,\"max_message_bytes\":256.0},"
        "\"log\":{\"level\":\"error\"}}");

    (void)state;
    assert_int_equal(cfg->mqtt.port, 65535);
    assert_string_equal(cfg->mqtt.client_id, "own");
    assert_int_equal(cfg->udp.port, 1);
    assert_int_equal(cfg->udp.public_port, 2);
    assert_int_equal(cfg->http.port, 0);
    assert_int_equal(cfg->limits.max_sessions, 1000000);
    assert_int_equal(cfg->limits.max_message_bytes, 256);
    assert_int_equal(cfg->log.level, GW_LOG_ERROR);
    gw_config_destroy(cfg);
}

/* An '@' after the host is a path's or a query's, not credentials. */
static void test_mcp_server_url_accepted(void **state)
{
    struct gw_config *cfg = load_ok(
        "{" BACKEND ",\"mcp_servers\":[{\"name\":\"t\","
        "\"url\":\"https://h:8443/mcp/a@b?to=c@d#e@f\"},"
        "{\"name\":\"u\",\"url\":\"http://h\",\"max_connections\":4096}]}");

    (void)state;
    assert_string_equal(cfg->mcp_servers[0].url,
                        "https://h:8443/mcp/a@b?to=c@d#e@f");
    assert_int_equal(cfg->mcp_servers[0].max_connections, 32);
    assert_int_equal(cfg->mcp_servers[1].max_connections, 4096);
    gw_config_destroy(cfg);
}

/* ---- bad configs -------------------------------------------------------- */

/* One inline config and what its messages must contain. */
struct bad_case {
    const char *text; /* NUL-terminated unless len is set */
    size_t len;       /* 0: strlen(text) */
    const char *want; /* substring of the error text */
    const char *also; /* second substring, or NULL */
};

static const struct bad_case bad_cases[] = {
    /* syntax */
    {"{\n  \"instance\": \"a\"\n  \"mqtt\": {}\n}", 0, "x.json:3:3: syntax",
     NULL},
    {"{\"a\":1,}", 0, "x.json:1:8: syntax error near '}'", NULL},
    {"{\"backends\": [", 0, "x.json:1:", "syntax error"},
    {"{" BACKEND "} x", 0, "x.json:1:", "unexpected text after"},
    {"{'a': 1}", 0, "x.json:1:", "syntax error near '"},
    {"{\"instance\":\"\\uD800\"}", 0, "x.json:1:", "syntax error"},
    /* what comes before the syntax */
    {"", 0, "x.json: empty", NULL},
    {" \n\t\r\n", 0, "x.json: empty", NULL},
    {"{\"instance\":\"\xff\"}", 0, "x.json:1:14: invalid UTF-8", NULL},
    {"{\n\"instance\":\"\xc3\xa9\xe2\x82\"}", 0, "x.json:2:14: invalid UTF-8",
     NULL},
    {"{\"instance\":\"\xed\xa0\x80\"}", 0, "x.json:1:14: invalid UTF-8", NULL},
    {"{\"instance\":\"a\0b\"}", 18, "x.json:1:15: NUL byte", NULL},
    {"{\"instance\":\"a\\u0000b\"}", 0, "x.json:1:15: \\u0000 is not allowed",
     NULL},
    {"[1, 2]", 0, "x.json: the top level must be an object, got an array",
     NULL},
    {"42", 0, "top level must be an object, got a number", NULL},
    {"\"x\"", 0, "top level must be an object, got a string", NULL},
    /* unknown and duplicate keys */
    {"{" BACKEND ",\"mqtt\":{\"hots\":\"b\"}}", 0,
     "x.json: mqtt.hots: unknown key (did you mean 'host'?)", NULL},
    {"{\"backend\":[]}", 0,
     "x.json: backend: unknown key (did you mean "
     "'backends'?)",
     NULL},
    {"{" BACKEND ",\"Log\":{}}", 0, "Log: unknown key (did you mean 'log'?)",
     NULL},
    {"{" BACKEND ",\"zzzzzz\":1}", 0, "x.json: zzzzzz: unknown key\n", NULL},
    {"{\"backends\":[{\"name\":\"m\",\"url\":\"ws://h\",\"framming\":\"v2\"}]"
     "}",
     0, "backends[0].framming: unknown key (did you mean 'framing'?)", NULL},
    {"{\"instance\":\"a\",\"instance\":\"b\"," BACKEND "}", 0,
     "x.json: instance: duplicate key", NULL},
    {"{" BACKEND ",\"a\\nb\":1}", 0, "x.json: a.b: unknown key", NULL},
    /* wrong types */
    {"{\"backends\":[{\"name\":\"m\",\"url\":5}]}", 0,
     "x.json: backends[0].url: expected a string, got a number", NULL},
    {"{" BACKEND ",\"mqtt\":{\"port\":\"1883\"}}", 0,
     "mqtt.port: expected an integer, got a string", NULL},
    {"{" BACKEND ",\"mqtt\":{\"port\":1883.5}}", 0,
     "mqtt.port: expected an integer, got 1883.5", NULL},
    {"{" BACKEND ",\"mqtt\":[]}", 0, "mqtt: expected an object, got an array",
     NULL},
    {"{" BACKEND ",\"mqtt\":{\"tls\":{\"enabled\":\"yes\"}}}", 0,
     "mqtt.tls.enabled: expected true or false, got a string", NULL},
    {"{" BACKEND ",\"instance\":null}", 0,
     "instance: expected a string, got null", NULL},
    {"{\"backends\":{}}", 0, "backends: expected an array, got an object",
     NULL},
    {"{\"backends\":[1]}", 0, "backends[0]: expected an object, got a number",
     NULL},
    {"{" BACKEND ",\"routes\":[{\"backends\":\"main\"}]}", 0,
     "routes[0].backends: expected an array, got a string", NULL},
    {"{" BACKEND ",\"routes\":[{\"backends\":[true]}]}", 0,
     "routes[0].backends[0]: expected a string, got a boolean", NULL},
    /* ranges and names */
    {"{" BACKEND ",\"udp\":{\"port\":70000}}", 0,
     "x.json: udp.port: 70000 is out of range 0-65535", NULL},
    {"{" BACKEND ",\"mqtt\":{\"port\":0}}", 0,
     "mqtt.port: 0 is out of range 1-65535", NULL},
    {"{" BACKEND ",\"limits\":{\"max_sessions\":1e300}}", 0,
     "limits.max_sessions: 1e+300 is out of range 1-1000000", NULL},
    {"{" BACKEND ",\"limits\":{\"max_message_bytes\":255}}", 0,
     "limits.max_message_bytes: 255 is out of range 256-65536", NULL},
    {"{" BACKEND ",\"limits\":{\"max_downlink_bytes\":8191}}", 0,
     "limits.max_downlink_bytes: 8191 is out of range 8192-16777216", NULL},
    {"{" BACKEND ",\"limits\":{\"tts_start_guard_ms\":1001}}", 0,
     "limits.tts_start_guard_ms: 1001 is out of range 0-1000", NULL},
    {"{" BACKEND ",\"limits\":{\"call_ring_timeout_ms\":100}}", 0,
     "limits.call_ring_timeout_ms: 100 is out of range 500-600000", NULL},
    {"{" BACKEND ",\"mqtt\":{\"keepalive\":-1}}", 0,
     "mqtt.keepalive: -1 is out of range 5-65535", NULL},
    {"{\"backends\":[{\"name\":\"m\",\"url\":\"ws://h\","
     "\"framing\":\"v9\"}]}",
     0, "backends[0].framing: 'v9' is not one of v2, v3, raw", NULL},
    {"{" BACKEND ",\"log\":{\"level\":\"verbose\"}}", 0,
     "log.level: 'verbose' is not one of error, warn, info, debug", NULL},
    {"{" BACKEND ",\"log\":{\"format\":\"xml\"}}", 0,
     "log.format: 'xml' is not one of text, json", NULL},
    {"{" BACKEND ",\"instance\":\"gw 1\"}", 0,
     "instance: may contain only letters", NULL},
    {"{" BACKEND ",\"instance\":\"\"}", 0, "instance: must not be empty", NULL},
    {"{" BACKEND ",\"mqtt\":{\"host\":\"\"}}", 0,
     "mqtt.host: must not be empty", NULL},
    /* backends */
    {"{}", 0, "x.json: backends: at least one backend is required", NULL},
    {"{\"backends\":[]}", 0, "backends: at least one backend is required",
     NULL},
    {"{\"backends\":[{\"name\":\"m\"}]}", 0,
     "backends[0].url: missing (required in a backend)", NULL},
    {"{\"backends\":[{\"url\":\"ws://h\"}]}", 0,
     "backends[0].name: missing (required in a backend)", NULL},
    {"{\"backends\":[{\"name\":\"main\",\"url\":\"ws://a\"},"
     "{\"name\":\"main\",\"url\":\"ws://b\"}]}",
     0, "backends[1].name: duplicate backend name 'main' (as in backends[0])",
     NULL},
    {"{\"backends\":[{\"name\":\"m\",\"url\":\"http://h/\"}]}", 0,
     "backends[0].url: scheme must be ws:// or wss://", NULL},
    {"{\"backends\":[{\"name\":\"m\",\"url\":\"ws://\"}]}", 0,
     "backends[0].url: has no host", NULL},
    {"{\"backends\":[{\"name\":\"m\",\"url\":\"wss://:443/x\"}]}", 0,
     "backends[0].url: has no host", NULL},
    {"{\"backends\":[{\"name\":\"m\",\"url\":\"ws://h/a b\"}]}", 0,
     "backends[0].url: must not contain spaces", NULL},
    {"{\"backends\":[{\"name\":\"m\",\"url\":\"ws://h\","
     "\"auth\":{\"scheme\":\"bearer\"}}]}",
     0, "backends[0].auth.token: required when the scheme is bearer", NULL},
    {"{\"backends\":[{\"name\":\"m\",\"url\":\"ws://h\","
     "\"auth\":{\"scheme\":\"xiaozhi-hmac\",\"token\":\"t\"}}]}",
     0, "backends[0].auth.secret: required when the scheme is xiaozhi-hmac",
     NULL},
    {"{\"backends\":[{\"name\":\"m\",\"url\":\"wss://h\","
     "\"ca_file\":\"/nonexistent/ca.pem\"}]}",
     0, "backends[0].ca_file: cannot read '/nonexistent/ca.pem'", NULL},
    /* routes */
    {"{" BACKEND ",\"routes\":[{\"backends\":[\"mian\"]}]}", 0,
     "x.json: routes[0].backends[0]: unknown backend 'mian' (did you mean "
     "'main'?)",
     NULL},
    {"{" BACKEND ",\"routes\":[{\"backends\":[\"main\",\"other-thing\"]}]}", 0,
     "routes[0].backends[1]: unknown backend 'other-thing'\n", NULL},
    {"{" BACKEND ",\"routes\":[]}", 0, "routes: needs at least 1 entry", NULL},
    {"{" BACKEND ",\"routes\":[{\"backends\":[]}]}", 0,
     "routes[0].backends: needs at least 1 entry", NULL},
    {"{" BACKEND ",\"routes\":[{\"match\":{}}]}", 0,
     "routes[0].backends: missing (required in a route)", NULL},
    {"{" BACKEND ",\"routes\":[{\"match\":{\"macs\":[\"aa:bb:cc:dd:ee\"]},"
     "\"backends\":[\"main\"]}]}",
     0, "routes[0].match.macs[0]: is not a MAC address", NULL},
    {"{" BACKEND ",\"routes\":[{\"match\":{\"macs\":[\"aa-bb-cc-dd-ee-ff\"]},"
     "\"backends\":[\"main\"]}]}",
     0, "routes[0].match.macs[0]: is not a MAC address", NULL},
    {"{" BACKEND ",\"routes\":[{\"match\":{\"macs\":[\"ga:bb:cc:dd:ee:ff\"]},"
     "\"backends\":[\"main\"]}]}",
     0, "routes[0].match.macs[0]: is not a MAC address", NULL},
    {"{" BACKEND ",\"routes\":[{\"match\":{\"client_ids\":[\"a/b\"]},"
     "\"backends\":[\"main\"]}]}",
     0, "routes[0].match.client_ids[0]: must not contain '/', '+' or '#'",
     NULL},
    {"{" BACKEND ",\"routes\":[{\"match\":{\"groups\":[\"G@@@x\"]},"
     "\"backends\":[\"main\"]}]}",
     0, "routes[0].match.groups[0]: must not contain '@@@'", NULL},
    {"{" BACKEND ",\"routes\":[{\"match\":{\"group\":[\"G\"]},"
     "\"backends\":[\"main\"]}]}",
     0, "routes[0].match.group: unknown key (did you mean 'groups'?)", NULL},
    /* topics */
    {"{" BACKEND ",\"mqtt\":{\"up_topic\":\"devices/#\"}}", 0,
     "mqtt.up_topic: must not contain '#'", NULL},
    {"{" BACKEND ",\"mqtt\":{\"up_topic\":\"devices/up\"}}", 0,
     "mqtt.up_topic: needs exactly one '+' level", NULL},
    {"{" BACKEND ",\"mqtt\":{\"presence_topic\":\"d/+/+/p\"}}", 0,
     "mqtt.presence_topic: needs exactly one '+' level", NULL},
    {"{" BACKEND ",\"mqtt\":{\"up_topic\":\"d/a+/up\"}}", 0,
     "mqtt.up_topic: '+' must be a whole topic level", NULL},
    {"{" BACKEND ",\"mqtt\":{\"down_topic\":\"devices/x/down\"}}", 0,
     "mqtt.down_topic: must contain {client_id} exactly once", NULL},
    {"{" BACKEND ",\"mqtt\":{\"down_topic\":\"{client_id}/{client_id}\"}}", 0,
     "mqtt.down_topic: must contain {client_id} exactly once", NULL},
    {"{" BACKEND ",\"mqtt\":{\"down_topic\":\"d/{client_id}/+\"}}", 0,
     "mqtt.down_topic: must not contain '+' or '#'", NULL},
    /* http and mcp */
    {"{" BACKEND ",\"http\":{\"manager_key\":\"Short1\"}}", 0,
     "http.manager_key: must be at least 8 characters", NULL},
    {"{" BACKEND ",\"http\":{\"manager_key\":\"alllowercase\"}}", 0,
     "http.manager_key: must mix upper and lower case letters", NULL},
    {"{" BACKEND ",\"http\":{\"manager_key\":\"MyAdminKeyX\"}}", 0,
     "http.manager_key: contains a guessable word", NULL},
    {"{" BACKEND ",\"http\":{\"allowed_origins\":[\"example.com\"]}}", 0,
     "http.allowed_origins[0]: must look like scheme://host[:port]", NULL},
    {"{" BACKEND ",\"http\":{\"allowed_origins\":[\"https://a.b/x\"]}}", 0,
     "http.allowed_origins[0]: must look like scheme://host[:port]", NULL},
    {"{" BACKEND ",\"http\":{\"allowed_hosts\":[\"gw.lan\",\"a b\"]}}", 0,
     "http.allowed_hosts[1]: must be a host name or IP address", NULL},
    {"{" BACKEND ",\"http\":{\"allowed_hosts\":[\"*.lan\"]}}", 0,
     "http.allowed_hosts[0]: must be a host name or IP address", NULL},
    {"{" BACKEND ",\"http\":{\"api_timeout_ms\":50}}", 0,
     "http.api_timeout_ms: 50 is out of range 100-600000", NULL},
    {"{" BACKEND ",\"http\":{\"broadcast_max_devices\":0}}", 0,
     "http.broadcast_max_devices: 0 is out of range 1-1048576", NULL},
    {"{" BACKEND ",\"mcp\":{\"client_capabilities\":{\"vision\":"
     "{\"url\":\"ftp://h/x\"}}}}",
     0,
     "mcp.client_capabilities.vision.url: scheme must be http:// or "
     "https://",
     NULL},
    {"{" BACKEND ",\"http\":{\"max_connections_per_address\":0}}", 0,
     "http.max_connections_per_address", NULL},
    {"{" BACKEND ",\"http\":{\"ui_dir\":\"web\"}}", 0,
     "http.ui_dir: must be an absolute path", NULL},
    {"{" BACKEND ",\"http\":{\"ui_dir\":\"/srv/w\\u0001\"}}", 0,
     "http.ui_dir: must not contain control characters", NULL},
    {"{" BACKEND ",\"mcp\":{\"call_timeout_ms\":10}}", 0, "mcp.call_timeout_ms",
     NULL},
    {"{" BACKEND ",\"mcp\":{\"max_tool\":10}}", 0,
     "mcp.max_tool: unknown key (did you mean 'max_tools'?)", NULL},
    {"{" BACKEND ",\"mcp\":{\"max_list_items\":0}}", 0, "mcp.max_list_items",
     NULL},
    {"{" BACKEND ",\"mcp\":{\"max_resource_bytes\":10}}", 0,
     "mcp.max_resource_bytes", NULL},
    {"{" BACKEND ",\"mcp\":{\"task_result_timeout_ms\":1}}", 0,
     "mcp.task_result_timeout_ms", NULL},
    {"{" BACKEND ",\"mcp\":{\"max_device_requests\":0}}", 0,
     "mcp.max_device_requests", NULL},
    {"{" BACKEND ",\"mcp\":{\"device_request_timeout_ms\":-1}}", 0,
     "mcp.device_request_timeout_ms", NULL},
    {"{" BACKEND ",\"mcp\":{\"outbound_max_pending\":0}}", 0,
     "mcp.outbound_max_pending", NULL},
    {"{" BACKEND ",\"mcp\":{\"outbound_max_response_bytes\":5}}", 0,
     "mcp.outbound_max_response_bytes", NULL},
    {"{" BACKEND ",\"mcp\":{\"outbound_session_idle_ms\":\"x\"}}", 0,
     "mcp.outbound_session_idle_ms", NULL},
    /* mcp_servers */
    {"{" BACKEND ",\"mcp_servers\":[{\"url\":\"http://h/mcp\"}]}", 0,
     "mcp_servers[0].name: missing (required in a mcp server)", NULL},
    {"{" BACKEND ",\"mcp_servers\":[{\"name\":\"t\"}]}", 0,
     "mcp_servers[0].url: missing (required in a mcp server)", NULL},
    {"{" BACKEND ",\"mcp_servers\":[{\"name\":\"a b\",\"url\":\"http://h\"}]}",
     0, "mcp_servers[0].name: may contain only letters", NULL},
    {"{" BACKEND ",\"mcp_servers\":[{\"name\":\"t\",\"url\":\"ws://h\"}]}", 0,
     "mcp_servers[0].url: scheme must be http:// or https://", NULL},
    {"{" BACKEND ",\"mcp_servers\":[{\"name\":\"t\",\"url\":\"https://\"}]}", 0,
     "mcp_servers[0].url: has no host", NULL},
    /* The URL goes to libcurl verbatim: no credentials, nothing but ASCII. */
    {"{" BACKEND ",\"mcp_servers\":[{\"name\":\"t\","
     "\"url\":\"http://user:pw@h/mcp\"}]}",
     0, "mcp_servers[0].url: must not contain user:password@", NULL},
    {"{" BACKEND ",\"mcp_servers\":[{\"name\":\"t\","
     "\"url\":\"https://tok@h:8443/mcp?x=1\"}]}",
     0, "mcp_servers[0].url: must not contain user:password@", NULL},
    {"{" BACKEND ",\"mcp_servers\":[{\"name\":\"t\","
     "\"url\":\"http://h/mc\\u00e9p\"}]}",
     0, "mcp_servers[0].url: must be ASCII", NULL},
    {"{" BACKEND ",\"mcp_servers\":[{\"name\":\"t\","
     "\"url\":\"http://h/mcp\\r\\nX-Evil: 1\"}]}",
     0, "mcp_servers[0].url: must not contain spaces or control characters",
     NULL},
    {"{" BACKEND ",\"mcp_servers\":[{\"name\":\"t\","
     "\"url\":\"http://h/mcp\",\"max_connections\":0}]}",
     0, "mcp_servers[0].max_connections: 0 is out of range 1-4096", NULL},
    {"{" BACKEND ",\"mcp_servers\":[{\"name\":\"t\",\"url\":\"http://h\"},"
     "{\"name\":\"t\",\"url\":\"http://g\"}]}",
     0,
     "mcp_servers[1].name: duplicate MCP server name 't' (as in "
     "mcp_servers[0])",
     NULL},
    {"{" BACKEND ",\"mcp_servers\":[{\"name\":\"t\",\"url\":\"http://h\","
     "\"auth\":{\"scheme\":\"bearer\"}}]}",
     0, "mcp_servers[0].auth.token: required when the scheme is bearer", NULL},
    {"{" BACKEND ",\"mcp_servers\":[{\"name\":\"t\",\"url\":\"http://h\","
     "\"auth\":{\"scheme\":\"xiaozhi-hmac\"}}]}",
     0, "mcp_servers[0].auth.scheme", NULL},
    {"{" BACKEND ",\"mcp_servers\":[{\"name\":\"t\",\"url\":\"http://h\","
     "\"auth\":{\"scheme\":\"bearer\",\"token\":\"a\\r\\nX-Evil: 1\"}}]}",
     0, "mcp_servers[0].auth.token: must not contain control characters", NULL},
    {"{" BACKEND ",\"mcp_servers\":[{\"name\":\"t\",\"url\":\"http://h\","
     "\"timeout_ms\":5}]}",
     0, "mcp_servers[0].timeout_ms", NULL},
    {"{" BACKEND ",\"mcp_servers\":[{\"name\":\"t\",\"url\":\"https://h\","
     "\"ca_file\":\"/nonexistent/ca.pem\"}]}",
     0, "mcp_servers[0].ca_file: cannot read '/nonexistent/ca.pem'", NULL},
    {"{" BACKEND ",\"mcp_servers\":[{\"name\":\"t\",\"url\":\"http://h\","
     "\"allow\":{\"macs\":[\"zz\"]}}]}",
     0, "mcp_servers[0].allow.macs[0]: is not a MAC address", NULL},
    {"{" BACKEND ",\"mcp_servers\":[{\"name\":\"t\",\"url\":\"http://h\","
     "\"allow\":{\"group\":[]}}]}",
     0, "mcp_servers[0].allow.group: unknown key (did you mean 'groups'?)",
     NULL},
    /* tls files are checked only when tls is on */
    {"{" BACKEND ",\"mqtt\":{\"tls\":{\"enabled\":true,"
     "\"ca_file\":\"/nonexistent/ca.pem\"}}}",
     0, "mqtt.tls.ca_file: cannot read '/nonexistent/ca.pem': No such file",
     NULL},
    {"{" BACKEND ",\"mqtt\":{\"tls\":{\"enabled\":true,"
     "\"cert_file\":\"/nonexistent/c.pem\"}}}",
     0, "mqtt.tls: cert_file and key_file go together",
     "mqtt.tls.cert_file: cannot read"},
    {"{" BACKEND ",\"mqtt\":{\"tls\":{\"enabled\":true,\"ca_file\":\"/\"}}}", 0,
     "mqtt.tls.ca_file: cannot read '/': Is a directory", NULL},
    /* cluster */
    {"{" BACKEND ",\"cluster\":{\"mode\":\"ring\"}}", 0,
     "cluster.mode: 'ring' is not one of off, hash", NULL},
    {"{" BACKEND ",\"cluster\":{\"instance\":\"a/b\"}}", 0,
     "cluster.instance: may contain only", NULL},
    {"{" BACKEND ",\"cluster\":{\"topic_prefix\":\"x/+\"}}", 0,
     "cluster.topic_prefix: must not contain '+' or '#'", NULL},
    {"{" BACKEND ",\"cluster\":{\"topic_prefix\":\"x/\"}}", 0,
     "cluster.topic_prefix: must not begin or end with '/'", NULL},
    {"{" BACKEND ",\"cluster\":{\"drain_deadline_s\":0}}", 0,
     "cluster.drain_deadline_s: 0 is out of range 1-86400", NULL},
    {"{" BACKEND ",\"cluster\":{\"mode\":\"hash\"},"
     "\"mqtt\":{\"client_id\":\"a b\"}}",
     0, "cluster.instance: not set, and mqtt.client_id cannot stand for it",
     NULL},
};

static void test_bad_configs(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        const struct bad_case *c = &bad_cases[i];
        size_t len = c->len ? c->len : strlen(c->text);
        char err[ERR_CAP];
        static struct gw_config sentinel;
        struct gw_config *cfg = &sentinel; /* must be reset to NULL */
        int rc = gw_config_load_string(c->text, len, "x.json", &cfg, err,
                                       sizeof(err));
        if (rc != GW_ECONFIG || strstr(err, c->want) == NULL ||
            (c->also != NULL && strstr(err, c->also) == NULL)) {
            print_error("case %zu: rc %d, want \"%s\", got:\n%s", i, rc,
                        c->want, err);
        }
        assert_int_equal(rc, GW_ECONFIG);
        assert_null(cfg);
        assert_non_null(strstr(err, c->want));
        if (c->also != NULL) {
            assert_non_null(strstr(err, c->also));
        }
        assert_int_equal(err[strlen(err) - 1], '\n');
    }
}

/* ---- error collection -------------------------------------------------- */

static size_t count_lines(const char *s)
{
    size_t n = 0;

    for (; *s; s++) {
        n += *s == '\n';
    }
    return n;
}

static void test_all_errors_reported(void **state)
{
    static const char text[] =
        "{\"mqtt\":{\"port\":0,\"hots\":\"x\"},\"udp\":{\"port\":\"x\"},"
        "\"backends\":[{\"name\":\"a\",\"url\":\"http://h\"},{\"url\":1}],"
        "\"log\":{\"level\":\"loud\"}}";
    char err[ERR_CAP];
    struct gw_config *cfg = NULL;

    (void)state;
    assert_int_equal(gw_config_load_string(text, strlen(text), "x.json", &cfg,
                                           err, sizeof(err)),
                     GW_ECONFIG);
    assert_int_equal(count_lines(err), 7);
    assert_non_null(strstr(err, "x.json: mqtt.port: 0 is out of range"));
    assert_non_null(strstr(err, "x.json: mqtt.hots: unknown key"));
    assert_non_null(strstr(err, "x.json: udp.port: expected an integer"));
    assert_non_null(strstr(err, "x.json: backends[0].url: scheme"));
    assert_non_null(strstr(err, "x.json: backends[1].url: expected a string"));
    assert_non_null(strstr(err, "x.json: backends[1].name: missing"));
    assert_non_null(strstr(err, "x.json: log.level: 'loud' is not one of"));
    assert_null(cfg);
}

static void test_error_cap(void **state)
{
    char text[2048], err[ERR_CAP];
    size_t used;
    struct gw_config *cfg = NULL;

    (void)state;
    used = (size_t)snprintf(text, sizeof(text), "{" BACKEND);
    for (int i = 0; i < 30; i++) {
        used += (size_t)snprintf(text + used, sizeof(text) - used,
                                 ",\"bad%d\":1", i);
    }
    snprintf(text + used, sizeof(text) - used, "}");
    assert_int_equal(gw_config_load_string(text, strlen(text), "x.json", &cfg,
                                           err, sizeof(err)),
                     GW_ECONFIG);
    assert_int_equal(count_lines(err), 21);
    assert_non_null(strstr(err, "x.json: bad19: unknown key\n"));
    assert_null(strstr(err, "bad20"));
    assert_non_null(strstr(err, "x.json: too many errors"));
}

/* A short buffer gets a terminated prefix; no buffer is fine too. */
static void test_error_buffer_truncated(void **state)
{
    static const char text[] = "{\"mqtt\":{\"port\":0}," BACKEND "}";
    char err[24];
    struct gw_config *cfg = NULL;

    (void)state;
    memset(err, 'x', sizeof(err));
    assert_int_equal(
        gw_config_load_string(text, strlen(text), "x.json", &cfg, err, 16),
        GW_ECONFIG);
    assert_int_equal(strlen(err), 15);
    assert_memory_equal(err, "x.json: mqtt.po", 15);
    assert_int_equal(err[16], 'x'); /* nothing past errlen */
    assert_int_equal(
        gw_config_load_string(text, strlen(text), "x.json", &cfg, NULL, 0),
        GW_ECONFIG);
    assert_int_equal(
        gw_config_load_string(text, strlen(text), NULL, &cfg, err, sizeof(err)),
        GW_ECONFIG);
    assert_memory_equal(err, "<string>: mqtt.port", 19);
}

static void test_invalid_arguments(void **state)
{
    struct gw_config *cfg = NULL;
    char err[64];

    (void)state;
    assert_int_equal(gw_config_load_string("{}", 2, "x", NULL, err, 64),
                     GW_EINVAL);
    assert_int_equal(gw_config_load_string(NULL, 2, "x", &cfg, err, 64),
                     GW_EINVAL);
    assert_int_equal(gw_config_load_file(NULL, &cfg, err, 64), GW_EINVAL);
    assert_null(cfg);
    gw_config_destroy(NULL);
}

/* Only the declared length is read: the text need not be terminated. */
static void test_unterminated_input(void **state)
{
    static const char text[] = "{" BACKEND "}garbage";
    struct gw_config *cfg = NULL;
    size_t len = strlen("{" BACKEND "}");
    char *copy = malloc(len);

    (void)state;
    assert_non_null(copy);
    memcpy(copy, text, len);
    assert_int_equal(gw_config_load_string(copy, len, "x", &cfg, NULL, 0), 0);
    assert_int_equal(cfg->n_backends, 1);
    gw_config_destroy(cfg);
    free(copy);
}

static void test_oversized(void **state)
{
    size_t len = GW_CONFIG_MAX_BYTES + 1;
    char *big = malloc(len), err[256];
    struct gw_config *cfg = NULL;

    (void)state;
    assert_non_null(big);
    memset(big, ' ', len);
    big[0] = '{';
    big[len - 1] = '}';
    assert_int_equal(
        gw_config_load_string(big, len, "big.json", &cfg, err, sizeof(err)),
        GW_ECONFIG);
    assert_string_equal(err, "big.json: larger than 1048576 bytes\n");
    free(big);
}

/* Nesting past cJSON's limit is a syntax error, not a crash. */
static void test_deep_nesting(void **state)
{
    size_t depth = 5000;
    char *text = malloc(depth + 16), err[256];
    struct gw_config *cfg = NULL;

    (void)state;
    assert_non_null(text);
    memcpy(text, "{\"a\":", 5);
    memset(text + 5, '[', depth);
    assert_int_equal(gw_config_load_string(text, depth + 5, "x.json", &cfg, err,
                                           sizeof(err)),
                     GW_ECONFIG);
    assert_non_null(strstr(err, "syntax error"));
    free(text);
}

/* ---- fixture files ----------------------------------------------------- */

/* One file under tests/unit/config/ and what loading it must give. */
struct file_case {
    const char *file; /* fixture name */
    int rc;           /* expected result */
    const char *want; /* substring after "<path>" in the message */
};

static const struct file_case file_cases[] = {
    {"missing-comma.json", GW_ECONFIG, ":3:3: syntax error near '\"backends\""},
    {"invalid-utf8.json", GW_ECONFIG, ":2:19: invalid UTF-8"},
    {"duplicate-key.json", GW_ECONFIG, ": log.level: duplicate key"},
    {"not-object.json", GW_ECONFIG, ": the top level must be an object"},
    {"empty.json", GW_ECONFIG, ": empty"},
    {"unknown-key.json", GW_ECONFIG,
     ": mqtt.hots: unknown key (did you mean 'host'?)"},
    {"no-such-file.json", -ENOENT, ": cannot open: No such file"},
    {"", -EISDIR, ": cannot read: Is a directory"},
};

static void test_fixture_files(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(file_cases) / sizeof(file_cases[0]); i++) {
        const struct file_case *c = &file_cases[i];
        char path[512], want[640], err[ERR_CAP];
        struct gw_config *cfg = NULL;
        snprintf(path, sizeof(path), "%s/tests/unit/config/%s", GW_SOURCE_DIR,
                 c->file);
        snprintf(want, sizeof(want), "%s%s", path, c->want);
        int rc = gw_config_load_file(path, &cfg, err, sizeof(err));
        if (rc != c->rc || strstr(err, want) == NULL) {
            print_error("%s: rc %d, want \"%s\", got:\n%s", c->file, rc, want,
                        err);
        }
        assert_int_equal(rc, c->rc);
        assert_null(cfg);
        assert_non_null(strstr(err, want));
    }
}

/* Readable TLS files pass; the check names the file that is not. */
static void test_tls_files(void **state)
{
    char text[1024], err[ERR_CAP];
    struct gw_config *cfg = NULL;
    const char *pem = GW_SOURCE_DIR "/tests/unit/config/readable.pem";

    (void)state;
    snprintf(text, sizeof(text),
             "{" BACKEND ",\"mqtt\":{\"tls\":{\"enabled\":true,"
             "\"ca_file\":\"%s\",\"cert_file\":\"%s\",\"key_file\":\"%s\"}}}",
             pem, pem, pem);
    cfg = load_ok(text);
    assert_true(cfg->mqtt.tls.enabled);
    assert_string_equal(cfg->mqtt.tls.key_file, pem);
    gw_config_destroy(cfg);

    /* disabled: the files are not looked at */
    cfg = load_ok("{" BACKEND ",\"mqtt\":{\"tls\":{\"enabled\":false,"
                  "\"ca_file\":\"/nonexistent\"}}}");
    gw_config_destroy(cfg);

    snprintf(text, sizeof(text),
             "{" BACKEND ",\"mqtt\":{\"tls\":{\"enabled\":true,"
             "\"cert_file\":\"%s\",\"key_file\":\"%s.missing\"}}}",
             pem, pem);
    assert_int_equal(gw_config_load_string(text, strlen(text), "x.json", &cfg,
                                           err, sizeof(err)),
                     GW_ECONFIG);
    assert_int_equal(count_lines(err), 1);
    assert_non_null(strstr(err, "x.json: mqtt.tls.key_file: cannot read"));
}

/* ---- reload ------------------------------------------------------------ */

/* Collects the paths reported by gw_config_restart_changes. */
struct changes {
    char paths[256]; /* "a,b," */
};

static void on_change(const char *path, void *arg)
{
    struct changes *c = arg;
    size_t used = strlen(c->paths);

    snprintf(c->paths + used, sizeof(c->paths) - used, "%s,", path);
}

/* One edit to the base config and the restart-only keys it touches. */
struct restart_case {
    const char *extra; /* appended to the base object */
    size_t n;          /* changes expected */
    const char *paths; /* as collected by on_change */
};

static const struct restart_case restart_cases[] = {
    {"", 0, ""},
    {",\"udp\":{\"port\":9999}", 1, "udp.port,"},
    {",\"log\":{\"level\":\"debug\"}", 0, ""},
    {",\"limits\":{\"max_sessions\":5}", 0, ""},
    {",\"udp\":{\"public_host\":\"10.0.0.1\",\"public_port\":1}", 0, ""},
    {",\"http\":{\"token\":\"t\"}", 0, ""},
    {",\"http\":{\"port\":8008,\"listen\":\"0.0.0.0\"}", 2,
     "http.listen,http.port,"},
    {",\"mqtt\":{\"tls\":{\"enabled\":true}}", 1, "mqtt.tls.enabled,"},
    {",\"mqtt\":{\"password\":\"p\",\"keepalive\":30}", 2,
     "mqtt.password,mqtt.keepalive,"},
    {",\"instance\":\"gw-2\"", 2, "instance,mqtt.client_id,"},
    {",\"routes\":[{\"match\":{\"groups\":[\"G\"]},\"backends\":[\"main\"]}]",
     0, ""},
};

static void test_restart_changes(void **state)
{
    struct gw_config *running = load_ok("{" BACKEND "}");

    (void)state;
    for (size_t i = 0; i < sizeof(restart_cases) / sizeof(restart_cases[0]);
         i++) {
        const struct restart_case *c = &restart_cases[i];
        char text[512];
        struct changes seen = {.paths = ""};
        snprintf(text, sizeof(text), "{" BACKEND "%s}", c->extra);
        struct gw_config *loaded = load_ok(text);
        size_t n = gw_config_restart_changes(running, loaded, on_change, &seen);
        if (n != c->n || strcmp(seen.paths, c->paths) != 0) {
            print_error("case %zu: %zu changes: %s", i, n, seen.paths);
        }
        assert_int_equal(n, c->n);
        assert_string_equal(seen.paths, c->paths);
        assert_int_equal(gw_config_restart_changes(running, loaded, NULL, 0),
                         c->n);
        gw_config_destroy(loaded);
    }
    gw_config_destroy(running);
}

/* ---- dump -------------------------------------------------------------- */

static void test_dump_round_trip(void **state)
{
    static const char *const files[] = {"hybridgw.json", "minimal.json",
                                        "multi-backend.json"};
    (void)state;
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char path[512], err[ERR_CAP], *once = NULL, *twice = NULL;
        struct gw_config *cfg = NULL, *again = NULL;
        snprintf(path, sizeof(path), "%s/config/%s", GW_SOURCE_DIR, files[i]);
        assert_int_equal(gw_config_load_file(path, &cfg, err, sizeof(err)), 0);
        assert_int_equal(gw_config_dump(cfg, true, &once), 0);
        assert_int_equal(gw_config_load_string(once, strlen(once), "dump",
                                               &again, err, sizeof(err)),
                         0);
        assert_int_equal(gw_config_restart_changes(cfg, again, NULL, NULL), 0);
        assert_int_equal(gw_config_dump(again, true, &twice), 0);
        assert_string_equal(once, twice);
        assert_int_equal(again->n_routes, cfg->n_routes);
        free(once);
        free(twice);
        gw_config_destroy(again);
        gw_config_destroy(cfg);
    }
}

static void test_dump_masks_secrets(void **state)
{
    struct gw_config *cfg = load_ok(
        "{\"mqtt\":{\"password\":\"pw-1\"},\"http\":{\"token\":\"tk-2\"},"
        "\"backends\":[{\"name\":\"m\",\"url\":\"ws://h\",\"auth\":{"
        "\"scheme\":\"bearer\",\"token\":\"tk-3\"}}]}");
    char *text = NULL;

    (void)state;
    assert_int_equal(gw_config_dump(cfg, false, &text), 0);
    assert_null(strstr(text, "pw-1"));
    assert_null(strstr(text, "tk-2"));
    assert_null(strstr(text, "tk-3"));
    assert_non_null(strstr(text, "\"password\":\t\"********\""));
    assert_non_null(strstr(text, "\"secret\":\t\"\"")); /* empty stays */
    assert_non_null(strstr(text, "\"max_message_bytes\":\t8192"));
    free(text);
    assert_int_equal(gw_config_dump(cfg, true, &text), 0);
    assert_non_null(strstr(text, "tk-3"));
    free(text);
    gw_config_destroy(cfg);
}

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(gw_framing_name(GW_FRAMING_V2), "v2");
    assert_string_equal(gw_framing_name(GW_FRAMING_V3), "v3");
    assert_string_equal(gw_framing_name(GW_FRAMING_RAW), "raw");
    assert_string_equal(gw_framing_name((enum gw_framing)99), "unknown");
    assert_string_equal(gw_auth_scheme_name(GW_AUTH_NONE), "none");
    assert_string_equal(gw_auth_scheme_name(GW_AUTH_BEARER), "bearer");
    assert_string_equal(gw_auth_scheme_name(GW_AUTH_XIAOZHI_HMAC),
                        "xiaozhi-hmac");
    assert_string_equal(gw_auth_scheme_name((enum gw_auth_scheme) - 1),
                        "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_examples_load),
        cmocka_unit_test(test_full_example_values),
        cmocka_unit_test(test_multi_backend_routes),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_cluster_defaults),
        cmocka_unit_test(test_edges_accepted),
        cmocka_unit_test(test_mcp_server_url_accepted),
        cmocka_unit_test(test_bad_configs),
        cmocka_unit_test(test_all_errors_reported),
        cmocka_unit_test(test_error_cap),
        cmocka_unit_test(test_error_buffer_truncated),
        cmocka_unit_test(test_invalid_arguments),
        cmocka_unit_test(test_unterminated_input),
        cmocka_unit_test(test_oversized),
        cmocka_unit_test(test_deep_nesting),
        cmocka_unit_test(test_fixture_files),
        cmocka_unit_test(test_tls_files),
        cmocka_unit_test(test_restart_changes),
        cmocka_unit_test(test_dump_round_trip),
        cmocka_unit_test(test_dump_masks_secrets),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
