/*
 * The MCP server's HTTP side (Streamable HTTP: answers as JSON, or as an
 * event stream when progress comes first): paths, header checks, JSON-RPC
 * dispatch to the methods, initialize with the capabilities each endpoint
 * shows; the server's life and the device changes it hears of.
 */
#include "gateway/mcp/mcp_server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "codec/envelope.h"
#include "codec/hex.h"
#include "codec/jsonrpc.h"
#include "codec/mcp_items.h"
#include "codec/mcp_tools.h"
#include "common/log.h"
#include "gateway/core/version.h"
#include "gateway/mcp/mcp_server_int.h"

#define DEVICES_PREFIX "/mcp/devices/"

static const char *const versions[] = {"2025-11-25", "2025-06-18",
                                       "2025-03-26"};

/* What one POST is about, while it is read. */
struct post {
    struct gw_mcp_server *srv;
    struct gw_http_req *req;
    const char *client_id; /* path's device, "" for /mcp */
    char subject[32];
};

static bool version_supported(const char *v)
{
    for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
        if (strcmp(v, versions[i]) == 0) {
            return true;
        }
    }
    return false;
}

static const struct gw_config *config(const struct gw_mcp_server *srv)
{
    return gw_config_live_get(srv->env.config);
}

/* ---- paths and headers ---- */

/*
 * "/mcp" -> "" and "/mcp/devices/{id}" -> the percent-decoded id in out
 * (returns 1), an invalid id there -> -1, any other path -> 0.
 */
static int parse_path(const char *path, char out[GW_CLIENT_ID_MAX + 1])
{
    struct gw_client_id parsed;
    size_t n = 0;
    const char *p;

    if (strcmp(path, "/mcp") == 0) {
        out[0] = '\0';
        return 1;
    }
    if (strncmp(path, DEVICES_PREFIX, sizeof(DEVICES_PREFIX) - 1) != 0) {
        return 0;
    }
    for (p = path + sizeof(DEVICES_PREFIX) - 1; *p != '\0'; p++) {
        int c = (unsigned char)*p;
        if (c == '%') {
            int hi = gw_hex_nibble(p[1]);
            int lo = hi < 0 ? -1 : gw_hex_nibble(p[2]);
            if (lo < 0) {
                return -1;
            }
            c = hi << 4 | lo;
            p += 2;
        }
        if (n == GW_CLIENT_ID_MAX) {
            return -1;
        }
        out[n++] = (char)c;
    }
    out[n] = '\0';
    if (n == 0 || memchr(out, '\0', n) != NULL ||
        gw_client_id_parse(out, n, &parsed) != 0) {
        return -1;
    }
    return 1;
}

/* A media type in a header's list (no parameters matter here). */
static bool lists_type(const char *header, const char *type)
{
    return header != NULL && strcasestr(header, type) != NULL;
}

static bool content_type_json(const char *ct)
{
    static const char json[] = "application/json";

    if (ct == NULL) {
        return false;
    }
    while (*ct == ' ' || *ct == '\t') {
        ct++;
    }
    if (strncasecmp(ct, json, sizeof(json) - 1) != 0) {
        return false;
    }
    ct += sizeof(json) - 1;
    return *ct == '\0' || *ct == ';' || *ct == ' ' || *ct == '\t';
}

static void subject_for(char out[32], const char *sid)
{
    if (sid != NULL) {
        snprintf(out, 32, "mcp sid=%.8s", sid);
    } else {
        snprintf(out, 32, "mcp");
    }
}

/*
 * The session named by the request's Mcp-Session-Id, bound to the path's
 * device; otherwise the request has been refused (400 / 404) and NULL.
 */
static struct gw_mcp_client *session_of(struct gw_mcp_server *srv,
                                        struct gw_http_req *req,
                                        const char *client_id)
{
    const char *sid = gw_http_req_header(req, "Mcp-Session-Id");
    struct gw_mcp_client *cl;
    char subject[32];

    subject_for(subject, sid);
    if (sid == NULL || sid[0] == '\0') {
        gw__mcp_server_reject(srv, req, subject, NULL, 400,
                              GW_RPC_INVALID_REQUEST,
                              "Mcp-Session-Id header required");
        return NULL;
    }
    cl = gw__mcp_server_client_find(srv, sid);
    if (cl == NULL) {
        gw__mcp_server_reject(srv, req, subject, NULL, 404,
                              GW_RPC_INVALID_REQUEST,
                              "session not found (expired or deleted)");
        return NULL;
    }
    if (strcmp(cl->client_id, client_id) != 0) {
        gw__mcp_server_reject(srv, req, subject, NULL, 404,
                              GW_RPC_INVALID_REQUEST,
                              "session belongs to another endpoint");
        return NULL;
    }
    gw__mcp_server_touch(cl);
    return cl;
}

/* ---- initialize ---- */

/* /mcp serves everything a device may offer except tasks/list (task ids
 * of many devices cannot be paged together). A device endpoint shows the
 * device's own capabilities; the gateway re-reads a list when the device
 * says it changed, and on its own, so listChanged always holds. */
static unsigned endpoint_caps(const struct gw_device *dev)
{
    unsigned caps;

    if (dev == NULL) {
        return GW_MCP_CAPS_ALL & ~(unsigned)GW_MCP_CAP_TASKS_LIST;
    }
    caps = gw_mcp_catalog_caps(&dev->catalog);
    if (caps & GW_MCP_CAP_TOOLS) {
        caps |= GW_MCP_CAP_TOOLS_LIST_CHANGED;
    }
    if (caps & GW_MCP_CAP_RESOURCES) {
        caps |= GW_MCP_CAP_RESOURCES_LIST_CHANGED;
    }
    if (caps & GW_MCP_CAP_PROMPTS) {
        caps |= GW_MCP_CAP_PROMPTS_LIST_CHANGED;
    }
    return caps;
}

static cJSON *initialize_result(const char *version, const char *client_id,
                                unsigned caps)
{
    cJSON *res = cJSON_CreateObject();
    cJSON *info = cJSON_AddObjectToObject(res, "serverInfo");
    cJSON *cj = gw_mcp_caps_json(caps);
    char text[320];

    if (client_id[0] == '\0') {
        snprintf(text, sizeof(text),
                 "Tools, resources and prompts of every online device. "
                 "Tools and prompts are named <device label>.<name>, "
                 "resources hybridgw://<device label>/<uri>; descriptions "
                 "start with the device's client id. The lists change as "
                 "devices come and go.");
    } else {
        snprintf(text, sizeof(text),
                 "Tools, resources and prompts of the device %s, under its "
                 "own names.",
                 client_id);
    }
    if (cj == NULL || !cJSON_AddItemToObject(res, "capabilities", cj)) {
        cJSON_Delete(cj);
        cJSON_Delete(res);
        return NULL;
    }
    if (cJSON_AddStringToObject(res, "protocolVersion", version) == NULL ||
        cJSON_AddStringToObject(info, "name", "hybridgw") == NULL ||
        cJSON_AddStringToObject(info, "version", GW_VERSION) == NULL ||
        cJSON_AddStringToObject(res, "instructions", text) == NULL) {
        cJSON_Delete(res);
        return NULL;
    }
    return res;
}

static void initialize(struct post *p, const struct gw_rpc *rpc)
{
    const cJSON *want =
        cJSON_GetObjectItemCaseSensitive(rpc->params, "protocolVersion");
    const char *version = GW_MCP_PROTOCOL_LATEST;
    struct gw_mcp_client *cl = NULL;
    const struct gw_device *dev = NULL;
    cJSON *msg, *result;
    int rc;

    if (cJSON_IsString(want) && version_supported(want->valuestring)) {
        version = want->valuestring;
    }
    /* A device endpoint exists while the gateway knows the device; a
     * session outlives it (calls then say the device is offline). */
    if (p->client_id[0] != '\0' &&
        (dev = gw_device_find(p->srv->env.devices, p->client_id)) == NULL) {
        gw__mcp_server_reject(p->srv, p->req, p->subject, NULL, 404,
                              GW_RPC_INVALID_REQUEST, "unknown device");
        return;
    }
    rc = gw__mcp_server_client_create(p->srv, p->client_id, version,
                                      &gw__mcp_server_peer_ops, &cl);
    if (rc == GW_ELIMIT) {
        char text[128];
        snprintf(text, sizeof(text),
                 "too many sessions (mcp.max_sessions %d): end one with "
                 "DELETE, or retry later",
                 config(p->srv)->mcp.max_sessions);
        gw_log_peer(GW_LOG_WARN, gw_http_req_peer(p->req), "mcp",
                    "initialize from %s refused: %s", gw_http_req_peer(p->req),
                    text);
        msg = gw_rpc_error(rpc->id, GW_MCP_SESSIONS_FULL, text);
        gw__mcp_server_respond(p->req, NULL, 503, msg);
        cJSON_Delete(msg);
        return;
    }
    if (rc != 0) {
        gw_log(GW_LOG_ERROR, "mcp", "cannot create a session: %s",
               gw_strerror(rc));
        msg = gw_rpc_error(rpc->id, GW_RPC_INTERNAL_ERROR,
                           "cannot create a session");
        gw__mcp_server_respond(p->req, NULL, 500, msg);
        cJSON_Delete(msg);
        return;
    }
    p->srv->stats.requests++;
    cl->caps = endpoint_caps(dev);
    cl->client_caps = gw_mcp_client_caps_parse(rpc->params);
    gw_log_peer(GW_LOG_INFO, gw_http_req_peer(p->req), cl->subject,
                "session opened on %s (protocol %s, client capabilities 0x%x)",
                gw_http_req_path(p->req), version, cl->client_caps);
    result = initialize_result(version, p->client_id, cl->caps);
    msg = result != NULL ? gw_rpc_result(rpc->id, result) : NULL;
    if (msg == NULL) {
        msg = gw_rpc_error(rpc->id, GW_RPC_INTERNAL_ERROR, "out of memory");
    }
    gw__mcp_server_respond(p->req, cl, 200, msg);
    cJSON_Delete(msg);
}

/* ---- dispatch ---- */

static void notification(struct gw_mcp_client *cl, const struct gw_rpc *rpc)
{
    if (strcmp(rpc->method, "notifications/cancelled") == 0) {
        const cJSON *rid =
            cJSON_GetObjectItemCaseSensitive(rpc->params, "requestId");
        if (!gw__mcp_server_pending_cancel(cl, rid)) {
            gw_log_peer(GW_LOG_DEBUG, NULL, cl->subject,
                        "cancel for no waiting request");
        }
    }
}

static cJSON *ping(struct gw_mcp_exchange *ex, const struct gw_rpc *rpc,
                   bool *started)
{
    cJSON *empty = cJSON_CreateObject();

    (void)ex;
    (void)started;
    return empty != NULL ? gw_rpc_result(rpc->id, empty) : NULL;
}

static const struct {
    const char *method;
    gw__mcp_method_fn fn;
} methods[] = {
    {"ping", ping},
    {"tools/list", gw__mcp_server_tools_list},
    {"tools/call", gw__mcp_server_tools_call},
    {"resources/list", gw__mcp_server_resources_list},
    {"resources/templates/list", gw__mcp_server_templates_list},
    {"resources/read", gw__mcp_server_resources_read},
    {"resources/subscribe", gw__mcp_server_subscribe},
    {"resources/unsubscribe", gw__mcp_server_subscribe},
    {"prompts/list", gw__mcp_server_prompts_list},
    {"prompts/get", gw__mcp_server_prompts_get},
    {"completion/complete", gw__mcp_server_complete},
    {"logging/setLevel", gw__mcp_server_set_level},
    {"tasks/get", gw__mcp_server_tasks},
    {"tasks/result", gw__mcp_server_tasks},
    {"tasks/cancel", gw__mcp_server_tasks},
    {"tasks/list", gw__mcp_server_tasks},
};

/* One message of a POST: its reply is put on ex now, later, or never. */
static void dispatch(struct gw_mcp_exchange *ex, const cJSON *msg)
{
    struct gw_mcp_client *cl = ex->cl;
    struct gw_rpc rpc;
    cJSON *reply = NULL;
    bool started = false;
    char text[96];
    size_t i;

    if (gw_rpc_classify(msg, &rpc) != 0) {
        gw__mcp_server_exchange_put(ex,
                                    gw_rpc_error(NULL, GW_RPC_INVALID_REQUEST,
                                                 "invalid JSON-RPC message"));
        return;
    }
    if (rpc.kind == GW_RPC_RESPONSE) {
        gw__mcp_server_ask_answered(cl, &rpc); /* to a device's own request */
        return;
    }
    if (rpc.kind == GW_RPC_NOTIFICATION) {
        notification(cl, &rpc);
        return;
    }
    cl->srv->stats.requests++;
    for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        if (strcmp(rpc.method, methods[i].method) == 0) {
            break;
        }
    }
    if (i < sizeof(methods) / sizeof(methods[0])) {
        reply = methods[i].fn(ex, &rpc, &started);
        if (started) {
            return;
        }
    } else if (strcmp(rpc.method, "initialize") == 0) {
        reply = gw_rpc_error(rpc.id, GW_RPC_INVALID_REQUEST,
                             "initialize must be a single request without "
                             "a session");
    } else {
        snprintf(text, sizeof(text), "Method not found: %.60s", rpc.method);
        reply = gw_rpc_error(rpc.id, GW_RPC_METHOD_NOT_FOUND, text);
    }
    gw__mcp_server_exchange_put(ex, reply);
}

/* ---- HTTP methods ---- */

static bool version_header_ok(struct gw_http_req *req)
{
    const char *v = gw_http_req_header(req, "MCP-Protocol-Version");

    /* absent: the client speaks 2025-03-26, which had no such header */
    return v == NULL || version_supported(v);
}

/*
 * The body as one message (an object) or, when it starts with '[', a
 * batch (an array). The array is parsed inside a wrapping object so that
 * it passes the same strict checks as single messages.
 */
static int parse_body(const struct gw_mcp_server *srv, const char *body,
                      size_t len, cJSON **out, bool *batch)
{
    size_t max = (size_t)config(srv)->http.max_body_bytes;
    size_t i = 0;
    char *wrapped;
    cJSON *obj;
    int rc;

    *out = NULL;
    while (i < len && (body[i] == ' ' || body[i] == '\t' || body[i] == '\r' ||
                       body[i] == '\n')) {
        i++;
    }
    *batch = i < len && body[i] == '[';
    if (!*batch) {
        return gw_json_object_parse(body, len, max, out);
    }
    if (len > max) {
        return GW_ETOOBIG;
    }
    if ((wrapped = malloc(len + 8)) == NULL) {
        return GW_ENOMEM;
    }
    memcpy(wrapped, "{\"b\":", 5);
    memcpy(wrapped + 5, body, len);
    wrapped[len + 5] = '}';
    rc = gw_json_object_parse(wrapped, len + 6, max + 6, &obj);
    free(wrapped);
    if (rc != 0) {
        return rc;
    }
    *out = cJSON_DetachItemFromObjectCaseSensitive(obj, "b");
    cJSON_Delete(obj);
    if (!cJSON_IsArray(*out)) {
        cJSON_Delete(*out);
        *out = NULL;
        return GW_EMALFORMED;
    }
    return 0;
}

/* Whether the parsed body is a single initialize request (no session). */
static bool is_initialize(const cJSON *root, bool batch, struct gw_rpc *rpc)
{
    return !batch && gw_rpc_classify(root, rpc) == 0 &&
           rpc->kind == GW_RPC_REQUEST &&
           strcmp(rpc->method, "initialize") == 0;
}

/* The messages of a POST that named a session. */
static void post_messages(struct post *p, struct gw_mcp_client *cl,
                          const cJSON *root, bool batch)
{
    struct gw_mcp_exchange *ex;
    struct gw_rpc rpc;
    const cJSON *msg;

    if (batch && strcmp(cl->version, GW_MCP_PROTOCOL_BATCH) != 0) {
        gw__mcp_server_reject(p->srv, p->req, cl->subject, cl, 400,
                              GW_RPC_INVALID_REQUEST,
                              "JSON-RPC batches need protocol 2025-03-26");
        return;
    }
    if (batch ? cJSON_GetArraySize(root) == 0
              : gw_rpc_classify(root, &rpc) != 0) {
        gw__mcp_server_reject(p->srv, p->req, cl->subject, cl, 400,
                              GW_RPC_INVALID_REQUEST,
                              "invalid JSON-RPC message");
        return;
    }
    if ((ex = gw__mcp_server_exchange_create(cl, p->req, batch)) == NULL) {
        cJSON *err = gw_rpc_error(NULL, GW_RPC_INTERNAL_ERROR, "out of memory");
        gw__mcp_server_respond(p->req, cl, 500, err);
        cJSON_Delete(err);
        return;
    }
    ex->sse_ok =
        lists_type(gw_http_req_header(p->req, "Accept"), "text/event-stream");
    if (batch) {
        cJSON_ArrayForEach(msg, root)
        {
            dispatch(ex, msg);
        }
    } else {
        dispatch(ex, root);
    }
    gw__mcp_server_exchange_dispatched(ex);
}

static void on_post(struct post *p)
{
    struct gw_http_req *req = p->req;
    const char *accept = gw_http_req_header(req, "Accept");
    struct gw_mcp_client *cl;
    struct gw_rpc rpc;
    const char *body;
    size_t len;
    cJSON *root;
    bool batch;
    int rc;

    if (!content_type_json(gw_http_req_header(req, "Content-Type"))) {
        gw__mcp_server_reject(p->srv, req, p->subject, NULL, 415,
                              GW_RPC_INVALID_REQUEST,
                              "Content-Type must be application/json");
        return;
    }
    if (accept != NULL && !lists_type(accept, "application/json") &&
        !lists_type(accept, "text/event-stream") &&
        !lists_type(accept, "*/*") && !lists_type(accept, "application/*")) {
        gw__mcp_server_reject(p->srv, req, p->subject, NULL, 406,
                              GW_RPC_INVALID_REQUEST,
                              "Accept must allow application/json");
        return;
    }
    body = gw_http_req_body(req, &len);
    if ((rc = parse_body(p->srv, body, len, &root, &batch)) != 0) {
        gw__mcp_server_reject(p->srv, req, p->subject, NULL,
                              rc == GW_ETOOBIG ? 413 : 400, GW_RPC_PARSE_ERROR,
                              rc == GW_ETOOBIG ? "body too large"
                                               : "parse error");
        return;
    }
    if (is_initialize(root, batch, &rpc)) {
        initialize(p, &rpc);
    } else if (!version_header_ok(req)) {
        gw__mcp_server_reject(p->srv, req, p->subject, NULL, 400,
                              GW_RPC_INVALID_REQUEST,
                              "unsupported MCP-Protocol-Version");
    } else if ((cl = session_of(p->srv, req, p->client_id)) != NULL) {
        post_messages(p, cl, root, batch);
    }
    cJSON_Delete(root);
}

static void on_get(struct post *p)
{
    struct gw_mcp_client *cl;

    if (!lists_type(gw_http_req_header(p->req, "Accept"),
                    "text/event-stream")) {
        gw__mcp_server_reject(p->srv, p->req, p->subject, NULL, 406,
                              GW_RPC_INVALID_REQUEST,
                              "Accept must allow text/event-stream");
        return;
    }
    if (!version_header_ok(p->req)) {
        gw__mcp_server_reject(p->srv, p->req, p->subject, NULL, 400,
                              GW_RPC_INVALID_REQUEST,
                              "unsupported MCP-Protocol-Version");
        return;
    }
    if ((cl = session_of(p->srv, p->req, p->client_id)) != NULL) {
        gw__mcp_server_stream_open(cl, p->req);
    }
}

static void on_delete(struct post *p)
{
    struct gw_mcp_client *cl;

    if (!version_header_ok(p->req)) {
        gw__mcp_server_reject(p->srv, p->req, p->subject, NULL, 400,
                              GW_RPC_INVALID_REQUEST,
                              "unsupported MCP-Protocol-Version");
        return;
    }
    if ((cl = session_of(p->srv, p->req, p->client_id)) != NULL) {
        gw__mcp_server_respond(p->req, cl, 200, NULL);
        gw__mcp_server_client_end(cl, "deleted by the client");
    }
}

static void method_not_allowed(struct post *p)
{
    static const char *const headers[] = {"Allow: GET, POST, DELETE", NULL};
    cJSON *msg =
        gw_rpc_error(NULL, GW_RPC_INVALID_REQUEST, "method not allowed");
    char *body = msg != NULL ? cJSON_PrintUnformatted(msg) : NULL;

    gw_log_peer(GW_LOG_WARN, gw_http_req_peer(p->req), p->subject,
                "%s %s refused with 405", gw_http_req_method(p->req),
                gw_http_req_path(p->req));
    p->srv->stats.rejected++;
    (void)gw_http_respond(p->req, 405, "application/json", headers,
                          body != NULL ? body : "",
                          body != NULL ? strlen(body) : 0);
    cJSON_free(body);
    cJSON_Delete(msg);
}

bool gw_mcp_server_handle(struct gw_mcp_server *srv, struct gw_http_req *req)
{
    char client_id[GW_CLIENT_ID_MAX + 1];
    const char *method = gw_http_req_method(req);
    struct post p = {.srv = srv, .req = req, .client_id = client_id};
    int where = parse_path(gw_http_req_path(req), client_id);

    if (where == 0) {
        return false;
    }
    subject_for(p.subject, gw_http_req_header(req, "Mcp-Session-Id"));
    if (where < 0) {
        gw__mcp_server_reject(srv, req, p.subject, NULL, 404,
                              GW_RPC_INVALID_REQUEST,
                              "not a valid device client id");
    } else if (strcmp(method, "POST") == 0) {
        on_post(&p);
    } else if (strcmp(method, "GET") == 0) {
        on_get(&p);
    } else if (strcmp(method, "DELETE") == 0) {
        on_delete(&p);
    } else {
        method_not_allowed(&p);
    }
    return true;
}

/* ---- the server ---- */

int gw_mcp_server_init(const struct gw_mcp_server_env *env,
                       struct gw_mcp_server **out)
{
    struct gw_mcp_server *srv = calloc(1, sizeof(*srv));
    int rc;

    *out = NULL;
    if (srv == NULL) {
        return GW_ENOMEM;
    }
    srv->env = *env;
    gw_list_init(&srv->asks);
    if ((rc = gw__mcp_server_clients_start(srv)) != 0) {
        return rc; /* srv is freed */
    }
    *out = srv;
    return 0;
}

void gw_mcp_server_close(struct gw_mcp_server *srv,
                         void (*cb)(struct gw_mcp_server *srv, void *arg),
                         void *arg)
{
    if (srv != NULL) {
        srv->close_cb = cb;
        srv->close_arg = arg;
        gw__mcp_server_clients_stop(srv);
    }
}

void gw_mcp_server_device_changed(struct gw_mcp_server *srv,
                                  const struct gw_device *dev, unsigned what)
{
    unsigned lists = 0;

    if (srv == NULL || dev == NULL) {
        return;
    }
    if (dev->state == GW_DEVICE_GONE) {
        gw__mcp_server_asks_device_gone(srv, dev);
    }
    /* A device coming or going changes every list /mcp shows (and the
     * device endpoint's, which then shows nothing or its lists again). */
    if (what & (GW_DEVICE_CHANGED_PRESENCE | GW_DEVICE_CHANGED_TOOLS)) {
        lists |= GW_MCP_CAP_TOOLS;
    }
    if (what & (GW_DEVICE_CHANGED_PRESENCE | GW_DEVICE_CHANGED_RESOURCES)) {
        lists |= GW_MCP_CAP_RESOURCES;
    }
    if (what & (GW_DEVICE_CHANGED_PRESENCE | GW_DEVICE_CHANGED_PROMPTS)) {
        lists |= GW_MCP_CAP_PROMPTS;
    }
    gw__mcp_server_lists_changed(srv, dev->client_id, lists);
}

void gw_mcp_server_get_stats(const struct gw_mcp_server *srv,
                             struct gw_mcp_server_stats *out)
{
    if (srv == NULL) {
        memset(out, 0, sizeof(*out));
        return;
    }
    *out = srv->stats;
}
