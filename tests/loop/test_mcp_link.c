/*
 * Device MCP links (gateway/device/mcp_link.c) through the device table: what a
 * device receives over a real mosquitto, answers matched by id, and every
 * way a request ends (timeout, offline, busy, refused, shutdown); progress
 * tokens, the device's own requests, its peers' subscriptions, levels and
 * tasks (gateway/device/mcp_peers.c), and the catalog discovery reads.
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

#include "codec/envelope.h"
#include "codec/jsonrpc.h"
#include "codec/presence.h"
#include "common/mqtt_link.h"
#include "config/config.h"
#include "fixture.h"
#include "fixture_parts.h"
#include "gateway/core/config_hold.h"
#include "gateway/device/device_table.h"
#include "gateway/device/mcp_link.h"
#include "gateway/device/mcp_peers.h"
#include "gateway/device/mcp_relay.h"
#include "gateway/device/publish.h"

#define DEV  "GID_test@@@a0_85_e3_f4_49_34@@@0f8e"
#define DEV2 "GID_test@@@a0_85_e3_f4_49_35@@@0f8e"
#define DEV3 "GID_test@@@a0_85_e3_f4_49_36@@@0f8e"

/* The device side subscribes to every down topic; its own message here
 * tells it that its subscription is in place at the broker. */
#define DOWN_TOPICS "devices/+/down"
#define PROBE_TOPIC "devices/probe/down"

/* The broker every test of this program shares, started once. */
static struct gw_fixture_broker B;

/* One request's end as its origin saw it. */
struct reply {
    unsigned calls;
    unsigned order; /* among all replies of the test, from 1 */
    enum gw_mcp_outcome outcome;
    int code;
    char message[128];
    char result[256];
    uint64_t at_ms;
};

/* One message the device received. */
struct msg {
    char topic[256];
    char *text;
    cJSON *root;
};

#define MAX_MSGS 64

static struct {
    struct gw_fixture fx;
    struct gw_config_live config;
    bool config_open;
    struct gw_publisher pub;
    struct gw_device_table t;
    bool table_made;
    bool started;
    unsigned table_closed;
    bool in_request; /* inside gw_mcp_request or gw_mcp_refuse */
    unsigned replies;
    struct gw_mqtt_link *gw;  /* the gateway's publisher */
    struct gw_mqtt_link *dev; /* the devices' side */
    bool gw_up;
    bool probe_seen;
    unsigned links_closed;
    struct msg msgs[MAX_MSGS];
    unsigned n_msgs;
    /* Replies live here, not on a test's stack: a request the test
     * leaves open ends in the teardown, after the test returned. */
    struct reply pool[16];
    unsigned n_pool;
} T;

static int session_a;
#define SESSION_A ((struct gw_session *)(void *)&session_a)

/* ---- the broker ------------------------------------------------------- */

static int broker_start(void **state)
{
    (void)state;
    return gw_fixture_broker_start(&B, "gwmcp");
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

static void on_gw_state(struct gw_mqtt_link *link, bool up, void *arg)
{
    (void)link;
    (void)arg;
    T.gw_up = up;
}

static void on_device_state(struct gw_mqtt_link *link, bool up, void *arg)
{
    (void)arg;
    if (up) {
        /* After the SUBSCRIBE on this same connection: once it comes
         * back, what anyone publishes to a down topic reaches us. */
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

static void links_open(void)
{
    const char *topics[] = {DOWN_TOPICS};
    struct gw_mqtt_link_options gw = {
        .host = "127.0.0.1",
        .port = B.port,
        .client_id = "hybridgw-test-gateway",
        .keepalive_s = 60,
        .on_state = on_gw_state,
    };
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

    assert_int_equal(gw_mqtt_link_init(&T.fx.loop, &gw, &T.gw), 0);
    assert_int_equal(gw_mqtt_link_init(&T.fx.loop, &dev, &T.dev), 0);
    /* The links retry until the broker listens. */
    GW_FIXTURE_RUN_UNTIL(&T.fx, (T.gw_up && T.probe_seen) || broker_exited());
    assert_false(B.exited);
    T.pub.link = T.gw;
}

static void on_link_closed(struct gw_mqtt_link *link, void *arg)
{
    (void)link;
    (void)arg;
    T.links_closed++;
}

static void links_close(void)
{
    unsigned n = 0;

    T.pub.link = NULL;
    if (T.gw != NULL) {
        gw_mqtt_link_close(T.gw, on_link_closed, NULL);
        n++;
    }
    if (T.dev != NULL) {
        gw_mqtt_link_close(T.dev, on_link_closed, NULL);
        n++;
    }
    GW_FIXTURE_RUN_UNTIL(&T.fx, T.links_closed == n);
    T.gw = T.dev = NULL;
}

static void wait_msgs(unsigned n)
{
    GW_FIXTURE_RUN_UNTIL(&T.fx, T.n_msgs >= n);
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
    const char *m = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(payload_of(i), "method"));

    assert_non_null(m);
    return m;
}

/* The numeric id of request i: a JSON integer in 1..GW_RPC_ID_MAX. */
static uint32_t id_of(unsigned i)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(payload_of(i), "id");

    assert_true(cJSON_IsNumber(id));
    assert_true(id->valuedouble >= 1 && id->valuedouble <= GW_RPC_ID_MAX);
    assert_true(id->valuedouble == (double)(uint32_t)id->valuedouble);
    return (uint32_t)id->valuedouble;
}

static const char *tool_name_of(unsigned i)
{
    const cJSON *params =
        cJSON_GetObjectItemCaseSensitive(payload_of(i), "params");

    return cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(params, "name"));
}

static void assert_topic(unsigned i, const char *client_id)
{
    char topic[256];

    snprintf(topic, sizeof(topic), "devices/%s/down", client_id);
    assert_string_equal(T.msgs[i].topic, topic);
}

/* The exact text of a notifications/cancelled the gateway sends. */
static void assert_cancelled(unsigned i, const char *sid, uint32_t id,
                             const char *reason)
{
    char want[512];

    snprintf(want, sizeof(want),
             "{\"session_id\":\"%s\",\"type\":\"mcp\",\"payload\":{"
             "\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
             "\"params\":{\"requestId\":%u,\"reason\":\"%s\"}}}",
             sid, id, reason);
    assert_string_equal(T.msgs[i].text, want);
}

static unsigned count_cancelled(uint32_t id)
{
    unsigned n = 0;

    for (unsigned i = 0; i < T.n_msgs; i++) {
        const cJSON *params;
        if (strcmp(method_of(i), "notifications/cancelled") != 0) {
            continue;
        }
        params = cJSON_GetObjectItemCaseSensitive(payload_of(i), "params");
        if (cJSON_GetObjectItemCaseSensitive(params, "requestId")
                ->valuedouble == (double)id) {
            n++;
        }
    }
    return n;
}

/* ---- the table -------------------------------------------------------- */

static void start(const char *mcp_json, bool broker)
{
    gw_fixture_config_mcp(&T.config, mcp_json);
    T.config_open = true;
    /* Without a broker link, nothing reaches a device: requests wait for
     * their timers, as with a broker that is away. */
    T.pub = (struct gw_publisher){.link = NULL, .config = &T.config};
    if (broker) {
        links_open();
    }
    gw_device_table_init(&T.t, &T.fx.loop, &T.config, &T.pub);
    T.table_made = true;
    T.started = true;
}

static void on_table_closed(struct gw_device_table *t, void *arg)
{
    (void)t;
    (void)arg;
    T.table_closed++;
}

static void table_close(void)
{
    T.started = false;
    gw_device_table_close(&T.t, on_table_closed, NULL);
}

static int setup(void **state)
{
    (void)state;
    memset(&T, 0, sizeof(T));
    gw_fixture_loop_init(&T.fx);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (T.started) {
        table_close();
    }
    if (T.table_made) {
        GW_FIXTURE_RUN_UNTIL(&T.fx, T.table_closed > 0);
        assert_int_equal(T.table_closed, 1);
    }
    links_close();
    for (unsigned i = 0; i < T.n_msgs; i++) {
        free(T.msgs[i].text);
        cJSON_Delete(T.msgs[i].root);
    }
    if (T.config_open) {
        gw_config_live_close(&T.config);
    }
    gw_fixture_loop_close(&T.fx); /* uv_loop_close() == 0 */
    return 0;
}

static int online(const char *client_id)
{
    struct gw_presence p = {.online = true};

    snprintf(p.address, sizeof(p.address), "10.0.0.1");
    return gw_device_on_presence(&T.t, client_id, &p);
}

static int offline(const char *client_id)
{
    struct gw_presence p = {.online = false};

    return gw_device_on_presence(&T.t, client_id, &p);
}

static struct gw_device *device(const char *client_id)
{
    struct gw_device *d = gw_device_find(&T.t, client_id);

    assert_non_null(d);
    return d;
}

/* ---- requests --------------------------------------------------------- */

static struct reply *reply_new(void)
{
    assert_true(T.n_pool < sizeof(T.pool) / sizeof(T.pool[0]));
    return &T.pool[T.n_pool++];
}

static void on_reply(void *arg, const struct gw_mcp_reply *reply)
{
    struct reply *r = arg;
    char *text;

    /* The promise every caller relies on: never from inside the call. */
    assert_false(T.in_request);
    r->calls++;
    r->order = ++T.replies;
    r->outcome = reply->outcome;
    r->at_ms = uv_now(&T.fx.loop);
    if (reply->outcome == GW_MCP_OK) {
        assert_null(reply->error);
        text = cJSON_PrintUnformatted(reply->result);
        assert_non_null(text);
        snprintf(r->result, sizeof(r->result), "%s", text);
        cJSON_free(text);
        return;
    }
    assert_null(reply->result);
    assert_true(cJSON_IsObject(reply->error));
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(reply->error, "code");
    const char *message = cJSON_GetStringValue(
        cJSON_GetObjectItemCaseSensitive(reply->error, "message"));
    assert_true(cJSON_IsNumber(code));
    assert_non_null(message);
    r->code = code->valueint;
    snprintf(r->message, sizeof(r->message), "%s", message);
}

static void request(struct gw_mcp_link *link, const char *method,
                    const char *params_json, uint32_t timeout_ms,
                    struct reply *r, uint64_t *handle)
{
    cJSON *params = NULL;

    if (params_json != NULL) {
        params = cJSON_Parse(params_json);
        assert_non_null(params);
    }
    T.in_request = true;
    gw_mcp_request(&T.t.links, link, method, params, timeout_ms,
                   GW_MCP_FROM_BACKEND, on_reply, r, handle);
    T.in_request = false;
    assert_int_equal(r->calls, 0);
}

static void refuse(int code, const char *message, struct reply *r,
                   uint64_t *handle)
{
    T.in_request = true;
    gw_mcp_refuse(&T.t.links, GW_MCP_FROM_CLIENT, code, message, on_reply, r,
                  handle);
    T.in_request = false;
    assert_int_equal(r->calls, 0);
}

static void assert_failed(const struct reply *r, enum gw_mcp_outcome outcome,
                          int code, const char *message)
{
    assert_int_equal(r->calls, 1);
    assert_int_equal(r->outcome, outcome);
    assert_int_equal(r->code, code);
    assert_string_equal(r->message, message);
}

static bool answer(const char *client_id, uint32_t id, const char *member)
{
    char payload[768];

    snprintf(payload, sizeof(payload), "{\"jsonrpc\":\"2.0\",\"id\":%u,%s}", id,
             member);
    return gw_fixture_mcp_in(&T.t, client_id, payload);
}

#define RESULT_EMPTY "\"result\":{}"

/* ---- tests ------------------------------------------------------------ */

/* What a device receives, and answers matched by id whatever their
 * order; answers nobody waits for are dropped and counted. */
static void test_ids_envelope_and_matching(void **state)
{
    struct reply *r1 = reply_new(), *r2 = reply_new(), *extra = reply_new();
    uint64_t h1 = 0, h2 = 0;
    struct gw_device *d, *same = NULL;
    char want[512];

    (void)state;
    start("{\"discover\":false,\"call_timeout_ms\":600000}", true);
    assert_int_equal(online(DEV), GW_PRESENCE_ARRIVED);
    d = device(DEV);
    assert_int_equal(
        gw_device_attach_session(&T.t, DEV, SESSION_A, "sid-1", &same), 0);
    assert_ptr_equal(same, d);
    request(&d->link, "tools/list", "{\"cursor\":\"c1\"}", 0, r1, &h1);
    request(&d->link, "ping", NULL, 0, r2, &h2);
    assert_true(h1 != 0 && h2 != 0 && h1 != h2);
    assert_int_equal(d->link.n_pending, 2);

    wait_msgs(2);
    assert_topic(0, DEV);
    assert_topic(1, DEV);
    uint32_t id1 = id_of(0), id2 = id_of(1);
    assert_true(id1 != id2);
    /* Byte for byte: the envelope with the session's id, a numeric id. */
    snprintf(want, sizeof(want),
             "{\"session_id\":\"sid-1\",\"type\":\"mcp\",\"payload\":{"
             "\"jsonrpc\":\"2.0\",\"id\":%u,\"method\":\"tools/list\","
             "\"params\":{\"cursor\":\"c1\"}}}",
             id1);
    assert_string_equal(T.msgs[0].text, want);
    snprintf(want, sizeof(want),
             "{\"session_id\":\"sid-1\",\"type\":\"mcp\",\"payload\":{"
             "\"jsonrpc\":\"2.0\",\"id\":%u,\"method\":\"ping\"}}",
             id2);
    assert_string_equal(T.msgs[1].text, want);

    /* Out of order: the second answered first. */
    assert_true(answer(DEV, id2, "\"result\":{\"n\":2}"));
    assert_int_equal(r2->calls, 1);
    assert_int_equal(r2->outcome, GW_MCP_OK);
    assert_string_equal(r2->result, "{\"n\":2}");
    assert_int_equal(r1->calls, 0);
    assert_int_equal(d->link.n_pending, 1);
    /* Firmware omits the code: the error is made whole. */
    assert_true(answer(DEV, id1, "\"error\":{\"message\":\"nope\"}"));
    assert_failed(r1, GW_MCP_ERROR, GW_RPC_INTERNAL_ERROR, "nope");
    assert_int_equal(d->link.n_pending, 0);
    assert_int_equal(T.t.links.stats.requests[GW_MCP_FROM_BACKEND][GW_MCP_OK],
                     1);
    assert_int_equal(
        T.t.links.stats.requests[GW_MCP_FROM_BACKEND][GW_MCP_ERROR], 1);
    assert_int_equal(T.t.links.stats.latency_count, 2);
    assert_int_equal(T.t.links.stats.unsolicited, 0);

    /* Answers nobody waits for: a repeat, another id, a string id, and
     * an answer from a device that is not online. */
    assert_true(answer(DEV, id1, RESULT_EMPTY));
    assert_true(answer(DEV, id2 + 1, RESULT_EMPTY));
    assert_true(gw_fixture_mcp_in(
        &T.t, DEV, "{\"jsonrpc\":\"2.0\",\"id\":\"7\",\"result\":{}}"));
    assert_true(answer(DEV2, id1, RESULT_EMPTY));
    assert_int_equal(T.t.links.stats.unsolicited, 4);
    assert_int_equal(r1->calls, 1);
    assert_int_equal(r2->calls, 1);

    /* The next id differs again, and without a session the envelope
     * carries an empty session id. */
    gw_device_detach_session(d, SESSION_A, false);
    assert_ptr_equal(gw_device_find(&T.t, DEV), d); /* presence holds it */
    request(&d->link, "ping", NULL, 0, extra, NULL);
    wait_msgs(3);
    uint32_t id3 = id_of(2);
    assert_true(id3 != id1 && id3 != id2);
    snprintf(want, sizeof(want),
             "{\"session_id\":\"\",\"type\":\"mcp\",\"payload\":{"
             "\"jsonrpc\":\"2.0\",\"id\":%u,\"method\":\"ping\"}}",
             id3);
    assert_string_equal(T.msgs[2].text, want);
    assert_true(answer(DEV, id3, RESULT_EMPTY));
    assert_int_equal(extra->outcome, GW_MCP_OK);
}

/* The timer ends a request with -32001, and the device is told to stop. */
static void test_timeout(void **state)
{
    struct reply *ra = reply_new(), *rb = reply_new();
    struct gw_device *d;
    uint64_t t0;

    (void)state;
    start("{\"discover\":false,\"call_timeout_ms\":100}", true);
    assert_int_equal(online(DEV), GW_PRESENCE_ARRIVED);
    d = device(DEV);
    t0 = uv_now(&T.fx.loop);
    request(&d->link, "tools/list", NULL, 0, ra, NULL); /* the config's */
    request(&d->link, "ping", NULL, 600000, rb, NULL);  /* its own */
    wait_msgs(2);
    uint32_t ida = id_of(0), idb = id_of(1);

    GW_FIXTURE_RUN_UNTIL(&T.fx, ra->calls > 0);
    assert_failed(ra, GW_MCP_TIMEOUT, GW_RPC_TIMEOUT,
                  "the device did not answer in time");
    assert_true(ra->at_ms - t0 >= 100);
    assert_int_equal(rb->calls, 0);
    assert_int_equal(d->link.n_pending, 1);
    wait_msgs(3);
    assert_topic(2, DEV);
    assert_cancelled(2, "", ida, "timed out");

    /* Too late: dropped and counted, the origin is not told twice. */
    assert_true(answer(DEV, ida, RESULT_EMPTY));
    assert_int_equal(T.t.links.stats.unsolicited, 1);
    assert_int_equal(ra->calls, 1);
    assert_true(answer(DEV, idb, RESULT_EMPTY));
    assert_int_equal(rb->outcome, GW_MCP_OK);
    assert_int_equal(
        T.t.links.stats.requests[GW_MCP_FROM_BACKEND][GW_MCP_TIMEOUT], 1);
    assert_int_equal(T.t.links.stats.latency_count, 1); /* answers only */
}

/* tools/call reaches the device one at a time, in order; other methods
 * do not wait, which makes them a fence for what was (not) sent. */
static void test_calls_one_at_a_time(void **state)
{
    struct reply *ra = reply_new(), *rb = reply_new(), *rc = reply_new(),
                 *rd = reply_new(), *f1 = reply_new(), *f2 = reply_new();
    struct gw_device *d;

    (void)state;
    start("{\"discover\":false,\"call_timeout_ms\":600000}", true);
    assert_int_equal(online(DEV), GW_PRESENCE_ARRIVED);
    d = device(DEV);
    request(&d->link, "tools/call", "{\"name\":\"a\",\"arguments\":{}}", 0, ra,
            NULL);
    request(&d->link, "tools/call", "{\"name\":\"b\",\"arguments\":{}}", 0, rb,
            NULL);
    request(&d->link, "ping", NULL, 0, f1, NULL);
    assert_int_equal(d->link.n_pending, 3);
    assert_non_null(d->link.call_in_flight);
    assert_int_equal(gw_list_count(&d->link.calls), 1);

    wait_msgs(2);
    assert_string_equal(method_of(0), "tools/call");
    assert_string_equal(tool_name_of(0), "a");
    assert_string_equal(method_of(1), "ping"); /* b is held back */
    uint32_t ida = id_of(0);
    assert_true(answer(DEV, id_of(1), RESULT_EMPTY));
    assert_int_equal(f1->outcome, GW_MCP_OK);
    /* Another answer is not the call's: b still waits. */
    request(&d->link, "ping", NULL, 0, f2, NULL);
    wait_msgs(3);
    assert_string_equal(method_of(2), "ping");
    assert_int_equal(gw_list_count(&d->link.calls), 1);

    assert_true(answer(DEV, ida, "\"result\":{\"content\":[]}"));
    assert_int_equal(ra->outcome, GW_MCP_OK);
    assert_int_equal(rb->calls, 0);
    wait_msgs(4);
    assert_string_equal(method_of(3), "tools/call");
    assert_string_equal(tool_name_of(3), "b");
    assert_true(gw_list_empty(&d->link.calls));
    assert_true(answer(DEV, id_of(3), RESULT_EMPTY));
    assert_true(answer(DEV, id_of(2), RESULT_EMPTY));
    assert_int_equal(rb->outcome, GW_MCP_OK);
    assert_true(ra->order < rb->order);
    assert_int_equal(f2->outcome, GW_MCP_OK);
    assert_null(d->link.call_in_flight);

    /* A call's timer also ends its turn: the device is told to stop it,
     * then gets the next one. */
    request(&d->link, "tools/call", "{\"name\":\"c\"}", 100, rc, NULL);
    request(&d->link, "tools/call", "{\"name\":\"d\"}", 0, rd, NULL);
    wait_msgs(5);
    assert_string_equal(tool_name_of(4), "c");
    uint32_t idc = id_of(4);
    GW_FIXTURE_RUN_UNTIL(&T.fx, rc->calls > 0);
    assert_int_equal(rc->outcome, GW_MCP_TIMEOUT);
    wait_msgs(7);
    assert_cancelled(5, "", idc, "timed out");
    assert_string_equal(tool_name_of(6), "d");
    assert_true(answer(DEV, id_of(6), RESULT_EMPTY));
    assert_int_equal(rd->outcome, GW_MCP_OK);
    assert_int_equal(T.n_msgs, 7);
}

/* An abandoned request never calls back, whatever ends it. */
static void test_abandon(void **state)
{
    struct reply *r1 = reply_new(), *ra = reply_new(), *rb = reply_new(),
                 *f = reply_new(), *r3 = reply_new(), *s = reply_new();
    uint64_t h1 = 0, hb = 0, h3 = 0;
    struct gw_device *d;

    (void)state;
    start("{\"discover\":false,\"call_timeout_ms\":600000}", true);
    assert_int_equal(online(DEV), GW_PRESENCE_ARRIVED);
    d = device(DEV);

    /* Sent: the device is told, and its answer is swallowed. */
    request(&d->link, "ping", NULL, 0, r1, &h1);
    wait_msgs(1);
    uint32_t id1 = id_of(0);
    gw_mcp_abandon(&T.t.links, h1);
    wait_msgs(2);
    assert_cancelled(1, "", id1, "the client went away");
    assert_int_equal(d->link.n_pending, 1); /* until the device answers */
    assert_true(answer(DEV, id1, RESULT_EMPTY));
    assert_int_equal(d->link.n_pending, 0);
    assert_int_equal(T.t.links.stats.unsolicited, 0);
    assert_int_equal(
        T.t.links.stats.requests[GW_MCP_FROM_BACKEND][GW_MCP_CANCELLED], 1);
    gw_mcp_abandon(&T.t.links, h1); /* ended: nothing */
    gw_mcp_abandon(&T.t.links, 0);
    gw_mcp_abandon(&T.t.links, h1 + 1000);

    /* Queued: it leaves at once and never goes out. */
    request(&d->link, "tools/call", "{\"name\":\"a\"}", 0, ra, NULL);
    request(&d->link, "tools/call", "{\"name\":\"b\"}", 0, rb, &hb);
    wait_msgs(3);
    assert_string_equal(tool_name_of(2), "a");
    gw_mcp_abandon(&T.t.links, hb);
    assert_int_equal(d->link.n_pending, 1);
    assert_true(gw_list_empty(&d->link.calls));
    assert_true(answer(DEV, id_of(2), RESULT_EMPTY));
    assert_int_equal(ra->outcome, GW_MCP_OK);
    request(&d->link, "ping", NULL, 0, f, NULL);
    wait_msgs(4);
    assert_string_equal(method_of(3), "ping"); /* no call b before it */
    assert_true(answer(DEV, id_of(3), RESULT_EMPTY));
    assert_int_equal(
        T.t.links.stats.requests[GW_MCP_FROM_BACKEND][GW_MCP_CANCELLED], 2);

    /* Its timer ends it silently: a later timer shows it has run. */
    request(&d->link, "ping", NULL, 100, r3, &h3);
    request(&d->link, "ping", NULL, 300, s, NULL);
    wait_msgs(6);
    uint32_t id3 = id_of(4), ids = id_of(5);
    gw_mcp_abandon(&T.t.links, h3);
    GW_FIXTURE_RUN_UNTIL(&T.fx, s->calls > 0);
    assert_int_equal(s->outcome, GW_MCP_TIMEOUT);
    assert_int_equal(d->link.n_pending, 0);
    /* The device is told to stop the abandoned one, before the later
     * timer's notice, which is the last message. */
    GW_FIXTURE_RUN_UNTIL(&T.fx, count_cancelled(ids) == 1);
    assert_cancelled(T.n_msgs - 1, "", ids, "timed out");
    assert_true(count_cancelled(id3) >= 1);
    assert_cancelled(6, "", id3, "the client went away");
    assert_int_equal(r1->calls + rb->calls + r3->calls, 0);
    assert_int_equal(
        T.t.links.stats.requests[GW_MCP_FROM_BACKEND][GW_MCP_CANCELLED], 3);

    /* A call the device has, abandoned: it gives up its turn at once (a
     * device honouring the cancel never answers), and an answer that
     * comes anyway is swallowed, not counted as unsolicited. */
    struct reply *rc = reply_new(), *rd = reply_new();
    uint64_t hc = 0;
    unsigned before = T.n_msgs;
    request(&d->link, "tools/call", "{\"name\":\"c\"}", 0, rc, &hc);
    request(&d->link, "tools/call", "{\"name\":\"d\"}", 0, rd, NULL);
    wait_msgs(before + 1);
    assert_string_equal(tool_name_of(before), "c");
    uint32_t idc = id_of(before);
    gw_mcp_abandon(&T.t.links, hc);
    wait_msgs(before + 3);
    assert_cancelled(before + 1, "", idc, "the client went away");
    assert_string_equal(tool_name_of(before + 2), "d");
    uint64_t unsolicited = T.t.links.stats.unsolicited;
    assert_true(answer(DEV, idc, RESULT_EMPTY));
    assert_int_equal(T.t.links.stats.unsolicited, unsolicited);
    assert_true(answer(DEV, id_of(before + 2), RESULT_EMPTY));
    assert_int_equal(rd->outcome, GW_MCP_OK);
    assert_int_equal(rc->calls, 0);
}

/* A device that goes offline ends its requests at once with -32002. */
static void test_offline_ends_requests(void **state)
{
    struct reply *ra = reply_new(), *rb = reply_new(), *rp = reply_new(),
                 *late = reply_new(), *none = reply_new();
    struct reply *rs = reply_new(), *rl = reply_new();
    struct gw_device *d, *d2 = NULL, *d3 = NULL;

    (void)state;
    start("{\"discover\":false,\"call_timeout_ms\":600000}", false);
    assert_int_equal(online(DEV), GW_PRESENCE_ARRIVED);
    d = device(DEV);
    request(&d->link, "tools/call", "{\"name\":\"a\"}", 0, ra, NULL);
    request(&d->link, "tools/call", "{\"name\":\"b\"}", 0, rb, NULL);
    request(&d->link, "ping", NULL, 0, rp, NULL);
    assert_int_equal(d->link.n_pending, 3);

    assert_int_equal(offline(DEV), GW_PRESENCE_LEFT);
    /* Before the call returned, not at the timeout ten minutes away. */
    assert_failed(ra, GW_MCP_OFFLINE, GW_RPC_DEVICE_OFFLINE,
                  "the device is offline");
    assert_failed(rb, GW_MCP_OFFLINE, GW_RPC_DEVICE_OFFLINE,
                  "the device is offline");
    assert_failed(rp, GW_MCP_OFFLINE, GW_RPC_DEVICE_OFFLINE,
                  "the device is offline");
    assert_true(ra->order < rb->order || rb->order < ra->order);
    assert_int_equal(d->link.n_pending, 0);
    assert_false(d->link.open);
    assert_null(d->link.call_in_flight);

    /* A caller still holding the record (until the loop turns) and one
     * with no record at all are both told offline, from the loop. */
    request(&d->link, "ping", NULL, 0, late, NULL);
    request(NULL, "ping", NULL, 0, none, NULL);
    GW_FIXTURE_RUN_UNTIL(&T.fx, late->calls > 0 && none->calls > 0);
    assert_failed(late, GW_MCP_OFFLINE, GW_RPC_DEVICE_OFFLINE,
                  "the device is offline");
    assert_failed(none, GW_MCP_OFFLINE, GW_RPC_DEVICE_OFFLINE,
                  "the device is offline");

    /* A device known only through its session: the session's end. */
    assert_int_equal(
        gw_device_attach_session(&T.t, DEV2, SESSION_A, "sid-2", &d2), 0);
    request(&d2->link, "ping", NULL, 0, rs, NULL);
    gw_device_detach_session(d2, SESSION_A, false);
    assert_failed(rs, GW_MCP_OFFLINE, GW_RPC_DEVICE_OFFLINE,
                  "the device is offline");

    /* Presence LEFT with a session attached: requests last until the
     * session lets go of the device. */
    assert_int_equal(online(DEV3), GW_PRESENCE_ARRIVED);
    assert_int_equal(
        gw_device_attach_session(&T.t, DEV3, SESSION_A, "sid-3", &d3), 0);
    request(&d3->link, "ping", NULL, 0, rl, NULL);
    assert_int_equal(offline(DEV3), GW_PRESENCE_LEFT);
    assert_int_equal(rl->calls, 0);
    assert_int_equal(d3->link.n_pending, 1);
    gw_device_detach_session(d3, SESSION_A, false);
    assert_failed(rl, GW_MCP_OFFLINE, GW_RPC_DEVICE_OFFLINE,
                  "the device is offline");
    assert_int_equal(
        T.t.links.stats.requests[GW_MCP_FROM_BACKEND][GW_MCP_OFFLINE], 7);
}

/* More than mcp.max_pending requests waiting on one device: -32003. */
static void test_max_pending(void **state)
{
    struct reply *r1 = reply_new(), *r2 = reply_new(), *r3 = reply_new(),
                 *r4 = reply_new(), *r5 = reply_new();
    struct gw_device *d, *d2;

    (void)state;
    start("{\"discover\":false,\"max_pending\":2,\"call_timeout_ms\":600000}",
          false);
    assert_int_equal(online(DEV), GW_PRESENCE_ARRIVED);
    assert_int_equal(online(DEV2), GW_PRESENCE_ARRIVED);
    d = device(DEV);
    d2 = device(DEV2);
    request(&d->link, "ping", NULL, 0, r1, NULL);
    request(&d->link, "tools/call", "{\"name\":\"a\"}", 0, r2, NULL);
    request(&d->link, "ping", NULL, 0, r3, NULL);
    request(&d->link, "tools/call", "{\"name\":\"b\"}", 0, r4, NULL);
    assert_int_equal(d->link.n_pending, 2);
    GW_FIXTURE_RUN_UNTIL(&T.fx, r3->calls > 0 && r4->calls > 0);
    assert_failed(r3, GW_MCP_BUSY, GW_RPC_DEVICE_BUSY,
                  "too many requests are waiting for the device");
    assert_failed(r4, GW_MCP_BUSY, GW_RPC_DEVICE_BUSY,
                  "too many requests are waiting for the device");
    assert_int_equal(r1->calls + r2->calls, 0);
    assert_int_equal(d->link.n_pending, 2);
    assert_true(gw_list_empty(&d->link.calls)); /* b was never queued */
    /* The bound is per device. */
    request(&d2->link, "ping", NULL, 0, r5, NULL);
    assert_int_equal(d2->link.n_pending, 1);
    assert_int_equal(T.t.links.stats.requests[GW_MCP_FROM_BACKEND][GW_MCP_BUSY],
                     2);
    assert_int_equal(offline(DEV), GW_PRESENCE_LEFT);
    assert_int_equal(r1->outcome, GW_MCP_OFFLINE);
    assert_int_equal(r2->outcome, GW_MCP_OFFLINE);
    assert_int_equal(r5->calls, 0);
}

/* Whatever the path, the callback runs from the loop, never from inside
 * gw_mcp_request or gw_mcp_refuse (request() and on_reply check it). */
static void test_callbacks_from_the_loop(void **state)
{
    struct reply *no_link = reply_new(), *gone = reply_new(), *p1 = reply_new(),
                 *p2 = reply_new(), *busy = reply_new();
    struct reply *refused = reply_new(), *big = reply_new(),
                 *small = reply_new(), *after = reply_new();
    struct gw_device *d, *d2, *d3;
    char params[9300];

    (void)state;
    start("{\"discover\":false,\"max_pending\":2,\"call_timeout_ms\":600000}",
          false);
    assert_int_equal(online(DEV), GW_PRESENCE_ARRIVED);
    assert_int_equal(online(DEV2), GW_PRESENCE_ARRIVED);
    assert_int_equal(online(DEV3), GW_PRESENCE_ARRIVED);
    d = device(DEV);
    d2 = device(DEV2);
    d3 = device(DEV3);
    assert_int_equal(offline(DEV2), GW_PRESENCE_LEFT);

    request(NULL, "ping", NULL, 0, no_link, NULL);
    request(&d2->link, "ping", NULL, 0, gone, NULL);
    request(&d->link, "ping", NULL, 0, p1, NULL);
    request(&d->link, "ping", NULL, 0, p2, NULL);
    request(&d->link, "ping", NULL, 0, busy, NULL);
    refuse(GW_RPC_INVALID_PARAMS, "Unknown tool: x", refused, NULL);
    /* Larger than a device takes: ended without sending, and the next
     * call gets its turn. */
    snprintf(params, sizeof(params), "{\"name\":\"a\",\"arguments\":{\"s\":\"");
    size_t n = strlen(params);
    memset(params + n, 'x', 9000);
    snprintf(params + n + 9000, sizeof(params) - n - 9000, "\"}}");
    request(&d3->link, "tools/call", params, 0, big, NULL);
    request(&d3->link, "tools/call", "{\"name\":\"b\"}", 0, small, NULL);
    assert_int_equal(gw_list_count(&d3->link.calls), 1);

    GW_FIXTURE_RUN_UNTIL(&T.fx, no_link->calls && gone->calls && busy->calls &&
                                    refused->calls && big->calls);
    assert_int_equal(no_link->outcome, GW_MCP_OFFLINE);
    assert_int_equal(gone->outcome, GW_MCP_OFFLINE);
    assert_int_equal(busy->outcome, GW_MCP_BUSY);
    assert_int_equal(refused->outcome, GW_MCP_REFUSED);
    assert_failed(big, GW_MCP_ERROR, GW_RPC_INVALID_PARAMS,
                  "the request is too large for the device");
    assert_int_equal(small->calls, 0);
    assert_true(gw_list_empty(&d3->link.calls));
    assert_non_null(d3->link.call_in_flight);
    assert_int_equal(d3->link.n_pending, 1);
    assert_int_equal(p1->calls + p2->calls, 0);

    /* Shutdown ends the rest from inside the close, which is allowed;
     * what is asked after it is refused from the loop. */
    table_close();
    assert_int_equal(p1->outcome, GW_MCP_CANCELLED);
    assert_int_equal(p2->outcome, GW_MCP_CANCELLED);
    assert_failed(small, GW_MCP_CANCELLED, GW_RPC_CANCELLED,
                  "the gateway is shutting down");
    request(NULL, "ping", NULL, 0, after, NULL);
    GW_FIXTURE_RUN_UNTIL(&T.fx, after->calls > 0);
    assert_failed(after, GW_MCP_CANCELLED, GW_RPC_CANCELLED,
                  "the gateway is shutting down");
}

/* A refusal decided before any device is asked. */
static void test_refuse(void **state)
{
    struct reply *r = reply_new(), *dropped = reply_new(),
                 *sentinel = reply_new();
    uint64_t h = 0, hd = 0;

    (void)state;
    start("{\"discover\":false}", false);
    refuse(GW_RPC_INVALID_PARAMS, "Unknown tool: self.x", r, &h);
    assert_true(h != 0);
    refuse(-32010, "not for you", dropped, &hd);
    assert_true(hd != 0 && hd != h);
    gw_mcp_abandon(&T.t.links, hd); /* its origin left before the loop */
    refuse(-32011, "sentinel", sentinel, NULL);
    GW_FIXTURE_RUN_UNTIL(&T.fx, r->calls > 0 && sentinel->calls > 0);
    assert_failed(r, GW_MCP_REFUSED, GW_RPC_INVALID_PARAMS,
                  "Unknown tool: self.x");
    assert_failed(sentinel, GW_MCP_REFUSED, -32011, "sentinel");
    assert_int_equal(dropped->calls, 0);
    assert_int_equal(
        T.t.links.stats.requests[GW_MCP_FROM_CLIENT][GW_MCP_REFUSED], 2);
    assert_int_equal(
        T.t.links.stats.requests[GW_MCP_FROM_CLIENT][GW_MCP_CANCELLED], 1);
    assert_int_equal(T.t.links.stats.latency_count, 0);
}

/*
 * Shutdown while discoveries wait in line: one slot, three devices. The
 * running one and every request end cancelled inside the close, the
 * waiting ones never start, and the close callback runs.
 */
static void test_shutdown_with_discoveries_waiting(void **state)
{
    struct reply *r[3] = {reply_new(), reply_new(), reply_new()},
                 *after = reply_new();
    const char *ids[3] = {DEV, DEV2, DEV3};
    struct gw_device *d[3];

    (void)state;
    start("{\"discover\":true,\"discover_concurrency\":1,"
          "\"call_timeout_ms\":600000}",
          true);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(online(ids[i]), GW_PRESENCE_ARRIVED);
        d[i] = device(ids[i]);
    }
    wait_msgs(1);
    assert_topic(0, DEV);
    assert_string_equal(method_of(0), "initialize");
    assert_int_equal(T.t.discoverer.running, 1);
    assert_int_equal(gw_list_count(&T.t.discoverer.queue), 2);
    assert_int_equal(d[0]->discovery.state, GW_MCP_INITIALIZING);
    for (int i = 1; i < 3; i++) {
        assert_int_equal(d[i]->discovery.state, GW_MCP_IDLE);
        assert_true(gw_list_linked(&d[i]->discovery.queue_node));
        assert_int_equal(d[i]->tools.state, GW_TOOL_LIST_PENDING);
        assert_int_equal(d[i]->link.n_pending, 0);
    }
    for (int i = 0; i < 3; i++) {
        request(&d[i]->link, "ping", NULL, 0, r[i], NULL);
    }
    wait_msgs(4);

    table_close();
    for (int i = 0; i < 3; i++) {
        assert_failed(r[i], GW_MCP_CANCELLED, GW_RPC_CANCELLED,
                      "the gateway is shutting down");
        assert_int_equal(d[i]->state, GW_DEVICE_GONE); /* until reaped */
        assert_int_equal(d[i]->link.n_pending, 0);
    }
    assert_int_equal(d[0]->discovery.state, GW_MCP_FAILED);
    assert_int_equal(T.t.discoverer.running, 0);
    assert_true(gw_list_empty(&T.t.discoverer.queue));
    const uint64_t *gateway = T.t.links.stats.requests[GW_MCP_FROM_GATEWAY];
    uint64_t asked = 0;
    for (int k = 0; k < GW_MCP_OUTCOME_COUNT_; k++) {
        asked += gateway[k];
    }
    assert_int_equal(asked, 1); /* the one initialize, nothing after */
    assert_int_equal(gateway[GW_MCP_CANCELLED], 1);
    assert_int_equal(T.t.links.stats.discoveries, 0);

    request(NULL, "ping", NULL, 0, after, NULL);
    GW_FIXTURE_RUN_UNTIL(&T.fx, T.table_closed > 0 && after->calls > 0);
    assert_int_equal(T.table_closed, 1);
    assert_int_equal(after->outcome, GW_MCP_CANCELLED);

    /* A fence down the same broker link: everything the gateway sent
     * before it has arrived, and none of it is a second initialize. */
    static const char fence[] = "{\"type\":\"fence\"}";
    assert_int_equal(gw_publish_json(&T.pub, DEV3, fence, strlen(fence)), 0);
    wait_msgs(5);
    assert_topic(4, DEV3);
    assert_string_equal(T.msgs[4].text, fence);
    for (unsigned i = 1; i < 4; i++) {
        assert_string_equal(method_of(i), "ping");
    }
}

/* ---- the whole surface: progress, peers, the device's own requests ---- */

/* Progress heard by the origin of one request. */
static struct {
    unsigned n;
    char last[256];
} P;

static void on_progress(void *arg, const cJSON *params)
{
    char *text = cJSON_PrintUnformatted(params);

    (void)arg;
    assert_non_null(text);
    P.n++;
    snprintf(P.last, sizeof(P.last), "%s", text);
    cJSON_free(text);
}

static void request_with(struct gw_mcp_link *link, const char *method,
                         const char *params_json, gw_mcp_progress_cb progress,
                         struct reply *r)
{
    struct gw_mcp_opts opts = {.on_progress = progress};
    cJSON *params = cJSON_Parse(params_json);

    assert_non_null(params);
    T.in_request = true;
    gw_mcp_request_with(&T.t.links, link, method, params, &opts,
                        GW_MCP_FROM_CLIENT, on_reply, r, NULL);
    T.in_request = false;
}

static const cJSON *params_of(unsigned i)
{
    return cJSON_GetObjectItemCaseSensitive(payload_of(i), "params");
}

/* The device gets the link's id as its token; its progress reaches the
 * origin under the origin's own token, and only while it waits. A
 * request whose origin hears no progress carries no token at all. */
static void test_progress_tokens(void **state)
{
    struct reply *r1 = reply_new(), *r2 = reply_new();
    char note[256];
    struct gw_device *d;

    (void)state;
    memset(&P, 0, sizeof(P));
    start("{\"discover\":false,\"call_timeout_ms\":600000}", true);
    assert_int_equal(online(DEV), GW_PRESENCE_ARRIVED);
    d = device(DEV);
    request_with(&d->link, "resources/read",
                 "{\"uri\":\"device://status\",\"_meta\":{\"progressToken\":"
                 "\"tok-a\",\"other\":1}}",
                 on_progress, r1);
    request_with(&d->link, "resources/read",
                 "{\"uri\":\"device://x\",\"_meta\":{\"progressToken\":7}}",
                 NULL, r2);
    wait_msgs(2);
    uint32_t id1 = id_of(0);
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params_of(0), "_meta");
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(meta, "progressToken");
    assert_true(cJSON_IsNumber(tok));
    assert_true(tok->valuedouble == (double)id1);
    assert_non_null(cJSON_GetObjectItemCaseSensitive(meta, "other"));
    assert_null(cJSON_GetObjectItemCaseSensitive(params_of(1), "_meta"));

    snprintf(note, sizeof(note),
             "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
             "\"params\":{\"progressToken\":%u,\"progress\":1,\"total\":3}}",
             id1);
    assert_true(gw_fixture_mcp_in(&T.t, DEV, note));
    assert_int_equal(P.n, 1);
    assert_string_equal(P.last, "{\"progressToken\":\"tok-a\",\"progress\":1,"
                                "\"total\":3}");
    /* esp-mcp echoes the numeric token as a string: the same request. */
    snprintf(note, sizeof(note),
             "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
             "\"params\":{\"progressToken\":\"%u\",\"progress\":2,"
             "\"total\":3}}",
             id1);
    assert_true(gw_fixture_mcp_in(&T.t, DEV, note));
    assert_int_equal(P.n, 2);
    assert_string_equal(P.last, "{\"progressToken\":\"tok-a\",\"progress\":2,"
                                "\"total\":3}");
    /* The other request's id: its origin hears none, nothing is sent. */
    snprintf(note, sizeof(note),
             "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
             "\"params\":{\"progressToken\":%u,\"progress\":1}}",
             id_of(1));
    assert_true(gw_fixture_mcp_in(&T.t, DEV, note));
    assert_int_equal(P.n, 2);
    assert_true(answer(DEV, id1, RESULT_EMPTY));
    assert_int_equal(r1->outcome, GW_MCP_OK);
    /* After the answer the token names nothing: dropped, counted. */
    uint64_t unsolicited = T.t.links.stats.unsolicited;
    snprintf(note, sizeof(note),
             "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
             "\"params\":{\"progressToken\":%u,\"progress\":2}}",
             id1);
    assert_true(gw_fixture_mcp_in(&T.t, DEV, note));
    assert_int_equal(P.n, 2);
    assert_int_equal(T.t.links.stats.unsolicited, unsolicited + 1);
}

/* The device's own requests: ping answered by the gateway, sampling with
 * nobody to take it refused at once under the device's id, anything else
 * left to the backend; gw_mcp_answer ends a request from the loop. */
static void test_device_requests(void **state)
{
    struct reply *r = reply_new();
    struct gw_device *d;

    (void)state;
    start("{\"discover\":false}", true);
    assert_int_equal(online(DEV), GW_PRESENCE_ARRIVED);
    d = device(DEV);
    assert_true(gw_fixture_mcp_in(
        &T.t, DEV, "{\"jsonrpc\":\"2.0\",\"id\":41,\"method\":\"ping\"}"));
    assert_true(gw_fixture_mcp_in(
        &T.t, DEV,
        "{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"sampling/createMessage\","
        "\"params\":{\"messages\":[],\"maxTokens\":8}}"));
    assert_true(gw_fixture_mcp_in(
        &T.t, DEV,
        "{\"jsonrpc\":\"2.0\",\"id\":\"r-43\",\"method\":\"roots/list\"}"));
    assert_false(gw_fixture_mcp_in(
        &T.t, DEV, "{\"jsonrpc\":\"2.0\",\"id\":44,\"method\":\"x/own\"}"));
    wait_msgs(3);
    assert_string_equal(T.msgs[0].text,
                        "{\"session_id\":\"\",\"type\":\"mcp\",\"payload\":{"
                        "\"jsonrpc\":\"2.0\",\"id\":41,\"result\":{}}}");
    assert_string_equal(
        T.msgs[1].text,
        "{\"session_id\":\"\",\"type\":\"mcp\",\"payload\":{\"jsonrpc\":\"2."
        "0\","
        "\"id\":42,\"error\":{\"code\":-32006,\"message\":\"no MCP client of "
        "this device declared sampling\"}}}");
    assert_string_equal(
        T.msgs[2].text,
        "{\"session_id\":\"\",\"type\":\"mcp\",\"payload\":{\"jsonrpc\":\"2."
        "0\","
        "\"id\":\"r-43\",\"error\":{\"code\":-32006,\"message\":\"no MCP "
        "client of this device declared roots\"}}}");

    T.in_request = true;
    gw_mcp_answer(&T.t.links, GW_MCP_FROM_CLIENT, NULL, on_reply, r, NULL);
    T.in_request = false;
    assert_int_equal(r->calls, 0);
    GW_FIXTURE_RUN_UNTIL(&T.fx, r->calls > 0);
    assert_int_equal(r->outcome, GW_MCP_OK);
    assert_string_equal(r->result, "{}");
    assert_int_equal(d->link.n_pending, 0);
}

/* Notifications each test peer heard. */
struct heard {
    struct gw_mcp_peer peer;
    unsigned n;
    char method[64];
    char params[256];
};

static void heard_notify(struct gw_mcp_peer *peer, const struct gw_device *dev,
                         const char *method, const cJSON *params)
{
    struct heard *h = GW_CONTAINER_OF(peer, struct heard, peer);
    char *text = cJSON_PrintUnformatted(params);

    assert_non_null(dev);
    assert_non_null(text);
    h->n++;
    snprintf(h->method, sizeof(h->method), "%s", method);
    snprintf(h->params, sizeof(h->params), "%s", text);
    cJSON_free(text);
}

static const struct gw_mcp_peer_ops heard_ops = {.notify = heard_notify};

/* A device that said in its initialize what it offers. */
static struct gw_device *capable(const char *client_id, unsigned caps)
{
    struct gw_mcp_server_info info = {.caps = caps};
    struct gw_device *d = device(client_id);

    gw_mcp_catalog_set_info(&d->catalog, &info);
    return d;
}

static void subscribe(struct gw_device *d, struct heard *h, const char *uri,
                      bool on, struct reply *r)
{
    T.in_request = true;
    gw_mcp_subscribe(&T.t, d, &h->peer, uri, on, GW_MCP_FROM_CLIENT, on_reply,
                     r, NULL);
    T.in_request = false;
}

static void notify_in(const char *client_id, const char *method,
                      const char *params)
{
    char text[512];

    snprintf(text, sizeof(text),
             "{\"jsonrpc\":\"2.0\",\"method\":\"%s\",\"params\":%s}", method,
             params);
    assert_true(gw_fixture_mcp_in(&T.t, client_id, text));
}

/* One subscription per URI on the device whoever subscribes; updates go
 * to every subscriber of that URI and nobody else; the device is
 * unsubscribed when the last subscriber leaves, not before. */
static void test_shared_subscriptions(void **state)
{
    struct heard a = {0}, b = {0};
    struct reply *r[6];
    struct gw_device *d;

    (void)state;
    for (int i = 0; i < 6; i++) {
        r[i] = reply_new();
    }
    start("{\"discover\":false,\"call_timeout_ms\":600000}", true);
    assert_int_equal(online(DEV), GW_PRESENCE_ARRIVED);
    d = capable(DEV, GW_MCP_CAP_TOOLS | GW_MCP_CAP_RESOURCES |
                         GW_MCP_CAP_RESOURCES_SUBSCRIBE);
    gw_mcp_peer_init(&a.peer, &heard_ops, "peer a", false);
    gw_mcp_peer_init(&b.peer, &heard_ops, "peer b", false);

    subscribe(d, &a, "device://status", true, r[0]);
    wait_msgs(1);
    assert_string_equal(method_of(0), "resources/subscribe");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                            params_of(0), "uri")),
                        "device://status");
    subscribe(d, &b, "device://status", true, r[1]); /* held: no message */
    GW_FIXTURE_RUN_UNTIL(&T.fx, r[1]->calls > 0);
    assert_int_equal(r[1]->outcome, GW_MCP_OK);
    assert_int_equal(r[0]->calls, 0); /* still the device's to answer */
    assert_true(answer(DEV, id_of(0), RESULT_EMPTY));
    assert_int_equal(r[0]->outcome, GW_MCP_OK);

    notify_in(DEV, "notifications/resources/updated",
              "{\"uri\":\"device://status\"}");
    notify_in(DEV, "notifications/resources/updated",
              "{\"uri\":\"device://other\"}");
    assert_int_equal(a.n, 1);
    assert_int_equal(b.n, 1);
    assert_string_equal(a.method, "notifications/resources/updated");
    assert_string_equal(b.params, "{\"uri\":\"device://status\"}");

    /* a leaves the URI: b still holds it, the device hears nothing. */
    subscribe(d, &a, "device://status", false, r[2]);
    GW_FIXTURE_RUN_UNTIL(&T.fx, r[2]->calls > 0);
    notify_in(DEV, "notifications/resources/updated",
              "{\"uri\":\"device://status\"}");
    assert_int_equal(a.n, 1);
    assert_int_equal(b.n, 2);
    assert_int_equal(T.n_msgs, 1);

    /* b's session ends: the device is unsubscribed. */
    gw_mcp_peer_leave(&T.t, &b.peer);
    assert_int_equal(b.peer.n_interests, 0);
    wait_msgs(2);
    assert_string_equal(method_of(1), "resources/unsubscribe");
    notify_in(DEV, "notifications/resources/updated",
              "{\"uri\":\"device://status\"}");
    assert_int_equal(b.n, 2);

    /* A device that did not offer subscriptions is never asked. */
    assert_int_equal(online(DEV2), GW_PRESENCE_ARRIVED);
    struct gw_device *d2 = capable(DEV2, GW_MCP_CAP_RESOURCES);
    subscribe(d2, &a, "device://status", true, r[3]);
    GW_FIXTURE_RUN_UNTIL(&T.fx, r[3]->calls > 0);
    assert_failed(r[3], GW_MCP_REFUSED, GW_RPC_METHOD_NOT_FOUND,
                  "device " DEV2 " does not offer resources.subscribe");
    /* A refusal by the device takes the record back. */
    subscribe(d, &a, "device://nope", true, r[4]);
    wait_msgs(3);
    assert_true(answer(DEV, id_of(2),
                       "\"error\":{\"code\":-32002,\"message\":\"unknown\"}"));
    assert_int_equal(r[4]->outcome, GW_MCP_ERROR);
    assert_int_equal(a.peer.n_interests, 0);
    /* Its origin gone before the device answers: no callback, and
     * nothing of the subscription's own is left behind (ASan). */
    uint64_t h = 0;
    T.in_request = true;
    gw_mcp_subscribe(&T.t, d, &a.peer, "device://z", true, GW_MCP_FROM_CLIENT,
                     on_reply, r[5], &h);
    T.in_request = false;
    wait_msgs(4);
    gw_mcp_abandon(&T.t.links, h);
    wait_msgs(5); /* the device is told the origin went away */
    assert_true(answer(DEV, id_of(3), RESULT_EMPTY));
    assert_int_equal(r[5]->calls, 0);
    assert_int_equal(a.peer.n_interests, 1); /* the device holds it */
    gw_mcp_peer_leave(&T.t, &a.peer);
    wait_msgs(6);
    assert_string_equal(method_of(5), "resources/unsubscribe");
}

/* The device's level is the most verbose any peer asked for; messages go
 * to each peer at or above its own level; a peer leaving lowers it. An
 * all-devices peer's level reaches every device offering logging. */
static void test_logging_levels(void **state)
{
    struct heard a = {0}, b = {0}, all = {0};
    struct reply *r[4];
    struct gw_device *d;

    (void)state;
    for (int i = 0; i < 4; i++) {
        r[i] = reply_new();
    }
    start("{\"discover\":false,\"call_timeout_ms\":600000}", true);
    assert_int_equal(online(DEV), GW_PRESENCE_ARRIVED);
    d = capable(DEV, GW_MCP_CAP_TOOLS | GW_MCP_CAP_LOGGING);
    gw_mcp_peer_init(&a.peer, &heard_ops, "peer a", false);
    gw_mcp_peer_init(&b.peer, &heard_ops, "peer b", false);
    gw_mcp_peer_init(&all.peer, &heard_ops, "peer all", true);

    gw_mcp_set_level(&T.t, d, &a.peer, GW_MCP_LOG_WARNING, GW_MCP_FROM_CLIENT,
                     on_reply, r[0], NULL);
    wait_msgs(1);
    assert_string_equal(method_of(0), "logging/setLevel");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                            params_of(0), "level")),
                        "warning");
    assert_true(answer(DEV, id_of(0), RESULT_EMPTY));
    gw_mcp_set_level(&T.t, d, &b.peer, GW_MCP_LOG_DEBUG, GW_MCP_FROM_CLIENT,
                     on_reply, r[1], NULL);
    wait_msgs(2);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                            params_of(1), "level")),
                        "debug");
    assert_true(answer(DEV, id_of(1), RESULT_EMPTY));

    notify_in(DEV, "notifications/message",
              "{\"level\":\"info\",\"data\":\"i\"}");
    notify_in(DEV, "notifications/message",
              "{\"level\":\"error\",\"data\":\"e\"}");
    assert_int_equal(a.n, 1); /* error only */
    assert_int_equal(b.n, 2);
    assert_string_equal(a.params, "{\"level\":\"error\",\"data\":\"e\"}");

    /* b leaves: back to warning on the device. */
    gw_mcp_peer_leave(&T.t, &b.peer);
    wait_msgs(3);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                            params_of(2), "level")),
                        "warning");
    assert_true(answer(DEV, id_of(2), RESULT_EMPTY));

    /* All devices at notice: the answer does not wait for the device. */
    gw_mcp_set_level(&T.t, NULL, &all.peer, GW_MCP_LOG_NOTICE,
                     GW_MCP_FROM_CLIENT, on_reply, r[2], NULL);
    GW_FIXTURE_RUN_UNTIL(&T.fx, r[2]->calls > 0 && T.n_msgs >= 4);
    assert_int_equal(r[2]->outcome, GW_MCP_OK);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                            params_of(3), "level")),
                        "notice");
    notify_in(DEV, "notifications/message",
              "{\"level\":\"notice\",\"data\":\"n\"}");
    assert_int_equal(all.n, 1);
    assert_int_equal(a.n, 1);
    gw_mcp_peer_leave(&T.t, &all.peer);
    gw_mcp_peer_leave(&T.t, &a.peer);

    /* A device without logging: refused without a word to it. */
    assert_int_equal(online(DEV2), GW_PRESENCE_ARRIVED);
    gw_mcp_set_level(&T.t, capable(DEV2, GW_MCP_CAP_TOOLS), &a.peer,
                     GW_MCP_LOG_INFO, GW_MCP_FROM_CLIENT, on_reply, r[3], NULL);
    GW_FIXTURE_RUN_UNTIL(&T.fx, r[3]->calls > 0);
    assert_failed(r[3], GW_MCP_REFUSED, GW_RPC_METHOD_NOT_FOUND,
                  "device " DEV2 " does not offer logging");
}

/* A task's status goes to the peer that created it, and no other. */
static void test_task_status(void **state)
{
    struct heard a = {0}, b = {0};
    struct gw_device *d;

    (void)state;
    start("{\"discover\":false}", true);
    assert_int_equal(online(DEV), GW_PRESENCE_ARRIVED);
    d = capable(DEV, GW_MCP_CAP_TOOLS | GW_MCP_CAP_TASKS);
    gw_mcp_peer_init(&a.peer, &heard_ops, "peer a", false);
    gw_mcp_peer_init(&b.peer, &heard_ops, "peer b", false);
    gw_mcp_task_created(d, &a.peer, "job-1");
    gw_mcp_task_created(d, &b.peer, "job-2");
    notify_in(DEV, "notifications/tasks/status",
              "{\"taskId\":\"job-1\",\"status\":\"completed\"}");
    assert_int_equal(a.n, 1);
    assert_int_equal(b.n, 0);
    /* A notification without what names its target: dropped, counted. */
    uint64_t refused = T.t.links.stats.refused;
    notify_in(DEV, "notifications/tasks/status", "{\"status\":\"x\"}");
    notify_in(DEV, "notifications/message", "{\"level\":\"loud\"}");
    assert_int_equal(T.t.links.stats.refused, refused + 2);
    /* The device going offline takes its records; the peers stay whole. */
    assert_int_equal(offline(DEV), GW_PRESENCE_LEFT);
    assert_int_equal(a.peer.n_interests, 0);
    assert_int_equal(b.peer.n_interests, 0);
}

/* Changes each listener heard. */
static struct {
    unsigned n;
    unsigned what;
} C;

static void on_changed(void *arg, const struct gw_device *dev, unsigned what)
{
    (void)arg;
    (void)dev;
    C.n++;
    C.what |= what;
}

/* Answers the oldest request of method not yet answered with result. */
static void answer_method(unsigned *next, const char *method,
                          const char *result)
{
    char member[600];

    wait_msgs(*next + 1);
    assert_string_equal(method_of(*next), method);
    snprintf(member, sizeof(member), "\"result\":%s", result);
    assert_true(answer(DEV, id_of(*next), member));
    (*next)++;
}

/* Discovery reads what the device offers, and only that: tools, then
 * resources, templates and prompts, each page by page. */
static void test_catalog_discovery(void **state)
{
    unsigned next = 0;
    struct gw_device *d;

    (void)state;
    memset(&C, 0, sizeof(C));
    start("{\"call_timeout_ms\":600000,\"max_list_items\":2}", true);
    gw_device_table_set_listener(&T.t, on_changed, NULL);
    assert_int_equal(online(DEV), GW_PRESENCE_ARRIVED);
    d = device(DEV);
    wait_msgs(1);
    assert_string_equal(method_of(0), "initialize");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                            params_of(0), "protocolVersion")),
                        "2025-11-25");
    /* Changes told before any list was asked: this run reads them all,
     * no second run follows. */
    assert_false(gw_fixture_mcp_in(&T.t, DEV,
                                   "{\"jsonrpc\":\"2.0\",\"method\":"
                                   "\"notifications/tools/list_changed\"}"));
    assert_false(gw_fixture_mcp_in(&T.t, DEV,
                                   "{\"jsonrpc\":\"2.0\",\"method\":"
                                   "\"notifications/prompts/list_changed\"}"));
    assert_false(d->discovery.again);
    answer_method(&next, "initialize",
                  "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{"
                  "\"tools\":{},\"resources\":{\"subscribe\":true},"
                  "\"prompts\":{}},\"serverInfo\":{\"name\":\"esp\","
                  "\"version\":\"2\"}}");
    wait_msgs(next + 1);
    assert_string_equal(method_of(next), "notifications/initialized");
    next++;
    answer_method(&next, "tools/list",
                  "{\"tools\":[{\"name\":\"self.a\",\"inputSchema\":{}}]}");
    answer_method(&next, "resources/list",
                  "{\"resources\":[{\"uri\":\"device://a\",\"name\":\"a\"}],"
                  "\"nextCursor\":\"p2\"}");
    wait_msgs(next + 1);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                            params_of(next), "cursor")),
                        "p2");
    /* Over mcp.max_list_items: cut there. */
    answer_method(&next, "resources/list",
                  "{\"resources\":[{\"uri\":\"device://b\",\"name\":\"b\"},"
                  "{\"uri\":\"device://c\",\"name\":\"c\"}]}");
    /* A device without templates: that list fails alone. */
    wait_msgs(next + 1);
    assert_string_equal(method_of(next), "resources/templates/list");
    assert_true(answer(DEV, id_of(next),
                       "\"error\":{\"code\":-32601,\"message\":\"no\"}"));
    next++;
    answer_method(&next, "prompts/list",
                  "{\"prompts\":[{\"name\":\"greeting\",\"arguments\":[{"
                  "\"name\":\"name\",\"required\":true}]}]}");
    GW_FIXTURE_RUN_UNTIL(&T.fx, d->discovery.state == GW_MCP_READY);
    assert_false(d->discovery.running);
    assert_true(d->catalog.known);
    assert_string_equal(d->catalog.info.name, "esp");
    assert_true(
        gw_mcp_catalog_offers(&d->catalog, GW_MCP_CAP_RESOURCES_SUBSCRIBE));
    assert_false(gw_mcp_catalog_offers(&d->catalog, GW_MCP_CAP_LOGGING));
    assert_int_equal(d->catalog.lists[GW_MCP_LIST_RESOURCES].state,
                     GW_TOOL_LIST_TRUNCATED);
    assert_int_equal(
        cJSON_GetArraySize(d->catalog.lists[GW_MCP_LIST_RESOURCES].items), 2);
    assert_null(gw_mcp_catalog_items(&d->catalog, GW_MCP_LIST_RESOURCES));
    assert_int_equal(d->catalog.lists[GW_MCP_LIST_TEMPLATES].state,
                     GW_TOOL_LIST_FAILED);
    assert_non_null(gw_mcp_catalog_items(&d->catalog, GW_MCP_LIST_PROMPTS));
    assert_true(gw_tool_cache_complete(&d->tools));
    assert_int_equal(C.what & (GW_DEVICE_CHANGED_TOOLS |
                               GW_DEVICE_CHANGED_RESOURCES |
                               GW_DEVICE_CHANGED_PROMPTS),
                     GW_DEVICE_CHANGED_TOOLS | GW_DEVICE_CHANGED_RESOURCES |
                         GW_DEVICE_CHANGED_PROMPTS);
    char why[128];
    assert_false(gw_mcp_catalog_allows(&d->catalog, DEV, "logging/setLevel",
                                       why, sizeof(why)));
    assert_string_equal(why, "device " DEV " does not offer logging");
    assert_true(gw_mcp_catalog_allows(&d->catalog, DEV, "prompts/get", why,
                                      sizeof(why)));

    /* prompts/list_changed reads the lists again; a device that no
     * longer offers prompts loses its list. */
    /* Read here, and passed on to the backend too (not consumed). */
    assert_false(gw_fixture_mcp_in(&T.t, DEV,
                                   "{\"jsonrpc\":\"2.0\",\"method\":"
                                   "\"notifications/prompts/list_changed\"}"));
    answer_method(&next, "initialize",
                  "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{"
                  "\"tools\":{}}}");
    next++; /* notifications/initialized */
    answer_method(&next, "tools/list", "{\"tools\":[]}");
    GW_FIXTURE_RUN_UNTIL(&T.fx,
                         d->discovery.state == GW_MCP_READY &&
                             d->catalog.lists[GW_MCP_LIST_PROMPTS].state ==
                                 GW_TOOL_LIST_NONE);
    assert_false(gw_mcp_catalog_offers(&d->catalog, GW_MCP_CAP_PROMPTS));
}

/* What the backend of a relay received. */
static struct {
    unsigned n;
    char last[512];
    char all[2048];
} BK;

static void backend_send(void *arg, const cJSON *payload)
{
    char *text = cJSON_PrintUnformatted(payload);

    (void)arg;
    assert_non_null(text);
    BK.n++;
    snprintf(BK.last, sizeof(BK.last), "%s", text);
    strncat(BK.all, text, sizeof(BK.all) - strlen(BK.all) - 1);
    cJSON_free(text);
}

static void backend_in(struct gw_mcp_relay *relay, struct gw_device *dev,
                       const char *payload)
{
    char text[1024];
    struct gw_envelope env;
    int n = snprintf(text, sizeof(text),
                     "{\"type\":\"mcp\",\"session_id\":\"s1\",\"payload\":%s}",
                     payload);

    assert_int_equal(gw_envelope_parse(text, (size_t)n, sizeof(text), &env), 0);
    assert_int_equal(
        gw_mcp_relay_from_backend(relay, dev, &env, text, (size_t)n), 0);
    gw_envelope_free(&env);
}

/* The backend's side: a method the device does not offer is refused
 * without a word to it; progress comes back under the backend's token;
 * the backend's cancel reaches the device under the link's id and gets
 * no answer; contents over mcp.max_resource_bytes are refused with the
 * size; a subscription of the backend is one peer's among others. */
static void test_backend_relay(void **state)
{
    struct gw_mcp_relay relay;
    struct heard a = {0};
    struct reply *r = reply_new();
    char note[256];
    struct gw_device *d;

    (void)state;
    memset(&BK, 0, sizeof(BK));
    start("{\"discover\":false,\"call_timeout_ms\":600000,"
          "\"max_resource_bytes\":1024}",
          true);
    assert_int_equal(online(DEV), GW_PRESENCE_ARRIVED);
    d = capable(DEV, GW_MCP_CAP_TOOLS | GW_MCP_CAP_RESOURCES |
                         GW_MCP_CAP_RESOURCES_SUBSCRIBE);
    gw_mcp_relay_init(&relay, &T.t, DEV, "sid=s1", backend_send, NULL);

    backend_in(&relay, d,
               "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"prompts/list\"}");
    GW_FIXTURE_RUN_UNTIL(&T.fx, BK.n == 1);
    assert_string_equal(BK.last,
                        "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":"
                        "-32601,\"message\":\"device " DEV
                        " does not offer prompts\"}}");

    backend_in(&relay, d,
               "{\"jsonrpc\":\"2.0\",\"id\":\"b2\",\"method\":"
               "\"resources/read\",\"params\":{\"uri\":\"device://big\","
               "\"_meta\":{\"progressToken\":\"bt\"}}}");
    wait_msgs(1);
    uint32_t id2 = id_of(0);
    snprintf(note, sizeof(note),
             "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
             "\"params\":{\"progressToken\":%u,\"progress\":5}}",
             id2);
    assert_true(gw_fixture_mcp_in(&T.t, DEV, note));
    assert_int_equal(BK.n, 2);
    assert_string_equal(BK.last, "{\"jsonrpc\":\"2.0\",\"method\":"
                                 "\"notifications/progress\",\"params\":{"
                                 "\"progressToken\":\"bt\",\"progress\":5}}");
    /* 1025 bytes of text, one over the limit. */
    char big[1200];
    char text[1100];
    memset(text, 'x', 1025);
    text[1025] = '\0';
    snprintf(big, sizeof(big),
             "{\"jsonrpc\":\"2.0\",\"id\":%u,\"result\":{\"contents\":[{"
             "\"uri\":\"device://big\",\"text\":\"%s\"}]}}",
             id2, text);
    assert_true(gw_fixture_mcp_in(&T.t, DEV, big));
    assert_int_equal(BK.n, 3);
    assert_non_null(
        strstr(BK.last, "\"id\":\"b2\",\"error\":{\"code\":-32603"));
    assert_non_null(strstr(BK.last, "1025"));
    assert_non_null(strstr(BK.last, "1024"));

    /* Cancelled by the backend: the device hears its own id. */
    backend_in(&relay, d,
               "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"resources/read\","
               "\"params\":{\"uri\":\"device://slow\"}}");
    wait_msgs(2);
    uint32_t id3 = id_of(1);
    backend_in(&relay, d,
               "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
               "\"params\":{\"requestId\":3,\"reason\":\"no\"}}");
    wait_msgs(3);
    assert_string_equal(method_of(2), "notifications/cancelled");
    assert_true(cJSON_GetObjectItemCaseSensitive(params_of(2), "requestId")
                    ->valuedouble == (double)id3);
    assert_true(answer(DEV, id3, "\"result\":{\"contents\":[]}"));
    assert_int_equal(BK.n, 3); /* no answer to a cancelled request */

    /* The backend and an MCP client on one URI: one device subscription,
     * kept while either holds it. */
    backend_in(&relay, d,
               "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":"
               "\"resources/subscribe\",\"params\":{\"uri\":\"device://s\"}}");
    wait_msgs(4);
    assert_string_equal(method_of(3), "resources/subscribe");
    assert_true(answer(DEV, id_of(3), RESULT_EMPTY));
    assert_int_equal(BK.n, 4);
    assert_string_equal(BK.last,
                        "{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}");
    gw_mcp_peer_init(&a.peer, &heard_ops, "peer a", false);
    subscribe(d, &a, "device://s", true, r);
    GW_FIXTURE_RUN_UNTIL(&T.fx, r->calls > 0);
    notify_in(DEV, "notifications/resources/updated",
              "{\"uri\":\"device://s\"}");
    assert_int_equal(a.n, 1);
    assert_int_equal(BK.n, 5);
    assert_string_equal(BK.last, "{\"jsonrpc\":\"2.0\",\"method\":"
                                 "\"notifications/resources/updated\","
                                 "\"params\":{\"uri\":\"device://s\"}}");
    /* The session ends: the client still holds the URI. */
    gw_mcp_relay_close(&relay);
    notify_in(DEV, "notifications/resources/updated",
              "{\"uri\":\"device://s\"}");
    assert_int_equal(a.n, 2);
    assert_int_equal(BK.n, 5);
    assert_int_equal(T.n_msgs, 4);
    gw_mcp_peer_leave(&T.t, &a.peer);
    wait_msgs(5);
    assert_string_equal(method_of(4), "resources/unsubscribe");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ids_envelope_and_matching, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_calls_one_at_a_time, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_abandon, setup, teardown),
        cmocka_unit_test_setup_teardown(test_offline_ends_requests, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_max_pending, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callbacks_from_the_loop, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_refuse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_with_discoveries_waiting,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_progress_tokens, setup, teardown),
        cmocka_unit_test_setup_teardown(test_device_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_subscriptions, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_logging_levels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_task_status, setup, teardown),
        cmocka_unit_test_setup_teardown(test_catalog_discovery, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_backend_relay, setup, teardown),
    };

    return cmocka_run_group_tests(tests, broker_start, broker_stop);
}
