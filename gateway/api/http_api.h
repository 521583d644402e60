/*
 * The HTTP API on http.listen:http.port: the xiaozhi manager-api endpoints
 * (daily token), the operator's /api/devices, /healthz and /metrics, and
 * the MCP server under /mcp. One router; authentication happens here.
 */
#ifndef GW_HTTP_API_H
#define GW_HTTP_API_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "common/error.h"
#include "gateway/api/metrics.h"
#include "gateway/binding/binding.h"
#include "gateway/core/config_hold.h"
#include "gateway/device/device_table.h"
#include "gateway/session/device_call.h"
#include "gateway/session/session.h"

struct gw_http_api;
struct gw_mcp_server;
struct gw_drain;

/* What the API needs of the instance, given once at init. */
struct gw_http_api_env {
    uv_loop_t *loop;
    const struct gw_config_live *config;
    struct gw_device_table *devices;
    struct gw_sessions *sessions;
    struct gw_device_calls *calls;     /* NULL: /api/call/... answer 404 */
    struct gw_mcp_server *mcp_server;  /* NULL: /mcp answers 404 */
    struct gw_metrics_sources metrics; /* the API fills its own part */
    struct gw_drain *drain;            /* NULL: /api/drain answers 404 */
    /* NULL unless ota.activation is on: OTA answers, /activate and
     * /api/bindings. */
    struct gw_binding_store *bindings;
    /* A binding undone: the instance tells the broker plugin. */
    void (*on_unbind)(const struct gw_binding_revoked *r, void *arg);
    void *on_unbind_arg;
    bool detached; /* listen nowhere: requests come from gw_http_api_inject */
};

/* Listens when http.port is not 0 (*out stays NULL otherwise), or when
 * env->detached not at all. */
GW_MUST_CHECK int gw_http_api_init(const struct gw_http_api_env *env,
                                   struct gw_http_api **out);
/* The port actually bound (http.port 0 is not used: that disables). */
int gw_http_api_port(const struct gw_http_api *api);

/*
 * Responses sent so far with this HTTP status (every route, the MCP
 * server's included); 0 outside 100..599. For metrics.
 */
uint64_t gw_http_api_responses(const struct gw_http_api *api, int status);

/* A request of a detached API, as gw_http_server_inject (tests, fuzzing). */
int gw_http_api_inject(struct gw_http_api *api, const char *method,
                       const char *target, const char *const *headers,
                       size_t n_headers, const char *body, size_t len,
                       size_t piece);

/*
 * Closes the listener and every connection: requests still waiting for a
 * device are abandoned, and the MCP server's requests get their on_gone,
 * before this returns. cb (may be NULL) runs when all is closed; the api
 * is freed after it.
 */
void gw_http_api_close(struct gw_http_api *api,
                       void (*cb)(struct gw_http_api *api, void *arg),
                       void *arg);

/* ---- the checks made from a request's head (pure, for tests and fuzzing) */

/*
 * Whether a Host header value may reach the API (DNS rebinding): IP
 * literals, localhost and *.localhost, http.listen's name and
 * http.allowed_hosts ("*" = any), each with or without a port; no header
 * (HTTP/1.0) passes.
 */
bool gw_http_api_host_ok(const struct gw_config *cfg, const char *host);
/* Whether an Origin header value may drive the API: none, a loopback
 * page, or one of http.allowed_origins. */
bool gw_http_api_origin_ok(const struct gw_config *cfg, const char *origin);
/* Whether the value carries token (compared in constant time); never for
 * an empty token. */
bool gw_http_api_token_matches(const char *token, const char *authorization);

#endif /* GW_HTTP_API_H */
