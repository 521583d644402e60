/*
 * Tool discovery (docs/protocol.md section 7): initialize,
 * notifications/initialized, then tools/list paged to the end or to
 * mcp.max_tools, filling a device's tool cache. At most
 * mcp.discover_concurrency discoveries run at once; the rest wait in line,
 * so a broker replaying every device's presence does not flood devices.
 */
#ifndef GW_MCP_DISCOVERY_H
#define GW_MCP_DISCOVERY_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "common/list.h"
#include "gateway/mcp_link.h"
#include "gateway/tool_cache.h"

/* Where a device's discovery is. */
#define GW_MCP_STATE_MAP(XX)                                                   \
    XX(IDLE, "idle")                 /* nothing asked yet, or waiting */       \
    XX(INITIALIZING, "initializing") /* initialize sent */                     \
    XX(LISTING, "listing")           /* tools/list pages in flight */          \
    XX(READY, "ready")               /* the cache holds the list */            \
    XX(FAILED, "failed")             /* the last discovery failed */

enum gw_mcp_state {
#define XX(name, _) GW_MCP_##name,
    GW_MCP_STATE_MAP(XX)
#undef XX
        GW_MCP_STATE_COUNT_
};

const char *gw_mcp_state_name(enum gw_mcp_state state);

struct gw_mcp_discoverer;

/* One device's discovery; lives in the device's record. */
struct gw_mcp_discovery {
    struct gw_mcp_discoverer *owner;
    struct gw_mcp_link *link;
    struct gw_tool_cache *cache;
    enum gw_mcp_state state;
    struct gw_list queue_node; /* in owner->queue while waiting */
    bool running;              /* holds one of the owner's slots */
    bool again;                /* list_changed during a run */
    cJSON *acc;                /* tools gathered by the run in progress */
    unsigned pages;            /* pages of the run in progress */
    char server_name[64];      /* serverInfo of the device's initialize */
    char server_version[32];
};

/* Told when a device's tool list changed (a run completed or failed). */
typedef void (*gw_mcp_tools_changed_cb)(void *arg,
                                        struct gw_mcp_discovery *disc);

/* Every discovery's shared part: slots, the line, the counters. */
struct gw_mcp_discoverer {
    struct gw_mcp_links *links;
    const struct gw_config_live *config;
    struct gw_list queue; /* discoveries waiting for a slot */
    unsigned running;
    bool stopping; /* shutdown: nothing new starts */
    gw_mcp_tools_changed_cb on_changed;
    void *on_changed_arg;
};

void gw_mcp_discoverer_init(struct gw_mcp_discoverer *d,
                            struct gw_mcp_links *links,
                            const struct gw_config_live *config,
                            gw_mcp_tools_changed_cb on_changed, void *arg);
/* Shutdown: the line is emptied and nothing new starts. Runs in flight
 * end when their links close. */
void gw_mcp_discoverer_stop(struct gw_mcp_discoverer *d);

void gw_mcp_discovery_init(struct gw_mcp_discovery *disc,
                           struct gw_mcp_discoverer *owner,
                           struct gw_mcp_link *link,
                           struct gw_tool_cache *cache);
/* Starts a run now, or in line; a run in progress is repeated once it
 * ends (the list changed under it). Nothing happens once stopping. */
void gw_mcp_discovery_start(struct gw_mcp_discovery *disc);
/* The device left: out of the line; a run in progress ends with its
 * link's requests. Must be called before the link closes. */
void gw_mcp_discovery_cancel(struct gw_mcp_discovery *disc);

#endif /* GW_MCP_DISCOVERY_H */
