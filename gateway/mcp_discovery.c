/* Discovering a device's tools; see mcp_discovery.h. */
#include "gateway/mcp_discovery.h"

#include <stdio.h>
#include <string.h>

#include "codec/mcp_tools.h"
#include "common/assert.h"
#include "common/log.h"
#include "version.h"

/* Pages one discovery may read: the cap on tools normally ends it first. */
#define DISCOVER_MAX_PAGES 64

static const char *const state_names[GW_MCP_STATE_COUNT_] = {
#define XX(name, text) [GW_MCP_##name] = text,
    GW_MCP_STATE_MAP(XX)
#undef XX
};

const char *gw_mcp_state_name(enum gw_mcp_state state)
{
    return (unsigned)state < GW_MCP_STATE_COUNT_ ? state_names[state] : "?";
}

static const struct gw_config *config_of(const struct gw_mcp_discovery *disc)
{
    return gw_config_live_get(disc->owner->config);
}

static void subject_of(const struct gw_mcp_discovery *disc, char *out,
                       size_t cap)
{
    snprintf(out, cap, "dev=%s mcp", disc->link->client_id);
}

void gw_mcp_discoverer_init(struct gw_mcp_discoverer *d,
                            struct gw_mcp_links *links,
                            const struct gw_config_live *config,
                            gw_mcp_tools_changed_cb on_changed, void *arg)
{
    memset(d, 0, sizeof(*d));
    d->links = links;
    d->config = config;
    gw_list_init(&d->queue);
    d->on_changed = on_changed;
    d->on_changed_arg = arg;
}

void gw_mcp_discovery_init(struct gw_mcp_discovery *disc,
                           struct gw_mcp_discoverer *owner,
                           struct gw_mcp_link *link,
                           struct gw_tool_cache *cache)
{
    memset(disc, 0, sizeof(*disc));
    disc->owner = owner;
    disc->link = link;
    disc->cache = cache;
    disc->state = GW_MCP_IDLE;
    gw_list_init(&disc->queue_node);
}

static void changed(struct gw_mcp_discovery *disc)
{
    struct gw_mcp_discoverer *d = disc->owner;

    if (d->on_changed != NULL && !d->stopping) {
        d->on_changed(d->on_changed_arg, disc);
    }
}

static void run(struct gw_mcp_discovery *disc);

/* Ends a run (ok or not) and gives its slot to the next in line. */
static void run_end(struct gw_mcp_discovery *disc, enum gw_mcp_state state)
{
    struct gw_mcp_discoverer *d = disc->owner;

    disc->state = state;
    cJSON_Delete(disc->acc);
    disc->acc = NULL;
    if (disc->running) {
        disc->running = false;
        d->running--;
    }
    if (state == GW_MCP_FAILED) {
        gw_tool_cache_fail(disc->cache);
        changed(disc);
    }
    if (d->stopping) {
        return; /* shutdown starts nothing */
    }
    /* A change seen during the run asks for one more, after a run that
     * read the list; a failed run drops the request with it (the next
     * run, whenever it starts, reads the list as it then is). */
    bool again = disc->again;
    disc->again = false;
    if (state == GW_MCP_READY && again && disc->link->open) {
        gw_mcp_discovery_start(disc);
    }
    while (!gw_list_empty(&d->queue) &&
           d->running < (unsigned)config_of(disc)->mcp.discover_concurrency) {
        struct gw_list *first = gw_list_first(&d->queue);
        gw_list_unlink(first);
        run(GW_LIST_ENTRY(first, struct gw_mcp_discovery, queue_node));
    }
}

static void request_page(struct gw_mcp_discovery *disc, const char *cursor);

static void on_list_reply(void *arg, const struct gw_mcp_reply *reply)
{
    struct gw_mcp_discovery *disc = arg;
    const struct gw_config *cfg = config_of(disc);
    char subject[GW_CLIENT_ID_MAX + 16];
    const char *next = NULL;
    bool truncated = false;
    int rc = GW_EPROTO;

    subject_of(disc, subject, sizeof(subject));
    if (reply->outcome == GW_MCP_OK) {
        rc = gw_mcp_tools_page_parse(reply->result, disc->acc, &next);
    }
    if (rc != 0) {
        gw_log(GW_LOG_WARN, subject, "tools/list page %u failed: %s",
               disc->pages + 1,
               reply->outcome == GW_MCP_OK
                   ? "malformed page"
                   : gw_mcp_outcome_name(reply->outcome));
        run_end(disc, GW_MCP_FAILED);
        return;
    }
    disc->pages++;
    if (cJSON_GetArraySize(disc->acc) > cfg->mcp.max_tools ||
        (next != NULL && (cJSON_GetArraySize(disc->acc) >= cfg->mcp.max_tools ||
                          disc->pages >= DISCOVER_MAX_PAGES))) {
        while (cJSON_GetArraySize(disc->acc) > cfg->mcp.max_tools) {
            cJSON_DeleteItemFromArray(disc->acc,
                                      cJSON_GetArraySize(disc->acc) - 1);
        }
        gw_log(GW_LOG_WARN, subject,
               "more tools than mcp.max_tools (%d) or %d pages: the list is "
               "cut, and AI callers may call none of them",
               cfg->mcp.max_tools, DISCOVER_MAX_PAGES);
        truncated = true;
        next = NULL;
    }
    if (next != NULL) {
        request_page(disc, next);
        return;
    }
    gw_tool_cache_set(disc->cache, disc->acc, truncated);
    disc->acc = NULL;
    disc->owner->links->stats.discoveries++;
    gw_log(GW_LOG_INFO, subject, "%d tools in %u page%s",
           gw_tool_cache_count(disc->cache), disc->pages,
           disc->pages == 1 ? "" : "s");
    changed(disc); /* before run_end, which may start the next run */
    run_end(disc, GW_MCP_READY);
}

static void request_page(struct gw_mcp_discovery *disc, const char *cursor)
{
    cJSON *params = cJSON_CreateObject();

    /* Every tool, so the cache knows the user-only ones and can hide
     * them; the firmware lists them only when asked. */
    if (params != NULL) {
        cJSON_AddBoolToObject(params, "withUserTools", 1);
        if (cursor != NULL) {
            cJSON_AddStringToObject(params, "cursor", cursor);
        }
    }
    gw_mcp_request(disc->owner->links, disc->link, "tools/list", params, 0,
                   GW_MCP_FROM_GATEWAY, on_list_reply, disc, NULL);
}

static void copy_info(const cJSON *result, const char *key, char *out,
                      size_t cap)
{
    const cJSON *info = cJSON_GetObjectItemCaseSensitive(result, "serverInfo");
    const char *v =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(info, key));

    snprintf(out, cap, "%s", v != NULL ? v : "");
}

static void on_init_reply(void *arg, const struct gw_mcp_reply *reply)
{
    struct gw_mcp_discovery *disc = arg;
    char subject[GW_CLIENT_ID_MAX + 16];

    subject_of(disc, subject, sizeof(subject));
    if (reply->outcome != GW_MCP_OK || !cJSON_IsObject(reply->result)) {
        gw_log(GW_LOG_WARN, subject, "initialize failed: %s",
               gw_mcp_outcome_name(reply->outcome));
        run_end(disc, GW_MCP_FAILED);
        return;
    }
    copy_info(reply->result, "name", disc->server_name,
              sizeof(disc->server_name));
    copy_info(reply->result, "version", disc->server_version,
              sizeof(disc->server_version));
    (void)gw_mcp_link_notify(disc->link, "notifications/initialized", NULL);
    disc->state = GW_MCP_LISTING;
    disc->pages = 0;
    cJSON_Delete(disc->acc);
    disc->acc = cJSON_CreateArray();
    if (disc->acc == NULL) {
        run_end(disc, GW_MCP_FAILED);
        return;
    }
    request_page(disc, NULL);
}

/* Takes a slot and sends initialize. */
static void run(struct gw_mcp_discovery *disc)
{
    struct gw_mcp_discoverer *d = disc->owner;
    cJSON *params = cJSON_CreateObject();
    cJSON *info = cJSON_CreateObject();

    disc->running = true;
    d->running++;
    disc->state = GW_MCP_INITIALIZING;
    gw_tool_cache_begin(disc->cache);
    if (params != NULL && info != NULL) {
        cJSON_AddStringToObject(params, "protocolVersion", "2024-11-05");
        cJSON_AddItemToObject(params, "capabilities", cJSON_CreateObject());
        cJSON_AddStringToObject(info, "name", "hybridgw");
        cJSON_AddStringToObject(info, "version", GW_VERSION);
        cJSON_AddItemToObject(params, "clientInfo", info);
        info = NULL;
    }
    cJSON_Delete(info);
    gw_mcp_request(d->links, disc->link, "initialize", params, 0,
                   GW_MCP_FROM_GATEWAY, on_init_reply, disc, NULL);
}

void gw_mcp_discovery_start(struct gw_mcp_discovery *disc)
{
    struct gw_mcp_discoverer *d = disc->owner;

    if (d->stopping || !disc->link->open) {
        return;
    }
    if (disc->running) {
        disc->again = true;
        return;
    }
    if (gw_list_linked(&disc->queue_node)) {
        return; /* already in line */
    }
    gw_tool_cache_begin(disc->cache);
    if (d->running >= (unsigned)config_of(disc)->mcp.discover_concurrency) {
        gw_list_insert_tail(&d->queue, &disc->queue_node);
        return;
    }
    run(disc);
}

void gw_mcp_discovery_cancel(struct gw_mcp_discovery *disc)
{
    gw_list_unlink(&disc->queue_node);
    disc->again = false;
    /* A run in flight ends through its requests when the link closes. */
}

void gw_mcp_discoverer_stop(struct gw_mcp_discoverer *d)
{
    struct gw_list *it, *tmp;

    d->stopping = true;
    GW_LIST_FOREACH_SAFE(it, tmp, &d->queue)
    {
        gw_list_unlink(it);
    }
}
