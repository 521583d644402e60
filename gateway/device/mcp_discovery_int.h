/*
 * Discovery as the device records run it (mcp_discovery.h), private to
 * gateway/device/: one per record, started, told of list changes and
 * cancelled by the device table; and the gateway's client capabilities,
 * which the backend relay declares too.
 */
#ifndef GW_MCP_DISCOVERY_INT_H
#define GW_MCP_DISCOVERY_INT_H

#include "gateway/core/config_hold.h"
#include "gateway/device/mcp_catalog.h"
#include "gateway/device/mcp_discovery.h"
#include "gateway/device/mcp_link.h"
#include "gateway/device/tool_cache.h"

void gw__device_discoverer_init(struct gw_mcp_discoverer *d,
                                struct gw_mcp_links *links,
                                const struct gw_config_live *config,
                                gw_mcp_tools_changed_cb on_changed, void *arg);

/* Shutdown: the line and the retry wheel are emptied and nothing new
 * starts. Runs in flight end when their links close. */
void gw__device_discoverer_stop(struct gw_mcp_discoverer *d);

/* After stop: closes the retry wheel's timer; cb gets its handle. */
void gw__device_discoverer_close(struct gw_mcp_discoverer *d, uv_close_cb cb);

void gw__device_discovery_init(struct gw_mcp_discovery *disc,
                               struct gw_mcp_discoverer *owner,
                               struct gw_mcp_link *link,
                               struct gw_tool_cache *cache,
                               struct gw_mcp_catalog *catalog);

/* Starts a run now, or in line (one waiting for a retry too, its
 * retries counted afresh); a run in progress is repeated once it ends
 * (the list changed under it). Nothing happens once stopping. */
void gw__device_discovery_start(struct gw_mcp_discovery *disc);

/*
 * The device says a list changed (kind: -1 for tools, else the first
 * catalog kind it affects): a run that has not asked for that list yet
 * will read it as it now is; otherwise the list is read again, as
 * gw__device_discovery_start does.
 */
void gw__device_discovery_list_changed(struct gw_mcp_discovery *disc, int kind);

/* The device left: out of the line or off the retry wheel; a run in progress
 * ends with its link's requests. Must be called before the link closes. */
void gw__device_discovery_cancel(struct gw_mcp_discovery *disc);

/*
 * The capabilities the gateway declares as the device's MCP client
 * (docs/protocol.md 7.2), new, or NULL when memory is short. With theirs
 * (a backend's initialize capabilities, relayed in mcp_relay.c): theirs,
 * their sampling, elicitation and roots replaced by the gateway's (the
 * device's requests reach only what the gateway routes), the gateway's
 * other keys added where theirs has none.
 */
cJSON *gw__device_client_capabilities(const struct gw_config *cfg,
                                      const cJSON *theirs);

#endif /* GW_MCP_DISCOVERY_INT_H */
