/*
 * The simulated device's esp-mcp-like MCP server (tools/sim_espmcp.h):
 * JSON-RPC in, replies and notifications out, every method of its
 * profile, its timers on a test clock, and each strict check.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tools/sim_espmcp.h"

/* One server under test, its stock state and the messages it sent. */
struct fx {
    struct gw_sim_mcp stock;
    struct gw_sim_esp *e;
    cJSON *out; /* [{"endpoint":..|null,"msg":..}] of the last drain */
};

static struct fx *fx_new(uint32_t update_ms, uint32_t change_ms,
                         const char *const *remote, size_t n_remote)
{
    struct fx *f = calloc(1, sizeof(*f));
    struct gw_sim_esp_options o = {
        .update_ms = update_ms,
        .change_after_ms = change_ms,
        .big_resource_bytes = 100,
        .remote = remote,
        .n_remote = n_remote,
    };

    assert_non_null(f);
    gw_sim_mcp_defaults(&f->stock);
    assert_int_equal(gw_sim_esp_create(&o, &f->stock, &f->e), 0);
    return f;
}

static void fx_free(struct fx *f)
{
    gw_sim_esp_destroy(f->e);
    cJSON_Delete(f->out);
    free(f);
}

/* Moves everything queued into f->out (replacing the last drain). */
static int drain(struct fx *f)
{
    char *ep, *json;
    const char *what;

    cJSON_Delete(f->out);
    f->out = cJSON_CreateArray();
    while (gw_sim_esp_pop(f->e, &ep, &json, &what)) {
        cJSON *item = cJSON_CreateObject();
        cJSON *msg = cJSON_Parse(json);
        assert_non_null(msg);
        assert_non_null(what);
        cJSON_AddItemToObject(item, "endpoint",
                              ep ? cJSON_CreateString(ep) : cJSON_CreateNull());
        cJSON_AddItemToObject(item, "msg", msg);
        cJSON_AddItemToArray(f->out, item);
        free(ep);
        free(json);
    }
    return cJSON_GetArraySize(f->out);
}

/* Delivers one message (endpoint_json: the envelope's endpoint member as
 * JSON, or NULL) at now and drains what it caused. */
static int rx(struct fx *f, uint64_t now, const char *json,
              const char *endpoint_json)
{
    cJSON *msg = cJSON_Parse(json);
    cJSON *ep = endpoint_json ? cJSON_Parse(endpoint_json) : NULL;

    assert_non_null(msg);
    assert_int_equal(gw_sim_esp_receive(f->e, now, msg, ep), 0);
    cJSON_Delete(msg);
    cJSON_Delete(ep);
    return drain(f);
}

static int tick(struct fx *f, uint64_t now)
{
    assert_int_equal(gw_sim_esp_tick(f->e, now), 0);
    return drain(f);
}

/* Message i of the last drain, and its endpoint (NULL for own link). */
static const cJSON *msg_at(const struct fx *f, int i)
{
    const cJSON *item = cJSON_GetArrayItem(f->out, i);
    assert_non_null(item);
    return cJSON_GetObjectItemCaseSensitive(item, "msg");
}

static const char *ep_at(const struct fx *f, int i)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetArrayItem(f->out, i), "endpoint"));
}

/* Member lookup by a dotted path ("result.content.0.text"). */
static const cJSON *at(const cJSON *j, const char *path)
{
    char buf[200], *save = NULL;

    snprintf(buf, sizeof(buf), "%s", path);
    for (char *k = strtok_r(buf, ".", &save); k != NULL && j != NULL;
         k = strtok_r(NULL, ".", &save)) {
        if (cJSON_IsArray(j)) {
            j = cJSON_GetArrayItem(j, atoi(k));
        } else {
            j = cJSON_GetObjectItemCaseSensitive(j, k);
        }
    }
    return j;
}

static const char *str_at(const cJSON *j, const char *path)
{
    return cJSON_GetStringValue(at(j, path));
}

static double num_at(const cJSON *j, const char *path)
{
    const cJSON *v = at(j, path);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static uint32_t violations(const struct fx *f)
{
    return gw_sim_esp_stats(f->e)->violations;
}

/* initialize 2025-11-25 and notifications/initialized. */
static void handshake(struct fx *f, uint64_t now)
{
    assert_int_equal(
        rx(f, now,
           "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
           "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}}",
           NULL) >= 1,
        1);
    assert_string_equal(str_at(msg_at(f, 0), "result.protocolVersion"),
                        "2025-11-25");
    assert_int_equal(
        rx(f, now,
           "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
           NULL),
        0);
}

/* A tools/call request text. */
static void call(struct fx *f, uint64_t now, int id, const char *name,
                 const char *args, const char *extra)
{
    char buf[600];

    snprintf(buf, sizeof(buf),
             "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\","
             "\"params\":{\"name\":\"%s\",\"arguments\":%s%s}}",
             id, name, args, extra ? extra : "");
    rx(f, now, buf, NULL);
}

/* ---- lifecycle ---------------------------------------------------------- */

static void test_initialize(void **state)
{
    struct fx *f = fx_new(0, 0, NULL, 0);
    const cJSON *r;

    (void)state;
    assert_int_equal(
        rx(f, 0,
           "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"initialize\",\"params\":"
           "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{\"vision\":"
           "{\"url\":\"http://v/x\"}}}}",
           NULL),
        1);
    r = msg_at(f, 0);
    assert_int_equal((int)num_at(r, "id"), 7);
    assert_string_equal(str_at(r, "result.protocolVersion"), "2025-06-18");
    assert_string_equal(str_at(r, "result.serverInfo.name"), "sim-esp");
    char *caps = cJSON_PrintUnformatted(at(r, "result.capabilities"));
    assert_string_equal(
        caps, "{\"tools\":{\"listChanged\":true},\"resources\":{\"subscribe\":"
              "true,\"listChanged\":true},\"prompts\":{\"listChanged\":true},"
              "\"completions\":{},\"logging\":{},\"tasks\":{\"list\":{},"
              "\"cancel\":{},\"requests\":{\"tools\":{\"call\":{}}}}}");
    free(caps);
    assert_true(f->stock.vision_seen);
    assert_string_equal(f->stock.vision_url, "http://v/x");
    /* An unknown version gets the latest. */
    rx(f, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"initialize\",\"params\":"
       "{\"protocolVersion\":\"1999-01-01\"}}",
       NULL);
    assert_string_equal(str_at(msg_at(f, 0), "result.protocolVersion"),
                        "2025-11-25");
    assert_int_equal(f->stock.initializes, 2);
    assert_int_equal(violations(f), 0);
    fx_free(f);
}

/* esp-mcp refuses requests before notifications/initialized (newer than
 * 2024-11-05); the baseline has no such gate. */
static void test_lifecycle_gate(void **state)
{
    struct fx *f = fx_new(0, 0, NULL, 0);

    (void)state;
    rx(f, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
       "{\"protocolVersion\":\"2025-11-25\"}}",
       NULL);
    assert_int_equal(
        rx(f, 0, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}", NULL),
        1);
    assert_non_null(at(msg_at(f, 0), "result"));
    assert_int_equal(violations(f), 0);
    rx(f, 0, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}", NULL);
    assert_int_equal((int)num_at(msg_at(f, 0), "error.code"), -32600);
    assert_int_equal(violations(f), 1);
    rx(f, 0, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
       NULL);
    rx(f, 0, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/list\"}", NULL);
    assert_non_null(at(msg_at(f, 0), "result.tools"));
    fx_free(f);

    f = fx_new(0, 0, NULL, 0);
    rx(f, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
       "{\"protocolVersion\":\"2024-11-05\"}}",
       NULL);
    assert_string_equal(str_at(msg_at(f, 0), "result.protocolVersion"),
                        "2024-11-05");
    rx(f, 0, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}", NULL);
    assert_non_null(at(msg_at(f, 0), "result.tools"));
    assert_int_equal(violations(f), 0);
    fx_free(f);
}

/* An initialize esp-mcp accepts, with an id and a protocolVersion. */
static const char engine_init[] =
    "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"initialize\",\"params\":"
    "{\"protocolVersion\":\"%s\",\"capabilities\":{},\"clientInfo\":"
    "{\"name\":\"t\",\"version\":\"1\"}}}";

/* A server in the --mcp-engine esp-mcp mode. */
static struct fx *engine_new(void)
{
    struct gw_sim_esp_options o = {.big_resource_bytes = 100,
                                   .engine_lifecycle = true};
    struct fx *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    gw_sim_mcp_defaults(&f->stock);
    assert_int_equal(gw_sim_esp_create(&o, &f->stock, &f->e), 0);
    return f;
}

/* --mcp-engine esp-mcp: esp_mcp_engine.c's lifecycle, exactly. */
static void test_engine_lifecycle(void **state)
{
    struct fx *f = engine_new();
    char buf[300];

    (void)state;
    /* Before any initialize: ping refused too, notifications dropped. */
    rx(f, 0, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", NULL);
    assert_int_equal((int)num_at(msg_at(f, 0), "error.code"), -32600);
    assert_string_equal(str_at(msg_at(f, 0), "error.message"),
                        "Invalid request");
    assert_string_equal(str_at(msg_at(f, 0), "error.data.reason"),
                        "initialize must be first interaction");
    assert_int_equal(
        rx(f, 0, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}", NULL),
        0);
    assert_int_equal(gw_sim_esp_stats(f->e)->lifecycle_ignored, 1);
    /* An unknown version and a missing clientInfo are refused. */
    snprintf(buf, sizeof(buf), engine_init, 2, "1999-01-01");
    rx(f, 0, buf, NULL);
    assert_int_equal((int)num_at(msg_at(f, 0), "error.code"), -32602);
    assert_string_equal(str_at(msg_at(f, 0), "error.data.expected"),
                        "supported params.protocolVersion");
    rx(f, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\",\"params\":"
       "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{}}}",
       NULL);
    assert_string_equal(str_at(msg_at(f, 0), "error.data.field"),
                        "params.clientInfo");
    /* Accepted; gated until notifications/initialized, ping passes. */
    snprintf(buf, sizeof(buf), engine_init, 4, "2025-06-18");
    rx(f, 0, buf, NULL);
    assert_string_equal(str_at(msg_at(f, 0), "result.protocolVersion"),
                        "2025-06-18");
    rx(f, 0, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}", NULL);
    assert_non_null(at(msg_at(f, 0), "result"));
    rx(f, 0, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/list\"}", NULL);
    assert_string_equal(str_at(msg_at(f, 0), "error.data.reason"),
                        "client not initialized");
    rx(f, 0, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
       NULL);
    rx(f, 0, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
       NULL);
    rx(f, 0, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\"}", NULL);
    assert_non_null(at(msg_at(f, 0), "result.tools"));
    /* A remembered id is refused, even one that was refused. */
    rx(f, 0, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\"}", NULL);
    assert_string_equal(str_at(msg_at(f, 0), "error.data.reason"),
                        "duplicate request id in session");
    /* A second initialize closes the gate again and forgets the ids. */
    snprintf(buf, sizeof(buf), engine_init, 8, "2025-11-25");
    rx(f, 0, buf, NULL);
    assert_non_null(at(msg_at(f, 0), "result"));
    assert_int_equal(gw_sim_esp_stats(f->e)->reinitializes, 1);
    rx(f, 0, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/list\"}", NULL);
    assert_string_equal(str_at(msg_at(f, 0), "error.data.reason"),
                        "client not initialized");
    assert_int_equal(gw_sim_esp_stats(f->e)->lifecycle_refused, 3);
    fx_free(f);
}

/* What esp_mcp_engine.c forgets on a second initialize: the subscriptions
 * (no more updates) and the log level (it logs every level again, as it
 * does while none is set). */
static void test_engine_forgets(void **state)
{
    struct fx *f = engine_new();
    static const char initialized[] =
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}";
    char buf[300];

    (void)state;
    snprintf(buf, sizeof(buf), engine_init, 1, "2025-06-18");
    rx(f, 0, buf, NULL);
    rx(f, 0, initialized, NULL);
    /* No level set: info and debug lines, then the answer. */
    call(f, 0, 2, "self.sim.touch", "{}", NULL);
    assert_int_equal(cJSON_GetArraySize(f->out), 4);
    assert_string_equal(str_at(msg_at(f, 1), "params.level"), "debug");
    rx(f, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"logging/setLevel\","
       "\"params\":{\"level\":\"info\"}}",
       NULL);
    rx(f, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"resources/subscribe\","
       "\"params\":{\"uri\":\"device://status\"}}",
       NULL);
    assert_non_null(at(msg_at(f, 0), "result"));
    /* Info only, and the update. */
    call(f, 0, 5, "self.sim.touch", "{}", NULL);
    assert_int_equal(cJSON_GetArraySize(f->out), 4);
    assert_string_equal(str_at(msg_at(f, 1), "method"),
                        "notifications/resources/updated");
    snprintf(buf, sizeof(buf), engine_init, 6, "2025-06-18");
    rx(f, 0, buf, NULL);
    rx(f, 0, initialized, NULL);
    assert_int_equal(gw_sim_esp_stats(f->e)->reinitializes, 1);
    /* Debug again, and no update. */
    call(f, 0, 7, "self.sim.touch", "{}", NULL);
    assert_int_equal(cJSON_GetArraySize(f->out), 4);
    for (int i = 0; i < 3; i++) {
        assert_string_equal(str_at(msg_at(f, i), "method"),
                            "notifications/message");
    }
    assert_string_equal(str_at(msg_at(f, 1), "params.level"), "debug");
    assert_string_equal(str_at(msg_at(f, 3), "result.content.0.text"),
                        "touched 3");
    assert_int_equal(gw_sim_esp_stats(f->e)->updates_sent, 1);
    assert_int_equal(violations(f), 0);
    fx_free(f);
}

/* ---- tools ------------------------------------------------------------ */

static bool has_tool(const cJSON *tools, const char *name)
{
    const cJSON *t;

    cJSON_ArrayForEach(t, tools)
    {
        if (strcmp(str_at(t, "name"), name) == 0) {
            return true;
        }
    }
    return false;
}

static void test_tools_list_paged(void **state)
{
    struct fx *f = fx_new(0, 0, NULL, 0);
    int total = 0, pages = 0;
    char req[200], cursor[64] = "";
    bool job_task = false;

    (void)state;
    f->stock.extra_tools = 60; /* several pages */
    handshake(f, 0);
    do {
        const cJSON *t;
        snprintf(req, sizeof(req),
                 "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/list\","
                 "\"params\":{%s%s%s}}",
                 10 + pages, cursor[0] ? "\"cursor\":\"" : "", cursor,
                 cursor[0] ? "\"" : "");
        assert_int_equal(rx(f, 0, req, NULL), 1);
        const cJSON *tools = at(msg_at(f, 0), "result.tools");
        assert_true(cJSON_GetArraySize(tools) > 0);
        cJSON_ArrayForEach(t, tools)
        {
            if (strcmp(str_at(t, "name"), "self.sim.job") == 0) {
                job_task =
                    strcmp(str_at(t, "execution.taskSupport"), "optional") == 0;
            }
        }
        total += cJSON_GetArraySize(tools);
        const char *next = str_at(msg_at(f, 0), "result.nextCursor");
        snprintf(cursor, sizeof(cursor), "%s", next ? next : "");
        pages++;
    } while (cursor[0] != '\0' && pages < 20);
    assert_true(pages > 1);
    /* 3 common, 60 extra, 8 of the profile; user-only ones hidden */
    assert_int_equal(total, 3 + 60 + 8);
    assert_true(job_task);
    rx(f, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"tools/list\",\"params\":"
       "{\"cursor\":\"bogus\"}}",
       NULL);
    assert_int_equal((int)num_at(msg_at(f, 0), "error.code"), -32602);
    assert_int_equal(violations(f), 0);
    fx_free(f);
}

static void test_stock_tools(void **state)
{
    struct fx *f = fx_new(0, 0, NULL, 0);

    (void)state;
    handshake(f, 0);
    call(f, 0, 5, "self.audio_speaker.set_volume", "{\"volume\":33}", NULL);
    assert_int_equal(cJSON_GetArraySize(f->out), 1);
    assert_false(cJSON_IsTrue(at(msg_at(f, 0), "result.isError")));
    assert_int_equal(f->stock.volume, 33);
    /* The profile's errors carry a code (the firmware's do not). */
    call(f, 0, 6, "self.nope", "{}", NULL);
    assert_int_equal((int)num_at(msg_at(f, 0), "error.code"), -32602);
    assert_string_equal(str_at(msg_at(f, 0), "error.message"),
                        "Unknown tool: self.nope");
    /* Not task-capable. */
    call(f, 0, 7, "self.get_device_status", "{}", ",\"task\":{}");
    assert_int_equal((int)num_at(msg_at(f, 0), "error.code"), -32601);
    fx_free(f);
}

static void test_count_progress(void **state)
{
    struct fx *f = fx_new(0, 0, NULL, 0);

    (void)state;
    handshake(f, 1000);
    call(f, 1000, 9, "self.sim.count", "{\"steps\":3,\"interval_ms\":20}",
         ",\"_meta\":{\"progressToken\":42}");
    assert_int_equal(cJSON_GetArraySize(f->out), 0);
    assert_int_equal(gw_sim_esp_next_ms(f->e, 1000), 20);
    assert_int_equal(tick(f, 1019), 0);
    for (int i = 1; i <= 3; i++) {
        int n = tick(f, 1000 + 20 * (uint64_t)i);
        const cJSON *p = msg_at(f, 0);
        assert_int_equal(n, i == 3 ? 2 : 1);
        assert_string_equal(str_at(p, "method"), "notifications/progress");
        assert_int_equal((int)num_at(p, "params.progressToken"), 42);
        assert_int_equal((int)num_at(p, "params.progress"), i);
        assert_int_equal((int)num_at(p, "params.total"), 3);
    }
    assert_string_equal(str_at(msg_at(f, 1), "result.content.0.text"),
                        "counted 3");
    assert_int_equal((int)num_at(msg_at(f, 1), "id"), 9);
    assert_int_equal(gw_sim_esp_stats(f->e)->progress_sent, 3);
    assert_int_equal(gw_sim_esp_next_ms(f->e, 2000), -1);
    /* No token, no progress; a bad argument is a tool error. */
    call(f, 2000, 10, "self.sim.count", "{\"steps\":1}", NULL);
    assert_int_equal(tick(f, 2050), 1);
    assert_string_equal(str_at(msg_at(f, 0), "result.content.0.text"),
                        "counted 1");
    call(f, 2000, 11, "self.sim.count", "{\"steps\":51}", NULL);
    assert_true(cJSON_IsTrue(at(msg_at(f, 0), "result.isError")));
    fx_free(f);
}

static void test_count_cancelled(void **state)
{
    struct fx *f = fx_new(0, 0, NULL, 0);

    (void)state;
    handshake(f, 0);
    call(f, 0, 3, "self.sim.count", "{\"steps\":5,\"interval_ms\":10}",
         ",\"_meta\":{\"progressToken\":\"t\"}");
    assert_int_equal(tick(f, 10), 1);
    assert_int_equal(rx(f, 15,
                        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/"
                        "cancelled\",\"params\":{\"requestId\":3}}",
                        NULL),
                     0);
    assert_int_equal(gw_sim_esp_next_ms(f->e, 15), -1);
    assert_int_equal(tick(f, 1000), 0); /* never answers */
    assert_int_equal(f->stock.cancelled, 1);
    /* Unknown ids are a race, not a fault. */
    rx(f, 20,
       "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
       "\"params\":{\"requestId\":77}}",
       NULL);
    assert_int_equal(violations(f), 0);
    fx_free(f);
}

static void test_job_and_tasks(void **state)
{
    struct fx *f = fx_new(0, 0, NULL, 0);
    const cJSON *m;

    (void)state;
    handshake(f, 0);
    /* Without a task: answered after ms. */
    call(f, 0, 2, "self.sim.job", "{\"ms\":100}", NULL);
    assert_int_equal(cJSON_GetArraySize(f->out), 0);
    assert_int_equal(tick(f, 99), 0);
    assert_int_equal(tick(f, 100), 1);
    assert_string_equal(str_at(msg_at(f, 0), "result.content.0.text"),
                        "job done after 100 ms");
    /* As a task: CreateTaskResult at once. */
    call(f, 200, 3, "self.sim.job", "{\"ms\":50}", ",\"task\":{\"ttl\":5000}");
    m = msg_at(f, 0);
    assert_string_equal(str_at(m, "result.task.taskId"), "job-1");
    assert_string_equal(str_at(m, "result.task.status"), "working");
    assert_int_equal((int)num_at(m, "result.task.pollInterval"), 100);
    assert_int_equal((int)num_at(m, "result.task.ttl"), 5000);
    assert_non_null(str_at(m, "result.task.createdAt"));
    assert_non_null(str_at(m, "result.task.lastUpdatedAt"));
    rx(f, 210,
       "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tasks/get\",\"params\":"
       "{\"taskId\":\"job-1\"}}",
       NULL);
    assert_string_equal(str_at(msg_at(f, 0), "result.status"), "working");
    /* tasks/result waits for the end. */
    assert_int_equal(rx(f, 210,
                        "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tasks/"
                        "result\",\"params\":{\"taskId\":\"job-1\"}}",
                        NULL),
                     0);
    assert_int_equal(tick(f, 250), 2);
    m = msg_at(f, 0);
    assert_string_equal(str_at(m, "method"), "notifications/tasks/status");
    assert_string_equal(str_at(m, "params.status"), "completed");
    m = msg_at(f, 1);
    assert_int_equal((int)num_at(m, "id"), 5);
    assert_string_equal(str_at(m, "result.content.0.text"),
                        "job done after 50 ms");
    fx_free(f);
}

static void test_tasks_cancel_list(void **state)
{
    struct fx *f = fx_new(0, 0, NULL, 0);
    const cJSON *m, *rel;

    (void)state;
    handshake(f, 0);
    call(f, 0, 3, "self.sim.job", "{\"ms\":50}", ",\"task\":{}");
    call(f, 0, 4, "self.sim.job", "{\"ms\":500}", ",\"task\":{}");
    assert_string_equal(str_at(msg_at(f, 0), "result.task.taskId"), "job-2");
    tick(f, 50);
    rx(f, 60,
       "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tasks/result\",\"params\":"
       "{\"taskId\":\"job-1\"}}",
       NULL);
    m = msg_at(f, 0);
    rel = cJSON_GetObjectItemCaseSensitive(
        at(m, "result._meta"), "io.modelcontextprotocol/related-task");
    assert_string_equal(str_at(rel, "taskId"), "job-1");
    rx(f, 60,
       "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tasks/result\",\"params\":"
       "{\"taskId\":\"job-2\"}}",
       NULL);
    assert_int_equal(rx(f, 70,
                        "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tasks/"
                        "cancel\",\"params\":{\"taskId\":\"job-2\"}}",
                        NULL),
                     3);
    assert_string_equal(str_at(msg_at(f, 0), "params.status"), "cancelled");
    assert_int_equal((int)num_at(msg_at(f, 1), "id"), 6); /* the waiter */
    assert_int_equal((int)num_at(msg_at(f, 1), "error.code"), -32603);
    assert_string_equal(str_at(msg_at(f, 2), "result.status"), "cancelled");
    rx(f, 80,
       "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tasks/cancel\",\"params\":"
       "{\"taskId\":\"job-1\"}}",
       NULL);
    assert_int_equal((int)num_at(msg_at(f, 0), "error.code"), -32602);
    rx(f, 80, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tasks/list\"}", NULL);
    assert_int_equal(cJSON_GetArraySize(at(msg_at(f, 0), "result.tasks")), 2);
    rx(f, 80,
       "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tasks/get\",\"params\":"
       "{\"taskId\":\"job-9\"}}",
       NULL);
    assert_int_equal((int)num_at(msg_at(f, 0), "error.code"), -32602);
    assert_int_equal(tick(f, 1000), 0); /* cancelled: no completion */
    assert_int_equal(gw_sim_esp_stats(f->e)->tasks, 2);
    assert_int_equal(violations(f), 0);
    fx_free(f);
}

/* ---- requests from the device ------------------------------------------ */

static void test_sampling(void **state)
{
    struct fx *f = fx_new(0, 0, NULL, 0);
    const cJSON *m;

    (void)state;
    handshake(f, 0);
    call(f, 0, 1, "self.sim.ask", "{\"question\":\"why?\"}", NULL);
    assert_int_equal(cJSON_GetArraySize(f->out), 1);
    m = msg_at(f, 0);
    assert_null(ep_at(f, 0));
    assert_string_equal(str_at(m, "method"), "sampling/createMessage");
    assert_int_equal((int)num_at(m, "id"), 1); /* the device's own ids */
    assert_string_equal(str_at(m, "params.messages.0.role"), "user");
    assert_string_equal(str_at(m, "params.messages.0.content.text"), "why?");
    assert_int_equal((int)num_at(m, "params.maxTokens"), 64);
    /* The answer, under the device's id. */
    assert_int_equal(
        rx(f, 5,
           "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"role\":\"assistant\","
           "\"content\":{\"type\":\"text\",\"text\":\"because\"},\"model\":"
           "\"m\"}}",
           NULL),
        1);
    assert_int_equal((int)num_at(msg_at(f, 0), "id"), 1);
    assert_string_equal(str_at(msg_at(f, 0), "result.content.0.text"),
                        "because");
    /* An error: isError with its message. */
    call(f, 10, 2, "self.sim.ask", "{\"question\":\"q\"}", NULL);
    rx(f, 11,
       "{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-32006,\"message\":"
       "\"no MCP client of this device declared sampling\"}}",
       NULL);
    assert_true(cJSON_IsTrue(at(msg_at(f, 0), "result.isError")));
    assert_string_equal(str_at(msg_at(f, 0), "result.content.0.text"),
                        "no MCP client of this device declared sampling");
    assert_int_equal(gw_sim_esp_stats(f->e)->samplings, 2);
    assert_int_equal(violations(f), 0);
    fx_free(f);
}

static void test_elicitation_roots(void **state)
{
    struct fx *f = fx_new(0, 0, NULL, 0);
    const cJSON *m;

    (void)state;
    handshake(f, 0);
    call(f, 0, 1, "self.sim.confirm", "{\"message\":\"sure?\"}", NULL);
    m = msg_at(f, 0);
    assert_string_equal(str_at(m, "method"), "elicitation/create");
    assert_string_equal(str_at(m, "params.mode"), "form");
    assert_string_equal(str_at(m, "params.message"), "sure?");
    assert_string_equal(str_at(m, "params.requestedSchema.properties.ok.type"),
                        "boolean");
    assert_string_equal(str_at(m, "params.requestedSchema.required.0"), "ok");
    rx(f, 1,
       "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"action\":\"accept\","
       "\"content\":{\"ok\":true}}}",
       NULL);
    assert_string_equal(str_at(msg_at(f, 0), "result.content.0.text"),
                        "{\"action\":\"accept\",\"content\":{\"ok\":true}}");
    call(f, 2, 2, "self.sim.roots", "{}", NULL);
    m = msg_at(f, 0);
    assert_string_equal(str_at(m, "method"), "roots/list");
    assert_int_equal((int)num_at(m, "id"), 2);
    rx(f, 3,
       "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"roots\":[{\"uri\":"
       "\"file:///a\",\"name\":\"a\"}]}}",
       NULL);
    assert_string_equal(str_at(msg_at(f, 0), "result.content.0.text"),
                        "[{\"uri\":\"file:///a\",\"name\":\"a\"}]");
    assert_int_equal(gw_sim_esp_stats(f->e)->elicitations, 1);
    assert_int_equal(gw_sim_esp_stats(f->e)->roots, 1);
    assert_int_equal(violations(f), 0);
    fx_free(f);
}

static void test_ask_cancel(void **state)
{
    struct fx *f = fx_new(0, 0, NULL, 0);
    const cJSON *m;

    (void)state;
    handshake(f, 0);
    call(f, 0, 4, "self.sim.ask_cancel", "{\"question\":\"q\",\"after_ms\":30}",
         NULL);
    assert_int_equal(tick(f, 30), 2);
    m = msg_at(f, 0);
    assert_string_equal(str_at(m, "method"), "notifications/cancelled");
    assert_int_equal((int)num_at(m, "params.requestId"), 1);
    assert_string_equal(str_at(m, "params.reason"), "changed my mind");
    assert_string_equal(str_at(msg_at(f, 1), "result.content.0.text"),
                        "withdrawn");
    /* A late answer is counted, not a violation. */
    assert_int_equal(rx(f, 40,
                        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"role\":"
                        "\"assistant\",\"content\":{\"type\":\"text\","
                        "\"text\":\"x\"}}}",
                        NULL),
                     0);
    assert_int_equal(gw_sim_esp_stats(f->e)->late, 1);
    assert_int_equal(violations(f), 0);
    /* Cancelling the tools/call withdraws its request too. */
    call(f, 50, 5, "self.sim.ask", "{\"question\":\"q\"}", NULL);
    assert_int_equal(rx(f, 51,
                        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/"
                        "cancelled\",\"params\":{\"requestId\":5}}",
                        NULL),
                     1);
    assert_int_equal((int)num_at(msg_at(f, 0), "params.requestId"), 2);
    gw_sim_esp_finish(f->e);
    assert_int_equal(violations(f), 0); /* withdrawn is not unanswered */
    fx_free(f);
}

/* ---- remote calls (devices as clients of MCP servers) -------------------- */

static void test_remote_tool(void **state)
{
    struct fx *f = fx_new(0, 0, NULL, 0);
    const cJSON *m;

    (void)state;
    handshake(f, 0);
    call(f, 0, 8, "self.sim.remote",
         "{\"endpoint\":\"tools\",\"tool\":\"add\",\"arguments\":{\"a\":1}}",
         NULL);
    assert_string_equal(ep_at(f, 0), "tools");
    m = msg_at(f, 0);
    assert_string_equal(str_at(m, "method"), "tools/call");
    assert_string_equal(str_at(m, "params.name"), "add");
    assert_int_equal((int)num_at(m, "params.arguments.a"), 1);
    int rid = (int)num_at(m, "id");
    char buf[300];
    snprintf(buf, sizeof(buf),
             "{\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{\"content\":[{"
             "\"type\":\"text\",\"text\":\"3\"}],\"structuredContent\":{\"v\":"
             "3}}}",
             rid);
    assert_int_equal(rx(f, 1, buf, "\"tools\""), 1);
    assert_null(ep_at(f, 0));
    assert_int_equal((int)num_at(msg_at(f, 0), "id"), 8);
    assert_string_equal(str_at(msg_at(f, 0), "result.content.0.text"), "3");
    assert_int_equal((int)num_at(msg_at(f, 0), "result.structuredContent.v"),
                     3);
    /* An error: "error <code>: <message>". */
    call(f, 2, 9, "self.sim.remote", "{\"endpoint\":\"x\",\"tool\":\"t\"}",
         NULL);
    rid = (int)num_at(msg_at(f, 0), "id");
    snprintf(buf, sizeof(buf),
             "{\"jsonrpc\":\"2.0\",\"id\":%d,\"error\":{\"code\":-32007,"
             "\"message\":\"no MCP server named x for this device\"}}",
             rid);
    rx(f, 3, buf, "\"x\"");
    assert_true(cJSON_IsTrue(at(msg_at(f, 0), "result.isError")));
    assert_string_equal(str_at(msg_at(f, 0), "result.content.0.text"),
                        "error -32007: no MCP server named x for this device");
    assert_int_equal(gw_sim_esp_stats(f->e)->remote_ok, 1);
    assert_int_equal(gw_sim_esp_stats(f->e)->remote_err, 1);
    assert_int_equal(violations(f), 0);
    /* A server's log message with its endpoint is fine... */
    rx(f, 4,
       "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":"
       "{\"level\":\"info\",\"data\":\"x\"}}",
       "\"tools\"");
    assert_int_equal(violations(f), 0);
    /* ...progress on a token the device never gave is not. */
    rx(f, 4,
       "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":"
       "{\"progressToken\":1,\"progress\":1}}",
       "\"tools\"");
    assert_int_equal(violations(f), 1);
    assert_int_equal(gw_sim_esp_stats(f->e)->remote_notifications, 2);
    fx_free(f);
}

static void test_remote_cli(void **state)
{
    const char *const remote[] = {"tools:echo:{\"text\":\"hi\"}", "other:ping"};
    struct fx *f = fx_new(0, 0, remote, 2);
    cJSON *o;
    const cJSON *m;

    (void)state;
    /* Nothing before the first initialize; then right after its reply. */
    assert_int_equal(gw_sim_esp_next_ms(f->e, 0), -1);
    assert_int_equal(
        rx(f, 0,
           "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
           "{\"protocolVersion\":\"2025-11-25\"}}",
           NULL),
        3);
    assert_non_null(at(msg_at(f, 0), "result.protocolVersion"));
    assert_string_equal(ep_at(f, 1), "tools");
    m = msg_at(f, 1);
    assert_string_equal(str_at(m, "method"), "tools/call");
    assert_string_equal(str_at(m, "params.name"), "echo");
    assert_string_equal(str_at(m, "params.arguments.text"), "hi");
    assert_int_equal((int)num_at(m, "id"), 1);
    assert_string_equal(ep_at(f, 2), "other");
    assert_int_equal((int)num_at(msg_at(f, 2), "id"), 2);
    /* A second initialize sends nothing more. */
    assert_int_equal(
        rx(f, 1,
           "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":"
           "{\"protocolVersion\":\"2025-11-25\"}}",
           NULL),
        1);
    rx(f, 2,
       "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":"
       "\"text\",\"text\":\"hi\"}]}}",
       "\"tools\"");
    /* The second answer lacks its endpoint: a violation. */
    rx(f, 3, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":[]}}",
       NULL);
    assert_int_equal(violations(f), 1);
    assert_non_null(
        strstr(gw_sim_esp_stats(f->e)->violation, "without its endpoint"));
    o = cJSON_CreateObject();
    assert_true(gw_sim_esp_result_json(f->e, o));
    assert_int_equal((int)num_at(o, "mcp_remote_ok"), 2);
    assert_string_equal(str_at(o, "mcp_remote.0.endpoint"), "tools");
    assert_string_equal(str_at(o, "mcp_remote.0.tool"), "echo");
    assert_true(cJSON_IsTrue(at(o, "mcp_remote.0.ok")));
    assert_true(cJSON_IsTrue(at(o, "mcp_remote.0.done")));
    assert_string_equal(str_at(o, "mcp_remote.0.text"), "hi");
    assert_string_equal(str_at(o, "mcp_remote.1.endpoint"), "other");
    assert_int_equal((int)num_at(o, "mcp_violations"), 1);
    cJSON_Delete(o);
    fx_free(f);
}

/* --mcp-remote-init: initialize and initialized per endpoint, then its
 * calls, as esp-mcp's client does. */
static void test_remote_init(void **state)
{
    const char *const remote[] = {"a:t1", "b:t2", "a:t3"};
    struct gw_sim_esp_options o = {
        .big_resource_bytes = 10,
        .remote = remote,
        .n_remote = 3,
        .remote_init = true,
    };
    struct fx *f = calloc(1, sizeof(*f));
    cJSON *r;

    (void)state;
    assert_non_null(f);
    gw_sim_mcp_defaults(&f->stock);
    assert_int_equal(gw_sim_esp_create(&o, &f->stock, &f->e), 0);
    assert_int_equal(
        rx(f, 0,
           "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
           "{\"protocolVersion\":\"2025-11-25\"}}",
           NULL),
        3);
    assert_string_equal(ep_at(f, 1), "a");
    assert_string_equal(str_at(msg_at(f, 1), "method"), "initialize");
    assert_string_equal(str_at(msg_at(f, 1), "params.protocolVersion"),
                        "2025-11-25");
    assert_string_equal(str_at(msg_at(f, 1), "params.clientInfo.name"),
                        "sim-esp");
    assert_string_equal(ep_at(f, 2), "b");
    /* a answers: initialized, then both of a's calls, in order. */
    assert_int_equal(rx(f, 1,
                        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{"
                        "\"protocolVersion\":\"2025-11-25\"}}",
                        "\"a\""),
                     3);
    assert_string_equal(str_at(msg_at(f, 0), "method"),
                        "notifications/initialized");
    assert_string_equal(ep_at(f, 0), "a");
    assert_string_equal(str_at(msg_at(f, 1), "params.name"), "t1");
    assert_string_equal(str_at(msg_at(f, 2), "params.name"), "t3");
    assert_string_equal(ep_at(f, 2), "a");
    /* b fails: no initialized, its call still goes. */
    assert_int_equal(rx(f, 2,
                        "{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{"
                        "\"code\":-32007,\"message\":\"no\"}}",
                        "\"b\""),
                     1);
    assert_string_equal(str_at(msg_at(f, 0), "params.name"), "t2");
    r = cJSON_CreateObject();
    assert_true(gw_sim_esp_result_json(f->e, r));
    assert_int_equal((int)num_at(r, "mcp_remote_inits"), 1);
    assert_int_equal((int)num_at(r, "mcp_remote_init_err"), 1);
    assert_int_equal((int)num_at(r, "mcp_remote_ok"), 0);
    assert_false(cJSON_IsTrue(at(r, "mcp_remote.0.done")));
    cJSON_Delete(r);
    assert_int_equal(violations(f), 0);
    gw_sim_esp_finish(f->e); /* three calls never answered */
    assert_int_equal(gw_sim_esp_stats(f->e)->unanswered, 3);
    fx_free(f);
}

/* --mcp-remote-progress: the call's token is its id; progress on it is
 * counted while it runs, anything else is a violation. */
static void test_remote_progress(void **state)
{
    const char *const remote[] = {"tools:count:{\"steps\":2}"};
    struct gw_sim_esp_options o = {
        .big_resource_bytes = 10,
        .remote = remote,
        .n_remote = 1,
        .remote_progress = true,
    };
    struct fx *f = calloc(1, sizeof(*f));
    const char *progress =
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\","
        "\"params\":{\"progressToken\":1,\"progress\":1,\"total\":2}}";

    (void)state;
    assert_non_null(f);
    gw_sim_mcp_defaults(&f->stock);
    assert_int_equal(gw_sim_esp_create(&o, &f->stock, &f->e), 0);
    assert_int_equal(
        rx(f, 0,
           "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
           "{\"protocolVersion\":\"2024-11-05\"}}",
           NULL),
        2);
    assert_string_equal(ep_at(f, 1), "tools");
    assert_int_equal((int)num_at(msg_at(f, 1), "id"), 1);
    assert_int_equal((int)num_at(msg_at(f, 1), "params._meta.progressToken"),
                     1);
    /* self.sim.remote calls carry theirs too */
    call(f, 0, 7, "self.sim.remote",
         "{\"endpoint\":\"tools\",\"tool\":\"count\"}", NULL);
    assert_int_equal((int)num_at(msg_at(f, 0), "id"), 2);
    assert_int_equal((int)num_at(msg_at(f, 0), "params._meta.progressToken"),
                     2);
    rx(f, 1, progress, "\"tools\"");
    assert_int_equal(violations(f), 0);
    assert_int_equal(gw_sim_esp_stats(f->e)->remote_progress, 1);
    rx(f, 1, progress, "\"other\""); /* another server */
    assert_int_equal(violations(f), 1);
    rx(f, 2, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}",
       "\"tools\"");
    rx(f, 3, progress, "\"tools\""); /* after the answer */
    assert_int_equal(violations(f), 2);
    assert_int_equal(gw_sim_esp_stats(f->e)->remote_progress, 1);
    fx_free(f);
}

static void test_remote_parse(void **state)
{
    struct gw_sim_esp_remote r;

    (void)state;
    assert_int_equal(gw_sim_esp_remote_parse("a.b-c_1:t:{\"x\":[1,2]}", &r), 0);
    assert_string_equal(r.endpoint, "a.b-c_1");
    assert_string_equal(r.tool, "t");
    assert_non_null(cJSON_GetObjectItem(r.arguments, "x"));
    gw_sim_esp_remote_free(&r);
    assert_int_equal(gw_sim_esp_remote_parse("e:t", &r), 0);
    assert_true(cJSON_IsObject(r.arguments));
    gw_sim_esp_remote_free(&r);
    assert_int_equal(gw_sim_esp_remote_parse("e", &r), GW_EINVAL);
    assert_int_equal(gw_sim_esp_remote_parse(":t", &r), GW_EINVAL);
    assert_int_equal(gw_sim_esp_remote_parse("e::{}", &r), GW_EINVAL);
    assert_int_equal(gw_sim_esp_remote_parse("e f:t", &r), GW_EINVAL);
    assert_int_equal(gw_sim_esp_remote_parse("e:t:[1]", &r), GW_EINVAL);
    assert_int_equal(gw_sim_esp_remote_parse("e:t:{", &r), GW_EINVAL);
}

/* ---- resources, prompts, completion, logging, list changes ------------- */

static void test_resources(void **state)
{
    struct fx *f = fx_new(100, 0, NULL, 0);
    const cJSON *m;

    (void)state;
    handshake(f, 0);
    rx(f, 0, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"resources/list\"}",
       NULL);
    m = at(msg_at(f, 0), "result.resources");
    assert_int_equal(cJSON_GetArraySize(m), 3);
    assert_string_equal(str_at(m, "0.uri"), "device://status");
    assert_int_equal((int)num_at(m, "2.size"), 100);
    rx(f, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"resources/templates/list\"}",
       NULL);
    assert_string_equal(
        str_at(msg_at(f, 0), "result.resourceTemplates.0.uriTemplate"),
        "device://sensor/{name}");
    rx(f, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"resources/read\",\"params\":"
       "{\"uri\":\"device://status\"}}",
       NULL);
    m = msg_at(f, 0);
    assert_string_equal(str_at(m, "result.contents.0.mimeType"),
                        "application/json");
    assert_string_equal(str_at(m, "result.contents.0.text"),
                        "{\"volume\":70,\"touched\":0}");
    rx(f, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"resources/read\",\"params\":"
       "{\"uri\":\"device://snapshot.png\"}}",
       NULL);
    assert_non_null(str_at(msg_at(f, 0), "result.contents.0.blob"));
    assert_null(at(msg_at(f, 0), "result.contents.0.text"));
    rx(f, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"resources/read\",\"params\":"
       "{\"uri\":\"device://big.txt\"}}",
       NULL);
    assert_int_equal(strlen(str_at(msg_at(f, 0), "result.contents.0.text")),
                     100);
    rx(f, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"resources/read\",\"params\":"
       "{\"uri\":\"device://sensor/humidity\"}}",
       NULL);
    assert_string_equal(str_at(msg_at(f, 0), "result.contents.0.text"),
                        "humidity=40");
    rx(f, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"resources/read\",\"params\":"
       "{\"uri\":\"device://sensor/nope\"}}",
       NULL);
    assert_int_equal((int)num_at(msg_at(f, 0), "error.code"), -32002);
    rx(f, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"resources/subscribe\","
       "\"params\":{\"uri\":\"device://nope\"}}",
       NULL);
    assert_int_equal((int)num_at(msg_at(f, 0), "error.code"), -32002);
    /* Subscribed: touch and the period each send an update. */
    assert_int_equal(gw_sim_esp_next_ms(f->e, 0), -1);
    rx(f, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"resources/subscribe\","
       "\"params\":{\"uri\":\"device://status\"}}",
       NULL);
    assert_non_null(at(msg_at(f, 0), "result"));
    assert_int_equal(gw_sim_esp_next_ms(f->e, 0), 100);
    call(f, 10, 11, "self.sim.touch", "{}", NULL);
    assert_int_equal(cJSON_GetArraySize(f->out), 2);
    assert_string_equal(str_at(msg_at(f, 0), "method"),
                        "notifications/resources/updated");
    assert_string_equal(str_at(msg_at(f, 0), "params.uri"), "device://status");
    assert_string_equal(str_at(msg_at(f, 1), "result.content.0.text"),
                        "touched 1");
    assert_int_equal(tick(f, 100), 1);
    assert_int_equal(tick(f, 200), 1);
    rx(f, 250,
       "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"resources/unsubscribe\","
       "\"params\":{\"uri\":\"device://status\"}}",
       NULL);
    assert_int_equal(tick(f, 300), 0);
    assert_int_equal(gw_sim_esp_next_ms(f->e, 300), -1);
    call(f, 310, 13, "self.sim.touch", "{}", NULL);
    assert_int_equal(cJSON_GetArraySize(f->out), 1); /* no update */
    assert_int_equal(gw_sim_esp_stats(f->e)->subscribed, 1);
    assert_int_equal(gw_sim_esp_stats(f->e)->updates_sent, 3);
    assert_int_equal(violations(f), 0);
    fx_free(f);
}

static void test_prompts_completion(void **state)
{
    struct fx *f = fx_new(0, 0, NULL, 0);
    const cJSON *m;

    (void)state;
    handshake(f, 0);
    rx(f, 0, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"prompts/list\"}",
       NULL);
    m = at(msg_at(f, 0), "result.prompts");
    assert_int_equal(cJSON_GetArraySize(m), 2);
    assert_string_equal(str_at(m, "0.name"), "greeting");
    assert_true(cJSON_IsTrue(at(m, "0.arguments.0.required")));
    rx(f, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"prompts/get\",\"params\":"
       "{\"name\":\"greeting\",\"arguments\":{\"name\":\"Ann\"}}}",
       NULL);
    assert_string_equal(str_at(msg_at(f, 0), "result.messages.0.content.text"),
                        "Say hello to Ann");
    rx(f, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"prompts/get\",\"params\":"
       "{\"name\":\"greeting\"}}",
       NULL);
    assert_int_equal((int)num_at(msg_at(f, 0), "error.code"), -32602);
    rx(f, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"prompts/get\",\"params\":"
       "{\"name\":\"status_report\"}}",
       NULL);
    assert_non_null(str_at(msg_at(f, 0), "result.messages.0.content.text"));
    rx(f, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"completion/complete\","
       "\"params\":{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"greeting\"},"
       "\"argument\":{\"name\":\"name\",\"value\":\"al\"}}}",
       NULL);
    m = at(msg_at(f, 0), "result.completion");
    assert_int_equal(cJSON_GetArraySize(at(m, "values")), 2);
    assert_string_equal(str_at(m, "values.0"), "alice");
    assert_string_equal(str_at(m, "values.1"), "alan");
    assert_int_equal((int)num_at(m, "total"), 2);
    rx(f, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"completion/complete\","
       "\"params\":{\"ref\":{\"type\":\"ref/resource\",\"uri\":"
       "\"device://sensor/{name}\"},\"argument\":{\"name\":\"name\","
       "\"value\":\"t\"}}}",
       NULL);
    m = at(msg_at(f, 0), "result.completion.values");
    assert_int_equal(cJSON_GetArraySize(m), 2);
    assert_string_equal(str_at(m, "0"), "temp");
    assert_string_equal(str_at(m, "1"), "tilt");
    rx(f, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"completion/complete\","
       "\"params\":{\"ref\":{\"type\":\"ref/other\"},\"argument\":{\"name\":"
       "\"n\",\"value\":\"\"}}}",
       NULL);
    assert_int_equal((int)num_at(msg_at(f, 0), "error.code"), -32602);
    rx(f, 0, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"nope/nope\"}", NULL);
    assert_int_equal((int)num_at(msg_at(f, 0), "error.code"), -32601);
    assert_int_equal(violations(f), 0);
    fx_free(f);
}

static void test_logging(void **state)
{
    struct fx *f = fx_new(0, 0, NULL, 0);
    const cJSON *m;

    (void)state;
    handshake(f, 0);
    call(f, 0, 2, "self.get_device_status", "{}", NULL);
    assert_int_equal(cJSON_GetArraySize(f->out), 1); /* nothing logged */
    rx(f, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"logging/setLevel\","
       "\"params\":{\"level\":\"info\"}}",
       NULL);
    assert_non_null(at(msg_at(f, 0), "result"));
    call(f, 0, 4, "self.get_device_status", "{}", NULL);
    assert_int_equal(cJSON_GetArraySize(f->out), 2);
    m = msg_at(f, 0);
    assert_string_equal(str_at(m, "method"), "notifications/message");
    assert_string_equal(str_at(m, "params.level"), "info");
    assert_string_equal(str_at(m, "params.logger"), "sim");
    assert_string_equal(str_at(m, "params.data"),
                        "tools/call self.get_device_status");
    rx(f, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"logging/setLevel\","
       "\"params\":{\"level\":\"debug\"}}",
       NULL);
    call(f, 0, 6, "self.get_device_status", "{}", NULL);
    assert_int_equal(cJSON_GetArraySize(f->out), 3);
    assert_string_equal(str_at(msg_at(f, 1), "params.level"), "debug");
    rx(f, 0,
       "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"logging/setLevel\","
       "\"params\":{\"level\":\"loud\"}}",
       NULL);
    assert_int_equal((int)num_at(msg_at(f, 0), "error.code"), -32602);
    assert_int_equal(gw_sim_esp_stats(f->e)->logs_sent, 3);
    fx_free(f);
}

static void test_list_changes(void **state)
{
    struct fx *f = fx_new(0, 500, NULL, 0);

    (void)state;
    assert_int_equal(gw_sim_esp_next_ms(f->e, 0), -1);
    handshake(f, 1000);
    assert_int_equal(gw_sim_esp_next_ms(f->e, 1000), 500);
    assert_int_equal(tick(f, 1500), 3);
    assert_string_equal(str_at(msg_at(f, 0), "method"),
                        "notifications/tools/list_changed");
    assert_string_equal(str_at(msg_at(f, 1), "method"),
                        "notifications/resources/list_changed");
    assert_string_equal(str_at(msg_at(f, 2), "method"),
                        "notifications/prompts/list_changed");
    rx(f, 1500, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}",
       NULL);
    assert_true(has_tool(at(msg_at(f, 0), "result.tools"), "self.sim.added"));
    rx(f, 1500, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"resources/list\"}",
       NULL);
    assert_int_equal(cJSON_GetArraySize(at(msg_at(f, 0), "result.resources")),
                     4);
    rx(f, 1500, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"prompts/list\"}",
       NULL);
    assert_int_equal(cJSON_GetArraySize(at(msg_at(f, 0), "result.prompts")), 3);
    call(f, 1500, 5, "self.sim.added", "{}", NULL);
    assert_string_equal(str_at(msg_at(f, 0), "result.content.0.text"), "added");
    assert_int_equal(tick(f, 5000), 0); /* once */
    fx_free(f);
}

/* ---- strict checks ------------------------------------------------------ */

static void test_violations(void **state)
{
    struct fx *f = fx_new(0, 0, NULL, 0);
    char text[200];

    (void)state;
    handshake(f, 0);
    /* String ids are dropped, as the firmware drops them. */
    assert_int_equal(rx(f, 0,
                        "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":"
                        "\"ping\"}",
                        NULL),
                     0);
    assert_int_equal(violations(f), 1);
    assert_int_equal(
        rx(f, 0, "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", NULL),
        0);
    assert_int_equal(violations(f), 2);
    assert_int_equal(
        rx(f, 0, "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", NULL),
        0);
    assert_int_equal(violations(f), 3);
    assert_int_equal(rx(f, 0, "{\"id\":1,\"method\":\"ping\"}", NULL), 0);
    assert_int_equal(violations(f), 4);
    assert_int_equal(rx(f, 0,
                        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\","
                        "\"extra\":1}",
                        NULL),
                     0);
    assert_int_equal(violations(f), 5);
    assert_int_equal(rx(f, 0,
                        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\","
                        "\"params\":[]}",
                        NULL),
                     1);
    assert_int_equal(violations(f), 6);
    /* Responses: never used, neither/both, answered twice, endpoint. */
    rx(f, 0, "{\"jsonrpc\":\"2.0\",\"id\":40,\"result\":{}}", NULL);
    assert_int_equal(violations(f), 7);
    rx(f, 0, "{\"jsonrpc\":\"2.0\",\"id\":40}", NULL);
    assert_int_equal(violations(f), 8);
    call(f, 0, 2, "self.sim.roots", "{}", NULL);
    rx(f, 0, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"roots\":[]}}",
       "\"tools\"");
    assert_int_equal(violations(f), 9); /* own-link request, endpoint set */
    rx(f, 0, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"roots\":[]}}", NULL);
    assert_int_equal(violations(f), 10); /* a second answer */
    rx(f, 0, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}", "7");
    assert_int_equal(violations(f), 11); /* endpoint not a string */
    rx(f, 0, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}", "\"\"");
    assert_int_equal(violations(f), 12);
    /* An id reused while its tools/call still runs. */
    call(f, 0, 9, "self.sim.job", "{\"ms\":100}", NULL);
    rx(f, 0, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}", NULL);
    assert_int_equal((int)num_at(msg_at(f, 0), "error.code"), -32600);
    assert_int_equal(violations(f), 13);
    /* A device request never answered, at the end. */
    call(f, 0, 10, "self.sim.ask", "{\"question\":\"q\"}", NULL);
    gw_sim_esp_finish(f->e);
    assert_int_equal(violations(f), 14);
    assert_int_equal(gw_sim_esp_stats(f->e)->unanswered, 1);
    assert_non_null(strstr(gw_sim_esp_stats(f->e)->violation, "\"a\""));
    int n = 0;
    while (gw_sim_esp_pop_violation(f->e, text, sizeof(text))) {
        n++;
    }
    assert_int_equal(n, 14);
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_initialize),
        cmocka_unit_test(test_lifecycle_gate),
        cmocka_unit_test(test_engine_lifecycle),
        cmocka_unit_test(test_engine_forgets),
        cmocka_unit_test(test_tools_list_paged),
        cmocka_unit_test(test_stock_tools),
        cmocka_unit_test(test_count_progress),
        cmocka_unit_test(test_count_cancelled),
        cmocka_unit_test(test_job_and_tasks),
        cmocka_unit_test(test_tasks_cancel_list),
        cmocka_unit_test(test_sampling),
        cmocka_unit_test(test_elicitation_roots),
        cmocka_unit_test(test_ask_cancel),
        cmocka_unit_test(test_remote_tool),
        cmocka_unit_test(test_remote_cli),
        cmocka_unit_test(test_remote_init),
        cmocka_unit_test(test_remote_progress),
        cmocka_unit_test(test_remote_parse),
        cmocka_unit_test(test_resources),
        cmocka_unit_test(test_prompts_completion),
        cmocka_unit_test(test_logging),
        cmocka_unit_test(test_list_changes),
        cmocka_unit_test(test_violations),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
