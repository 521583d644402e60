/*
 * The gateway's MCP server beyond tools (gateway/mcp_server*.c) on a real
 * instance whose broker link reaches a real mosquitto: the device side is
 * a second MQTT client that reads what devices receive, and device
 * messages are handed to the table as the dispatcher would. MCP clients
 * are raw HTTP on 127.0.0.1, GET streams read as they come. What the
 * end-to-end test with the official SDK cannot reach: refusals of what a
 * device does not offer, names that are not the gateway's, resource
 * contents over the limit or malformed, cancellation of any request,
 * progress as an event-stream answer, and the device's own requests to
 * its clients with their bound, timeout, withdrawal and the client going
 * away.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>
#include <mosquitto.h>
#include <uv.h>

#include "codec/mcp_caps.h"
#include "codec/mcp_tools.h"
#include "codec/presence.h"
#include "common/log.h"
#include "common/mqtt_link.h"
#include "config/config.h"
#include "fixture.h"
#include "fixture_parts.h"
#include "gateway/device/device_table.h"
#include "gateway/device/mcp_catalog.h"
#include "gateway/instance.h"
#include "gateway/mcp/mcp_server.h"
#include "http_client.h"

#define TOKEN   "tok-mcp-4d1"
#define AUTH    "Authorization: Bearer " TOKEN "\r\n"
#define DEV     "GID_test@@@a0_85_e3_f4_49_34@@@0f8e"
#define DEV2    "GID_test@@@a0_85_e3_f4_49_35@@@0f8e" /* tools only */
#define DEV_EP  "/mcp/devices/" DEV
#define DEV2_EP "/mcp/devices/" DEV2

#define DOWN_TOPICS "devices/+/down"
#define PROBE_TOPIC "devices/probe/down"

#define ASK_TIMEOUT_MS 1500
#define MAX_ASKS       2

#define INIT_BODY(caps)                                                        \
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"     \
    "\"protocolVersion\":\"2025-11-25\",\"capabilities\":" caps ","            \
    "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}"

static struct gw_fixture_broker B;

/* One message a device received. */
struct msg {
    char topic[256];
    char *text;
    cJSON *root;
};

#define MAX_MSGS 128
#define N_CONNS  8

static struct {
    struct gw_fixture fx;
    struct gw_instance *inst;
    bool stopped;
    int port;
    struct gw_mqtt_link *dev; /* the devices' side */
    bool probe_seen;
    bool dev_closed;
    struct msg msgs[MAX_MSGS];
    unsigned n_msgs;
    char label[GW_MCP_LABEL_LEN + 1];
    struct hc_client conns[N_CONNS];
    bool conn_used[N_CONNS];
} T;

static struct hc_resp R; /* large: one shared answer buffer */

/* ---- the broker ------------------------------------------------------- */

static int broker_start(void **state)
{
    (void)state;
    return gw_fixture_broker_start(&B, "gwmcps");
}

static int broker_stop(void **state)
{
    (void)state;
    gw_fixture_broker_stop(&B);
    return 0;
}

static bool broker_exited(void)
{
    return gw_fixture_broker_exited(&B);
}

/* ---- the device side -------------------------------------------------- */

static void on_device_state(struct gw_mqtt_link *link, bool up, void *arg)
{
    (void)arg;
    if (up) {
        assert_int_equal(gw_mqtt_link_publish(link, PROBE_TOPIC, "{}", 2), 0);
    }
}

static void on_device_message(struct gw_mqtt_link *link, const char *topic,
                              const uint8_t *payload, size_t len, void *arg)
{
    struct msg *m;

    (void)link;
    (void)arg;
    if (strcmp(topic, PROBE_TOPIC) == 0) {
        T.probe_seen = true;
        return;
    }
    assert_true(T.n_msgs < MAX_MSGS);
    m = &T.msgs[T.n_msgs++];
    snprintf(m->topic, sizeof(m->topic), "%s", topic);
    m->text = strndup((const char *)payload, len);
    assert_non_null(m->text);
    m->root = cJSON_Parse(m->text);
    assert_non_null(m->root);
}

static const cJSON *payload_of(unsigned i)
{
    const cJSON *p;

    assert_true(i < T.n_msgs);
    p = cJSON_GetObjectItemCaseSensitive(T.msgs[i].root, "payload");
    assert_true(cJSON_IsObject(p));
    return p;
}

static const char *method_of(unsigned i)
{
    return cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(payload_of(i), "method"));
}

static const cJSON *params_of(unsigned i)
{
    return cJSON_GetObjectItemCaseSensitive(payload_of(i), "params");
}

/* The index of the first message at or after from with method (or, for
 * NULL, any response), waiting for it. */
static unsigned wait_down(unsigned from, const char *method)
{
    for (unsigned i = from;; i++) {
        GW_FIXTURE_RUN_UNTIL(&T.fx, T.n_msgs > i);
        const char *m = method_of(i);
        if (method == NULL ? m == NULL : m != NULL && strcmp(m, method) == 0) {
            return i;
        }
    }
}

static unsigned down_id(unsigned i)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(payload_of(i), "id");

    assert_true(cJSON_IsNumber(id));
    return (unsigned)id->valuedouble;
}

/* A device message (payload) handed to the table. */
static void device_says(const char *client_id, const char *fmt, ...)
{
    char payload[1800];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(payload, sizeof(payload), fmt, ap);
    va_end(ap);
    assert_true(n > 0 && (size_t)n < sizeof(payload));
    (void)gw_fixture_mcp_in(&T.inst->devices, client_id, payload);
}

/* A device's answer to request i: member is "result":... or "error":... */
static void device_answers(unsigned i, const char *member)
{
    device_says(DEV, "{\"jsonrpc\":\"2.0\",\"id\":%u,%s}", down_id(i), member);
}

/* ---- devices ------------------------------------------------------------ */

static cJSON *json(const char *text)
{
    cJSON *v = cJSON_Parse(text);

    assert_non_null(v);
    return v;
}

/* A device online, with what its discovery would have read: caps, and
 * (when caps offer them) a tool, resources, a template and a prompt. */
static void device_online(const char *client_id, unsigned caps)
{
    struct gw_presence p = {.online = true};
    struct gw_mcp_server_info info = {.caps = caps};
    struct gw_device *dev;

    snprintf(p.address, sizeof(p.address), "10.0.0.1");
    assert_true(gw_device_on_presence(&T.inst->devices, client_id, &p) >= 0);
    dev = gw_device_find(&T.inst->devices, client_id);
    assert_non_null(dev);
    gw_tool_cache_set(
        &dev->tools,
        json("[{\"name\":\"self.a\",\"description\":\"a\","
             "\"inputSchema\":{\"type\":\"object\"}},"
             "{\"name\":\"self.sim.job\",\"inputSchema\":{\"type\":\"object\"},"
             "\"execution\":{\"taskSupport\":\"optional\"}}]"),
        false);
    gw_mcp_catalog_set_info(&dev->catalog, &info);
    if (caps & GW_MCP_CAP_RESOURCES) {
        gw_mcp_catalog_set(
            &dev->catalog, GW_MCP_LIST_RESOURCES,
            json("[{\"uri\":\"device://status\",\"name\":\"status\","
                 "\"description\":\"volume\"}]"),
            false);
        gw_mcp_catalog_set(&dev->catalog, GW_MCP_LIST_TEMPLATES,
                           json("[{\"uriTemplate\":\"device://sensor/{name}\","
                                "\"name\":\"sensor\"}]"),
                           false);
    }
    if (caps & GW_MCP_CAP_PROMPTS) {
        gw_mcp_catalog_set(&dev->catalog, GW_MCP_LIST_PROMPTS,
                           json("[{\"name\":\"greeting\",\"arguments\":"
                                "[{\"name\":\"name\",\"required\":true}]}]"),
                           false);
    }
}

/* ---- HTTP ------------------------------------------------------------- */

static struct hc_client *conn_open(void)
{
    for (int i = 0; i < N_CONNS; i++) {
        if (!T.conn_used[i]) {
            T.conn_used[i] = true;
            hc_open(&T.conns[i], &T.fx.loop, &T.fx.timed_out, "127.0.0.1",
                    T.port);
            return &T.conns[i];
        }
    }
    fail_msg("no free connection");
    return NULL;
}

static void conn_close(struct hc_client *c)
{
    hc_close(c);
    T.conn_used[c - T.conns] = false;
}

/* Sends a request on a new connection; its answer is read later. */
static struct hc_client *send_req(const char *method, const char *path,
                                  const char *sid, const char *accept,
                                  const char *body)
{
    struct hc_client *c = conn_open();
    size_t cap = 1024 + (body != NULL ? strlen(body) : 0);
    char *req = malloc(cap);
    char sid_h[96] = "";

    assert_non_null(req);
    if (sid != NULL) {
        snprintf(sid_h, sizeof(sid_h), "Mcp-Session-Id: %s\r\n", sid);
    }
    snprintf(req, cap,
             "%s %s HTTP/1.1\r\nHost: localhost\r\n" AUTH
             "Content-Type: application/json\r\nAccept: %s\r\n%s"
             "Content-Length: %zu\r\n\r\n%s",
             method, path, accept, sid_h, body != NULL ? strlen(body) : 0,
             body != NULL ? body : "");
    hc_send(c, req);
    free(req);
    return c;
}

/* The answer on c (whole), then c closes. */
static void take(struct hc_client *c, struct hc_resp *r)
{
    HC_RUN_UNTIL(c, hc_take(c, r, false));
    conn_close(c);
}

static void post(const char *path, const char *sid, const char *body,
                 struct hc_resp *r)
{
    take(send_req("POST", path, sid, "application/json", body), r);
}

/* initialize on path declaring caps; the session id into sid. */
static cJSON *initialize(const char *path, const char *body, char sid[64])
{
    post(path, NULL, body, &R);
    assert_int_equal(R.status, 200);
    assert_non_null(hc_header(R.head, "mcp-session-id", sid, 64));
    return json(R.body);
}

/* A request in a session answered as JSON (status 200): the message. */
static cJSON *call(const char *path, const char *sid, const char *method,
                   const char *params)
{
    char body[2048];

    snprintf(body, sizeof(body),
             "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"%s\",\"params\":%s}",
             method, params);
    post(path, sid, body, &R);
    assert_int_equal(R.status, 200);
    return json(R.body);
}

static int error_code(const cJSON *msg)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(msg, "error");

    assert_true(cJSON_IsObject(e));
    return cJSON_GetObjectItemCaseSensitive(e, "code")->valueint;
}

static const char *error_message(const cJSON *msg)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(msg, "error");

    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "message"));
}

static const cJSON *result_of(const cJSON *msg)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(msg, "result");

    assert_true(cJSON_IsObject(r));
    return r;
}

/* A refusal: code and message, the device asked nothing. */
static void assert_refused(const char *path, const char *sid,
                           const char *method, const char *params, int code,
                           const char *message)
{
    cJSON *msg = call(path, sid, method, params);

    assert_int_equal(error_code(msg), code);
    assert_string_equal(error_message(msg), message);
    cJSON_Delete(msg);
}

/* A GET stream of the session. */
static struct hc_client *stream_open(const char *path, const char *sid)
{
    struct hc_client *c = send_req("GET", path, sid, "text/event-stream", NULL);
    HC_RUN_UNTIL(c, strstr(c->rx, "\r\n\r\n") != NULL);
    assert_non_null(strstr(c->rx, "200"));
    return c;
}

/* What came on a stream so far, de-chunked, into R.body. */
static const char *stream_text(struct hc_client *c)
{
    R.body[0] = '\0'; /* nothing yet leaves it as it was */
    (void)hc_take(c, &R, true);
    return R.body;
}

/* Waits until the stream carried needle (the count-th time). */
static void stream_wait(struct hc_client *c, const char *needle, int count)
{
    for (;;) {
        const char *p = stream_text(c);
        int n = 0;
        while ((p = strstr(p, needle)) != NULL) {
            n++;
            p++;
        }
        if (n >= count) {
            return;
        }
        gw_loop_run_once(&T.fx.loop, &T.fx.timed_out, needle, __FILE__,
                         __LINE__);
    }
}

static int stream_count(struct hc_client *c, const char *needle)
{
    const char *p = stream_text(c);
    int n = 0;

    while ((p = strstr(p, needle)) != NULL) {
        n++;
        p++;
    }
    return n;
}

static uint64_t metric_value(const char *name)
{
    struct hc_client *c = conn_open();
    char req[256], want[160];
    const char *p;

    snprintf(req, sizeof(req),
             "GET /metrics HTTP/1.1\r\nHost: localhost\r\n" AUTH "\r\n");
    hc_send(c, req);
    take(c, &R);
    assert_int_equal(R.status, 200);
    snprintf(want, sizeof(want), "\n%s ", name);
    p = strstr(R.body, want);
    assert_non_null(p);
    return strtoull(p + strlen(want), NULL, 10);
}

/* ---- set-up ----------------------------------------------------------- */

static void on_dev_closed(struct gw_mqtt_link *link, void *arg)
{
    (void)link;
    (void)arg;
    T.dev_closed = true;
}

static int setup(void **state)
{
    const char *topics[] = {DOWN_TOPICS};
    struct gw_mqtt_link_options dev = {
        .host = "127.0.0.1",
        .port = B.port,
        .client_id = "hybridgw-test-devices",
        .keepalive_s = 60,
        .topics = topics,
        .n_topics = 1,
        .on_message = on_device_message,
        .on_state = on_device_state,
    };
    struct gw_config *cfg = NULL;
    char text[2048], err[512];
    int n;

    (void)state;
    memset(&T, 0, sizeof(T));
    gw_fixture_loop_init(&T.fx);
    T.port = gw_fixture_free_port(SOCK_STREAM);
    n = snprintf(
        text, sizeof(text),
        "{\"mqtt\":{\"host\":\"127.0.0.1\",\"port\":%d},"
        "\"udp\":{\"bind\":\"127.0.0.1\",\"port\":0,"
        "\"public_host\":\"127.0.0.1\"},"
        "\"backends\":[{\"name\":\"main\",\"url\":\"ws://127.0.0.1:9/\"}],"
        "\"http\":{\"listen\":\"127.0.0.1\",\"port\":%d,\"token\":\"" TOKEN
        "\"},"
        "\"mcp\":{\"discover\":false,\"call_timeout_ms\":20000,"
        "\"max_resource_bytes\":1024,\"max_device_requests\":%d,"
        "\"device_request_timeout_ms\":%d}}",
        B.port, T.port, MAX_ASKS, ASK_TIMEOUT_MS);
    assert_int_equal(
        gw_config_load_string(text, (size_t)n, "test", &cfg, err, sizeof(err)),
        0);
    assert_int_equal(gw_instance_init(&T.fx.loop, cfg, &T.inst), 0);
    assert_int_equal(gw_mqtt_link_init(&T.fx.loop, &dev, &T.dev), 0);
    GW_FIXTURE_RUN_UNTIL(&T.fx,
                         (gw_mqtt_link_is_up(T.inst->mqtt) && T.probe_seen) ||
                             broker_exited());
    assert_false(B.exited);
    assert_int_equal(gw_mcp_device_label(DEV, strlen(DEV), T.label), 0);
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
    for (int i = 0; i < N_CONNS; i++) {
        if (T.conn_used[i]) {
            conn_close(&T.conns[i]);
        }
    }
    gw_instance_close(T.inst, on_stopped, NULL);
    GW_FIXTURE_RUN_UNTIL(&T.fx, T.stopped);
    gw_mqtt_link_close(T.dev, on_dev_closed, NULL);
    GW_FIXTURE_RUN_UNTIL(&T.fx, T.dev_closed);
    for (unsigned i = 0; i < T.n_msgs; i++) {
        free(T.msgs[i].text);
        cJSON_Delete(T.msgs[i].root);
    }
    gw_fixture_loop_close(&T.fx);
    return 0;
}

/* ---- tests ------------------------------------------------------------ */

/*
 * A device offers tools only: its endpoint shows exactly that, and every
 * method it does not offer is refused -32601 by the gateway, never sent;
 * on /mcp it contributes nothing to the other lists, tasks/list is not
 * served, and names the gateway did not make are refused -32602. Each
 * refusal is counted. A list change reaches a session only for the lists
 * it was shown.
 */
static void test_refusals(void **state)
{
    char sid[64], agg[64], text[256];
    cJSON *msg;
    const cJSON *caps;
    unsigned i;

    (void)state;
    device_online(DEV2, GW_MCP_CAP_TOOLS);
    msg = initialize(DEV2_EP, INIT_BODY("{}"), sid);
    caps = cJSON_GetObjectItemCaseSensitive(result_of(msg), "capabilities");
    char *shown = cJSON_PrintUnformatted(caps);
    assert_string_equal(shown, "{\"tools\":{\"listChanged\":true}}");
    cJSON_free(shown);
    cJSON_Delete(msg);

    static const struct {
        const char *method, *params, *cap;
    } refused[] = {
        {"resources/list", "{}", "resources"},
        {"resources/templates/list", "{}", "resources"},
        {"resources/read", "{\"uri\":\"device://status\"}", "resources"},
        {"resources/subscribe", "{\"uri\":\"device://status\"}",
         "resources.subscribe"},
        {"prompts/list", "{}", "prompts"},
        {"prompts/get", "{\"name\":\"greeting\"}", "prompts"},
        {"completion/complete",
         "{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"greeting\"},"
         "\"argument\":{\"name\":\"name\",\"value\":\"a\"}}",
         "completions"},
        {"logging/setLevel", "{\"level\":\"info\"}", "logging"},
        {"tasks/list", "{}", "tasks.list"},
        {"tasks/get", "{\"taskId\":\"job-1\"}", "tasks"},
        {"tools/call",
         "{\"name\":\"self.sim.job\",\"arguments\":{},\"task\":{}}", "tasks"},
    };
    for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        snprintf(text, sizeof(text), "device %s does not offer %s", DEV2,
                 refused[i].cap);
        assert_refused(DEV2_EP, sid, refused[i].method, refused[i].params,
                       -32601, text);
    }

    msg = initialize("/mcp", INIT_BODY("{}"), agg);
    caps = cJSON_GetObjectItemCaseSensitive(result_of(msg), "capabilities");
    const cJSON *tasks = cJSON_GetObjectItemCaseSensitive(caps, "tasks");
    assert_true(cJSON_IsObject(tasks));
    assert_null(cJSON_GetObjectItemCaseSensitive(tasks, "list"));
    assert_non_null(cJSON_GetObjectItemCaseSensitive(tasks, "cancel"));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(caps, "resources"), "subscribe")));
    assert_non_null(cJSON_GetObjectItemCaseSensitive(caps, "completions"));
    assert_non_null(cJSON_GetObjectItemCaseSensitive(caps, "logging"));
    cJSON_Delete(msg);
    /* The tools-only device contributes no resources, templates, prompts. */
    msg = call("/mcp", agg, "resources/list", "{}");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(
                         result_of(msg), "resources")),
                     0);
    cJSON_Delete(msg);
    msg = call("/mcp", agg, "prompts/list", "{}");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(
                         result_of(msg), "prompts")),
                     0);
    cJSON_Delete(msg);
    assert_refused("/mcp", agg, "tasks/list", "{}", -32601,
                   "tasks/list is served on /mcp/devices/{clientId} only");
    assert_refused("/mcp", agg, "resources/read",
                   "{\"uri\":\"device://status\"}", -32602,
                   "Unknown resource: device://status");
    assert_refused("/mcp", agg, "resources/read",
                   "{\"uri\":\"hybridgw://nolabel/device://status\"}", -32602,
                   "Unknown resource: hybridgw://nolabel/device://status");
    assert_refused("/mcp", agg, "prompts/get", "{\"name\":\"greeting\"}",
                   -32602, "Unknown prompt: greeting");
    assert_refused("/mcp", agg, "tasks/get", "{\"taskId\":\"job-1\"}", -32602,
                   "Unknown task: job-1");
    assert_refused("/mcp", agg, "resources/list", "{\"cursor\":\"x\"}", -32602,
                   "invalid cursor");
    assert_refused("/mcp", agg, "logging/setLevel", "{\"level\":\"loud\"}",
                   -32602,
                   "logging/setLevel needs a level of debug, info, notice, "
                   "warning, error, critical, alert or emergency");
    /* A label no online device has: offline, as for tools. */
    assert_refused("/mcp", agg, "prompts/get",
                   "{\"name\":\"a0b0c0d0e0f0-0123456789abcdef.greeting\"}",
                   -32002,
                   "no online device has label a0b0c0d0e0f0-0123456789abcdef");
    assert_int_equal(metric_value("hybridgw_mcp_server_refused_total"),
                     sizeof(refused) / sizeof(refused[0]) + 7);

    /* list_changed: a session hears of the lists it was shown, no more */
    struct hc_client *st2 = stream_open(DEV2_EP, sid);
    struct hc_client *st_agg = stream_open("/mcp", agg);
    const struct gw_device *d2 = gw_device_find(&T.inst->devices, DEV2);
    gw_mcp_server_device_changed(T.inst->mcp_server, d2,
                                 GW_DEVICE_CHANGED_RESOURCES |
                                     GW_DEVICE_CHANGED_PROMPTS);
    gw_mcp_server_device_changed(T.inst->mcp_server, d2,
                                 GW_DEVICE_CHANGED_TOOLS);
    stream_wait(st2, "notifications/tools/list_changed", 1);
    assert_int_equal(stream_count(st2, "resources/list_changed"), 0);
    assert_int_equal(stream_count(st2, "prompts/list_changed"), 0);
    stream_wait(st_agg, "notifications/tools/list_changed", 1);
    assert_int_equal(stream_count(st_agg, "resources/list_changed"), 1);
    assert_int_equal(stream_count(st_agg, "prompts/list_changed"), 1);
    conn_close(st2);
    conn_close(st_agg);

    /* Nothing of that reached the device: the first thing it gets is
     * this call. */
    msg = NULL;
    struct hc_client *c = send_req(
        "POST", DEV2_EP, sid, "application/json",
        "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":"
        "{\"name\":\"self.a\"}}");
    i = wait_down(0, "tools/call");
    assert_int_equal(i, 0);
    device_says(DEV2,
                "{\"jsonrpc\":\"2.0\",\"id\":%u,\"result\":{\"content\":[]}}",
                down_id(i));
    take(c, &R);
    assert_int_equal(R.status, 200);
    assert_non_null(strstr(R.body, "\"id\":9,\"result\":{\"content\":[]}"));
}

/*
 * Resources on /mcp: lists renamed hybridgw://<label>/<uri>; a read goes
 * to the device under its own uri and comes back renamed; contents over
 * mcp.max_resource_bytes or malformed are -32603; a subscription is the
 * session's and its updates arrive renamed on the session's GET stream.
 */
static void test_resources(void **state)
{
    char agg[64], uri[128], params[256], want[256];
    struct hc_client *c, *st;
    unsigned i;
    cJSON *msg;
    const cJSON *item;

    (void)state;
    device_online(DEV, GW_MCP_CAPS_ALL);
    cJSON_Delete(initialize("/mcp", INIT_BODY("{}"), agg));
    msg = call("/mcp", agg, "resources/list", "{}");
    item = cJSON_GetArrayItem(
        cJSON_GetObjectItemCaseSensitive(result_of(msg), "resources"), 0);
    snprintf(uri, sizeof(uri), "hybridgw://%s/device://status", T.label);
    assert_string_equal(
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(item, "uri")),
        uri);
    snprintf(want, sizeof(want), "[%s] volume", DEV);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                            item, "description")),
                        want);
    cJSON_Delete(msg);
    /* Tools on /mcp carry their device's client id the same way, a tool
     * without a description too. */
    msg = call("/mcp", agg, "tools/list", "{}");
    const cJSON *tools =
        cJSON_GetObjectItemCaseSensitive(result_of(msg), "tools");
    assert_int_equal(cJSON_GetArraySize(tools), 2);
    snprintf(want, sizeof(want), "[%s] a", DEV);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                            cJSON_GetArrayItem(tools, 0), "description")),
                        want);
    snprintf(want, sizeof(want), "[%s] ", DEV);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                            cJSON_GetArrayItem(tools, 1), "description")),
                        want);
    cJSON_Delete(msg);
    msg = call("/mcp", agg, "resources/templates/list", "{}");
    item = cJSON_GetArrayItem(
        cJSON_GetObjectItemCaseSensitive(result_of(msg), "resourceTemplates"),
        0);
    snprintf(want, sizeof(want), "hybridgw://%s/device://sensor/{name}",
             T.label);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                            item, "uriTemplate")),
                        want);
    cJSON_Delete(msg);

    /* read: the device's own uri; contents renamed back */
    snprintf(params, sizeof(params),
             "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"resources/read\","
             "\"params\":{\"uri\":\"%s\"}}",
             uri);
    c = send_req("POST", "/mcp", agg, "application/json", params);
    i = wait_down(0, "resources/read");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                            params_of(i), "uri")),
                        "device://status");
    device_answers(i, "\"result\":{\"contents\":[{\"uri\":\"device://status\","
                      "\"mimeType\":\"application/json\",\"text\":\"{}\"}]}");
    take(c, &R);
    snprintf(want, sizeof(want), "\"contents\":[{\"uri\":\"%s\"", uri);
    assert_non_null(strstr(R.body, want));

    /* over the limit (1024 bytes): -32603 naming it */
    c = send_req("POST", "/mcp", agg, "application/json", params);
    i = wait_down(i + 1, "resources/read");
    char big[1300];
    memset(big, 'x', 1100);
    big[1100] = '\0';
    char member[1400];
    snprintf(member, sizeof(member),
             "\"result\":{\"contents\":[{\"uri\":\"device://status\","
             "\"text\":\"%s\"}]}",
             big);
    device_answers(i, member);
    take(c, &R);
    msg = json(R.body);
    assert_int_equal(error_code(msg), -32603);
    assert_non_null(strstr(error_message(msg), "1100"));
    assert_non_null(strstr(error_message(msg), "1024"));
    cJSON_Delete(msg);

    /* malformed: text and blob both */
    c = send_req("POST", "/mcp", agg, "application/json", params);
    i = wait_down(i + 1, "resources/read");
    device_answers(i, "\"result\":{\"contents\":[{\"uri\":\"device://status\","
                      "\"text\":\"a\",\"blob\":\"YQ==\"}]}");
    take(c, &R);
    msg = json(R.body);
    assert_int_equal(error_code(msg), -32603);
    assert_string_equal(error_message(msg),
                        "device sent invalid resource contents");
    cJSON_Delete(msg);

    /* subscribe: the device gets its own uri; updates come renamed */
    st = stream_open("/mcp", agg);
    snprintf(params, sizeof(params),
             "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"resources/subscribe\","
             "\"params\":{\"uri\":\"%s\"}}",
             uri);
    c = send_req("POST", "/mcp", agg, "application/json", params);
    i = wait_down(i + 1, "resources/subscribe");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                            params_of(i), "uri")),
                        "device://status");
    device_answers(i, "\"result\":{}");
    take(c, &R);
    assert_non_null(strstr(R.body, "\"id\":4,\"result\":{}"));
    device_says(DEV, "{\"jsonrpc\":\"2.0\",\"method\":"
                     "\"notifications/resources/updated\",\"params\":{\"uri\":"
                     "\"device://status\"}}");
    snprintf(want, sizeof(want),
             "\"method\":\"notifications/resources/updated\",\"params\":"
             "{\"uri\":\"%s\"}",
             uri);
    stream_wait(st, want, 1);
    conn_close(st);
}

/*
 * A client that leaves before the device confirmed its subscription: the
 * session still holds it (updates reach its stream), and nothing of the
 * waiting request is left behind (the sanitizer build checks the memory
 * at exit).
 */
static void test_subscribe_client_gone(void **state)
{
    char sid[64], want[128];
    struct hc_client *c, *st;
    unsigned i;

    (void)state;
    device_online(DEV, GW_MCP_CAPS_ALL);
    cJSON_Delete(initialize(DEV_EP, INIT_BODY("{}"), sid));
    st = stream_open(DEV_EP, sid);
    c = send_req("POST", DEV_EP, sid, "application/json",
                 "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":"
                 "\"resources/subscribe\",\"params\":{\"uri\":"
                 "\"device://status\"}}");
    i = wait_down(0, "resources/subscribe");
    conn_close(c); /* gone before the answer */
    device_answers(i, "\"result\":{}");
    device_says(DEV, "{\"jsonrpc\":\"2.0\",\"method\":"
                     "\"notifications/resources/updated\",\"params\":{\"uri\":"
                     "\"device://status\"}}");
    snprintf(want, sizeof(want), "\"uri\":\"device://status\"");
    stream_wait(st, want, 1);
    conn_close(st);
}

/*
 * Prompts and completion on /mcp go to the device under its own names;
 * logging/setLevel on /mcp reaches the device; a device log message comes
 * to the session's stream with the logger named after the device.
 */
static void test_prompts_completion_logging(void **state)
{
    char agg[64], params[512], want[256];
    struct hc_client *c, *st;
    unsigned i;

    (void)state;
    device_online(DEV, GW_MCP_CAPS_ALL);
    cJSON_Delete(initialize("/mcp", INIT_BODY("{}"), agg));
    snprintf(params, sizeof(params),
             "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"prompts/get\","
             "\"params\":{\"name\":\"%s.greeting\",\"arguments\":{\"name\":"
             "\"bob\"}}}",
             T.label);
    c = send_req("POST", "/mcp", agg, "application/json", params);
    i = wait_down(0, "prompts/get");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                            params_of(i), "name")),
                        "greeting");
    device_answers(i, "\"result\":{\"messages\":[]}");
    take(c, &R);
    assert_non_null(strstr(R.body, "\"id\":3,\"result\":{\"messages\":[]}"));

    snprintf(params, sizeof(params),
             "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"completion/complete\","
             "\"params\":{\"ref\":{\"type\":\"ref/resource\",\"uri\":"
             "\"hybridgw://%s/device://sensor/{name}\"},\"argument\":"
             "{\"name\":\"name\",\"value\":\"t\"}}}",
             T.label);
    c = send_req("POST", "/mcp", agg, "application/json", params);
    i = wait_down(i + 1, "completion/complete");
    assert_string_equal(
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(params_of(i), "ref"), "uri")),
        "device://sensor/{name}");
    device_answers(i, "\"result\":{\"completion\":{\"values\":[\"temp\","
                      "\"tilt\"]}}");
    take(c, &R);
    assert_non_null(strstr(R.body, "\"values\":[\"temp\",\"tilt\"]"));

    st = stream_open("/mcp", agg);
    c = send_req(
        "POST", "/mcp", agg, "application/json",
        "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"logging/setLevel\","
        "\"params\":{\"level\":\"info\"}}");
    i = wait_down(i + 1, "logging/setLevel");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                            params_of(i), "level")),
                        "info");
    device_answers(i, "\"result\":{}");
    take(c, &R);
    assert_non_null(strstr(R.body, "\"id\":5,\"result\":{}"));
    device_says(DEV,
                "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
                "\"params\":{\"level\":\"info\",\"logger\":\"sim\","
                "\"data\":\"hello\"}}");
    snprintf(want, sizeof(want), "\"logger\":\"%s.sim\"", T.label);
    stream_wait(st, want, 1);
    conn_close(st);
}

/*
 * Tasks on /mcp: a task-augmented tools/call gets the device's task id
 * renamed <label>.<id>; tasks/get with that name reaches the device with
 * its own id; the task's status notifications come renamed on the
 * session's stream. Cancellation: a client's notifications/cancelled ends
 * a waiting tasks/result (no response: its POST gets 202) and the device
 * hears of it.
 */
static void test_tasks_and_cancel(void **state)
{
    char agg[64], other[64], params[512], want[256];
    struct hc_client *c, *st;
    unsigned i, j;

    (void)state;
    device_online(DEV, GW_MCP_CAPS_ALL);
    cJSON_Delete(initialize("/mcp", INIT_BODY("{}"), agg));
    st = stream_open("/mcp", agg);
    snprintf(params, sizeof(params),
             "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\","
             "\"params\":{\"name\":\"%s.self.sim.job\",\"arguments\":"
             "{\"ms\":100},\"task\":{\"ttl\":60000}}}",
             T.label);
    c = send_req("POST", "/mcp", agg, "application/json", params);
    i = wait_down(0, "tools/call");
    assert_non_null(cJSON_GetObjectItemCaseSensitive(params_of(i), "task"));
    device_answers(i, "\"result\":{\"task\":{\"taskId\":\"job-1\","
                      "\"status\":\"working\",\"createdAt\":\"2026-11-26T00:00:"
                      "00Z\",\"ttl\":60000,\"pollInterval\":100}}");
    take(c, &R);
    snprintf(want, sizeof(want), "\"taskId\":\"%s.job-1\"", T.label);
    assert_non_null(strstr(R.body, want));
    device_says(DEV, "{\"jsonrpc\":\"2.0\",\"method\":"
                     "\"notifications/tasks/status\",\"params\":{\"taskId\":"
                     "\"job-1\",\"status\":\"completed\"}}");
    stream_wait(st, want, 1);

    snprintf(params, sizeof(params),
             "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tasks/get\","
             "\"params\":{\"taskId\":\"%s.job-1\"}}",
             T.label);
    c = send_req("POST", "/mcp", agg, "application/json", params);
    i = wait_down(i + 1, "tasks/get");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                            params_of(i), "taskId")),
                        "job-1");
    device_answers(i, "\"result\":{\"taskId\":\"job-1\",\"status\":"
                      "\"completed\"}");
    take(c, &R);
    assert_non_null(strstr(R.body, want));

    /* Another session: the task is not its own, so it is unknown there,
     * and nothing goes to the device. */
    cJSON_Delete(initialize("/mcp", INIT_BODY("{}"), other));
    for (int k = 0; k < 3; k++) {
        static const char *const methods[] = {"tasks/get", "tasks/result",
                                              "tasks/cancel"};
        snprintf(params, sizeof(params),
                 "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"%s\","
                 "\"params\":{\"taskId\":\"%s.job-1\"}}",
                 methods[k], T.label);
        post("/mcp", other, params, &R);
        assert_non_null(strstr(R.body, "\"code\":-32602"));
        assert_non_null(strstr(R.body, "Unknown task"));
    }

    /* cancelled by the client while it waits */
    snprintf(params, sizeof(params),
             "{\"jsonrpc\":\"2.0\",\"id\":\"r5\",\"method\":\"tasks/result\","
             "\"params\":{\"taskId\":\"%s.job-1\"}}",
             T.label);
    c = send_req("POST", "/mcp", agg, "application/json", params);
    i = wait_down(i + 1, "tasks/result");
    post("/mcp", agg,
         "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
         "\"params\":{\"requestId\":\"r5\"}}",
         &R);
    assert_int_equal(R.status, 202);
    /* MCP: no response to a cancelled request; its POST ends with 202. */
    take(c, &R);
    assert_int_equal(R.status, 202);
    assert_int_equal(strlen(R.body), 0);
    j = wait_down(i + 1, "notifications/cancelled");
    assert_int_equal(
        (unsigned)cJSON_GetObjectItemCaseSensitive(params_of(j), "requestId")
            ->valuedouble,
        down_id(i));
    conn_close(st);
}

/*
 * Progress: a request with a progress token from a POST that takes event
 * streams is answered as one: the device's progress under the client's
 * token, then the response, then the end. Without event streams in Accept
 * the progress goes to the session's GET stream.
 */
static void test_progress(void **state)
{
    char sid[64];
    struct hc_client *c, *st;
    unsigned i;
    const cJSON *tok;
    char prog[256];

    (void)state;
    device_online(DEV, GW_MCP_CAPS_ALL);
    cJSON_Delete(initialize(DEV_EP, INIT_BODY("{}"), sid));
    c = send_req("POST", DEV_EP, sid, "application/json, text/event-stream",
                 "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\","
                 "\"params\":{\"name\":\"self.a\",\"arguments\":{},"
                 "\"_meta\":{\"progressToken\":\"p-1\"}}}");
    i = wait_down(0, "tools/call");
    tok = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(params_of(i), "_meta"),
        "progressToken");
    assert_true(cJSON_IsNumber(tok)); /* the link's own token */
    for (int k = 1; k <= 2; k++) {
        device_says(
            DEV,
            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
            "\"params\":{\"progressToken\":%u,\"progress\":%d,"
            "\"total\":2}}",
            (unsigned)tok->valuedouble, k);
    }
    device_answers(i, "\"result\":{\"content\":[{\"type\":\"text\",\"text\":"
                      "\"counted\"}]}");
    take(c, &R);
    assert_int_equal(R.status, 200);
    assert_non_null(strstr(R.head, "text/event-stream"));
    const char *p1 = strstr(R.body, "\"progressToken\":\"p-1\",\"progress\":1");
    const char *p2 = strstr(R.body, "\"progressToken\":\"p-1\",\"progress\":2");
    const char *res = strstr(R.body, "\"id\":3,\"result\"");
    assert_non_null(p1);
    assert_non_null(p2);
    assert_non_null(res);
    assert_true(p1 < p2 && p2 < res);

    /* JSON only: the progress takes the GET stream */
    st = stream_open(DEV_EP, sid);
    c = send_req("POST", DEV_EP, sid, "application/json",
                 "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\","
                 "\"params\":{\"name\":\"self.a\",\"arguments\":{},"
                 "\"_meta\":{\"progressToken\":7}}}");
    i = wait_down(i + 1, "tools/call");
    tok = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(params_of(i), "_meta"),
        "progressToken");
    device_says(DEV,
                "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
                "\"params\":{\"progressToken\":%u,\"progress\":1}}",
                (unsigned)tok->valuedouble);
    snprintf(prog, sizeof(prog), "\"progressToken\":7,\"progress\":1");
    stream_wait(st, prog, 1);
    device_answers(i, "\"result\":{\"content\":[]}");
    take(c, &R);
    assert_non_null(strstr(R.head, "application/json"));
    assert_non_null(strstr(R.body, "\"id\":4,\"result\""));

    /* the session ends while an event-stream answer waits: it gets the
     * gateway's -32004, the stream ends, the device is told */
    c = send_req("POST", DEV_EP, sid, "application/json, text/event-stream",
                 "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\","
                 "\"params\":{\"name\":\"self.a\",\"arguments\":{},"
                 "\"_meta\":{\"progressToken\":8}}}");
    i = wait_down(i + 1, "tools/call");
    take(send_req("DELETE", DEV_EP, sid, "application/json", NULL), &R);
    assert_int_equal(R.status, 200);
    take(c, &R);
    assert_non_null(strstr(R.head, "text/event-stream"));
    assert_non_null(strstr(R.body, "\"id\":5,\"error\":{\"code\":-32004"));
    unsigned j = wait_down(i + 1, "notifications/cancelled");
    assert_int_equal(
        (unsigned)cJSON_GetObjectItemCaseSensitive(params_of(j), "requestId")
            ->valuedouble,
        down_id(i));
    conn_close(st);
}

/* The device's own requests: the first of each step is the one asserted. */
static unsigned device_asks(unsigned from, unsigned id, const char *method)
{
    device_says(DEV,
                "{\"jsonrpc\":\"2.0\",\"id\":%u,\"method\":\"%s\",\"params\":"
                "{\"messages\":[],\"maxTokens\":8}}",
                id, method);
    return wait_down(from, NULL);
}

static const cJSON *answer_error(unsigned i, unsigned id)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(payload_of(i), "error");

    assert_int_equal(down_id(i), id);
    assert_true(cJSON_IsObject(e));
    return e;
}

/*
 * Requests of a device to its client: to the newest capable session with
 * a GET stream, under "gw-<n>"; its POSTed response goes back under the
 * device's id. No capable client: -32006 at once. More than
 * mcp.max_device_requests: -32003. No answer in time: -32001 to the
 * device, notifications/cancelled to the client (and a late response is
 * dropped). The device withdrawing one: notifications/cancelled to the
 * client. The session ending: -32006 to the device.
 */
static void test_device_requests(void **state)
{
    char old[64], sid[64], plain[64], body[256];
    struct hc_client *st_old, *st, *st_plain;
    const cJSON *e;
    unsigned i;

    (void)state;
    device_online(DEV, GW_MCP_CAPS_ALL);
    /* no session at all */
    i = device_asks(0, 11, "sampling/createMessage");
    e = answer_error(i, 11);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(e, "code")->valueint,
                     -32006);
    assert_string_equal(
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "message")),
        "no MCP client of this device declared sampling");

    cJSON_Delete(initialize(DEV_EP, INIT_BODY("{\"sampling\":{}}"), old));
    cJSON_Delete(initialize(DEV_EP, INIT_BODY("{\"sampling\":{}}"), sid));
    cJSON_Delete(initialize(DEV_EP, INIT_BODY("{\"roots\":{}}"), plain));
    /* capable but without a stream: still none */
    i = device_asks(i + 1, 12, "sampling/createMessage");
    assert_int_equal(
        cJSON_GetObjectItemCaseSensitive(answer_error(i, 12), "code")->valueint,
        -32006);
    st_old = stream_open(DEV_EP, old);
    st = stream_open(DEV_EP, sid);
    st_plain = stream_open(DEV_EP, plain);
    /* elicitation: nobody declared it */
    i = device_asks(i + 1, 13, "elicitation/create");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                            answer_error(i, 13), "message")),
                        "no MCP client of this device declared elicitation");

    /* to the newest sampling session, answered */
    device_says(DEV,
                "{\"jsonrpc\":\"2.0\",\"id\":14,\"method\":"
                "\"sampling/createMessage\",\"params\":{\"maxTokens\":8}}");
    stream_wait(st, "\"id\":\"gw-", 1);
    assert_int_equal(stream_count(st_old, "sampling/createMessage"), 0);
    assert_int_equal(stream_count(st_plain, "sampling/createMessage"), 0);
    const char *at = strstr(stream_text(st), "\"id\":\"gw-");
    char gw_id[24];
    assert_int_equal(sscanf(at, "\"id\":\"%23[^\"]", gw_id), 1);
    snprintf(body, sizeof(body),
             "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"result\":{\"role\":"
             "\"assistant\",\"content\":{\"type\":\"text\",\"text\":\"hi\"}}}",
             gw_id);
    post(DEV_EP, sid, body, &R);
    assert_int_equal(R.status, 202);
    i = wait_down(i + 1, NULL);
    assert_int_equal(down_id(i), 14);
    assert_non_null(strstr(T.msgs[i].text, "\"text\":\"hi\""));

    /* the bound: two wait, the third is refused at once */
    device_says(DEV, "{\"jsonrpc\":\"2.0\",\"id\":15,\"method\":"
                     "\"sampling/createMessage\",\"params\":{}}");
    device_says(DEV, "{\"jsonrpc\":\"2.0\",\"id\":16,\"method\":"
                     "\"sampling/createMessage\",\"params\":{}}");
    i = device_asks(i + 1, 17, "sampling/createMessage");
    e = answer_error(i, 17);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(e, "code")->valueint,
                     -32003);
    /* the device withdraws 15: the client is told */
    device_says(DEV, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/"
                     "cancelled\",\"params\":{\"requestId\":15,\"reason\":"
                     "\"changed my mind\"}}");
    stream_wait(st, "\"reason\":\"changed my mind\"", 1);
    /* 16 times out: -32001 to the device, cancelled to the client */
    i = wait_down(i + 1, NULL);
    e = answer_error(i, 16);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(e, "code")->valueint,
                     -32001);
    stream_wait(st, "\"reason\":\"timed out\"", 1);
    /* a late answer to it is dropped: the next thing the device gets is
     * the answer to 18 */
    at = strstr(stream_text(st), "\"reason\":\"timed out\"");
    assert_non_null(at);
    while (at > R.body && strncmp(at, "\"requestId\":\"", 13) != 0) {
        at--;
    }
    assert_int_equal(sscanf(at, "\"requestId\":\"%23[^\"]", gw_id), 1);
    snprintf(body, sizeof(body),
             "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"result\":{}}", gw_id);
    post(DEV_EP, sid, body, &R);
    assert_int_equal(R.status, 202);
    /* 18 waits when the session ends: -32006 to the device */
    device_says(DEV, "{\"jsonrpc\":\"2.0\",\"id\":18,\"method\":"
                     "\"sampling/createMessage\",\"params\":{}}");
    stream_wait(st, "sampling/createMessage", 4);
    take(send_req("DELETE", DEV_EP, sid, "application/json", NULL), &R);
    assert_int_equal(R.status, 200);
    i = wait_down(i + 1, NULL);
    e = answer_error(i, 18);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(e, "code")->valueint,
                     -32006);
    assert_string_equal(
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "message")),
        "the MCP client went away");
    /* now the older capable session takes them */
    device_says(DEV, "{\"jsonrpc\":\"2.0\",\"id\":19,\"method\":"
                     "\"sampling/createMessage\",\"params\":{}}");
    stream_wait(st_old, "sampling/createMessage", 1);
    /* the device goes offline meanwhile: the client is told */
    struct gw_presence gone = {.online = false};
    assert_true(gw_device_on_presence(&T.inst->devices, DEV, &gone) >= 0);
    stream_wait(st_old, "\"reason\":\"the device went offline\"", 1);
    assert_int_equal(metric_value("hybridgw_mcp_server_device_requests_total{"
                                  "outcome=\"answered\"}"),
                     1);
    assert_int_equal(metric_value("hybridgw_mcp_server_device_requests_total{"
                                  "outcome=\"timeout\"}"),
                     1);
    conn_close(st_old);
    conn_close(st_plain);
    (void)st;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resources, setup, teardown),
        cmocka_unit_test_setup_teardown(test_subscribe_client_gone, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_prompts_completion_logging, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_tasks_and_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_progress, setup, teardown),
        cmocka_unit_test_setup_teardown(test_device_requests, setup, teardown),
    };

    gw_log_set_level(GW_LOG_WARN);
    gw_fixture_filter();
    return cmocka_run_group_tests(tests, broker_start, broker_stop);
}
