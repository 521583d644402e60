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
#include "gateway/config_hold.h"
#include "gateway/device_table.h"
#include "gateway/metrics.h"
#include "gateway/session.h"

struct gw_http_api;
struct gw_mcp_server;

/* What the API needs of the instance, given once at init. */
struct gw_http_api_env {
    uv_loop_t *loop;
    const struct gw_config_live *config;
    struct gw_device_table *devices;
    struct gw_sessions *sessions;
    struct gw_mcp_server *mcp_server;  /* NULL: /mcp answers 404 */
    struct gw_metrics_sources metrics; /* the API fills its own part */
};

/* Listens when http.port is not 0 (*out stays NULL otherwise). */
GW_MUST_CHECK int gw_http_api_init(const struct gw_http_api_env *env,
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
