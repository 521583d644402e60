/*
 * The HTTP API's router: Origin and token checks, /healthz, /metrics, the
 * operator's /api/devices, the xiaozhi manager-api routes (daily token)
 * and the hand-over of /mcp to the MCP server and of /ui/ to the
 * operator page's files (http_static.c).
 */
#include "gateway/api/http_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <arpa/inet.h>

#include <cjson/cJSON.h>

#include "common/hash.h"
#include "common/log.h"
#include "crypto/credential.h"
#include "gateway/session/drain.h"
#include "gateway/api/http_api_push.h"
#include "gateway/api/http_api_int.h"
#include "gateway/http/http_server.h"
#include "gateway/api/http_static.h"
#include "gateway/mcp/mcp_server.h"
#include "gateway/api/ota.h"
#include "gateway/session/session.h"

#define SUBJECT         "http"
#define JSON            "application/json"
#define METRICS_TYPE    "text/plain; version=0.0.4; charset=utf-8"
#define DEVICES_PREFIX  "/api/devices/"
#define COMMANDS_PREFIX "/api/commands/"
#define UI_MOUNT        "/ui"
/* POST /api/devices/status: ids per request (each is a hash lookup). */
#define STATUS_MAX_IDS 4096

struct gw_http_api {
    struct gw_http_api_env env;
    struct gw_http_server *srv;
    void (*close_cb)(struct gw_http_api *api, void *arg);
    void *close_arg;
    struct gw_ota_stats ota; /* POST /xiaozhi/ota/ outcomes */
    /* Pushes to devices, for metrics. */
    struct gw_push_stats push;
};

/* ---- answers ----------------------------------------------------------- */

static void send_json(struct gw_http_req *req, int status, cJSON *doc,
                      const char *const *headers)
{
    char *text = doc != NULL ? cJSON_PrintUnformatted(doc) : NULL;

    cJSON_Delete(doc);
    if (text == NULL) {
        static const char oom[] = "{\"error\":\"out of memory\"}";
        (void)gw_http_respond(req, 503, JSON, NULL, oom, sizeof(oom) - 1);
        return;
    }
    (void)gw_http_respond(req, status, JSON, headers, text, strlen(text));
    free(text);
}

/* {"error":why}, or for the manager-api {"success":false,"error":why}. */
static void send_error(struct gw_http_req *req, int status, bool manager,
                       const char *why, const char *const *headers)
{
    cJSON *doc = cJSON_CreateObject();

    if (doc != NULL && manager) {
        cJSON_AddBoolToObject(doc, "success", false);
    }
    if (doc != NULL) {
        cJSON_AddStringToObject(doc, "error", why);
    }
    send_json(req, status, doc, headers);
}

/* One warning per refused request, naming the client. */
static void refuse(struct gw_http_req *req, int status, bool manager,
                   const char *why, const char *const *headers)
{
    gw_log(GW_LOG_WARN, SUBJECT, "%s %.128s from %s: %d %s",
           gw_http_req_method(req), gw_http_req_path(req),
           gw_http_req_peer(req), status, why);
    send_error(req, status, manager, why, headers);
}

void gw_http_api_send_json(struct gw_http_req *req, int status, cJSON *doc,
                           const char *const *headers)
{
    send_json(req, status, doc, headers);
}

void gw_http_api_refuse(struct gw_http_req *req, int status, bool manager,
                        const char *why, const char *const *headers)
{
    refuse(req, status, manager, why, headers);
}

static void not_found(struct gw_http_req *req, bool manager)
{
    GW_LOG(GW_LOG_DEBUG, SUBJECT, "%s %.128s from %s: 404",
           gw_http_req_method(req), gw_http_req_path(req),
           gw_http_req_peer(req));
    send_error(req, 404, manager, "not found", NULL);
}

/* 405 with Allow, unless the method is one of allow ("GET, HEAD"). */
static bool method_ok(struct gw_http_req *req, const char *allow, bool manager)
{
    const char *method = gw_http_req_method(req);
    size_t n = strlen(method);
    char header[64];
    const char *headers[] = {header, NULL};

    for (const char *p = allow; (p = strstr(p, method)) != NULL; p += n) {
        if ((p == allow || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0')) {
            return true;
        }
    }
    snprintf(header, sizeof(header), "Allow: %s", allow);
    refuse(req, 405, manager, "method not allowed", headers);
    return false;
}

/* ---- who may ask ------------------------------------------------------- */

/* scheme://host[:port] with a loopback host, as browsers send it. */
static bool origin_is_local(const char *origin)
{
    static const char *const hosts[] = {"localhost", "127.0.0.1", "[::1]"};
    const char *host;

    if (strncasecmp(origin, "http://", 7) == 0) {
        host = origin + 7;
    } else if (strncasecmp(origin, "https://", 8) == 0) {
        host = origin + 8;
    } else {
        return false;
    }
    for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
        size_t n = strlen(hosts[i]);
        const char *rest = host + n;
        if (strncasecmp(host, hosts[i], n) != 0) {
            continue;
        }
        if (*rest == '\0') {
            return true;
        }
        if (*rest != ':' || rest[1] == '\0') {
            return false;
        }
        return strspn(rest + 1, "0123456789") == strlen(rest + 1) &&
               strlen(rest + 1) <= 5;
    }
    return false;
}

/*
 * Browsers name the page's origin: only local pages and the configured
 * ones may drive the API (DNS rebinding, drive-by requests).
 */
bool gw_http_api_origin_ok(const struct gw_config *cfg, const char *origin)
{
    if (origin == NULL || origin_is_local(origin)) {
        return true;
    }
    for (size_t i = 0; i < cfg->http.n_allowed_origins; i++) {
        if (strcasecmp(origin, cfg->http.allowed_origins[i]) == 0) {
            return true;
        }
    }
    return false;
}

/* An IP literal (IPv6 without its brackets): never a rebound name. */
static bool is_ip_literal(const char *name)
{
    unsigned char addr[16];

    return inet_pton(AF_INET, name, addr) == 1 ||
           inet_pton(AF_INET6, name, addr) == 1;
}

static bool name_is(const char *name, const char *want)
{
    size_t n = strlen(want);

    if (want[0] == '[' && n >= 2 && want[n - 1] == ']') {
        want++; /* "[::1]" as http.listen names "::1" */
        n -= 2;
    }
    return strlen(name) == n && strncasecmp(name, want, n) == 0;
}

/*
 * A DNS rebinding page reaches the API under the attacker's name, which
 * its Host header carries: only IP literals, localhost names, the listen
 * name and http.allowed_hosts ("*" = any) get through.
 */
bool gw_http_api_host_ok(const struct gw_config *cfg, const char *host)
{
    char name[256];
    const char *end, *port;
    size_t n;

    if (host == NULL) {
        return true; /* HTTP/1.0 without one: no browser sends that */
    }
    if (host[0] == '[') {
        end = strchr(host, ']');
        if (end == NULL) {
            return false;
        }
        host++;
        port = end + 1;
    } else {
        end = host + strcspn(host, ":");
        port = end;
    }
    n = (size_t)(end - host);
    if (n == 0 || n >= sizeof(name) ||
        (*port != '\0' &&
         (*port != ':' || port[1] == '\0' || strlen(port + 1) > 5 ||
          strspn(port + 1, "0123456789") != strlen(port + 1)))) {
        return false;
    }
    memcpy(name, host, n);
    name[n] = '\0';
    if (n > 1 && name[n - 1] == '.') {
        name[--n] = '\0'; /* the absolute form of the same name */
    }
    if (is_ip_literal(name) || strcasecmp(name, "localhost") == 0 ||
        (n > 10 && strcasecmp(name + n - 10, ".localhost") == 0) ||
        name_is(name, cfg->http.listen)) {
        return true;
    }
    for (size_t i = 0; i < cfg->http.n_allowed_hosts; i++) {
        const char *h = cfg->http.allowed_hosts[i];
        if (strcmp(h, "*") == 0 || name_is(name, h)) {
            return true;
        }
    }
    return false;
}

const char *gw_http_api_bearer(const char *auth)
{
    if (auth == NULL || strncasecmp(auth, "Bearer ", 7) != 0) {
        return NULL;
    }
    return auth + 7 + strspn(auth + 7, " ");
}

bool gw_http_api_token_matches(const char *token, const char *auth)
{
    const char *given = gw_http_api_bearer(auth);

    return token != NULL && token[0] != '\0' && given != NULL &&
           gw_credential_equal(token, strlen(token), given, strlen(given));
}

/* The credential of "Authorization: Bearer <credential>", or NULL. */
static const char *bearer_of(struct gw_http_req *req)
{
    return gw_http_api_bearer(gw_http_req_header(req, "authorization"));
}

/* http.token, when set, guards /metrics, /api/devices and /mcp. */
static bool token_ok(const struct gw_config *cfg, struct gw_http_req *req)
{
    static const char *const challenge[] = {
        "WWW-Authenticate: Bearer realm=\"hybridgw\"", NULL};
    const char *token = cfg->http.token;
    const char *given;

    if (token == NULL || token[0] == '\0') {
        return true;
    }
    given = bearer_of(req);
    if (gw_http_api_token_matches(token,
                                  gw_http_req_header(req, "authorization"))) {
        return true;
    }
    refuse(req, 401, false,
           given == NULL ? "bearer token missing" : "bearer token wrong",
           challenge);
    return false;
}

/* The manager-api's daily token: sha256(UTC date + manager_key). */
static bool daily_token_ok(const struct gw_config *cfg, struct gw_http_req *req)
{
    const char *key = cfg->http.manager_key;
    const char *given = bearer_of(req);

    if (given != NULL &&
        gw_credential_daily_token_verify(key, strlen(key), (int64_t)time(NULL),
                                         given, strlen(given)) == 0) {
        return true;
    }
    refuse(req, 401, true,
           given == NULL ? "missing token" : "invalid or expired token", NULL);
    return false;
}

/* ---- devices ----------------------------------------------------------- */

/* What the device's initialize said, and the sizes of its lists. */
static void add_catalog(cJSON *mcp, const struct gw_mcp_catalog *c)
{
    cJSON *server = cJSON_AddObjectToObject(mcp, "server");
    cJSON *caps = cJSON_AddArrayToObject(mcp, "capabilities");

    cJSON_AddStringToObject(server, "name", c->info.name);
    cJSON_AddStringToObject(server, "version", c->info.server_ver);
    cJSON_AddStringToObject(server, "protocol", c->info.version);
    for (unsigned bit = 1; bit <= GW_MCP_CAPS_ALL; bit <<= 1) {
        if (c->info.caps & bit) {
            cJSON_AddItemToArray(caps,
                                 cJSON_CreateString(gw_mcp_cap_name(bit)));
        }
    }
    for (int k = 0; k < GW_MCP_LIST_COUNT_; k++) {
        const struct gw_mcp_list *l = &c->lists[k];
        if (l->state != GW_TOOL_LIST_NONE) {
            cJSON_AddNumberToObject(mcp, gw_mcp_list_member(k),
                                    cJSON_GetArraySize(l->items));
        }
    }
}

/*
 * What the gateway knows of a device besides its MCP state: since when it
 * is online (UTC, from the loop time its record was made), its address
 * (the broker's word, else its audio's source), the firmware version and
 * board its MCP serverInfo named, its live session and backend, and how
 * many tools it has. Shared by /api/devices and /api/devices/status.
 */
static void add_detail(cJSON *o, const struct gw_device *dev, uint64_t now_ms)
{
    const struct gw_session *s = dev->session;
    uint64_t age_ms = now_ms - dev->presence.since_ms;
    time_t since = time(NULL) - (time_t)(age_ms / 1000);
    struct tm tm;
    char when[32], addr[64] = "";

    if (gmtime_r(&since, &tm) != NULL &&
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm) > 0) {
        cJSON_AddStringToObject(o, "online_since", when);
    }
    cJSON_AddNumberToObject(o, "online_s", (double)(age_ms / 1000));
    if (dev->presence.address[0] != '\0') {
        snprintf(addr, sizeof(addr), "%s", dev->presence.address);
    } else if (s != NULL && s->udp.has_addr) {
        const union gw_udp_addr *a = &s->udp.addr;
        (void)inet_ntop(a->sa.sa_family,
                        a->sa.sa_family == AF_INET6
                            ? (const void *)&a->in6.sin6_addr
                            : (const void *)&a->in.sin_addr,
                        addr, sizeof(addr));
    }
    if (addr[0] != '\0') {
        cJSON_AddStringToObject(o, "address", addr);
    } else {
        cJSON_AddNullToObject(o, "address");
    }
    if (dev->catalog.known && dev->catalog.info.server_ver[0] != '\0') {
        cJSON_AddStringToObject(o, "firmware", dev->catalog.info.server_ver);
    } else {
        cJSON_AddNullToObject(o, "firmware");
    }
    if (dev->catalog.known && dev->catalog.info.name[0] != '\0') {
        cJSON_AddStringToObject(o, "board", dev->catalog.info.name);
    } else {
        cJSON_AddNullToObject(o, "board");
    }
    cJSON_AddNumberToObject(o, "tool_count", gw_tool_cache_count(&dev->tools));
}

static cJSON *device_json(const struct gw_device *dev, uint64_t now_ms)
{
    const struct gw_session *s = dev->session;
    cJSON *o = cJSON_CreateObject();
    cJSON *sess = s != NULL ? cJSON_CreateObject() : cJSON_CreateNull();
    cJSON *mcp = cJSON_CreateObject();

    if (o == NULL || sess == NULL || mcp == NULL) {
        cJSON_Delete(o);
        cJSON_Delete(sess);
        cJSON_Delete(mcp);
        return NULL;
    }
    cJSON_AddStringToObject(o, "client_id", dev->client_id);
    cJSON_AddStringToObject(o, "label", dev->label);
    cJSON_AddBoolToObject(o, "online", dev->state == GW_DEVICE_KNOWN);
    add_detail(o, dev, now_ms);
    if (s != NULL) {
        cJSON_AddStringToObject(sess, "state", gw_session_state_name(s->state));
        cJSON_AddStringToObject(sess, "session_id", s->session_id);
        if (s->backend_name != NULL) {
            cJSON_AddStringToObject(sess, "backend", s->backend_name);
        } else {
            cJSON_AddNullToObject(sess, "backend");
        }
    }
    cJSON_AddItemToObject(o, "session", sess);
    cJSON_AddStringToObject(mcp, "state",
                            gw_mcp_state_name(dev->discovery.state));
    cJSON_AddNumberToObject(mcp, "tools", gw_tool_cache_count(&dev->tools));
    cJSON_AddBoolToObject(mcp, "complete", gw_tool_cache_complete(&dev->tools));
    cJSON_AddStringToObject(mcp, "list",
                            gw_tool_list_state_name(dev->tools.state));
    if (dev->catalog.known) {
        add_catalog(mcp, &dev->catalog);
    }
    cJSON_AddItemToObject(o, "mcp", mcp);
    return o;
}

static void list_devices(struct gw_http_api *api, struct gw_http_req *req)
{
    cJSON *doc = cJSON_CreateObject();
    cJSON *list = cJSON_AddArrayToObject(doc, "devices");
    int n = 0;

    const struct gw_device *d;
    for (d = gw_device_table_first(api->env.devices); d != NULL && list != NULL;
         d = gw_device_table_next(d)) {
        cJSON *o = device_json(d, uv_now(api->env.loop));
        if (o == NULL) {
            cJSON_Delete(doc);
            doc = NULL;
            break;
        }
        cJSON_AddItemToArray(list, o);
        n++;
    }
    if (doc != NULL) {
        cJSON_AddNumberToObject(doc, "count", n);
    }
    send_json(req, 200, doc, NULL);
}

/* Pushing acts on devices: like the MCP server, off without a token. */
static bool push_allowed(const struct gw_config *cfg, struct gw_http_req *req)
{
    if (cfg->http.token[0] == '\0') {
        refuse(req, 403, true,
               "pushing to devices is off: set http.token to enable it", NULL);
        return false;
    }
    return true;
}

/* /api/devices/{id} and /api/devices/{id}/refresh. */
static void one_device(struct gw_http_api *api, struct gw_http_req *req,
                       const char *rest)
{
    const char *slash = strchr(rest, '/');
    size_t n = slash != NULL ? (size_t)(slash - rest) : strlen(rest);
    char id[GW_CLIENT_ID_MAX + 1];
    const struct gw_device *dev;

    if (n == 0 || n > GW_CLIENT_ID_MAX ||
        (slash != NULL && strcmp(slash, "/refresh") != 0)) {
        not_found(req, false);
        return;
    }
    memcpy(id, rest, n);
    id[n] = '\0';
    if (slash == NULL) {
        if (method_ok(req, "GET, HEAD", false)) {
            dev = gw_device_find(api->env.devices, id);
            if (dev == NULL) {
                not_found(req, false);
            } else {
                send_json(req, 200, device_json(dev, uv_now(api->env.loop)),
                          NULL);
            }
        }
        return;
    }
    if (!method_ok(req, "POST", false)) {
        return;
    }
    if (gw_device_refresh(api->env.devices, id) != 0) {
        not_found(req, false);
        return;
    }
    gw_log(GW_LOG_INFO, SUBJECT, "tool refresh of %s asked by %s", id,
           gw_http_req_peer(req));
    send_json(req, 202, cJSON_CreateObject(), NULL);
}

/* ---- manager-api ------------------------------------------------------- */

static cJSON *parse_body(struct gw_http_req *req)
{
    size_t len;
    const char *body = gw_http_req_body(req, &len);
    cJSON *doc = cJSON_ParseWithLength(body, len);

    if (doc != NULL && !cJSON_IsObject(doc)) {
        cJSON_Delete(doc);
        doc = NULL;
    }
    return doc;
}

/* One id of a status request, in the set that drops repeated ones. */
struct status_id {
    UT_hash_handle hh;
};

/*
 * {"clientIds":[..]} -> {"<id>":{"isAlive":..,"exists":..}}: one hash
 * lookup per id (a repeated id is answered once), at most STATUS_MAX_IDS.
 */
static void devices_status(struct gw_http_api *api, struct gw_http_req *req)
{
    cJSON *in = parse_body(req);
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(in, "clientIds");
    struct status_id *seen_set = NULL, *slots = NULL;
    const cJSON *id;
    cJSON *out = NULL;
    int n = 0;
    char why[64];

    if (!cJSON_IsArray(ids)) {
        cJSON_Delete(in);
        refuse(req, 400, true, "body must be {\"clientIds\":[...]}", NULL);
        return;
    }
    cJSON_ArrayForEach(id, ids)
    {
        if (cJSON_GetStringValue(id) == NULL) {
            cJSON_Delete(in);
            refuse(req, 400, true, "clientIds must hold strings", NULL);
            return;
        }
        if (++n > STATUS_MAX_IDS) {
            cJSON_Delete(in);
            snprintf(why, sizeof(why), "at most %d clientIds per request",
                     STATUS_MAX_IDS);
            refuse(req, 413, true, why, NULL);
            return;
        }
    }
    if ((n > 0 && (slots = calloc((size_t)n, sizeof(*slots))) == NULL) ||
        (out = cJSON_CreateObject()) == NULL) {
        free(slots);
        cJSON_Delete(in);
        send_error(req, 503, true, "out of memory", NULL);
        return;
    }
    n = 0;
    cJSON_ArrayForEach(id, ids)
    {
        const char *cid = id->valuestring;
        size_t len = strlen(cid);
        const struct gw_device *dev;
        struct status_id *seen = NULL;
        cJSON *o;

        HASH_FIND(hh, seen_set, cid, len, seen);
        if (seen != NULL) {
            continue; /* asked twice */
        }
        seen = &slots[n++];
        HASH_ADD_KEYPTR(hh, seen_set, cid, len, seen);
        if (!GW_HASH_ADDED(seen, hh)) {
            cJSON_Delete(out);
            out = NULL; /* answered as out of memory */
            break;
        }
        dev = gw_device_find(api->env.devices, cid);
        o = cJSON_AddObjectToObject(out, cid);
        cJSON_AddBoolToObject(o, "isAlive",
                              dev != NULL && dev->session != NULL &&
                                  dev->session->state == GW_SESSION_ACTIVE);
        cJSON_AddBoolToObject(o, "exists", dev != NULL);
        if (dev != NULL && o != NULL) {
            /* Beyond the manager-api's two: what /api/devices says. */
            add_detail(o, dev, uv_now(api->env.loop));
            if (dev->session != NULL && dev->session->backend_name != NULL) {
                cJSON_AddStringToObject(o, "backend",
                                        dev->session->backend_name);
            } else {
                cJSON_AddNullToObject(o, "backend");
            }
        }
    }
    HASH_CLEAR(hh, seen_set);
    free(slots);
    send_json(req, 200, out, NULL);
    cJSON_Delete(in); /* the ids were the set's keys */
}

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
    ROUTE_UI,   /* the operator page's files: no data, no token */
    ROUTE_CALL, /* /api/call/request, /api/call/accept (daily token) */
    ROUTE_DRAIN /* POST /api/drain: a rolling restart (http.token) */
};

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
    size_t n = strlen(path), pre = strlen(DEVICES_PREFIX);

    if (n <= pre + sizeof(tail) - 1 ||
        strncmp(path, DEVICES_PREFIX, pre) != 0 ||
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
    if (gw_ota_path(path)) {
        return ROUTE_OTA;
    }
    if (strncmp(path, COMMANDS_PREFIX, strlen(COMMANDS_PREFIX)) == 0 ||
        (strcmp(path, "/api/devices/status") == 0 &&
         strcmp(gw_http_req_method(req), "POST") == 0)) {
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
    if (strcmp(path, "/api/broadcast") == 0 ||
        push_target(path, id, sizeof(id))) {
        return ROUTE_PUSH;
    }
    if (is_under(path, "/api/devices")) {
        return ROUTE_DEVICES;
    }
    if (gw_http_static_is_under(path, UI_MOUNT)) {
        return ROUTE_UI;
    }
    return is_under(path, "/mcp") ? ROUTE_MCP : ROUTE_NONE;
}

/* The manager-api's checks: its key set, a valid id, POST, daily token. */
static bool manager_ok(const struct gw_config *cfg, struct gw_http_req *req)
{
    const char *path = gw_http_req_path(req);
    bool commands =
        strncmp(path, COMMANDS_PREFIX, strlen(COMMANDS_PREFIX)) == 0;
    const char *id = commands ? path + strlen(COMMANDS_PREFIX) : "";

    if (cfg->http.manager_key == NULL || cfg->http.manager_key[0] == '\0') {
        not_found(req, true); /* the routes are off */
        return false;
    }
    if (commands && (id[0] == '\0' || strchr(id, '/') != NULL ||
                     strlen(id) > GW_CLIENT_ID_MAX)) {
        not_found(req, true);
        return false;
    }
    return method_ok(req, "POST", true) && daily_token_ok(cfg, req);
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
            refuse(req, 503, false, "out of memory", NULL);
            return true;
        }
    }
    if (strcmp(gw_http_req_method(req), "OPTIONS") != 0) {
        return false;
    }
    if (api->env.mcp_server == NULL) {
        not_found(req, false);
        return true;
    }
    GW_LOG(GW_LOG_DEBUG, SUBJECT, "preflight of %.128s from %s (origin %s)",
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
        not_found(req, false);
        return false;
    }
    if (!method_ok(req, "POST", false)) {
        return false;
    }
    if (cfg->http.token == NULL || cfg->http.token[0] == '\0') {
        refuse(req, 403, false,
               "draining over HTTP is off: set http.token to enable it", NULL);
        return false;
    }
    return token_ok(cfg, req);
}

/* With no token the MCP server is off: its tools act on devices. */
static bool mcp_ok(struct gw_http_api *api, const struct gw_config *cfg,
                   struct gw_http_req *req)
{
    if (api->env.mcp_server == NULL) {
        not_found(req, false);
        return false;
    }
    if (cfg->http.token == NULL || cfg->http.token[0] == '\0') {
        refuse(req, 403, false,
               "the MCP server is off: set http.token to enable it", NULL);
        return false;
    }
    return token_ok(cfg, req);
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
        refuse(req, 421, route == ROUTE_MANAGER, "host not allowed", NULL);
        return;
    }
    if (!gw_http_api_origin_ok(cfg, gw_http_req_header(req, "origin"))) {
        refuse(req, 403, route == ROUTE_MANAGER, "origin not allowed", NULL);
        return;
    }
    switch (route) {
    case ROUTE_HEALTHZ:
        (void)method_ok(req, "GET, HEAD", false);
        break;
    case ROUTE_MANAGER:
    case ROUTE_CALL:
        (void)manager_ok(cfg, req);
        break;
    case ROUTE_METRICS:
        (void)(method_ok(req, "GET, HEAD", false) && token_ok(cfg, req));
        break;
    case ROUTE_DEVICES:
        (void)token_ok(cfg, req);
        break;
    case ROUTE_MCP:
        if (!mcp_cors(api, req)) {
            (void)mcp_ok(api, cfg, req);
        }
        break;
    case ROUTE_PUSH:
        (void)(method_ok(req, "POST", true) && push_allowed(cfg, req) &&
               token_ok(cfg, req));
        break;
    case ROUTE_OTA:
        (void)gw_ota_head(cfg, &api->ota, req);
        break;
    case ROUTE_DRAIN:
        (void)drain_ok(api, cfg, req);
        break;
    case ROUTE_UI:
        (void)method_ok(req, "GET, HEAD", false);
        break;
    case ROUTE_NONE:
        not_found(req, false);
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

static void healthz(struct gw_http_api *api, struct gw_http_req *req)
{
    const struct gw_metrics_sources *src = &api->env.metrics;
    bool up = src->mqtt != NULL && gw_mqtt_link_is_up(src->mqtt);
    const struct gw_backend_pool *pool = api->env.sessions->env.pool;
    cJSON *doc = cJSON_CreateObject();
    cJSON *status =
        cJSON_AddStringToObject(doc, "status", up ? "ok" : "unavailable");

    cJSON_AddStringToObject(doc, "broker", up ? "up" : "down");
    /* A route none of whose backends is in rotation: still 200 (sessions
     * still try them), but said, with the route and backends. */
    if (pool != NULL &&
        gw_backend_pool_health_json(pool, gw_config_live_get(api->env.config),
                                    uv_now(api->env.loop), doc) > 0 &&
        up) {
        cJSON_SetValuestring(status, "degraded");
    }
    cJSON_AddNumberToObject(doc, "sessions",
                            (double)gw_sessions_live(api->env.sessions));
    cJSON_AddNumberToObject(doc, "devices_online",
                            (double)gw_device_table_online(api->env.devices));
    cJSON_AddNumberToObject(
        doc, "uptime_s",
        (double)((uv_now(api->env.loop) - src->started_ms) / 1000));
    healthz_cluster(src, doc);
    send_json(req, up ? 200 : 503, doc, NULL);
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
    send_json(req, started ? 202 : 200, doc, NULL);
}

static void metrics(struct gw_http_api *api, struct gw_http_req *req)
{
    char *text = NULL;
    size_t len = 0;

    if (gw_metrics_format(&api->env.metrics, &text, &len) != 0) {
        send_error(req, 503, false, "out of memory", NULL);
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
        if (strncmp(path, COMMANDS_PREFIX, strlen(COMMANDS_PREFIX)) == 0) {
            gw_api_push_command(&api->env, &api->push, req,
                                path + strlen(COMMANDS_PREFIX));
        } else {
            devices_status(api, req);
        }
        break;
    case ROUTE_METRICS:
        metrics(api, req);
        break;
    case ROUTE_DEVICES:
        if (strcmp(path, "/api/devices") == 0 ||
            strcmp(path, "/api/devices/") == 0) {
            if (method_ok(req, "GET, HEAD", false)) {
                list_devices(api, req);
            }
        } else {
            one_device(api, req, path + strlen(DEVICES_PREFIX));
        }
        break;
    case ROUTE_MCP:
        if (!gw_mcp_server_handle(api->env.mcp_server, req)) {
            not_found(req, false);
        }
        break;
    case ROUTE_PUSH: {
        char id[GW_CLIENT_ID_MAX + 1];
        if (push_target(path, id, sizeof(id))) {
            gw_api_push_command(&api->env, &api->push, req, id);
        } else {
            gw_api_push_broadcast(&api->env, &api->push, req);
        }
        break;
    }
    case ROUTE_CALL: {
        size_t len;
        const char *body = gw_http_req_body(req, &len);
        cJSON *doc = NULL;
        if (api->env.calls == NULL) {
            not_found(req, false);
            break;
        }
        int status = gw_device_calls_api(api->env.calls, path, body, len,
                                         gw_http_req_peer(req), &doc);
        send_json(req, status, doc, NULL);
        break;
    }
    case ROUTE_OTA:
        gw_ota_serve(gw_config_live_get(api->env.config), &api->ota, req);
        break;
    case ROUTE_DRAIN:
        drain(api, req);
        break;
    case ROUTE_UI:
        gw_http_static_serve(req, api->env.detached ? NULL : api->env.loop,
                             gw_config_live_get(api->env.config)->http.ui_dir,
                             UI_MOUNT);
        break;
    case ROUTE_NONE:
        not_found(req, false);
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
    api->env.metrics.ota = &api->ota;
    api->env.metrics.push = &api->push;
    o.arg = api;
    rc = env->detached ? gw_http_server_init_detached(&o, &api->srv)
                       : gw_http_server_init(env->loop, &o, &api->srv);
    if (rc != 0) {
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
    gw_http_server_close(api->srv, on_server_closed, api);
    api->srv = NULL; /* a second close does nothing */
}
