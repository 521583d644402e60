/*
 * A device's endpoint-addressed mcp messages through gateway/mcp/mcp_outbound.c
 * as the dispatcher hands them over, without a broker (answers to the
 * device go nowhere) and with servers that refuse connections at once
 * (127.0.0.1 port 1) or that the device may not use. Checked: a message is
 * taken exactly when it has an "endpoint" member; every request the
 * device makes ends exactly once (one outcome counted per request,
 * refusals, local answers, failures, cancels and the shutdown included);
 * at most one session per server; everything closes.
 *
 * Input: chunks separated by NUL bytes. "!r" lets the loop run (connects
 * fail, -32008 answers), "!g" sends the device offline (its sessions end);
 * any other chunk is a whole envelope as the device would publish it.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <uv.h>

#include "codec/envelope.h"
#include "codec/jsonrpc.h"
#include "common/log.h"
#include "config/config.h"
#include "gateway/core/config_hold.h"
#include "gateway/device/device_table.h"
#include "gateway/device/publish.h"
#include "gateway/mcp/mcp_outbound.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define DEV       "GID_fz@@@a0_85_e3_f4_49_34@@@0f8e"
#define CHUNK_MAX 8192

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            abort();                                                           \
        }                                                                      \
    } while (0)

static uv_loop_t loop;
static struct gw_config_live live;
static struct gw_publisher pub;
static bool ready;

static void setup(void)
{
    static const char text[] =
        "{\"backends\":[{\"name\":\"main\",\"url\":\"ws://127.0.0.1:9/\"}],"
        "\"mcp\":{\"discover\":false,\"outbound_max_pending\":3,"
        "\"outbound_max_response_bytes\":1024},"
        "\"mcp_servers\":["
        "{\"name\":\"a\",\"url\":\"http://127.0.0.1:1/mcp\","
        "\"timeout_ms\":100},"
        "{\"name\":\"b\",\"url\":\"http://127.0.0.1:1/mcp\","
        "\"auth\":{\"scheme\":\"bearer\",\"token\":\"t\"}},"
        "{\"name\":\"c\",\"url\":\"http://127.0.0.1:1/mcp\","
        "\"allow\":{\"client_ids\":[\"GID_fz@@@a0_85_e3_f4_49_35@@@0f8e\"]}}"
        "]}";
    struct gw_config *cfg = NULL;
    char err[256];

    if (ready) {
        return;
    }
    gw_log_set_level(GW_LOG_ERROR); /* each refusal is a line otherwise */
    /* One reference for the whole run: each input's client takes and
     * drops its own, and curl's global state is costly to set up. */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
        uv_loop_init(&loop) != 0 ||
        gw_config_load_string(text, sizeof(text) - 1, "fuzz", &cfg, err,
                              sizeof(err)) != 0 ||
        gw_config_live_init(&live, cfg) != 0) {
        abort();
    }
    pub = (struct gw_publisher){.link = NULL, .config = &live};
    ready = true;
}

static uint64_t outcomes;
static bool ob_closed, table_closed;

static void count(void *arg, const struct gw_outbound_server_stats *st)
{
    (void)arg;
    for (int i = 0; i < GW_OUTBOUND_OUTCOME_COUNT_; i++) {
        outcomes += st->requests[i];
    }
}

static void on_ob_closed(struct gw_mcp_outbound *ob, void *arg)
{
    (void)arg;
    outcomes = 0;
    gw_mcp_outbound_each_stats(ob, count, NULL);
    ob_closed = true;
}

static void on_table_closed(struct gw_device_table *t, void *arg)
{
    (void)t;
    (void)arg;
    table_closed = true;
}

/* Whether the envelope is one the module must answer once. */
static bool is_request(const struct gw_envelope *env)
{
    const cJSON *ep = cJSON_GetObjectItemCaseSensitive(env->root, "endpoint");
    struct gw_rpc rpc;

    return cJSON_IsString(ep) && ep->valuestring[0] != '\0' &&
           gw_rpc_classify(
               cJSON_GetObjectItemCaseSensitive(env->root, "payload"), &rpc) ==
               0 &&
           rpc.kind == GW_RPC_REQUEST;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char chunk[CHUNK_MAX + 1];
    struct gw_device_table t;
    struct gw_mcp_outbound *ob = NULL;
    uint64_t requests = 0;

    setup();
    ob_closed = table_closed = false;
    gw_device_table_init(&t, &loop, &live, &pub);
    const struct gw_mcp_outbound_env env = {
        .loop = &loop, .config = &live, .pub = &pub, .devices = &t};
    CHECK(gw_mcp_outbound_init(&env, &ob) == 0);
    for (size_t off = 0; off < size;) {
        const uint8_t *end = memchr(data + off, 0, size - off);
        size_t len = (end != NULL ? (size_t)(end - data) : size) - off;
        size_t keep = len < CHUNK_MAX ? len : CHUNK_MAX;
        struct gw_envelope e;

        memcpy(chunk, data + off, keep);
        chunk[keep] = '\0';
        off += len + 1;
        if (keep == 2 && chunk[0] == '!') {
            if (chunk[1] == 'r') {
                uv_run(&loop, UV_RUN_NOWAIT);
                uv_run(&loop, UV_RUN_NOWAIT);
            } else if (chunk[1] == 'g') {
                gw_mcp_outbound_device_gone(ob, DEV);
            }
            continue;
        }
        /* As gw_mqtt_dispatch_message hands an mcp message over. */
        if (gw_envelope_parse(chunk, keep, CHUNK_MAX, &e) != 0) {
            continue;
        }
        if (e.kind == GW_MSG_MCP) {
            bool has_ep =
                cJSON_GetObjectItemCaseSensitive(e.root, "endpoint") != NULL;
            requests += is_request(&e);
            CHECK(gw_mcp_outbound_on_device(ob, DEV, &e) == has_ep);
        }
        gw_envelope_free(&e);
        /* Sessions: at most one per configured server. */
        CHECK(gw_mcp_outbound_sessions(ob) <= 3);
    }
    gw_mcp_outbound_close(ob, on_ob_closed, NULL);
    gw_device_table_close(&t, on_table_closed, NULL);
    while (!(ob_closed && table_closed) && uv_run(&loop, UV_RUN_ONCE) != 0) {
    }
    uv_run(&loop, UV_RUN_NOWAIT);
    CHECK(ob_closed && table_closed);
    CHECK(outcomes == requests); /* each request ended exactly once */
    CHECK(!uv_loop_alive(&loop));
    return 0;
}
