/*
 * What the HTTP API's files share, private to gateway/api/: the router
 * (http_api.c) hands each route to the file that serves it, and every
 * file answers through http_api_answer.c; none calls back up into the
 * router.
 */
#ifndef GW_HTTP_API_INT_H
#define GW_HTTP_API_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "common/error.h"
#include "common/ratelimit.h"
#include "config/config.h"
#include "gateway/api/http_api.h"
#include "gateway/api/metrics.h"
#include "gateway/api/ota.h"
#include "gateway/api/push_stats.h"
#include "gateway/binding/binding.h"
#include "gateway/core/wall_clock.h"
#include "gateway/device/device_table.h"
#include "gateway/http/http_server.h"

#define GW__API_DEVICES_PREFIX "/api/devices/"

/* ---- http_api_answer.c: answers in the API's shapes ------------------- */

/* doc (taken; NULL: 503 out of memory) as the answer, with extra header
 * lines (NULL-terminated, may be NULL). */
void gw__api_send_json(struct gw_http_req *req, int status, cJSON *doc,
                       const char *const *headers);

/* {"error":why}, or for the manager-api's shapes
 * {"success":false,"error":why}; not logged. */
void gw__api_send_error(struct gw_http_req *req, int status, bool manager,
                        const char *why, const char *const *headers);

/* A refusal as gw__api_send_error, logged with the client. */
void gw__api_refuse(struct gw_http_req *req, int status, bool manager,
                    const char *why, const char *const *headers);

/* 404, logged at debug level. */
void gw__api_not_found(struct gw_http_req *req, bool manager);

/* 405 with Allow, unless the method is one of allow ("GET, HEAD"). */
bool gw__api_method_ok(struct gw_http_req *req, const char *allow,
                       bool manager);

/* ---- http_api_auth.c: who may ask (besides http_api.h's checks) ------- */

/* The credential of the request's "Authorization: Bearer <credential>",
 * or NULL. */
const char *gw__api_bearer(const struct gw_http_req *req);

/* http.token, when set: true when the request carries it, else 401. */
bool gw__api_token_ok(const struct gw_config *cfg, struct gw_http_req *req);

/* ---- http_api_devices.c: /api/devices (http.token) -------------------- */

/*
 * What the gateway knows of a device besides its MCP state, added to o:
 * since when it is online, its address, firmware, board and tool count.
 * /api/devices and the manager-api's /api/devices/status both say it.
 */
void gw__api_device_detail(cJSON *o, const struct gw_device *dev,
                           uint64_t now_ms);

/* /api/devices, /api/devices/{id} and /api/devices/{id}/refresh. */
void gw__api_devices_serve(const struct gw_http_api_env *env,
                           struct gw_http_req *req);

/* ---- manager_api.c: the xiaozhi manager-api (daily token) ------------- */

/* /api/commands/{id} or POST /api/devices/status (the call routes are
 * GW_DEVICE_CALL_REQUEST_PATH and GW_DEVICE_CALL_ACCEPT_PATH). */
bool gw__api_manager_route(const struct gw_http_req *req);

/* The checks of a manager-api or call route's head: http.manager_key
 * set, a valid id, POST, the daily token. A refusal answers here. */
bool gw__api_manager_head(const struct gw_config *cfg, struct gw_http_req *req);

/* Serves a manager-api or call route whose head passed. */
void gw__api_manager_serve(const struct gw_http_api_env *env,
                           struct gw_push_stats *push, struct gw_http_req *req);

/* ---- http_api_push.c: messages to idle devices ------------------------ */

/*
 * POST /api/commands/{id} (manager-api) and POST /api/devices/{id}/commands
 * (http.token), once the route's credentials passed: one message; an MCP
 * one answers with the device's result within http.api_timeout_ms, the
 * others once published. Answered exactly once, now or later; counted in
 * stats (which outlives every request).
 */
void gw__api_push_command(const struct gw_http_api_env *env,
                          struct gw_push_stats *stats, struct gw_http_req *req,
                          const char *client_id);

/*
 * POST /api/broadcast (http.token): one message to the listed ids, a
 * group or every online device, at most http.broadcast_max_devices;
 * handled a batch of devices per loop turn, MCP requests in parallel;
 * answers with a result per device once all are known.
 */
void gw__api_push_broadcast(const struct gw_http_api_env *env,
                            struct gw_push_stats *stats,
                            struct gw_http_req *req);

/* ---- ota.c, ota_activate.c: provisioning ------------------------------ */

/* The OTA endpoint's state, owned by the API. */
struct gw__api_ota {
    uv_loop_t *loop;
    struct gw_ota_stats stats;
    /* Codes and proofs tried, per address and overall: a 6-digit code
     * must not be found in its lifetime. */
    struct gw_ratelimit guesses;
    /* New pending activations, per address and overall. */
    struct gw_ratelimit newcomers;
};

/* ota.activation_ttl_s in ms: a code's lifetime, a reissue's window. */
#define GW__API_OTA_TTL_MS(cfg) ((int64_t)(cfg)->ota.activation_ttl_s * 1000)

const char *gw__api_ota_result_name(enum gw_ota_result r);

/* True for the paths the firmware's default OTA URL ends in. */
bool gw__api_ota_path(const char *path);

/* <ota url>/activate of those. */
bool gw__api_ota_activate_path(const char *path);

/*
 * The head checks of an OTA or activation request (after Host and
 * Origin): 404 while off, 405 unless POST, 413 for a body announced over
 * GW_OTA_BODY_MAX. Returns false when it has answered.
 */
bool gw__api_ota_head(const struct gw_config *cfg, struct gw__api_ota *ota,
                      struct gw_http_req *req);

/* Answers a check that passed gw__api_ota_head, its body read. */
void gw__api_ota_serve(const struct gw_http_api_env *env,
                       struct gw__api_ota *ota, struct gw_http_req *req);

/* Answers an activation request that passed gw__api_ota_head. */
void gw__api_ota_activate(const struct gw_http_api_env *env,
                          struct gw__api_ota *ota, struct gw_http_req *req);

/* {"error":why} with status, logged at a bounded rate per address. */
void gw__api_ota_refuse(struct gw_http_req *req, int status, const char *why,
                        const char *const *headers);

/* A Serial-Number header a binding may keep. */
bool gw__api_ota_serial_ok(const char *s);

/* The challenge a bound device answers to have its credentials again,
 * for one window of ota.activation_ttl_s. */
GW_MUST_CHECK int gw__api_ota_reissue_challenge(const struct gw_config *cfg,
                                                const struct gw_binding *b,
                                                int64_t window, char out[33]);

/* ---- http_api_bindings.c: /api/bindings (http.token) ------------------ */

bool gw__api_bindings_path(const char *path);

/* Token, method and body size of a bindings request; false: answered. */
bool gw__api_bindings_head(const struct gw_config *cfg, struct gw__api_ota *ota,
                           struct gw_http_req *req);

/* GET (list), POST (bind by code), DELETE /api/bindings/{client id}. */
void gw__api_bindings_serve(const struct gw_http_api_env *env,
                            struct gw__api_ota *ota, struct gw_http_req *req);

/* The binding a pending activation makes (client id, group, mac, uuid,
 * board, serial number; the rest is the caller's). GW_EPROTO: its client
 * id would be refused. */
GW_MUST_CHECK int
gw__api_binding_from_pending(const struct gw_config *cfg,
                             const struct gw_binding_pending *p,
                             struct gw_binding *b);

/* ---- metrics.c: /metrics ---------------------------------------------- */

/* The whole exposition as a heap string (free()); GW_ENOMEM. */
GW_MUST_CHECK int gw__api_metrics_format(const struct gw_metrics_sources *src,
                                         char **out, size_t *len);

/* ---- series.c: the last minutes (GET /api/series) and the turn
 * histograms ---- */

#define GW__API_TURN_HISTS 4

/* One turn histogram: its key in /api/series, its metric, what it times. */
struct gw__api_turn_hist {
    const char *key, *name, *help;
    struct gw_latency h;
};

/* The turn histograms of src, in the order /metrics writes them. */
void gw__api_turn_hists(const struct gw_metrics_sources *src,
                        struct gw__api_turn_hist out[GW__API_TURN_HISTS]);

struct gw__api_series;

/* Samples src every 10 s on loop (NULL: never; the answer then holds
 * only the time since init). src must outlive the series. */
GW_MUST_CHECK int gw__api_series_init(uv_loop_t *loop,
                                      const struct gw_metrics_sources *src,
                                      struct gw__api_series **out);

/* Frees the series (after its timer's close when it has one). */
void gw__api_series_close(struct gw__api_series *se, bool has_timer);

/* GET /api/series: the samples, oldest first, then the time since. */
void gw__api_series_serve(struct gw__api_series *se, struct gw_http_req *req);

#endif /* GW_HTTP_API_INT_H */
