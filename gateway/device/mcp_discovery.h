/*
 * Discovery (docs/protocol.md section 7): initialize (its capabilities
 * go to the device's catalog; the link follows its result with
 * notifications/initialized), then tools/list
 * paged to the end or to mcp.max_tools, filling a device's tool cache,
 * then, only when the device offers them, resources/list,
 * resources/templates/list and prompts/list, each to the end or to
 * mcp.max_list_items, filling its catalog. At most
 * mcp.discover_concurrency discoveries run at once; the rest wait in line,
 * so a broker replaying every device's presence does not flood devices.
 * A run that fails for want of an answer (timeout, the link busy) is run
 * again later, up to mcp.discover_retries times, after a growing and
 * jittered delay that it waits out on the discoverer's retry wheel.
 */
#ifndef GW_MCP_DISCOVERY_H
#define GW_MCP_DISCOVERY_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "common/list.h"
#include "gateway/device/mcp_catalog.h"
#include "gateway/device/mcp_link.h"
#include "gateway/device/tool_cache.h"

/* Where a device's discovery is. */
#define GW_MCP_STATE_MAP(XX)                                                   \
    XX(IDLE, "idle")                 /* nothing asked yet, or waiting */       \
    XX(INITIALIZING, "initializing") /* initialize sent */                     \
    XX(LISTING, "listing")           /* list pages in flight */                \
    XX(READY, "ready")               /* the cache holds the list */            \
    XX(FAILED, "failed")             /* the last discovery failed */           \
    XX(RETRYING, "retrying")         /* it failed; a retry is due */

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
    struct gw_mcp_catalog *catalog;
    enum gw_mcp_state state;
    int kind;                  /* list being read: -1 tools, else a kind */
    struct gw_list queue_node; /* in owner->queue or retry while waiting */
    bool running;              /* holds one of the owner's slots */
    bool again;                /* list_changed during a run */
    uint8_t attempts;          /* retries since the last start from outside */
    cJSON *acc;                /* tools gathered by the run in progress */
    unsigned pages;            /* pages of the run in progress */
};

/* Told when a device's lists changed (a run completed or failed); what:
 * GW_DEVICE_CHANGED_* bits of mcp_catalog.h. */
typedef void (*gw_mcp_tools_changed_cb)(void *arg,
                                        struct gw_mcp_discovery *disc,
                                        unsigned what);

/* The retry wheel: a slot per tick, one turn longer than the longest
 * delay (mcp.discover_retry_max_ms). */
#define GW_MCP_RETRY_TICK_MS 100
#define GW_MCP_RETRY_SLOTS   1024

/* Every discovery's shared part: slots, the line, the counters. */
struct gw_mcp_discoverer {
    struct gw_mcp_links *links;
    const struct gw_config_live *config;
    struct gw_list queue; /* discoveries waiting for a slot */
    unsigned running;
    /* Failed runs waiting for their retry, each in the slot of the tick
     * it is due (queue_node): O(1) in and out, one timer for all. */
    struct gw_list retry[GW_MCP_RETRY_SLOTS];
    unsigned retry_at;      /* the slot of the last tick */
    unsigned retry_waiting; /* discoveries on the wheel */
    uv_timer_t retry_timer; /* ticks while any wait */
    uint64_t jitter;        /* xorshift state: spreads a storm's retries */
    bool stopping;          /* shutdown: nothing new starts */
    gw_mcp_tools_changed_cb on_changed;
    void *on_changed_arg;
};

#endif /* GW_MCP_DISCOVERY_H */
