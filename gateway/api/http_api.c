/*
 * The HTTP API's router: what a request is for, the checks its head must
 * pass, and who serves it: /healthz, /metrics and /api/drain here; the
 * operator's /api/devices, the manager-api, pushes, OTA and /ui/ in their
 * own files (http_api_int.h); /mcp in the MCP server.
 */
#include "gateway/api/http_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/log.h"
#include "gateway/api/http_api_int.h"
#include "gateway/api/http_static.h"
#include "gateway/http/http_server.h"
#include "gateway/mcp/mcp_server.h"
#include "gateway/session/device_call.h"
#include "gateway/session/drain.h"
#include "gateway/session/session.h"

#define SUBJECT      "http"
#define METRICS_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define UI_MOUNT     "/ui"

struct gw_http_api {
    struct gw_http_api_env env;
    struct gw_http_server *srv;
    void (*close_cb)(struct gw_http_api *api, void *arg);
    void *close_arg;
    struct gw__api_ota ota; /* provisioning: OTA, activation, bindings */
    /* Pushes to devices, for metrics. */
    struct gw_push_stats push;
    struct gw__api_series *series; /* the operator page's charts */
};

/* ---- routes ------------------------------------------------------------ */

/* What a request is for, from its path and method alone. */
enum route {
    ROUTE_NONE,
    ROUTE_HEALTHZ,
    ROUTE_MANAGER, /* /api/commands/{id}, POST /api/devices/status */
    ROUTE_METRICS,
    ROUTE_DEVICES,
    ROUTE_MCP,
    ROUTE_PUSH, /* /api/devices/{id}/commands, /api/broadcast (http.token) */
    ROUTE_OTA,  /* the firmware's check: no token, off unless ota.enabled */
    ROUTE_ACTIVATE, /* <ota url>/activate: no token, as the check */
    ROUTE_BINDINGS, /* /api/bindings (http.token) */
    ROUTE_UI,       /* the operator page's files: no data, no token */
    ROUTE_CALL,     /* /api/call/request, /api/call/accept (daily token) */
    ROUTE_DRAIN,    /* POST /api/drain: a rolling restart (http.token) */
    ROUTE_SERIES    /* GET /api/series: the last minutes (http.token) */
};

/* Whether path is base itself or under it ("/mcp", "/mcp/..."). */
static bool is_under(const char *path, const char *base)
{
    size_t n = strlen(base);

    return strncmp(path, base, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* The id of /api/devices/{id}/commands (NUL-terminated into id), or
 * false for any other path. */
static bool push_target(const char *path, char *id, size_t cap)
{
    static const char tail[] = "/commands";
    size_t n = strlen(path), pre = strlen(GW__API_DEVICES_PREFIX);

    if (n <= pre + sizeof(tail) - 1 ||
        strncmp(path, GW__API_DEVICES_PREFIX, pre) != 0 ||
        strcmp(path + n - (sizeof(tail) - 1), tail) != 0) {
        return false;
    }
    n -= pre + sizeof(tail) - 1;
    if (n >= cap || memchr(path + pre, '/', n) != NULL) {
        return false;
    }
    memcpy(id, path + pre, n);
    id[n] = '\0';
    return true;
}

static enum route route_of(struct gw_http_req *req)
{
    char id[GW_CLIENT_ID_MAX + 1];

    const char *path = gw_http_req_path(req);

    if (strcmp(path, "/healthz") == 0) {
        return ROUTE_HEALTHZ;
    }
    if (gw__api_ota_path(path)) {
        return ROUTE_OTA;
    }
    if (gw__api_ota_activate_path(path)) {
        return ROUTE_ACTIVATE;
    }
    if (gw__api_bindings_path(path)) {
        return ROUTE_BINDINGS;
    }
    if (gw__api_manager_route(req)) {
        return ROUTE_MANAGER;
    }
    if (strcmp(path, GW_DEVICE_CALL_REQUEST_PATH) == 0 ||
        strcmp(path, GW_DEVICE_CALL_ACCEPT_PATH) == 0) {
        return ROUTE_CALL;
    }
    if (strcmp(path, "/metrics") == 0) {
        return ROUTE_METRICS;
    }
    if (strcmp(path, "/api/drain") == 0) {
        return ROUTE_DRAIN;
    }
    if (strcmp(path, "/api/series") == 0) {
        return ROUTE_SERIES;
    }
    if (strcmp(path, "/api/broadcast") == 0 ||
        push_target(path, id, sizeof(id))) {
        return ROUTE_PUSH;
    }
    if (is_under(path, "/api/devices")) {
        return ROUTE_DEVICES;
    }
    if (is_under(path, UI_MOUNT)) {
        return ROUTE_UI;
    }
    return is_under(path, "/mcp") ? ROUTE_MCP : ROUTE_NONE;
}

/* ---- the checks of the head -------------------------------------------- */

/*
 * A route that reads no body holds none (open to anyone while http.token
 * is not set): one announced is refused before it is read.
 */
static bool no_body(struct gw_http_req *req)
{
    if (gw_http_content_length(gw_http_req_header(req, "content-length")) > 0) {
        gw__api_refuse(req, 413, false, "this route takes no body", NULL);
        return false;
    }
    return true;
}

/* Pushing acts on devices: like the MCP server, off without a token. */
static bool push_allowed(const struct gw_config *cfg, struct gw_http_req *req)
{
    if (cfg->http.token[0] == '\0') {
        gw__api_refuse(req, 403, true,
                       "pushing to devices is off: set http.token to enable it",
                       NULL);
        return false;
    }
    return true;
}

/*
 * Browser MCP clients: a page whose Origin passed (a local one or one of
 * http.allowed_origins) may read /mcp's answers, its 401s included, and
 * the headers the Streamable HTTP transport needs. The preflight carries
 * no credentials, so it is answered here, before the token check.
 * Returns true when the request was answered.
 */
static bool mcp_cors(struct gw_http_api *api, struct gw_http_req *req)
{
    static const char *const preflight[] = {
        "Allow: GET, POST, DELETE, OPTIONS",
        "Access-Control-Allow-Methods: GET, POST, DELETE, OPTIONS",
        "Access-Control-Allow-Headers: Authorization, Content-Type, Accept, "
        "Mcp-Session-Id, MCP-Protocol-Version, Last-Event-ID",
        "Access-Control-Max-Age: 600", NULL};
    const char *origin = gw_http_req_header(req, "origin");
    char line[300];

    if (origin != NULL && strlen(origin) < 256) {
        snprintf(line, sizeof(line), "Access-Control-Allow-Origin: %s", origin);
        if (gw_http_req_add_header(req, line) != 0 ||
            gw_http_req_add_header(req, "Vary: Origin") != 0 ||
            gw_http_req_add_header(
                req, "Access-Control-Expose-Headers: Mcp-Session-Id, "
                     "MCP-Protocol-Version, WWW-Authenticate") != 0) {
            gw__api_refuse(req, 503, false, "out of memory", NULL);
            return true;
        }
    }
    if (strcmp(gw_http_req_method(req), "OPTIONS") != 0) {
        return false;
    }
    if (api->env.mcp_server == NULL) {
        gw__api_not_found(req, false);
        return true;
    }
    gw_log_peer(GW_LOG_DEBUG, gw_http_req_peer(req), SUBJECT,
                "preflight of %.128s from %s (origin %s)",
                gw_http_req_path(req), gw_http_req_peer(req),
                origin != NULL ? origin : "none");
    (void)gw_http_respond(req, 204, NULL, preflight, NULL, 0);
    return true;
}

/* Draining stops the instance: never without a token. */
static bool drain_ok(struct gw_http_api *api, const struct gw_config *cfg,
                     struct gw_http_req *req)
{
    if (api->env.drain == NULL) {
        gw__api_not_found(req, false);
        return false;
    }
    if (!gw__api_method_ok(req, "POST", false)) {
        return false;
    }
    if (cfg->http.token == NULL || cfg->http.token[0] == '\0') {
        gw__api_refuse(req, 403, false,
                       "draining over HTTP is off: set http.token to enable it",
                       NULL);
        return false;
    }
    return gw__api_token_ok(cfg, req);
}

/* With no token the MCP server is off: its tools act on devices. */
static bool mcp_ok(struct gw_http_api *api, const struct gw_config *cfg,
                   struct gw_http_req *req)
{
    if (api->env.mcp_server == NULL) {
        gw__api_not_found(req, false);
        return false;
    }
    if (cfg->http.token == NULL || cfg->http.token[0] == '\0') {
        gw__api_refuse(req, 403, false,
                       "the MCP server is off: set http.token to enable it",
                       NULL);
        return false;
    }
    return gw__api_token_ok(cfg, req);
}

/*
 * Every check that needs only the head, before any body is read: Host,
 * Origin, then the route's credentials. A refusal answers here.
 */
static void on_head(struct gw_http_req *req, void *arg)
{
    struct gw_http_api *api = arg;
    const struct gw_config *cfg = gw_config_live_get(api->env.config);
    enum route route = route_of(req);

    if (!gw_http_api_host_ok(cfg, gw_http_req_header(req, "host"))) {
        gw__api_refuse(req, 421, route == ROUTE_MANAGER, "host not allowed",
                       NULL);
        return;
    }
    if (!gw_http_api_origin_ok(cfg, gw_http_req_header(req, "origin"))) {
        gw__api_refuse(req, 403, route == ROUTE_MANAGER, "origin not allowed",
                       NULL);
        return;
    }
    switch (route) {
    case ROUTE_HEALTHZ:
        /* Anyone may ask (probes send no token); a bearer sent must be
         * the token, which shows the whole document. */
        (void)(gw__api_method_ok(req, "GET, HEAD", false) &&
               (gw__api_bearer(req) == NULL || gw__api_token_ok(cfg, req)));
        break;
    case ROUTE_MANAGER:
    case ROUTE_CALL:
        (void)gw__api_manager_head(cfg, req);
        break;
    case ROUTE_METRICS:
    case ROUTE_SERIES:
        (void)(gw__api_method_ok(req, "GET, HEAD", false) &&
               gw__api_token_ok(cfg, req));
        break;
    case ROUTE_DEVICES:
        (void)(gw__api_token_ok(cfg, req) && no_body(req));
        break;
    case ROUTE_MCP:
        if (!mcp_cors(api, req)) {
            (void)mcp_ok(api, cfg, req);
        }
        break;
    case ROUTE_PUSH:
        (void)(gw__api_method_ok(req, "POST", true) && push_allowed(cfg, req) &&
               gw__api_token_ok(cfg, req));
        break;
    case ROUTE_OTA:
    case ROUTE_ACTIVATE:
        (void)gw__api_ota_head(cfg, &api->ota, req);
        break;
    case ROUTE_BINDINGS:
        (void)gw__api_bindings_head(cfg, &api->ota, req);
        break;
    case ROUTE_DRAIN:
        (void)drain_ok(api, cfg, req);
        break;
    case ROUTE_UI:
        (void)gw__api_method_ok(req, "GET, HEAD", false);
        break;
    case ROUTE_NONE:
        gw__api_not_found(req, false);
        break;
    }
}

/* ---- the router -------------------------------------------------------- */

static void cluster_member(void *arg, const char *name, const char *state,
                           const char *udp, unsigned sessions)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddStringToObject(o, "name", name);
    cJSON_AddStringToObject(o, "state", state);
    if (udp[0] != '\0') {
        cJSON_AddStringToObject(o, "udp", udp);
    }
    cJSON_AddNumberToObject(o, "sessions", sessions);
    cJSON_AddItemToArray(arg, o);
}

/* The instance's name and state, and the instances it sees. */
static void healthz_cluster(const struct gw_metrics_sources *src, cJSON *doc)
{
    const struct gw_cluster *c = src->cluster != NULL ? *src->cluster : NULL;
    cJSON *o, *seen;

    if (c == NULL) {
        return;
    }
    o = cJSON_AddObjectToObject(doc, "cluster");
    cJSON_AddStringToObject(o, "name", gw_cluster_name(c));
    cJSON_AddStringToObject(o, "state",
                            gw_cluster_is_draining(c) &&
                                    gw_cluster_phase(c) == GW_CLUSTER_OFF
                                ? "draining"
                                : gw_cluster_phase_name(gw_cluster_phase(c)));
    if (gw_cluster_phase(c) != GW_CLUSTER_OFF &&
        (seen = cJSON_AddArrayToObject(o, "instances")) != NULL) {
        gw_cluster_each(c, cluster_member, seen);
    }
}

/*
 * The overall status to anyone; the rest (backends and their failures,
 * the instances and their addresses) with http.token's bearer, or to
 * anyone when no token is set (every route is open then).
 */
static void healthz(struct gw_http_api *api, struct gw_http_req *req)
{
    const struct gw_metrics_sources *src = &api->env.metrics;
    const struct gw_config *cfg = gw_config_live_get(api->env.config);
    bool up = src->mqtt != NULL && gw_mqtt_link_is_up(src->mqtt);
    bool full = cfg->http.token[0] == '\0' ||
                gw_http_api_token_matches(
                    cfg->http.token, gw_http_req_header(req, "authorization"));
    const struct gw_backend_pool *pool = api->env.sessions->env.pool;
    const char *status = up ? "ok" : "unavailable";
    cJSON *doc = cJSON_CreateObject();
    cJSON *item = cJSON_AddStringToObject(doc, "status", status);

    cJSON_AddStringToObject(doc, "broker", up ? "up" : "down");
    /* A route none of whose backends is in rotation: still 200 (sessions
     * still try them), but said, with the route and backends. */
    if (pool != NULL &&
        gw_backend_pool_health_json(pool, cfg, uv_now(api->env.loop), doc) >
            0 &&
        up) {
        status = "degraded";
        if (item != NULL) {
            cJSON_SetValuestring(item, status);
        }
    }
    if (!full) {
        cJSON_Delete(doc);
        doc = cJSON_CreateObject();
        cJSON_AddStringToObject(doc, "status", status);
        gw__api_send_json(req, up ? 200 : 503, doc, NULL);
        return;
    }
    cJSON_AddNumberToObject(doc, "sessions",
                            (double)gw_sessions_live(api->env.sessions));
    cJSON_AddNumberToObject(doc, "devices_online",
                            (double)gw_device_table_online(api->env.devices));
    cJSON_AddNumberToObject(
        doc, "uptime_s",
        (double)((uv_now(api->env.loop) - src->started_ms) / 1000));
    healthz_cluster(src, doc);
    gw__api_send_json(req, up ? 200 : 503, doc, NULL);
}

/*
 * POST /api/drain: 202 when this request started the drain, 200 when one
 * was under way (its deadline stays); either way what it stands at.
 */
static void drain(struct gw_http_api *api, struct gw_http_req *req)
{
    const struct gw_config *cfg = gw_config_live_get(api->env.config);
    char by[96];

    snprintf(by, sizeof(by), "POST /api/drain from %s", gw_http_req_peer(req));
    bool started =
        gw_drain_start(api->env.drain, cfg->cluster.drain_deadline_s, by);
    cJSON *doc = cJSON_CreateObject();

    if (doc != NULL) {
        cJSON_AddStringToObject(doc, "state",
                                gw_drain_state_name(api->env.drain->state));
        cJSON_AddBoolToObject(doc, "started", started);
        cJSON_AddNumberToObject(doc, "sessions",
                                (double)gw_sessions_live(api->env.sessions));
        cJSON_AddNumberToObject(doc, "deadline_s",
                                (double)gw_drain_seconds_left(api->env.drain));
    }
    gw__api_send_json(req, started ? 202 : 200, doc, NULL);
}

static void metrics(struct gw_http_api *api, struct gw_http_req *req)
{
    char *text = NULL;
    size_t len = 0;

    if (gw__api_metrics_format(&api->env.metrics, &text, &len) != 0) {
        gw__api_send_error(req, 503, false, "out of memory", NULL);
        return;
    }
    (void)gw_http_respond(req, 200, METRICS_TYPE, NULL, text, len);
    free(text);
}

/* The head passed on_head: serve what the route is for. */
static void on_request(struct gw_http_req *req, void *arg)
{
    struct gw_http_api *api = arg;
    const char *path = gw_http_req_path(req);

    switch (route_of(req)) {
    case ROUTE_HEALTHZ:
        healthz(api, req);
        break;
    case ROUTE_MANAGER:
    case ROUTE_CALL:
        gw__api_manager_serve(&api->env, &api->push, req);
        break;
    case ROUTE_METRICS:
        metrics(api, req);
        break;
    case ROUTE_DEVICES:
        gw__api_devices_serve(&api->env, req);
        break;
    case ROUTE_MCP:
        if (!gw_mcp_server_handle(api->env.mcp_server, req)) {
            gw__api_not_found(req, false);
        }
        break;
    case ROUTE_PUSH: {
        char id[GW_CLIENT_ID_MAX + 1];
        if (push_target(path, id, sizeof(id))) {
            gw__api_push_command(&api->env, &api->push, req, id);
        } else {
            gw__api_push_broadcast(&api->env, &api->push, req);
        }
        break;
    }
    case ROUTE_OTA:
        gw__api_ota_serve(&api->env, &api->ota, req);
        break;
    case ROUTE_ACTIVATE:
        gw__api_ota_activate(&api->env, &api->ota, req);
        break;
    case ROUTE_BINDINGS:
        gw__api_bindings_serve(&api->env, &api->ota, req);
        break;
    case ROUTE_DRAIN:
        drain(api, req);
        break;
    case ROUTE_SERIES:
        gw__api_series_serve(api->series, req);
        break;
    case ROUTE_UI:
        gw_http_static_serve(req, api->env.detached ? NULL : api->env.loop,
                             gw_config_live_get(api->env.config)->http.ui_dir,
                             UI_MOUNT);
        break;
    case ROUTE_NONE:
        gw__api_not_found(req, false);
        break;
    }
}

/* ---- life cycle -------------------------------------------------------- */

static uint64_t responses_of(const void *arg, int status)
{
    return gw_http_api_responses(arg, status);
}

static void server_stats_of(const void *arg, struct gw_http_server_stats *out)
{
    const struct gw_http_api *api = arg;

    gw_http_server_get_stats(api->srv, out);
}

int gw_http_api_init(const struct gw_http_api_env *env,
                     struct gw_http_api **out)
{
    const struct gw_config *cfg = gw_config_live_get(env->config);
    struct gw_http_server_options o = {
        .listen = cfg->http.listen,
        .port = cfg->http.port,
        .max_body = (size_t)cfg->http.max_body_bytes,
        .on_head = on_head,
        .on_request = on_request,
        .max_connections = cfg->http.max_connections,
        .max_connections_per_address = cfg->http.max_connections_per_address,
    };
    struct gw_http_api *api;
    int rc;

    *out = NULL;
    if (cfg->http.port == 0 && !env->detached) {
        return 0;
    }
    api = calloc(1, sizeof(*api));
    if (api == NULL) {
        return GW_ENOMEM;
    }
    api->env = *env;
    api->env.metrics.http_responses = responses_of;
    api->env.metrics.http_server_stats = server_stats_of;
    api->env.metrics.http_arg = api;
    api->env.metrics.ota = &api->ota.stats;
    api->ota.loop = env->loop;
    /* A code or proof tried: a few a minute from one address, and a
     * bound over all of them that keeps a 6-digit code unguessable in its
     * lifetime (docs/protocol.md section 9.3). */
    gw_ratelimit_init(&api->ota.guesses,
                      (struct gw_bucket_rate){.per_s = 10.0 / 60, .burst = 10},
                      (struct gw_bucket_rate){.per_s = 30.0 / 60, .burst = 30},
                      4096);
    /* New devices: a shop's worth from one address, a fleet's overall. */
    gw_ratelimit_init(&api->ota.newcomers,
                      (struct gw_bucket_rate){.per_s = 20.0 / 60, .burst = 60},
                      (struct gw_bucket_rate){.per_s = 10, .burst = 600}, 4096);

    api->env.metrics.push = &api->push;
    if (gw__api_series_init(env->detached ? NULL : env->loop, &api->env.metrics,
                            &api->series) != 0) {
        gw_ratelimit_free(&api->ota.guesses);
        gw_ratelimit_free(&api->ota.newcomers);
        free(api);
        return GW_ENOMEM;
    }
    o.arg = api;
    rc = env->detached ? gw_http_server_init_detached(&o, &api->srv)
                       : gw_http_server_init(env->loop, &o, &api->srv);
    if (rc != 0) {
        gw__api_series_close(api->series, !env->detached);
        gw_ratelimit_free(&api->ota.guesses);
        gw_ratelimit_free(&api->ota.newcomers);
        free(api);
        return rc;
    }
    gw_log(GW_LOG_INFO, SUBJECT, "API on %s port %d (token %s, manager-api %s)",
           cfg->http.listen, gw_http_server_port(api->srv),
           cfg->http.token[0] != '\0' ? "required" : "off",
           cfg->http.manager_key[0] != '\0' ? "on" : "off");
    if (cfg->http.token[0] == '\0' && env->mcp_server != NULL) {
        gw_log(GW_LOG_INFO, SUBJECT,
               "MCP server off: http.token is not set (its tools act on "
               "devices); to enable it set one, e.g. \"http\": "
               "{\"token\": \"<a long random string>\"}");
    }
    *out = api;
    return 0;
}

int gw_http_api_inject(struct gw_http_api *api, const char *method,
                       const char *target, const char *const *headers,
                       size_t n_headers, const char *body, size_t len,
                       size_t piece)
{
    return gw_http_server_inject(api->srv, method, target, headers, n_headers,
                                 body, len, piece);
}

int gw_http_api_port(const struct gw_http_api *api)
{
    return api->srv != NULL ? gw_http_server_port(api->srv) : 0;
}

uint64_t gw_http_api_responses(const struct gw_http_api *api, int status)
{
    return api != NULL ? gw_http_server_responses(api->srv, status) : 0;
}

static void on_server_closed(struct gw_http_server *srv, void *arg)
{
    struct gw_http_api *api = arg;

    (void)srv;
    if (api->close_cb != NULL) {
        api->close_cb(api, api->close_arg);
    }
    gw_ratelimit_free(&api->ota.guesses);
    gw_ratelimit_free(&api->ota.newcomers);
    free(api);
}

void gw_http_api_close(struct gw_http_api *api,
                       void (*cb)(struct gw_http_api *api, void *arg),
                       void *arg)
{
    if (api == NULL || api->srv == NULL) {
        return;
    }
    api->close_cb = cb;
    api->close_arg = arg;
    gw__api_series_close(api->series, !api->env.detached);
    api->series = NULL;
    gw_http_server_close(api->srv, on_server_closed, api);
    api->srv = NULL; /* a second close does nothing */
}
