/*
 * The MCP server's request path on arbitrary requests, without a socket:
 * paths (/mcp, /mcp/devices/{clientId}, anything), headers (session,
 * protocol version, content type, accept), methods and JSON bodies
 * (single messages, batches, every method: tools, resources, prompts,
 * completion, logging, tasks, cursors, progress tokens, cancellations,
 * and responses to the device's own requests), through the HTTP API
 * detached from any listener. Two devices are online: one offering every
 * capability, with enough tools and resources for several pages, the
 * other tools only; sessions of both protocol revisions stay open across
 * inputs, declaring sampling, elicitation and roots, and the first
 * device's sessions hold a stream that goes nowhere, so that before each
 * input the device's own sampling request waits for them (ids "gw-<n>",
 * up to mcp.max_device_requests; every seventh input the device withdraws
 * one). The first two bytes of an input choose path, method and headers;
 * the rest is the body. Invariants: every answer has a status the server
 * documents, never 500; a session is only ever ended by its own DELETE,
 * never to make room for another.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/envelope.h"
#include "codec/mcp_caps.h"
#include "common/log.h"
#include "config/config.h"
#include "gateway/api/http_api.h"
#include "gateway/core/config_hold.h"
#include "gateway/core/counters.h"
#include "gateway/device/device_table.h"
#include "gateway/device/publish.h"
#include "gateway/mcp/mcp_server_int.h"
#include "gateway/session/session.h"

#define TOKEN      "fuzz-bearer-7c1"
#define DEV1       "GID_test@@@02_00_00_00_00_01@@@fuzz-1"
#define DEV2       "GID_test@@@02_00_00_00_00_02@@@fuzz-2"
#define DEV2_PATH  "GID_test%40%40%4002_00_00_00_00_02@@@fuzz-2"
#define DEV1_TOOLS 150 /* pages of 100: a cursor to follow */
#define DEV1_ITEMS 120 /* resources, likewise */
#define INPUT_MAX  65536
#define N_PATHS    3
#define N_VERS     2

static const char config_text[] =
    "{\"backends\":[{\"name\":\"main\",\"url\":\"ws://127.0.0.1:9/\"}],"
    "\"http\":{\"listen\":\"127.0.0.1\",\"port\":0,\"token\":\"" TOKEN "\","
    "\"max_body_bytes\":65536},"
    "\"mcp\":{\"discover\":false,\"max_sessions\":8,"
    "\"call_timeout_ms\":1000,\"max_list_items\":4096}}";

static const char *const paths[N_PATHS] = {"/mcp", "/mcp/devices/" DEV1,
                                           "/mcp/devices/" DEV2_PATH};
static const char *const versions[N_VERS] = {"2025-03-26", "2025-11-25"};

static struct {
    uv_loop_t loop;
    struct gw_config_live config;
    struct gw_publisher pub;
    struct gw_counters counters;
    struct gw_device_table devices;
    struct gw_sessions sessions;
    struct gw_mcp_server *mcp;
    struct gw_http_api *api;
    char sid[N_PATHS][N_VERS][GW_MCP_SESSION_ID_LEN + 1]; /* ours */
    unsigned inputs;
    unsigned device_ids; /* of the first device's own requests */
} W;

static cJSON *items_of(int n, const char *prefix, const char *suffix,
                       const char *key)
{
    cJSON *items = cJSON_CreateArray();
    char name[64];

    for (int i = 0; items != NULL && i < n; i++) {
        cJSON *it = cJSON_CreateObject();
        snprintf(name, sizeof(name), "%s%d%s", prefix, i, suffix);
        cJSON_AddStringToObject(it, key, name);
        cJSON_AddStringToObject(it, "name", name);
        cJSON_AddStringToObject(it, "description", "an item");
        cJSON_AddItemToArray(items, it);
    }
    return items;
}

static void device_with_tools(const char *client_id, int n, unsigned caps)
{
    struct gw_presence online = {.online = true};
    struct gw_mcp_server_info info = {.caps = caps};
    struct gw_device *dev;
    cJSON *tools = cJSON_CreateArray();
    char name[32];

    if (gw_device_on_presence(&W.devices, client_id, &online) < 0 ||
        (dev = gw_device_find(&W.devices, client_id)) == NULL ||
        tools == NULL) {
        abort();
    }
    for (int i = 0; i < n; i++) {
        cJSON *t = cJSON_CreateObject();
        snprintf(name, sizeof(name), i == 0 ? "self.reboot" : "self.tool_%d",
                 i);
        cJSON_AddStringToObject(t, "name", name);
        cJSON_AddStringToObject(t, "description", "a tool");
        cJSON *schema = cJSON_AddObjectToObject(t, "inputSchema");
        cJSON_AddStringToObject(schema, "type", "object");
        cJSON_AddItemToArray(tools, t);
    }
    gw_tool_cache_set(&dev->tools, tools, false);
    gw_mcp_catalog_set_info(&dev->catalog, &info);
    if (caps & GW_MCP_CAP_RESOURCES) {
        gw_mcp_catalog_set(&dev->catalog, GW_MCP_LIST_RESOURCES,
                           items_of(DEV1_ITEMS, "device://r/", "", "uri"),
                           false);
        gw_mcp_catalog_set(&dev->catalog, GW_MCP_LIST_TEMPLATES,
                           items_of(2, "device://t/", "/{x}", "uriTemplate"),
                           false);
    }
    if (caps & GW_MCP_CAP_PROMPTS) {
        gw_mcp_catalog_set(&dev->catalog, GW_MCP_LIST_PROMPTS,
                           items_of(3, "prompt_", "", "name"), false);
    }
}

/* The first device's sessions hold a stream that goes nowhere (writes
 * to no request fail quietly), so its own requests have a taker. */
static void stream_nowhere(struct gw_mcp_client *cl)
{
    struct gw_mcp_stream *st = calloc(1, sizeof(*st));

    if (st == NULL) {
        abort();
    }
    st->cl = cl;
    gw_list_insert_head(&cl->streams, &st->node);
    cl->n_streams++;
    W.mcp->stats.streams_open++;
}

static bool on_device_request(void *arg, struct gw_device *dev,
                              const struct gw_rpc *rpc)
{
    return gw_mcp_server_device_request(arg, dev, rpc);
}

/* A message of the first device's own, as the MQTT dispatcher hands it. */
static void device_says(const char *payload)
{
    char text[512];
    struct gw_envelope env;
    int n = snprintf(text, sizeof(text),
                     "{\"type\":\"mcp\",\"session_id\":\"\",\"payload\":%s}",
                     payload);

    if (gw_envelope_parse(text, (size_t)n, sizeof(text), &env) != 0) {
        abort();
    }
    (void)gw_device_on_mcp(&W.devices, DEV1, &env);
    gw_envelope_free(&env);
}

/* Before each input: the device asks its client (up to the bound, then
 * refused), and now and then withdraws an earlier request. */
static void device_asks(void)
{
    char payload[256];

    W.device_ids++;
    snprintf(payload, sizeof(payload),
             "{\"jsonrpc\":\"2.0\",\"id\":%u,\"method\":"
             "\"sampling/createMessage\",\"params\":{\"messages\":[],"
             "\"maxTokens\":8}}",
             W.device_ids);
    device_says(payload);
    if (W.inputs % 7 == 6 && W.device_ids > 2) {
        snprintf(payload, sizeof(payload),
                 "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                 "\"params\":{\"requestId\":%u}}",
                 W.device_ids - 2);
        device_says(payload);
    }
}

static bool ours(const char *id)
{
    for (int p = 0; p < N_PATHS; p++) {
        for (int v = 0; v < N_VERS; v++) {
            if (strcmp(W.sid[p][v], id) == 0) {
                return true;
            }
        }
    }
    return false;
}

/* An initialize of ours on paths[p] in versions[v]; its session id. */
static void open_session(int p, int v)
{
    static const char *const headers[] = {
        "Authorization",  ("Bearer " TOKEN),
        "Content-Type",   "application/json",
        "Accept",         "application/json, text/event-stream",
        "Content-Length", NULL};
    const char *h[sizeof(headers) / sizeof(headers[0])];
    char body[256], len[16];
    int n = snprintf(body, sizeof(body),
                     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
                     "\"params\":{\"protocolVersion\":\"%s\","
                     "\"capabilities\":{\"sampling\":{},\"elicitation\":{},"
                     "\"roots\":{}},\"clientInfo\":{\"name\":\"f\","
                     "\"version\":\"1\"}}}",
                     versions[v]);
    struct gw_mcp_client *cl, *tmp;

    W.sid[p][v][0] = '\0';
    memcpy(h, headers, sizeof(h));
    snprintf(len, sizeof(len), "%d", n);
    h[7] = len;
    int status = gw_http_api_inject(W.api, "POST", paths[p], h, 4, body,
                                    (size_t)n, 4096);
    if (status != 200) {
        fprintf(stderr, "initialize on %s: %d\n", paths[p], status);
        abort();
    }
    HASH_ITER(hh, W.mcp->clients, cl, tmp)
    {
        if (!ours(cl->id)) {
            memcpy(W.sid[p][v], cl->id, sizeof(W.sid[p][v]));
            if (p == 1) {
                stream_nowhere(cl);
            }
            return;
        }
    }
    abort();
}

/* Between inputs: others' sessions end, ours are there (again). */
static void sessions_reset(void)
{
    struct gw_mcp_client *cl, *tmp;

    HASH_ITER(hh, W.mcp->clients, cl, tmp)
    {
        if (!ours(cl->id)) {
            gw__mcp_server_client_end(cl, "fuzz reset");
        }
    }
    for (int p = 0; p < N_PATHS; p++) {
        for (int v = 0; v < N_VERS; v++) {
            if (gw__mcp_server_client_find(W.mcp, W.sid[p][v]) == NULL) {
                open_session(p, v);
            }
        }
    }
}

static void world_init(void)
{
    struct gw_config *cfg = NULL;
    char err[256];

    gw_log_set_level(GW_LOG_ERROR);
    if (uv_loop_init(&W.loop) != 0 ||
        gw_config_load_string(config_text, sizeof(config_text) - 1, "fuzz",
                              &cfg, err, sizeof(err)) != 0 ||
        gw_config_live_init(&W.config, cfg) != 0) {
        abort();
    }
    W.pub.config = &W.config; /* no broker link: publishes fail */
    gw_device_table_init(&W.devices, &W.loop, &W.config, &W.pub);
    struct gw_session_env senv = {.loop = &W.loop,
                                  .config = &W.config,
                                  .pub = &W.pub,
                                  .devices = &W.devices,
                                  .counters = &W.counters};
    gw_sessions_init(&W.sessions, &senv);
    struct gw_mcp_server_env menv = {
        .loop = &W.loop, .config = &W.config, .devices = &W.devices};
    if (gw_mcp_server_init(&menv, &W.mcp) != 0) {
        abort();
    }
    struct gw_http_api_env aenv = {
        .loop = &W.loop,
        .config = &W.config,
        .devices = &W.devices,
        .sessions = &W.sessions,
        .mcp_server = W.mcp,
        .metrics = {.loop = &W.loop,
                    .counters = &W.counters,
                    .sessions = &W.sessions,
                    .devices = &W.devices,
                    .mcp_server = W.mcp},
        .detached = true,
    };
    if (gw_http_api_init(&aenv, &W.api) != 0 || W.api == NULL) {
        abort();
    }
    gw_device_table_set_request_handler(&W.devices, on_device_request, W.mcp);
    device_with_tools(DEV1, DEV1_TOOLS, GW_MCP_CAPS_ALL);
    device_with_tools(DEV2, 3, GW_MCP_CAP_TOOLS);
    sessions_reset();
}

static bool status_documented(int status)
{
    static const int ok[] = {0,   200, 202, 400, 401, 403,
                             404, 405, 406, 413, 415, 503};

    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        if (status == ok[i]) {
            return true;
        }
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool ready;
    static const char *const methods[] = {"POST", "POST", "GET", "DELETE"};
    static char text[INPUT_MAX + 1];
    const char *headers[2 * 8];
    char length[24];
    size_t nh = 0;
    const char *path, *body;
    char raw_path[256];
    size_t body_len;
    int which, ver, status;
    uint8_t f0, f1;

    if (!ready) {
        world_init();
        ready = true;
    }
    if (size < 2 || size > INPUT_MAX) {
        return 0;
    }
    W.inputs++;
    device_asks();
    f0 = data[0];
    f1 = data[1];
    memcpy(text, data + 2, size - 2);
    text[size - 2] = '\0';
    body = text;
    body_len = size - 2;
    which = f0 & 3;
    ver = (f0 >> 3) & 1;
    if (which < N_PATHS) {
        path = paths[which];
    } else {
        /* The path is the body's first line. */
        size_t n = strcspn(text, "\n");
        snprintf(raw_path, sizeof(raw_path), "/mcp%.*s",
                 (int)(n < 200 ? n : 200), text);
        path = raw_path;
        body = text + n + (text[n] == '\n');
        body_len = size - 2 - (size_t)(body - text);
    }
    headers[nh++] = "Authorization";
    headers[nh++] = "Bearer " TOKEN;
    /* Announced as sent, or more: the client leaves mid-body. */
    snprintf(length, sizeof(length), "%zu", body_len + (f1 & 8 ? 10 : 0));
    headers[nh++] = "Content-Length";
    headers[nh++] = length;
    if (!(f1 & 1)) {
        headers[nh++] = "Content-Type";
        headers[nh++] = "application/json";
    }
    if (!(f1 & 2)) {
        headers[nh++] = "Accept";
        headers[nh++] = methods[f0 >> 6][0] == 'G'
                            ? "text/event-stream"
                            : "application/json, text/event-stream";
    }
    if (f0 & 4) {
        headers[nh++] = "Mcp-Session-Id";
        headers[nh++] = f1 & 4 ? "0123456789abcdef0123456789abcdef"
                               : W.sid[which < N_PATHS ? which : 0][ver];
    }
    if (f0 & 16) {
        headers[nh++] = "MCP-Protocol-Version";
        headers[nh++] = f0 & 32 ? "1999-01-01" : versions[ver];
    }
    status = gw_http_api_inject(W.api, methods[f0 >> 6], path, headers, nh / 2,
                                body, body_len, 1 + (f1 >> 4) * 211);
    (void)uv_run(&W.loop, UV_RUN_NOWAIT); /* closes what ended */
    if (status == GW_EPROTO) {
        return 0;
    }
    if (!status_documented(status)) {
        abort();
    }
    /* Others' initializes never evicted one of ours: only a DELETE in
     * that session may have ended it. */
    for (int p = 0; p < N_PATHS; p++) {
        for (int v = 0; v < N_VERS; v++) {
            bool deleted = strcmp(methods[f0 >> 6], "DELETE") == 0 &&
                           (f0 & 4) && !(f1 & 4) &&
                           (which < N_PATHS ? which : 0) == p && ver == v;
            if (!deleted &&
                gw__mcp_server_client_find(W.mcp, W.sid[p][v]) == NULL) {
                abort();
            }
        }
    }
    if (W.mcp->n_clients >
        (size_t)gw_config_live_get(&W.config)->mcp.max_sessions) {
        abort();
    }
    sessions_reset();
    return 0;
}
