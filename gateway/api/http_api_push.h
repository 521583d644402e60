/*
 * Messages from the API to idle devices (docs/protocol.md section 8.5):
 * mcp, alert, system and custom, to one device or fanned out to a
 * selection, each checked by codec/device_command.h first. Both are
 * route handlers of http_api.c, called once the route's credentials
 * passed; each answers its request exactly once, now or later, and
 * counts what it did in stats (which outlives every request).
 */
#ifndef GW_HTTP_API_PUSH_H
#define GW_HTTP_API_PUSH_H

#include "gateway/api/http_api.h"
#include "gateway/http/http_server.h"
#include "gateway/api/push_stats.h"

/*
 * POST /api/commands/{id} (manager-api) and POST /api/devices/{id}/commands
 * (http.token): one message; an MCP one answers with the device's result
 * within http.api_timeout_ms, the others once published.
 */
void gw_api_push_command(const struct gw_http_api_env *env,
                         struct gw_push_stats *stats, struct gw_http_req *req,
                         const char *client_id);

/*
 * POST /api/broadcast (http.token): one message to the listed ids, a
 * group or every online device, at most http.broadcast_max_devices;
 * handled FANOUT_PER_TURN devices per loop turn, MCP requests in
 * parallel; answers with a result per device once all are known.
 */
void gw_api_push_broadcast(const struct gw_http_api_env *env,
                           struct gw_push_stats *stats,
                           struct gw_http_req *req);

#endif /* GW_HTTP_API_PUSH_H */
