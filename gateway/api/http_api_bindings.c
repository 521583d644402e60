/*
 * /api/bindings (http.token): the operator lists bindings and pending
 * activations, binds a device by the code it shows, and undoes a binding,
 * which the instance then tells the broker plugin (docs/protocol.md
 * section 9.3).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "codec/envelope.h"
#include "common/log.h"
#include "gateway/api/http_api_int.h"
#include "gateway/binding/binding.h"
#include "gateway/http/http_server.h"

#define SUBJECT  "bindings"
#define PAGE     100
#define BODY_MAX 1024
#define PREFIX   "/api/bindings/"

bool gw__api_bindings_path(const char *path)
{
    return strcmp(path, "/api/bindings") == 0 ||
           strncmp(path, PREFIX, strlen(PREFIX)) == 0;
}

int gw__api_binding_from_pending(const struct gw_config *cfg,
                                 const struct gw_binding_pending *p,
                                 struct gw_binding *b)
{
    const char *end;
    int rc = gw_ota_client_id(cfg->ota.group, p->mac, p->uuid, p->board,
                              b->client_id);

    if (rc != 0) {
        return rc;
    }
    end = strstr(b->client_id, "@@@");
    snprintf(b->group, sizeof(b->group), "%.*s",
             end != NULL ? (int)(end - b->client_id) : 0, b->client_id);
    memcpy(b->mac, p->mac, sizeof(b->mac));
    memcpy(b->uuid, p->uuid, sizeof(b->uuid));
    memcpy(b->board, p->board, sizeof(b->board));
    memcpy(b->serial_number, p->serial_number, sizeof(b->serial_number));
    return 0;
}

static void count(struct gw__api_ota *ota, enum gw_ota_binding_result r)
{
    ota->stats.bindings[r]++;
}

static void refuse(struct gw__api_ota *ota, enum gw_ota_binding_result r,
                   struct gw_http_req *req, int status, const char *why)
{
    count(ota, r);
    gw__api_refuse(req, status, false, why, NULL);
}

bool gw__api_bindings_head(const struct gw_config *cfg, struct gw__api_ota *ota,
                           struct gw_http_req *req)
{
    const char *path = gw_http_req_path(req);
    const char *method = gw_http_req_method(req);
    bool one = strcmp(path, "/api/bindings") != 0;

    if (cfg->http.token[0] == '\0') {
        refuse(ota, GW_OTA_BINDING_REFUSED, req, 403,
               "bindings are off: set http.token to enable them");
        return false;
    }
    if (!gw__api_token_ok(cfg, req) ||
        !gw__api_method_ok(req, one ? "DELETE" : "GET, HEAD, POST", false)) {
        count(ota, GW_OTA_BINDING_REFUSED);
        return false;
    }
    int64_t body =
        gw_http_content_length(gw_http_req_header(req, "content-length"));
    if (body > (strcmp(method, "POST") == 0 ? BODY_MAX : 0)) {
        refuse(ota, GW_OTA_BINDING_REFUSED, req, 413,
               "this request takes no body that large");
        return false;
    }
    return true;
}

static cJSON *binding_json(const struct gw_binding *b)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddNumberToObject(o, "id", (double)b->id);
    cJSON_AddStringToObject(o, "client_id", b->client_id);
    cJSON_AddStringToObject(o, "mac", b->mac);
    cJSON_AddStringToObject(o, "uuid", b->uuid);
    cJSON_AddStringToObject(o, "group", b->group);
    cJSON_AddStringToObject(o, "board", b->board);
    cJSON_AddStringToObject(o, "serial_number", b->serial_number);
    cJSON_AddStringToObject(o, "by", gw_binding_by_name(b->by));
    cJSON_AddNumberToObject(o, "bound_ms", (double)b->bound_ms);
    cJSON_AddBoolToObject(o, "issued", b->issued);
    return o;
}

struct listing {
    const struct gw_config *cfg;
    struct gw_binding_store *store;
    cJSON *bindings, *pending;
    int64_t last;
};

static void add_binding(const struct gw_binding *b, void *arg)
{
    struct listing *l = arg;

    cJSON_AddItemToArray(l->bindings, binding_json(b));
    l->last = b->id;
}

/* A pending activation, never with its code: the device shows it. */
static void add_pending(const struct gw_binding_pending *p, void *arg)
{
    struct listing *l = arg;
    struct gw_binding b = {0};
    cJSON *o = cJSON_CreateObject();
    int bound = 0;

    cJSON_AddStringToObject(o, "mac", p->mac);
    cJSON_AddStringToObject(o, "uuid", p->uuid);
    cJSON_AddStringToObject(o, "board", p->board);
    /* What binding it would make it: the operator sees its group. */
    if (gw__api_binding_from_pending(l->cfg, p, &b) == 0) {
        cJSON_AddStringToObject(o, "client_id", b.client_id);
    }
    cJSON_AddBoolToObject(o, "serial_number", p->serial_number[0] != '\0');
    /* Its MAC bound to another identity already: an impostor, or a
     * device that lost its uuid (the operator tells which). */
    if (gw_binding_count_mac(l->store, p->mac, &bound) == 0) {
        cJSON_AddNumberToObject(o, "mac_bindings", bound);
    }
    cJSON_AddStringToObject(o, "peer", p->peer);
    cJSON_AddNumberToObject(o, "created_ms", (double)p->created_ms);
    cJSON_AddNumberToObject(o, "expires_ms", (double)p->expires_ms);
    cJSON_AddItemToArray(l->pending, o);
}

static void list(const struct gw_http_api_env *env, struct gw__api_ota *ota,
                 struct gw_http_req *req)
{
    const char *q = gw_http_req_query(req);
    struct listing l = {.cfg = gw_config_live_get(env->config),
                        .store = env->bindings};
    int64_t after = 0;
    cJSON *doc = cJSON_CreateObject();
    int n, m;

    if (q != NULL && strncmp(q, "after=", 6) == 0) {
        char *end;
        after = strtoll(q + 6, &end, 10);
        if (*end != '\0' || after < 0) {
            cJSON_Delete(doc);
            refuse(ota, GW_OTA_BINDING_REFUSED, req, 400,
                   "after must be a binding id");
            return;
        }
    }
    l.bindings = cJSON_AddArrayToObject(doc, "bindings");
    l.pending = cJSON_AddArrayToObject(doc, "pending");
    n = gw_binding_list(env->bindings, after, PAGE, add_binding, &l);
    m = gw_binding_pending_list(env->bindings, gw_wall_ms(), PAGE, add_pending,
                                &l);
    if (n < 0 || m < 0) {
        cJSON_Delete(doc);
        refuse(ota, GW_OTA_BINDING_FAILED, req, 503,
               "the bindings are unavailable");
        return;
    }
    if (n == PAGE) {
        cJSON_AddNumberToObject(doc, "next", (double)l.last);
    } else {
        cJSON_AddNullToObject(doc, "next");
    }
    count(ota, GW_OTA_BINDING_LISTED);
    gw__api_send_json(req, 200, doc, NULL);
}

/* The code of {"code":"123456"}, or NULL. */
static const char *code_of(const cJSON *root)
{
    const cJSON *code = NULL;

    if (gw_json_unique_member(root, "code", &code) != 0 ||
        !cJSON_IsString(code) ||
        strlen(code->valuestring) != GW_BINDING_CODE_LEN ||
        strspn(code->valuestring, "0123456789") != GW_BINDING_CODE_LEN) {
        return NULL;
    }
    return code->valuestring;
}

static void bind_by_code(const struct gw_http_api_env *env,
                         struct gw__api_ota *ota, struct gw_http_req *req)
{
    const struct gw_config *cfg = gw_config_live_get(env->config);
    struct gw_binding_pending p;
    struct gw_binding b = {.by = GW_BINDING_BY_OPERATOR};
    const char *body, *code;
    cJSON *root = NULL, *doc;
    size_t len;
    int rc;

    body = gw_http_req_body(req, &len);
    if (gw_json_object_parse(body, len, BODY_MAX, &root) != 0 ||
        (code = code_of(root)) == NULL) {
        cJSON_Delete(root);
        refuse(ota, GW_OTA_BINDING_REFUSED, req, 400,
               "the body must be {\"code\":\"<the 6 digits the device "
               "shows>\"}");
        return;
    }
    if (!gw_ratelimit_take(&ota->guesses, gw_http_req_peer(req),
                           uv_now(ota->loop), NULL)) {
        cJSON_Delete(root);
        refuse(ota, GW_OTA_BINDING_LIMITED, req, 429,
               "too many codes tried: wait");
        return;
    }
    rc = gw_binding_pending_by_code(env->bindings, code, gw_wall_ms(), &p);
    cJSON_Delete(root);
    if (rc == GW_ENOENT) {
        refuse(ota, GW_OTA_BINDING_UNKNOWN, req, 404,
               "no device waits with this code (it may have expired)");
        return;
    }
    if (rc == 0) {
        rc = gw__api_binding_from_pending(cfg, &p, &b);
    }
    if (rc == 0) {
        /* A serial number is kept only as its proof binds it: the header
         * of a check proves nothing. */
        b.serial_number[0] = '\0';
        b.bound_ms = gw_wall_ms();
        rc = gw_binding_bind(env->bindings, &b);
    }
    if (rc == GW_EEXIST) {
        refuse(ota, GW_OTA_BINDING_CONFLICT, req, 409,
               "this device is already bound");
        return;
    }
    if (rc != 0) {
        refuse(ota, GW_OTA_BINDING_FAILED, req, 503,
               "the bindings are unavailable");
        return;
    }
    gw_log(GW_LOG_INFO, SUBJECT,
           "%s bound by the operator from %s (binding %" PRId64 ")",
           b.client_id, gw_http_req_peer(req), b.id);
    count(ota, GW_OTA_BINDING_BOUND);
    doc = cJSON_CreateObject();
    cJSON_AddItemToObject(doc, "binding", binding_json(&b));
    gw__api_send_json(req, 201, doc, NULL);
}

static void unbind(const struct gw_http_api_env *env, struct gw__api_ota *ota,
                   struct gw_http_req *req, const char *client_id)
{
    struct gw_binding_revoked r;
    cJSON *doc;
    int rc = strlen(client_id) <= GW_CLIENT_ID_MAX
                 ? gw_binding_unbind(env->bindings, client_id, &r)
                 : GW_ENOENT;

    if (rc == GW_ENOENT) {
        refuse(ota, GW_OTA_BINDING_UNKNOWN, req, 404, "no such binding");
        return;
    }
    if (rc != 0) {
        refuse(ota, GW_OTA_BINDING_FAILED, req, 503,
               "the bindings are unavailable");
        return;
    }
    gw_log(GW_LOG_INFO, SUBJECT,
           "%s unbound by the operator from %s: credentials below binding "
           "%" PRId64 " refused from now on",
           r.client_id, gw_http_req_peer(req), r.below);
    if (env->on_unbind != NULL) {
        env->on_unbind(&r, env->on_unbind_arg);
    }
    count(ota, GW_OTA_BINDING_UNBOUND);
    doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "unbound", r.client_id);
    cJSON_AddNumberToObject(doc, "below", (double)r.below);
    gw__api_send_json(req, 200, doc, NULL);
}

void gw__api_bindings_serve(const struct gw_http_api_env *env,
                            struct gw__api_ota *ota, struct gw_http_req *req)
{
    const char *path = gw_http_req_path(req);
    const char *method = gw_http_req_method(req);

    if (env->bindings == NULL) {
        refuse(ota, GW_OTA_BINDING_UNKNOWN, req, 404,
               "no bindings here: ota.activation is off or OTA disabled");
    } else if (strcmp(path, "/api/bindings") != 0) {
        unbind(env, ota, req, path + strlen(PREFIX));
    } else if (strcmp(method, "POST") == 0) {
        bind_by_code(env, ota, req);
    } else {
        list(env, ota, req);
    }
}
