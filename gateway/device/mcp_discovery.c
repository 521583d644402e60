/* Discovering a device's tools and catalog; see mcp_discovery.h. */
#include "gateway/device/mcp_discovery.h"

#include <stdio.h>
#include <string.h>

#include "codec/mcp_caps.h"
#include "codec/mcp_items.h"
#include "codec/mcp_tools.h"
#include "common/assert.h"
#include "common/log.h"
#include "gateway/core/version.h"
#include "gateway/device/mcp_discovery_int.h"

/* Pages one discovery may read: the cap on tools normally ends it first. */
#define DISCOVER_MAX_PAGES 64

/* The lists of a run, in order: tools, then the catalog's. */
#define KIND_TOOLS (-1)

/* What a list change means to listeners. */
static const unsigned list_changed_bits[GW_MCP_LIST_COUNT_] = {
    [GW_MCP_LIST_RESOURCES] = GW_DEVICE_CHANGED_RESOURCES,
    [GW_MCP_LIST_TEMPLATES] = GW_DEVICE_CHANGED_RESOURCES,
    [GW_MCP_LIST_PROMPTS] = GW_DEVICE_CHANGED_PROMPTS,
};

/* The capability a catalog list needs. */
static const unsigned list_cap[GW_MCP_LIST_COUNT_] = {
    [GW_MCP_LIST_RESOURCES] = GW_MCP_CAP_RESOURCES,
    [GW_MCP_LIST_TEMPLATES] = GW_MCP_CAP_RESOURCES,
    [GW_MCP_LIST_PROMPTS] = GW_MCP_CAP_PROMPTS,
};

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

void gw__device_discoverer_init(struct gw_mcp_discoverer *d,
                                struct gw_mcp_links *links,
                                const struct gw_config_live *config,
                                gw_mcp_tools_changed_cb on_changed, void *arg)
{
    memset(d, 0, sizeof(*d));
    d->links = links;
    d->config = config;
    gw_list_init(&d->queue);
    for (unsigned i = 0; i < GW_MCP_RETRY_SLOTS; i++) {
        gw_list_init(&d->retry[i]);
    }
    uv_timer_init(links->loop, &d->retry_timer);
    d->retry_timer.data = d;
    d->jitter = uv_hrtime() | 1; /* xorshift's state must not be 0 */
    d->on_changed = on_changed;
    d->on_changed_arg = arg;
}

void gw__device_discovery_init(struct gw_mcp_discovery *disc,
                               struct gw_mcp_discoverer *owner,
                               struct gw_mcp_link *link,
                               struct gw_tool_cache *cache,
                               struct gw_mcp_catalog *catalog)
{
    memset(disc, 0, sizeof(*disc));
    disc->owner = owner;
    disc->link = link;
    disc->cache = cache;
    disc->catalog = catalog;
    disc->kind = KIND_TOOLS;
    disc->state = GW_MCP_IDLE;
    gw_list_init(&disc->queue_node);
}

static void changed(struct gw_mcp_discovery *disc, unsigned what)
{
    struct gw_mcp_discoverer *d = disc->owner;

    if (d->on_changed != NULL && !d->stopping) {
        d->on_changed(d->on_changed_arg, disc, what);
    }
}

static void run(struct gw_mcp_discovery *disc);

static void on_retry_tick(uv_timer_t *timer);

/* Failed for want of an answer: the device may answer a later run (one
 * that answered with an error or nonsense would answer the same). */
static bool worth_retrying(enum gw_mcp_outcome outcome)
{
    return outcome == GW_MCP_TIMEOUT || outcome == GW_MCP_BUSY;
}

static uint64_t jitter_next(struct gw_mcp_discoverer *d)
{
    d->jitter ^= d->jitter << 13;
    d->jitter ^= d->jitter >> 7;
    d->jitter ^= d->jitter << 17;
    return d->jitter;
}

/*
 * Puts a failed run on the retry wheel, when it has retries left: after
 * mcp.discover_retry_ms doubling per retry to mcp.discover_retry_max_ms,
 * of which a random half, so that the failures of a storm come back
 * spread out. True when it will run again.
 */
static bool retry_later(struct gw_mcp_discovery *disc)
{
    struct gw_mcp_discoverer *d = disc->owner;
    const struct gw_config *cfg = config_of(disc);
    char subject[GW_CLIENT_ID_MAX + 16];
    uint64_t delay = (uint64_t)cfg->mcp.discover_retry_ms;
    uint64_t ticks;

    if (d->stopping || !disc->link->open ||
        disc->attempts >= cfg->mcp.discover_retries) {
        return false;
    }
    for (unsigned i = 0;
         i < disc->attempts && delay < (uint64_t)cfg->mcp.discover_retry_max_ms;
         i++) {
        delay *= 2;
    }
    if (delay > (uint64_t)cfg->mcp.discover_retry_max_ms) {
        delay = (uint64_t)cfg->mcp.discover_retry_max_ms;
    }
    delay = delay - delay / 2 + jitter_next(d) % (delay / 2 + 1);
    ticks = (delay + GW_MCP_RETRY_TICK_MS - 1) / GW_MCP_RETRY_TICK_MS;
    if (ticks < 1) {
        ticks = 1;
    }
    if (ticks > GW_MCP_RETRY_SLOTS - 1) {
        ticks = GW_MCP_RETRY_SLOTS - 1;
    }
    disc->attempts++;
    disc->state = GW_MCP_RETRYING;
    gw_list_insert_tail(&d->retry[(d->retry_at + ticks) % GW_MCP_RETRY_SLOTS],
                        &disc->queue_node);
    if (d->retry_waiting++ == 0) {
        uv_timer_start(&d->retry_timer, on_retry_tick, GW_MCP_RETRY_TICK_MS,
                       GW_MCP_RETRY_TICK_MS);
    }
    d->links->stats.discovery_retries++;
    subject_of(disc, subject, sizeof(subject));
    gw_log_peer(GW_LOG_INFO, NULL, subject,
                "discovery retry %u of %d in %llu ms", disc->attempts,
                cfg->mcp.discover_retries,
                (unsigned long long)(ticks * GW_MCP_RETRY_TICK_MS));
    return true;
}

/* Off the retry wheel (it was RETRYING). */
static void retry_unlink(struct gw_mcp_discovery *disc)
{
    struct gw_mcp_discoverer *d = disc->owner;

    gw_list_unlink(&disc->queue_node);
    d->retry_waiting--;
    if (d->retry_waiting == 0) {
        uv_timer_stop(&d->retry_timer);
    }
}

/* Ends a run (ok or not) and gives its slot to the next in line; a
 * failed run for want of an answer (retry) may be run again later. */
static void run_end(struct gw_mcp_discovery *disc, enum gw_mcp_state state,
                    bool retry)
{
    struct gw_mcp_discoverer *d = disc->owner;

    disc->state = state;
    cJSON_Delete(disc->acc);
    disc->acc = NULL;
    if (disc->running) {
        disc->running = false;
        d->running--;
    }
    if (state == GW_MCP_READY) {
        disc->attempts = 0;
    }
    if (state == GW_MCP_FAILED) {
        gw_tool_cache_fail(disc->cache);
        if (retry) {
            retry_later(disc); /* RETRYING then, for the listeners too */
        }
        changed(disc, GW_DEVICE_CHANGED_TOOLS);
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
        gw__device_discovery_start(disc);
    }
    while (!gw_list_empty(&d->queue) &&
           d->running < (unsigned)config_of(disc)->mcp.discover_concurrency) {
        struct gw_list *first = gw_list_first(&d->queue);
        gw_list_unlink(first);
        run(GW_LIST_ENTRY(first, struct gw_mcp_discovery, queue_node));
    }
}

static void request_page(struct gw_mcp_discovery *disc, const char *cursor);
static void next_list(struct gw_mcp_discovery *disc, int kind);

static const char *kind_method(int kind)
{
    return kind == KIND_TOOLS ? "tools/list" : gw_mcp_list_method(kind);
}

/* The run is over: every list read (or given up). */
static void run_done(struct gw_mcp_discovery *disc)
{
    unsigned what = GW_DEVICE_CHANGED_TOOLS;

    for (int k = 0; k < GW_MCP_LIST_COUNT_; k++) {
        if (disc->catalog->lists[k].state != GW_TOOL_LIST_NONE) {
            what |= list_changed_bits[k];
        }
    }
    disc->owner->links->stats.discoveries++;
    changed(disc, what); /* before run_end, which may start the next run */
    run_end(disc, GW_MCP_READY, false);
}

/* A list page failed: the tools fail the run; a catalog list fails alone,
 * and the run goes on with the next. */
static void list_failed(struct gw_mcp_discovery *disc, const char *why,
                        bool retry)
{
    char subject[GW_CLIENT_ID_MAX + 16];

    subject_of(disc, subject, sizeof(subject));
    gw_log_peer(GW_LOG_WARN, NULL, subject, "%s page %u failed: %s",
                kind_method(disc->kind), disc->pages + 1, why);
    if (disc->kind == KIND_TOOLS) {
        run_end(disc, GW_MCP_FAILED, retry);
        return;
    }
    gw_mcp_catalog_fail(disc->catalog, disc->kind);
    next_list(disc, disc->kind + 1);
}

/* The list in acc is whole (or cut): into the cache or the catalog. */
static void list_done(struct gw_mcp_discovery *disc, bool truncated)
{
    char subject[GW_CLIENT_ID_MAX + 16];
    int n = cJSON_GetArraySize(disc->acc);

    subject_of(disc, subject, sizeof(subject));
    if (disc->kind == KIND_TOOLS) {
        gw_tool_cache_set(disc->cache, disc->acc, truncated);
        disc->acc = NULL;
        gw_log_peer(GW_LOG_INFO, NULL, subject, "%d tools in %u page%s", n,
                    disc->pages, disc->pages == 1 ? "" : "s");
    } else {
        gw_mcp_catalog_set(disc->catalog, disc->kind, disc->acc, truncated);
        disc->acc = NULL;
        gw_log_peer(GW_LOG_INFO, NULL, subject, "%s: %d item%s in %u page%s",
                    kind_method(disc->kind), n, n == 1 ? "" : "s", disc->pages,
                    disc->pages == 1 ? "" : "s");
    }
    next_list(disc, disc->kind + 1);
}

static void on_list_reply(void *arg, const struct gw_mcp_reply *reply)
{
    struct gw_mcp_discovery *disc = arg;
    const struct gw_config *cfg = config_of(disc);
    bool tools = disc->kind == KIND_TOOLS;
    int max = tools ? cfg->mcp.max_tools : cfg->mcp.max_list_items;
    char subject[GW_CLIENT_ID_MAX + 16];
    const char *next = NULL;
    bool truncated = false;
    int rc = GW_EPROTO;

    if (reply->outcome == GW_MCP_OK) {
        rc = tools ? gw_mcp_tools_page_parse(reply->result, disc->acc, &next)
                   : gw_mcp_list_page_parse(disc->kind, reply->result,
                                            disc->acc, &next);
    }
    if (rc != 0) {
        list_failed(disc,
                    reply->outcome == GW_MCP_OK
                        ? "malformed page"
                        : gw_mcp_outcome_name(reply->outcome),
                    worth_retrying(reply->outcome));
        return;
    }
    disc->pages++;
    if (cJSON_GetArraySize(disc->acc) > max ||
        (next != NULL && (cJSON_GetArraySize(disc->acc) >= max ||
                          disc->pages >= DISCOVER_MAX_PAGES))) {
        while (cJSON_GetArraySize(disc->acc) > max) {
            cJSON_DeleteItemFromArray(disc->acc,
                                      cJSON_GetArraySize(disc->acc) - 1);
        }
        subject_of(disc, subject, sizeof(subject));
        gw_log_peer(GW_LOG_WARN, NULL, subject,
                    "%s: more than %s (%d) or %d pages: the list is cut%s",
                    kind_method(disc->kind),
                    tools ? "mcp.max_tools" : "mcp.max_list_items", max,
                    DISCOVER_MAX_PAGES,
                    tools ? ", and AI callers may call none of them" : "");
        truncated = true;
        next = NULL;
    }
    if (next != NULL) {
        request_page(disc, next);
        return;
    }
    list_done(disc, truncated);
}

static void request_page(struct gw_mcp_discovery *disc, const char *cursor)
{
    cJSON *params = cJSON_CreateObject();

    if (params != NULL) {
        /* Every tool, so the cache knows the user-only ones and can hide
         * them; the firmware lists them only when asked. */
        if (disc->kind == KIND_TOOLS) {
            cJSON_AddBoolToObject(params, "withUserTools", 1);
        }
        if (cursor != NULL) {
            cJSON_AddStringToObject(params, "cursor", cursor);
        }
    }
    gw_mcp_request(disc->owner->links, disc->link, kind_method(disc->kind),
                   params, 0, GW_MCP_FROM_GATEWAY, on_list_reply, disc, NULL);
}

/* Reads the list of kind (KIND_TOOLS first), skipping the catalog lists
 * the device does not offer; ends the run after the last. */
static void next_list(struct gw_mcp_discovery *disc, int kind)
{
    /* A device may offer no tools at all (only resources, say): its list
     * is then known to be empty, without asking. */
    if (kind == KIND_TOOLS && !(disc->catalog->info.caps & GW_MCP_CAP_TOOLS)) {
        cJSON *none = cJSON_CreateArray();
        if (none == NULL) {
            run_end(disc, GW_MCP_FAILED, false);
            return;
        }
        gw_tool_cache_set(disc->cache, none, false);
        kind++;
    }
    while (kind != KIND_TOOLS && kind < GW_MCP_LIST_COUNT_ &&
           !(disc->catalog->info.caps & list_cap[kind])) {
        if (disc->catalog->lists[kind].state != GW_TOOL_LIST_NONE) {
            /* offered before, no more */
            gw_mcp_catalog_clear_list(disc->catalog, kind);
        }
        kind++;
    }
    if (kind >= GW_MCP_LIST_COUNT_) {
        run_done(disc);
        return;
    }
    disc->kind = kind;
    disc->pages = 0;
    cJSON_Delete(disc->acc);
    if ((disc->acc = cJSON_CreateArray()) == NULL) {
        run_end(disc, GW_MCP_FAILED, false);
        return;
    }
    if (kind != KIND_TOOLS) {
        gw_mcp_catalog_begin(disc->catalog, kind);
    }
    request_page(disc, NULL);
}

static void on_init_reply(void *arg, const struct gw_mcp_reply *reply)
{
    struct gw_mcp_discovery *disc = arg;
    struct gw_mcp_server_info info;
    char subject[GW_CLIENT_ID_MAX + 16];

    subject_of(disc, subject, sizeof(subject));
    if (reply->outcome != GW_MCP_OK ||
        gw_mcp_server_info_parse(reply->result, &info) != 0) {
        gw_log_peer(GW_LOG_WARN, NULL, subject, "initialize failed: %s",
                    reply->outcome == GW_MCP_OK
                        ? "malformed result"
                        : gw_mcp_outcome_name(reply->outcome));
        run_end(disc, GW_MCP_FAILED, worth_retrying(reply->outcome));
        return;
    }
    /* Firmware that names no capability at all still has tools. */
    if (info.caps == 0) {
        info.caps = GW_MCP_CAP_TOOLS;
    }
    gw_mcp_catalog_set_info(disc->catalog, &info);
    /* notifications/initialized went already: the link sends it on every
     * initialize result (mcp_link.c). */
    disc->state = GW_MCP_LISTING;
    next_list(disc, KIND_TOOLS);
}

/* The capabilities only the gateway can honour: the device's requests
 * go to MCP clients (7.10), never to a backend. */
static const char *const routed_caps[] = {"sampling", "elicitation", "roots"};

/*
 * What the gateway offers as the device's MCP client. Sampling,
 * elicitation and roots whenever the MCP server is on to carry them to a
 * client that declared them (docs/protocol.md section 7.10): esp-mcp
 * sends none of them to a client that did not declare them. The firmware
 * reads capabilities.vision {url, token} to upload camera pictures, so
 * tools called outside a conversation (API, MCP clients) can see. The
 * token goes only into this message, never into a log.
 */
static cJSON *own_capabilities(const struct gw_config *cfg)
{
    const char *url = cfg->mcp.client_capabilities.vision.url;
    const char *token = cfg->mcp.client_capabilities.vision.token;
    cJSON *caps = cJSON_CreateObject();
    cJSON *vision;

    if (caps != NULL && cfg->http.port != 0 && cfg->http.token[0] != '\0') {
        for (size_t i = 0; i < sizeof(routed_caps) / sizeof(routed_caps[0]);
             i++) {
            cJSON_AddObjectToObject(caps, routed_caps[i]);
        }
    }
    if (caps == NULL || url[0] == '\0') {
        return caps;
    }
    vision = cJSON_AddObjectToObject(caps, "vision");
    if (vision != NULL) {
        cJSON_AddStringToObject(vision, "url", url);
        cJSON_AddStringToObject(vision, "token", token);
    }
    return caps;
}

cJSON *gw__device_client_capabilities(const struct gw_config *cfg,
                                      const cJSON *theirs)
{
    cJSON *own = own_capabilities(cfg);
    cJSON *caps;

    if (theirs == NULL || own == NULL) {
        return own;
    }
    if ((caps = cJSON_Duplicate(theirs, 1)) == NULL) {
        cJSON_Delete(own);
        return NULL;
    }
    /* Whatever a backend declares of these, the device's requests reach
     * only what the gateway routes. */
    for (size_t i = 0; i < sizeof(routed_caps) / sizeof(routed_caps[0]); i++) {
        cJSON_DeleteItemFromObjectCaseSensitive(caps, routed_caps[i]);
    }
    /* The gateway's other keys (vision) only where the backend has none. */
    for (const cJSON *it = own->child; it != NULL; it = it->next) {
        cJSON *dup;
        if (cJSON_GetObjectItemCaseSensitive(caps, it->string) != NULL) {
            continue;
        }
        if ((dup = cJSON_Duplicate(it, 1)) == NULL ||
            !cJSON_AddItemToObject(caps, it->string, dup)) {
            cJSON_Delete(dup);
            cJSON_Delete(caps);
            caps = NULL;
            break;
        }
    }
    cJSON_Delete(own);
    return caps;
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
        /* The newest revision: the firmware answers 2024-11-05 whatever
         * is asked, esp-mcp devices answer what they support. */
        cJSON_AddStringToObject(params, "protocolVersion", "2025-11-25");
        cJSON_AddItemToObject(
            params, "capabilities",
            gw__device_client_capabilities(config_of(disc), NULL));
        cJSON_AddStringToObject(info, "name", "hybridgw");
        cJSON_AddStringToObject(info, "version", GW_VERSION);
        cJSON_AddItemToObject(params, "clientInfo", info);
        info = NULL;
    }
    cJSON_Delete(info);
    gw_mcp_request(d->links, disc->link, "initialize", params, 0,
                   GW_MCP_FROM_GATEWAY, on_init_reply, disc, NULL);
}

/* Starts a run now or in line; one waiting for its retry goes now. */
static void begin(struct gw_mcp_discovery *disc)
{
    struct gw_mcp_discoverer *d = disc->owner;

    if (d->stopping || !disc->link->open) {
        return;
    }
    if (disc->running) {
        disc->again = true;
        return;
    }
    if (disc->state == GW_MCP_RETRYING) {
        retry_unlink(disc);
    } else if (gw_list_linked(&disc->queue_node)) {
        return; /* already in line */
    }
    gw_tool_cache_begin(disc->cache);
    if (d->running >= (unsigned)config_of(disc)->mcp.discover_concurrency) {
        /* Waiting: not "ready" for lists it is about to read again. */
        disc->state = GW_MCP_IDLE;
        gw_list_insert_tail(&d->queue, &disc->queue_node);
        return;
    }
    run(disc);
}

/* A tick of the retry wheel: what is due now joins the line behind the
 * discoveries already waiting, under the same concurrency. */
static void on_retry_tick(uv_timer_t *timer)
{
    struct gw_mcp_discoverer *d = timer->data;
    struct gw_list *slot, *first;

    d->retry_at = (d->retry_at + 1) % GW_MCP_RETRY_SLOTS;
    slot = &d->retry[d->retry_at];
    while ((first = gw_list_first(slot)) != NULL) {
        struct gw_mcp_discovery *disc =
            GW_LIST_ENTRY(first, struct gw_mcp_discovery, queue_node);
        /* Off the wheel first, whatever begin() makes of it; a retry
         * set meanwhile lands at least one slot ahead, never here. */
        retry_unlink(disc);
        disc->state = GW_MCP_FAILED;
        begin(disc);
    }
}

void gw__device_discovery_start(struct gw_mcp_discovery *disc)
{
    /* From outside (presence, a list change, refresh): retries afresh. */
    disc->attempts = 0;
    begin(disc);
}

void gw__device_discovery_list_changed(struct gw_mcp_discovery *disc, int kind)
{
    /* Nothing of that list asked yet: the run in progress reads it new.
     * A device sending several list_changed at once costs one run. */
    if (disc->running &&
        (disc->state == GW_MCP_INITIALIZING ||
         (disc->state == GW_MCP_LISTING && disc->kind < kind))) {
        return;
    }
    gw__device_discovery_start(disc);
}

void gw__device_discovery_cancel(struct gw_mcp_discovery *disc)
{
    if (disc->state == GW_MCP_RETRYING) {
        retry_unlink(disc);
        disc->state = GW_MCP_FAILED;
    }
    gw_list_unlink(&disc->queue_node);
    disc->again = false;
    /* A run in flight ends through its requests when the link closes. */
}

void gw__device_discoverer_stop(struct gw_mcp_discoverer *d)
{
    struct gw_list *it, *tmp;

    d->stopping = true;
    GW_LIST_FOREACH_SAFE(it, tmp, &d->queue)
    {
        gw_list_unlink(it);
    }
    for (unsigned i = 0; i < GW_MCP_RETRY_SLOTS; i++) {
        GW_LIST_FOREACH_SAFE(it, tmp, &d->retry[i])
        {
            GW_LIST_ENTRY(it, struct gw_mcp_discovery, queue_node)->state =
                GW_MCP_FAILED;
            gw_list_unlink(it);
        }
    }
    d->retry_waiting = 0;
    uv_timer_stop(&d->retry_timer);
}

void gw__device_discoverer_close(struct gw_mcp_discoverer *d, uv_close_cb cb)
{
    uv_close((uv_handle_t *)&d->retry_timer, cb);
}
