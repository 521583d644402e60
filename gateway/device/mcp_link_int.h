/*
 * The device records' side of a device's MCP link (mcp_link.h), private
 * to gateway/device/: links opened and closed with their records, and
 * what the device sends on them.
 */
#ifndef GW_MCP_LINK_INT_H
#define GW_MCP_LINK_INT_H

#include <stdbool.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "codec/jsonrpc.h"
#include "gateway/core/config_hold.h"
#include "gateway/device/mcp_link.h"
#include "gateway/device/publish.h"

void gw__device_links_init(struct gw_mcp_links *links, uv_loop_t *loop,
                           struct gw_publisher *pub,
                           const struct gw_config_live *config);

/*
 * Shutdown: every request still waiting ends with GW_MCP_CANCELLED (its
 * callback runs from here) and every later request is refused the same
 * way. Links must have been closed first (gw__device_link_close).
 */
void gw__device_links_close(struct gw_mcp_links *links);

/* Opens a device's link: ids start at a random point, so answers meant
 * for a previous instance of the gateway match nothing. */
void gw__device_link_open(struct gw_mcp_link *link, struct gw_mcp_links *links,
                          const char *client_id);

/*
 * The device left (GW_MCP_OFFLINE) or the gateway stops
 * (GW_MCP_CANCELLED): every request of the link ends now, with why; the
 * link refuses new ones until opened again. Callbacks run from here.
 */
void gw__device_link_close(struct gw_mcp_link *link, enum gw_mcp_outcome why);

/*
 * A response from the device (rpc classified as GW_RPC_RESPONSE): ends
 * the request it answers, or is dropped and counted when nobody waits.
 * True when it was the result of an initialize (whoever sent it): the
 * device may have forgotten what its peers asked of it.
 */
bool gw__device_link_on_response(struct gw_mcp_link *link,
                                 const struct gw_rpc *rpc);

/*
 * A device notifications/progress: true (consumed) when its token is the
 * id of a request of the link that asked for progress; the origin hears
 * it under its own token.
 */
bool gw__device_link_on_progress(struct gw_mcp_link *link,
                                 const struct gw_rpc *rpc);

/* Sends a notification (params moved) to the device; nothing waits. */
int gw__device_link_notify(struct gw_mcp_link *link, const char *method,
                           cJSON *params);

#endif /* GW_MCP_LINK_INT_H */
