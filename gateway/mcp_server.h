/*
 * The gateway's MCP server for any client (Streamable HTTP, protocol
 * 2025-11-25, also 2025-06-18 and 2025-03-26): /mcp shows the tools of
 * every online device under aggregated names, /mcp/devices/{clientId} the
 * tools of one, and tool calls go to the device through its MCP link.
 */
#ifndef GW_MCP_SERVER_H
#define GW_MCP_SERVER_H

#include <stdbool.h>

#include "gateway/config_hold.h"
#include "gateway/device_table.h"
#include "gateway/http_server.h"

struct gw_mcp_server;

struct gw_mcp_server_stats {
    uint64_t sessions_opened;
    uint64_t sessions_expired;
    uint64_t sessions_refused; /* initialize with mcp.max_sessions open */
    uint64_t requests;         /* JSON-RPC requests handled */
    uint64_t rejected;         /* HTTP 4xx answered */
    uint64_t streams_open;     /* GET streams now open (a gauge) */
};

/* What the MCP server needs of the instance. */
struct gw_mcp_server_env {
    uv_loop_t *loop;
    const struct gw_config_live *config;
    struct gw_device_table *devices;
};

/* Starts the server's sweep timer (idle clients, keepalives). */
GW_MUST_CHECK int gw_mcp_server_init(const struct gw_mcp_server_env *env,
                                     struct gw_mcp_server **out);
/*
 * Ends every stream and client session (pending tool calls are
 * abandoned) before returning; cb (may be NULL) runs once the timer has
 * closed, and srv is freed after it.
 */
void gw_mcp_server_close(struct gw_mcp_server *srv,
                         void (*cb)(struct gw_mcp_server *srv, void *arg),
                         void *arg);

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
