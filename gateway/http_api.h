/*
 * The HTTP API on http.listen:http.port: the xiaozhi manager-api endpoints
 * (daily token), the operator's /api/devices, /healthz and /metrics, and
 * the MCP server under /mcp. One router; authentication happens here.
 */
#ifndef GW_HTTP_API_H
#define GW_HTTP_API_H

#include <stdint.h>

#include <uv.h>

#include "common/error.h"

struct gw_instance;
struct gw_http_api;

/* Listens when http.port is not 0 (*out stays NULL otherwise). */
GW_MUST_CHECK int gw_http_api_init(struct gw_instance *inst,
                                   struct gw_http_api **out);
/* The port actually bound (http.port 0 is not used: that disables). */
int gw_http_api_port(const struct gw_http_api *api);

/*
 * Responses sent so far with this HTTP status (every route, the MCP
 * server's included); 0 outside 100..599. For metrics.
 */
uint64_t gw_http_api_responses(const struct gw_http_api *api, int status);

/*
 * Closes the listener and every connection: requests still waiting for a
 * device are abandoned, and the MCP server's requests get their on_gone,
 * before this returns. cb (may be NULL) runs when all is closed; the api
 * is freed after it.
 */
void gw_http_api_close(struct gw_http_api *api,
                       void (*cb)(struct gw_http_api *api, void *arg),
                       void *arg);

#endif /* GW_HTTP_API_H */
