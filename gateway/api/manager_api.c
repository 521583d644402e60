/*
 * The xiaozhi manager-api's routes (on when http.manager_key is set, each
 * behind its daily token): a command to one device (http_api_push.c),
 * the status of a list of devices, and the device-to-device call API
 * (gateway/session/device_call.h).
 */
#include "gateway/api/http_api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/hash.h"
#include "crypto/credential.h"
#include "gateway/session/device_call.h"
#include "gateway/session/session.h"

#define COMMANDS_PREFIX "/api/commands/"
/* POST /api/devices/status: ids per request (each is a hash lookup). */
#define STATUS_MAX_IDS 4096

/* The manager-api's daily token: sha256(UTC date + manager_key). */
static bool daily_token_ok(const struct gw_config *cfg, struct gw_http_req *req)
{
    const char *key = cfg->http.manager_key;
    const char *given = gw__api_bearer(req);

    if (given != NULL &&
        gw_credential_daily_token_verify(key, strlen(key), (int64_t)time(NULL),
                                         given, strlen(given)) == 0) {
        return true;
    }
    gw__api_refuse(req, 401, true,
                   given == NULL ? "missing token" : "invalid or expired token",
                   NULL);
    return false;
}

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
static void devices_status(const struct gw_http_api_env *env,
                           struct gw_http_req *req)
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
        gw__api_refuse(req, 400, true, "body must be {\"clientIds\":[...]}",
                       NULL);
        return;
    }
    cJSON_ArrayForEach(id, ids)
    {
        if (cJSON_GetStringValue(id) == NULL) {
            cJSON_Delete(in);
            gw__api_refuse(req, 400, true, "clientIds must hold strings", NULL);
            return;
        }
        if (++n > STATUS_MAX_IDS) {
            cJSON_Delete(in);
            snprintf(why, sizeof(why), "at most %d clientIds per request",
                     STATUS_MAX_IDS);
            gw__api_refuse(req, 413, true, why, NULL);
            return;
        }
    }
    if ((n > 0 && (slots = calloc((size_t)n, sizeof(*slots))) == NULL) ||
        (out = cJSON_CreateObject()) == NULL) {
        free(slots);
        cJSON_Delete(in);
        gw__api_send_error(req, 503, true, "out of memory", NULL);
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
        dev = gw_device_find(env->devices, cid);
        o = cJSON_AddObjectToObject(out, cid);
        cJSON_AddBoolToObject(o, "isAlive",
                              dev != NULL && dev->session != NULL &&
                                  dev->session->state == GW_SESSION_ACTIVE);
        cJSON_AddBoolToObject(o, "exists", dev != NULL);
        if (dev != NULL && o != NULL) {
            /* Beyond the manager-api's two: what /api/devices says. */
            gw__api_device_detail(o, dev, uv_now(env->loop));
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
    gw__api_send_json(req, 200, out, NULL);
    cJSON_Delete(in); /* the ids were the set's keys */
}

bool gw__api_manager_route(const struct gw_http_req *req)
{
    const char *path = gw_http_req_path(req);

    return strncmp(path, COMMANDS_PREFIX, strlen(COMMANDS_PREFIX)) == 0 ||
           (strcmp(path, "/api/devices/status") == 0 &&
            strcmp(gw_http_req_method(req), "POST") == 0);
}

/* The manager-api's checks: its key set, a valid id, POST, daily token. */
bool gw__api_manager_head(const struct gw_config *cfg, struct gw_http_req *req)
{
    const char *path = gw_http_req_path(req);
    bool commands =
        strncmp(path, COMMANDS_PREFIX, strlen(COMMANDS_PREFIX)) == 0;
    const char *id = commands ? path + strlen(COMMANDS_PREFIX) : "";

    if (cfg->http.manager_key == NULL || cfg->http.manager_key[0] == '\0') {
        gw__api_not_found(req, true); /* the routes are off */
        return false;
    }
    if (commands && (id[0] == '\0' || strchr(id, '/') != NULL ||
                     strlen(id) > GW_CLIENT_ID_MAX)) {
        gw__api_not_found(req, true);
        return false;
    }
    return gw__api_method_ok(req, "POST", true) && daily_token_ok(cfg, req);
}

/* POST /api/call/request or /api/call/accept: the device calls' own API. */
static void device_call(const struct gw_http_api_env *env,
                        struct gw_http_req *req, const char *path)
{
    size_t len;
    const char *body = gw_http_req_body(req, &len);
    cJSON *doc = NULL;

    if (env->calls == NULL) {
        gw__api_not_found(req, false);
        return;
    }
    int status = gw_device_calls_api(env->calls, path, body, len,
                                     gw_http_req_peer(req), &doc);
    gw__api_send_json(req, status, doc, NULL);
}

void gw__api_manager_serve(const struct gw_http_api_env *env,
                           struct gw_push_stats *push, struct gw_http_req *req)
{
    const char *path = gw_http_req_path(req);

    if (strncmp(path, COMMANDS_PREFIX, strlen(COMMANDS_PREFIX)) == 0) {
        gw__api_push_command(env, push, req, path + strlen(COMMANDS_PREFIX));
    } else if (strcmp(path, GW_DEVICE_CALL_REQUEST_PATH) == 0 ||
               strcmp(path, GW_DEVICE_CALL_ACCEPT_PATH) == 0) {
        device_call(env, req, path);
    } else {
        devices_status(env, req);
    }
}
