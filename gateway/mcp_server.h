/*
 * The gateway's MCP server for any client (Streamable HTTP, protocol
 * 2025-11-25, also 2025-06-18 and 2025-03-26): /mcp shows the tools of
 * every online device under aggregated names, /mcp/devices/{clientId} the
 * tools of one, and tool calls go to the device through its MCP link.
 */
#ifndef GW_MCP_SERVER_H
#define GW_MCP_SERVER_H

#include <stdbool.h>

#include "gateway/device.h"
#include "gateway/http_server.h"

struct gw_instance;
struct gw_mcp_server;

struct gw_mcp_server_stats {
    uint64_t sessions_opened;
    uint64_t sessions_expired;
    uint64_t requests;     /* JSON-RPC requests handled */
    uint64_t rejected;     /* HTTP 4xx answered */
    uint64_t streams_open; /* GET streams now open (a gauge) */
};

GW_MUST_CHECK int gw_mcp_server_create(struct gw_instance *inst,
                                       struct gw_mcp_server **out);
/* Ends every stream and session; pending tool calls are abandoned. */
void gw_mcp_server_destroy(struct gw_mcp_server *srv);

/*
 * Serves req if its path is /mcp or /mcp/devices/{clientId} (returns
 * true), else returns false and leaves req alone. Authentication (bearer
 * token, Origin) was already checked by the caller.
 */
bool gw_mcp_server_handle(struct gw_mcp_server *srv, struct gw_http_req *req);

/* A device came, went or changed its tools: list_changed to the streams. */
void gw_mcp_server_device_changed(struct gw_mcp_server *srv,
                                  const struct gw_device *dev);

void gw_mcp_server_get_stats(const struct gw_mcp_server *srv,
                             struct gw_mcp_server_stats *out);

#endif /* GW_MCP_SERVER_H */
