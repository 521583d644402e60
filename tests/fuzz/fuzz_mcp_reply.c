/*
 * A device's MCP replies through the gateway's own handling, without
 * sockets: a device table on a loop that is never run for I/O, a
 * publisher with no broker (requests wait as if sent), and the device's
 * messages fed in as the dispatcher does (envelope, gw_device_on_mcp). Its
 * discovery sends initialize and tools/list pages; the input answers them
 * and tools/call requests made here, in any shape. Checked: every request
 * gets exactly one reply, a result on success and a valid {code,message}
 * error otherwise; the tool cache never holds more than mcp.max_tools, the
 * catalog lists never more than mcp.max_list_items, the allow-list and
 * capability checks work on whatever they hold, and a peer's records
 * are all gone once it leaves.
 *
 * Input: chunks separated by NUL bytes. A chunk "!c<name>" makes a
 * tools/call of that tool, "!r" re-reads the tools, "!o" / "!n" send the
 * device offline / online, "!s<uri>" / "!u<uri>" (un)subscribe the test
 * peer, "!l<level>" sets its logging level, "!t<id>" gives it a task,
 * "!p<method>" asks method with a progress token, "!x" makes the peer
 * leave; any other chunk is the payload member of an mcp message from
 * the device, with each "@ID" replaced by the id of the gateway's latest
 * request to it (so that answers and progress can match).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "codec/envelope.h"
#include "codec/presence.h"
#include "common/log.h"
#include "config/config.h"
#include "gateway/core/config_hold.h"
#include "gateway/device/device_table.h"
#include "gateway/device/mcp_peers.h"
#include "gateway/device/publish.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define DEV       "GID_fz@@@a0_85_e3_f4_49_34@@@0f8e"
#define MAX_TOOLS 8
#define MAX_ITEMS 4
#define CHUNK_MAX 4096

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
static unsigned asked, answered, closed;

static void setup(void)
{
    static const char text[] =
        "{\"backends\":[{\"name\":\"main\",\"url\":\"ws://127.0.0.1:9/\"}],"
        "\"mcp\":{\"discover\":true,\"max_tools\":8,\"max_pending\":4,"
        "\"max_list_items\":4}}";
    struct gw_config *cfg = NULL;
    char err[256];

    if (ready) {
        return;
    }
    gw_log_set_level(GW_LOG_ERROR); /* each refusal is a line otherwise */
    if (uv_loop_init(&loop) != 0 ||
        gw_config_load_string(text, sizeof(text) - 1, "fuzz", &cfg, err,
                              sizeof(err)) != 0 ||
        gw_config_live_init(&live, cfg) != 0) {
        abort();
    }
    pub = (struct gw_publisher){.link = NULL, .config = &live};
    ready = true;
}

static void on_reply(void *arg, const struct gw_mcp_reply *reply)
{
    (void)arg;
    answered++;
    if (reply->outcome == GW_MCP_OK) {
        CHECK(reply->result != NULL);
        return;
    }
    CHECK(cJSON_IsObject(reply->error));
    CHECK(
        cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(reply->error, "code")));
    CHECK(cJSON_IsString(
        cJSON_GetObjectItemCaseSensitive(reply->error, "message")));
}

/* The test peer: every notification it hears is checked for shape. */
static unsigned heard;

static void peer_notify(struct gw_mcp_peer *peer, const struct gw_device *dev,
                        const char *method, const cJSON *params)
{
    (void)peer;
    CHECK(dev != NULL && method != NULL && cJSON_IsObject(params));
    heard++;
}

static const struct gw_mcp_peer_ops peer_ops = {.notify = peer_notify};
static struct gw_mcp_peer peer;

static void on_progress(void *arg, const cJSON *params)
{
    (void)arg;
    /* The origin's own token, whatever the device sent. */
    CHECK(cJSON_IsString(
        cJSON_GetObjectItemCaseSensitive(params, "progressToken")));
}

static void peer_command(struct gw_device_table *t, char op, const char *arg)
{
    struct gw_device *d = gw_device_find(t, DEV);
    enum gw_mcp_log_level level;

    if (op == 'x') {
        gw_mcp_peer_leave(t, &peer);
        CHECK(peer.n_interests == 0);
        return;
    }
    if (d == NULL) {
        return;
    }
    switch (op) {
    case 's':
    case 'u':
        asked++;
        gw_mcp_subscribe(t, d, &peer, arg, op == 's', GW_MCP_FROM_CLIENT,
                         on_reply, NULL, NULL);
        break;
    case 'l':
        if (gw_mcp_log_level_parse(arg, &level) == 0) {
            asked++;
            gw_mcp_set_level(t, d, &peer, level, GW_MCP_FROM_CLIENT, on_reply,
                             NULL, NULL);
        }
        break;
    case 't':
        gw_mcp_task_created(d, &peer, arg);
        break;
    case 'p': {
        const struct gw_mcp_opts opts = {.on_progress = on_progress};
        cJSON *params = cJSON_Parse("{\"_meta\":{\"progressToken\":\"fz\"}}");
        asked++;
        gw_mcp_request_with(&t->links, &d->link, arg[0] ? arg : "ping", params,
                            &opts, GW_MCP_FROM_CLIENT, on_reply, NULL, NULL);
        break;
    }
    default:
        break;
    }
}

static void presence(struct gw_device_table *t, bool online)
{
    struct gw_presence p = {.online = online};

    (void)gw_device_on_presence(t, DEV, &p);
}

static void call(struct gw_device_table *t, const char *name)
{
    struct gw_device *d = gw_device_find(t, DEV);
    char why[128];
    uint64_t handle;

    if (d == NULL) {
        return;
    }
    /* The allow-list on whatever the cache holds. */
    (void)gw_tool_cache_may_call(&d->tools, GW_TOOLS_FOR_BACKEND, name, false,
                                 why, sizeof(why));
    (void)gw_tool_cache_may_call(&d->tools, GW_TOOLS_FOR_CLIENT, name, true,
                                 why, sizeof(why));
    cJSON *params = cJSON_CreateObject();
    if (params == NULL ||
        cJSON_AddStringToObject(params, "name", name) == NULL) {
        cJSON_Delete(params);
        return;
    }
    asked++;
    gw_mcp_request(&t->links, &d->link, "tools/call", params, 5000,
                   GW_MCP_FROM_API, on_reply, NULL, &handle);
}

/* An mcp message from the device around payload, @ID filled in. */
static void device_says(struct gw_device_table *t, const char *payload,
                        size_t len)
{
    static char text[CHUNK_MAX * 4 + 64];
    struct gw_device *d = gw_device_find(t, DEV);
    char id[16];
    size_t n = 0;
    struct gw_envelope env;

    snprintf(id, sizeof(id), "%u", d != NULL ? d->link.next_id : 0);
    n += (size_t)snprintf(text, sizeof(text),
                          "{\"type\":\"mcp\",\"session_id\":\"\",\"payload\":");
    for (size_t i = 0; i < len; i++) {
        if (i + 3 <= len && memcmp(payload + i, "@ID", 3) == 0) {
            memcpy(text + n, id, strlen(id));
            n += strlen(id);
            i += 2;
        } else {
            text[n++] = payload[i];
        }
    }
    text[n++] = '}';
    if (gw_envelope_parse(text, n, GW_ENVELOPE_DEVICE_MAX, &env) != 0) {
        return;
    }
    if (env.kind == GW_MSG_MCP) {
        (void)gw_device_on_mcp(t, DEV, &env);
    }
    gw_envelope_free(&env);
}

static void check_cache(struct gw_device_table *t)
{
    struct gw_device *d = gw_device_find(t, DEV);

    if (d != NULL) {
        CHECK(gw_tool_cache_count(&d->tools) <= MAX_TOOLS);
        CHECK(d->link.n_pending <= 64);
        CHECK(d->interests.count <= GW_MCP_INTERESTS_MAX);
        for (int k = 0; k < GW_MCP_LIST_COUNT_; k++) {
            CHECK(cJSON_GetArraySize(d->catalog.lists[k].items) <= MAX_ITEMS);
        }
        char why[256];
        (void)gw_mcp_catalog_allows(&d->catalog, DEV, "resources/read", why,
                                    sizeof(why));
    }
}

static void on_closed(struct gw_device_table *t, void *arg)
{
    (void)t;
    (void)arg;
    closed++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_device_table t;
    char chunk[CHUNK_MAX + 1];

    setup();
    asked = answered = closed = heard = 0;
    gw_mcp_peer_init(&peer, &peer_ops, "fuzz peer", false);
    gw_device_table_init(&t, &loop, &live, &pub);
    presence(&t, true); /* discovery starts: initialize is asked */
    for (size_t off = 0; off < size;) {
        const uint8_t *end = memchr(data + off, 0, size - off);
        size_t len = (end != NULL ? (size_t)(end - data) : size) - off;
        size_t keep = len < CHUNK_MAX ? len : CHUNK_MAX;

        memcpy(chunk, data + off, keep);
        chunk[keep] = '\0';
        off += len + 1;
        if (keep >= 2 && chunk[0] == '!') {
            switch (chunk[1]) {
            case 'c':
                call(&t, chunk + 2);
                break;
            case 'r':
                (void)gw_device_refresh(&t, DEV);
                break;
            case 'o':
                presence(&t, false);
                break;
            case 'n':
                presence(&t, true);
                break;
            default:
                peer_command(&t, chunk[1], chunk + 2);
                break;
            }
        } else {
            device_says(&t, chunk, keep);
        }
        check_cache(&t);
        uv_run(&loop, UV_RUN_NOWAIT); /* the reaper's turn */
    }
    gw_mcp_peer_leave(&t, &peer);
    CHECK(peer.n_interests == 0);
    gw_device_table_close(&t, on_closed, NULL);
    while (closed == 0 && uv_run(&loop, UV_RUN_ONCE) != 0) {
    }
    uv_run(&loop, UV_RUN_NOWAIT);
    CHECK(closed == 1);
    CHECK(answered == asked); /* every call answered exactly once */
    return 0;
}
