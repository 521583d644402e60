/*
 * What an idle device costs the gateway: devices online and discovered
 * with the stock firmware's tool list through the real device table, its
 * discovery, link and catalog, counted by the allocator; and the one copy
 * of a tool list that devices of one firmware share.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>
#include <uv.h>

#if defined(__SANITIZE_ADDRESS__)
#define GW_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GW_ASAN 1
#endif
#endif
#ifdef GW_ASAN
/* The sanitizer's count (its header is not always installed). */
size_t __sanitizer_get_current_allocated_bytes(void);
#else
#include <malloc.h>
#endif

#include "codec/envelope.h"
#include "codec/presence.h"
#include "common/log.h"
#include "config/config.h"
#include "fixture.h"
#include "gateway/core/config_hold.h"
#include "gateway/device/device_table.h"
#include "gateway/device/publish.h"
#include "gateway/device/shared_lists_int.h"

/* The target of a fleet: bytes of gateway memory per idle device. */
#define IDLE_DEVICE_BYTES_MAX 4096

/* Devices measured: the fleet bench's size; GW_IDLE_DEVICES overrides. */
#define IDLE_DEVICES 18000

/* Stock xiaozhi-esp32 (2.x) answers, as a device of it sends them. */
static const char init_result[] =
    "{\"protocolVersion\":\"2024-11-05\",\"capabilities\":{\"tools\":{}},"
    "\"serverInfo\":{\"name\":\"bread-compact-wifi\",\"version\":\"2.0.3\"}}";

/* Its eight tools (the common ones, the camera's, the user-only ones),
 * with %s in a description so that a test can make a different list. */
static const char stock_tools_fmt[] =
    "{\"tools\":["
    "{\"name\":\"self.get_device_status\",\"description\":\"Provides the "
    "real-time information of the device, including the current status of "
    "the audio speaker, screen, battery, network, etc.\\nUse this tool for: "
    "\\n1. Answering questions about current condition (e.g. what is the "
    "current volume of the audio speaker?)\\n2. As the first step to control "
    "the device (e.g. turn up / down the volume of the audio speaker, "
    "etc.)\",\"inputSchema\":{\"type\":\"object\",\"properties\":{}}},"
    "{\"name\":\"self.audio_speaker.set_volume\",\"description\":\"Set the "
    "volume of the audio speaker. If the current volume is unknown, you must "
    "call `self.get_device_status` tool first and then call this "
    "tool.\",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"volume\":"
    "{\"type\":\"integer\",\"minimum\":0,\"maximum\":100}},\"required\":["
    "\"volume\"]}},"
    "{\"name\":\"self.screen.set_brightness\",\"description\":\"Set the "
    "brightness of the screen.\",\"inputSchema\":{\"type\":\"object\","
    "\"properties\":{\"brightness\":{\"type\":\"integer\",\"minimum\":0,"
    "\"maximum\":100}},\"required\":[\"brightness\"]}},"
    "{\"name\":\"self.screen.set_theme\",\"description\":\"Set the theme of "
    "the screen. The theme can be `light` or `dark`.%s\",\"inputSchema\":{"
    "\"type\":\"object\",\"properties\":{\"theme\":{\"type\":\"string\"}},"
    "\"required\":[\"theme\"]}},"
    "{\"name\":\"self.camera.take_photo\",\"description\":\"Take a photo and "
    "explain it. Use this tool after the user asks you to see something.\\n"
    "Args:\\n  `question`: The question that you want to ask about the "
    "photo.\\nReturn:\\n  A JSON object that provides the photo "
    "information.\",\"inputSchema\":{\"type\":\"object\",\"properties\":{"
    "\"question\":{\"type\":\"string\"}},\"required\":[\"question\"]}},"
    "{\"name\":\"self.get_system_info\",\"description\":\"Get the system "
    "information\",\"inputSchema\":{\"type\":\"object\",\"properties\":{}},"
    "\"annotations\":{\"audience\":[\"user\"]}},"
    "{\"name\":\"self.reboot\",\"description\":\"Reboot the system\","
    "\"inputSchema\":{\"type\":\"object\",\"properties\":{}},\"annotations\":"
    "{\"audience\":[\"user\"]}},"
    "{\"name\":\"self.upgrade_firmware\",\"description\":\"Upgrade firmware "
    "from a specific URL. This will download and install the firmware, then "
    "reboot the device.\",\"inputSchema\":{\"type\":\"object\",\"properties\":"
    "{\"url\":{\"type\":\"string\",\"description\":\"The URL of the firmware "
    "binary file to download and install\"}},\"required\":[\"url\"]},"
    "\"annotations\":{\"audience\":[\"user\"]}}]}";

static struct {
    struct gw_fixture fx;
    struct gw_config_live config;
    struct gw_publisher pub;
    struct gw_device_table t;
    bool started;
    unsigned closed;
} T;

/* Bytes the allocator has handed out and not taken back. */
static size_t heap_in_use(void)
{
#ifdef GW_ASAN
    return __sanitizer_get_current_allocated_bytes();
#else
    struct mallinfo2 mi = mallinfo2();

    /* Big blocks (the hash table's buckets) are mapped apart. */
    return mi.uordblks + mi.hblkhd;
#endif
}

/* A table with discovery on and the outbox off (no broker here: what is
 * sent is dropped, as a broker would take it, not held). */
static void start(void)
{
    static const char text[] =
        "{\"backends\":[{\"name\":\"main\",\"url\":\"ws://127.0.0.1:9/\"}],"
        "\"limits\":{\"outbox_messages\":0},"
        "\"mcp\":{\"discover\":true,\"call_timeout_ms\":600000}}";
    char err[512];
    struct gw_config *cfg = NULL;

    assert_int_equal(gw_config_load_string(text, sizeof(text) - 1, "test", &cfg,
                                           err, sizeof(err)),
                     0);
    assert_int_equal(gw_config_live_init(&T.config, cfg), 0);
    T.pub = (struct gw_publisher){.link = NULL, .config = &T.config};
    gw_device_table_init(&T.t, &T.fx.loop, &T.config, &T.pub);
    T.started = true;
}

static void on_closed(struct gw_device_table *t, void *arg)
{
    (void)t;
    (void)arg;
    T.closed++;
}

static void stop(void)
{
    if (!T.started) {
        return;
    }
    T.started = false;
    gw_device_table_close(&T.t, on_closed, &T);
    GW_FIXTURE_RUN_UNTIL(&T.fx, T.closed > 0);
    gw_config_live_close(&T.config);
}

static int setup(void **state)
{
    (void)state;
    memset(&T, 0, sizeof(T));
    /* Lines per discovery otherwise (with no broker, "not sent"). */
    gw_log_set_level(GW_LOG_ERROR);
    gw_fixture_loop_init(&T.fx);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    stop();
    gw_fixture_loop_close(&T.fx);
    /* Every shared list went with the last device that held it. */
    assert_int_equal(gw__device_lists_held(), 0);
    return 0;
}

/* A stock-firmware-like client id: group, MAC, uuid. */
static void client_id_of(unsigned i, char *out, size_t cap)
{
    snprintf(out, cap,
             "GID_test@@@02_00_%02x_%02x_%02x_%02x@@@"
             "6f1e2d3c-4b5a-4978-8a6b-5c4d%08x",
             (i >> 24) & 0xff, (i >> 16) & 0xff, (i >> 8) & 0xff, i & 0xff, i);
}

/* The device's result to the link's latest request. */
static void answer_latest(const struct gw_device *d, const char *result)
{
    size_t cap = strlen(result) + 256;
    char *text = malloc(cap);
    struct gw_envelope env;
    int n;

    assert_non_null(text);
    n = snprintf(text, cap,
                 "{\"type\":\"mcp\",\"session_id\":\"\",\"payload\":{"
                 "\"jsonrpc\":\"2.0\",\"id\":%u,\"result\":%s}}",
                 d->link.next_id, result);
    assert_true(n > 0 && (size_t)n < cap);
    assert_int_equal(gw_envelope_parse(text, (size_t)n, cap, &env), 0);
    free(text);
    assert_true(gw_device_on_mcp(&T.t, d->client_id, &env));
    gw_envelope_free(&env);
}

/* The stock list, or one whose set_theme description ends in extra. */
static char *tools_result(const char *extra)
{
    size_t cap = sizeof(stock_tools_fmt) + strlen(extra);
    char *s = malloc(cap);

    assert_non_null(s);
    snprintf(s, cap, stock_tools_fmt, extra);
    return s;
}

/* Device i online, initialized and its tools read (tools: the result). */
static struct gw_device *online(unsigned i, const char *tools)
{
    struct gw_presence p = {.online = true, .has_conn = true, .conn = i + 1};
    char id[GW_CLIENT_ID_MAX + 1];
    struct gw_device *d;

    client_id_of(i, id, sizeof(id));
    snprintf(p.address, sizeof(p.address), "10.%u.%u.%u", (i >> 16) & 0xff,
             (i >> 8) & 0xff, i & 0xff);
    assert_int_equal(gw_device_on_presence(&T.t, id, &p), GW_PRESENCE_ARRIVED);
    d = gw_device_find(&T.t, id);
    assert_non_null(d);
    assert_int_equal(d->discovery.state, GW_MCP_INITIALIZING);
    answer_latest(d, init_result);
    assert_int_equal(d->discovery.state, GW_MCP_LISTING);
    answer_latest(d, tools);
    assert_int_equal(d->discovery.state, GW_MCP_READY);
    assert_int_equal(d->tools.state, GW_TOOL_LIST_COMPLETE);
    assert_int_equal(gw_tool_cache_count(&d->tools), 8);
    assert_int_equal(d->link.n_pending, 0);
    return d;
}

static void offline(unsigned i)
{
    struct gw_presence p = {.online = false, .has_conn = true, .conn = i + 1};
    char id[GW_CLIENT_ID_MAX + 1];

    client_id_of(i, id, sizeof(id));
    assert_int_equal(gw_device_on_presence(&T.t, id, &p), GW_PRESENCE_LEFT);
}

/* Turns the loop until the closed request timers and gone records are
 * freed (the reaper and close callbacks run on the next turns). */
static void settle(void)
{
    for (int i = 0; i < 4; i++) {
        uv_run(&T.fx.loop, UV_RUN_NOWAIT);
    }
}

static size_t chunk(size_t n)
{
    /* glibc: an 8-byte header, 16-byte steps, 32 bytes at least. */
    size_t c = (n + 8 + 15) & ~(size_t)15;
    return c < 32 ? 32 : c;
}

/* Bytes of a cJSON tree as the allocator holds it (nodes, keys,
 * strings). */
static size_t tree_bytes(const cJSON *j)
{
    size_t n = 0;

    for (; j != NULL; j = j->next) {
        n += chunk(sizeof(cJSON));
        if (j->string != NULL) {
            n += chunk(strlen(j->string) + 1);
        }
        if (cJSON_IsString(j) && j->valuestring != NULL) {
            n += chunk(strlen(j->valuestring) + 1);
        }
        n += tree_bytes(j->child);
    }
    return n;
}

/*
 * N idle devices of one firmware, each online and discovered: what the
 * gateway holds per device stays under the fleet's target, and their tool
 * list is held once.
 */
static void test_idle_device_bytes(void **state)
{
    const char *env = getenv("GW_IDLE_DEVICES");
    unsigned n = env != NULL ? (unsigned)strtoul(env, NULL, 10) : IDLE_DEVICES;
    char *tools = tools_result("");
    const struct gw_device *first = NULL;
    size_t before, after;

    (void)state;
    assert_true(n >= 2);
    start();
    settle();
    before = heap_in_use();
    for (unsigned i = 0; i < n; i++) {
        const struct gw_device *d = online(i, tools);
        first = first != NULL ? first : d;
    }
    settle();
    after = heap_in_use();
    free(tools);
    assert_int_equal(gw_device_table_online(&T.t), n);

    double per = (double)(after - before) / n;
    size_t record = chunk(sizeof(struct gw_device));
    size_t list = tree_bytes(first->tools.tools);
    double hash = (double)(T.t.by_id->hh.tbl->num_buckets +
                           T.t.by_label->label_hh.tbl->num_buckets) *
                  sizeof(struct UT_hash_bucket) / n;
    unsigned copies = gw__device_list_refs(first->tools.tools) == n ? 1 : n;
    printf("idle devices: %u, bytes per device: %.0f (target %d)\n", n, per,
           IDLE_DEVICE_BYTES_MAX);
    printf("  device record (struct gw_device, %zu bytes): %zu\n",
           sizeof(struct gw_device), record);
    printf("    of which: client id %zu, label %zu, presence %zu, MCP link "
           "%zu, tool cache %zu, catalog %zu, peers' interests %zu, "
           "discovery %zu\n",
           sizeof(first->client_id), sizeof(first->label),
           sizeof(first->presence), sizeof(first->link), sizeof(first->tools),
           sizeof(first->catalog), sizeof(first->interests),
           sizeof(first->discovery));
    printf("  hash tables' buckets (by client id, by label): %.1f\n", hash);
    printf("  tool list (%zu bytes a copy, %u cop%s): %.1f\n", list, copies,
           copies == 1 ? "y" : "ies", (double)list * copies / n);
    printf("  anything else: %.1f\n",
           per - (double)record - hash - (double)list * copies / n);
    assert_true(per < IDLE_DEVICE_BYTES_MAX);

    /* One copy of the list, held by every device. */
    assert_int_equal(gw__device_lists_held(), 1);
    assert_int_equal(gw__device_list_refs(first->tools.tools), n);

    /* All gone: the memory goes back (the shared list with the last). */
    for (unsigned i = 0; i < n; i++) {
        offline(i);
    }
    settle();
    assert_int_equal(gw_device_table_online(&T.t), 0);
    assert_int_equal(gw__device_lists_held(), 0);
}

/*
 * Two devices with one list share it; a device with another list gets its
 * own; a device whose list changes moves to the copy of its new list; the
 * last holder of a copy frees it.
 */
static void test_shared_lists(void **state)
{
    char *stock = tools_result("");
    char *other = tools_result(" Or `auto`.");
    struct gw_device *a, *b, *c;

    (void)state;
    start();
    a = online(0, stock);
    b = online(1, stock);
    assert_ptr_equal(a->tools.tools, b->tools.tools);
    assert_int_equal(gw__device_list_refs(a->tools.tools), 2);
    assert_int_equal(gw__device_lists_held(), 1);

    c = online(2, other);
    assert_ptr_not_equal(c->tools.tools, a->tools.tools);
    assert_int_equal(gw__device_list_refs(c->tools.tools), 1);
    assert_int_equal(gw__device_list_refs(a->tools.tools), 2);
    assert_int_equal(gw__device_lists_held(), 2);

    /* a's firmware changed its list: a reads it again and moves to c's
     * copy; b keeps the stock one alone. */
    const cJSON *stock_copy = a->tools.tools;
    uint64_t serial = a->tools.serial;
    assert_int_equal(gw_device_refresh(&T.t, a->client_id), 0);
    answer_latest(a, init_result);
    answer_latest(a, other);
    assert_int_equal(a->tools.state, GW_TOOL_LIST_COMPLETE);
    assert_true(a->tools.serial != serial);
    assert_ptr_equal(a->tools.tools, c->tools.tools);
    assert_int_equal(gw__device_list_refs(c->tools.tools), 2);
    assert_ptr_equal(b->tools.tools, stock_copy);
    assert_int_equal(gw__device_list_refs(stock_copy), 1);
    assert_int_equal(gw__device_lists_held(), 2);

    /* The same list read again: the same copy, still two holders. */
    assert_int_equal(gw_device_refresh(&T.t, a->client_id), 0);
    answer_latest(a, init_result);
    answer_latest(a, other);
    assert_ptr_equal(a->tools.tools, c->tools.tools);
    assert_int_equal(gw__device_list_refs(c->tools.tools), 2);

    /* The last holder of the stock copy leaves: it goes. */
    offline(1);
    settle();
    assert_int_equal(gw__device_lists_held(), 1);
    assert_int_equal(gw__device_list_refs(a->tools.tools), 2);

    /* A failed reading lets go of the list. */
    assert_int_equal(gw_device_refresh(&T.t, a->client_id), 0);
    answer_latest(a, "{\"capabilities\":7}");
    assert_int_equal(a->tools.state, GW_TOOL_LIST_FAILED);
    assert_null(a->tools.tools);
    assert_int_equal(gw__device_list_refs(c->tools.tools), 1);
    assert_int_equal(gw__device_lists_held(), 1);

    /* The rest goes at shutdown (teardown checks nothing is held). */
    free(stock);
    free(other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_shared_lists, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_device_bytes, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
