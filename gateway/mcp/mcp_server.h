/*
 * The gateway's MCP server for any client (Streamable HTTP, protocol
 * 2025-11-25, also 2025-06-18 and 2025-03-26): /mcp shows the tools,
 * resources and prompts of every online device under aggregated names,
 * /mcp/devices/{clientId} those of one under their own; requests go to the
 * device through its MCP link, and a device's own requests (sampling,
 * elicitation, roots) to a client session of its endpoint.
 */
#ifndef GW_MCP_SERVER_H
#define GW_MCP_SERVER_H

#include <stdbool.h>

#include "gateway/core/config_hold.h"
#include "gateway/device/device_table.h"
#include "gateway/http/http_server.h"

struct gw_mcp_server;

struct gw_mcp_server_stats {
    uint64_t sessions_opened;
    uint64_t sessions_expired;
    uint64_t sessions_refused; /* initialize with mcp.max_sessions open */
    uint64_t requests;         /* JSON-RPC requests handled */
    uint64_t rejected;         /* HTTP 4xx answered */
    uint64_t streams_open;     /* GET streams now open (a gauge) */
    uint64_t refused;          /* JSON-RPC requests the gateway refused */
    uint64_t progress;         /* progress notifications passed on */
    uint64_t notifications;    /* device notifications to sessions */
    uint64_t asks;             /* device requests sent to a client */
    uint64_t asks_answered;    /* ... and answered by it */
    uint64_t asks_refused;     /* answered at once: no capable client, busy */
    uint64_t asks_timeout;     /* not answered in time */
    uint64_t asks_dropped;     /* client gone, device gone or withdrawn */
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

/* A device came, went or changed a list (what: GW_DEVICE_CHANGED_*
 * bits): the matching list_changed notifications to the streams. */
void gw_mcp_server_device_changed(struct gw_mcp_server *srv,
                                  const struct gw_device *dev, unsigned what);

/*
 * A device's own request to its client (sampling/createMessage,
 * elicitation/create, roots/list) or its notifications/cancelled
 * (gw_device_request_cb): sent to a capable client session of the
 * device's endpoint, or answered -32006 at once. True when taken.
 */
bool gw_mcp_server_device_request(struct gw_mcp_server *srv,
                                  struct gw_device *dev,
                                  const struct gw_rpc *rpc);

void gw_mcp_server_get_stats(const struct gw_mcp_server *srv,
                             struct gw_mcp_server_stats *out);

#endif /* GW_MCP_SERVER_H */
