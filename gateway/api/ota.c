/*
 * The OTA endpoint: the device's check parsed by codec/ota_request.c, its
 * credentials made with crypto/credential.c under the key the broker
 * plugin verifies, the answer in the shape the firmware stores.
 */
#include "gateway/api/ota.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <openssl/crypto.h>

#include "codec/activation_request.h"
#include "codec/client_id.h"
#include "codec/device_username.h"
#include "common/log.h"
#include "crypto/credential.h"
#include "gateway/api/http_api_int.h"
#include "gateway/http/http_server.h"

#define SUBJECT "ota"
#define JSON    "application/json"
#define BOARD   "{board}"
/* Of a board name, what "{board}" may put into a group. */
#define BOARD_IN_GROUP 32

const char *gw__api_ota_result_name(enum gw_ota_result r)
{
    static const char *const names[] = {
#define XX(_, text) text,
        GW_OTA_RESULT_MAP(XX)
#undef XX
    };

    return (unsigned)r < GW_OTA_RESULT_COUNT_ ? names[r] : "unknown";
}

bool gw__api_ota_path(const char *path)
{
    return strcmp(path, "/xiaozhi/ota/") == 0 ||
           strcmp(path, "/xiaozhi/ota") == 0;
}

/* ---- the answer -------------------------------------------------------- */

int gw_ota_client_id(const char *group, const char *mac, const char *uuid,
                     const char *board, char out[GW_CLIENT_ID_MAX + 1])
{
    const char *hole = strstr(group, BOARD);
    const char *name = board[0] != '\0' ? board : "unknown";
    /* GROUP@@@MAC@@@UUID without the board: what is left for it. */
    size_t fixed = strlen(group) + 6 + 17 + strlen(uuid);
    size_t room = 0, n;
    struct gw_client_id parsed;
    char part[18];
    int len;

    if (strlen(mac) != 17) {
        return GW_EPROTO;
    }
    for (size_t i = 0; i < 17; i++) {
        part[i] = mac[i] == ':' ? '_' : mac[i];
    }
    part[17] = '\0';
    if (hole != NULL) {
        fixed -= strlen(BOARD);
        room = fixed < GW_CLIENT_ID_MAX ? GW_CLIENT_ID_MAX - fixed : 0;
        room = room < BOARD_IN_GROUP ? room : BOARD_IN_GROUP;
    } else {
        hole = group + strlen(group);
    }
    n = strlen(name) < room ? strlen(name) : room;
    len = snprintf(out, GW_CLIENT_ID_MAX + 1, "%.*s%.*s%s@@@%s@@@%s",
                   (int)(hole - group), group, (int)n, name,
                   *hole != '\0' ? hole + strlen(BOARD) : "", part, uuid);
    if (len < 0 || len > GW_CLIENT_ID_MAX ||
        gw_client_id_parse(out, (size_t)len, &parsed) != 0) {
        return GW_EPROTO;
    }
    /* The gateways' own prefix (docs/protocol.md section 9.2). */
    if (strncasecmp(out, GW_OTA_RESERVED_GROUP,
                    strlen(GW_OTA_RESERVED_GROUP)) == 0) {
        return GW_EPROTO;
    }
    return 0;
}

/* devices/{client_id}/down for a device that subscribes (firmware before
 * 1.0.1); the plugin delivers there whether or not it does. */
static char *make_down_topic(const char *tmpl, const char *client_id)
{
    const char *hole = strstr(tmpl, "{client_id}");
    size_t len;
    char *s;

    if (hole == NULL) {
        return NULL;
    }
    len = strlen(tmpl) - 11 + strlen(client_id) + 1;
    s = malloc(len);
    if (s != NULL) {
        snprintf(s, len, "%.*s%s%s", (int)(hole - tmpl), tmpl, client_id,
                 hole + 11);
    }
    return s;
}

static void add_firmware(cJSON *root, const struct gw_config *cfg,
                         const struct gw_ota_request *r)
{
    cJSON *fw;

    if (cfg->ota.firmware.version[0] == '\0' && r->version[0] == '\0') {
        return; /* nothing safe to say: the device keeps its firmware */
    }
    fw = cJSON_AddObjectToObject(root, "firmware");
    if (cfg->ota.firmware.version[0] != '\0') {
        cJSON_AddStringToObject(fw, "version", cfg->ota.firmware.version);
        cJSON_AddStringToObject(fw, "url", cfg->ota.firmware.url);
        if (cfg->ota.firmware.force) {
            cJSON_AddNumberToObject(fw, "force", 1);
        }
    } else {
        /* Its own version: not newer, so no upgrade is attempted. */
        cJSON_AddStringToObject(fw, "version", r->version);
        cJSON_AddStringToObject(fw, "url", "");
    }
}

/* The mqtt section; username and password only with credentials. */
static int add_mqtt(cJSON *root, const struct gw_config *cfg,
                    const struct gw_ota_offer *o, const char *peer)
{
    char username[GW_DEVICE_USERNAME_MAX + 1];
    char password[GW_CREDENTIAL_PASSWORD_LEN + 1];
    const char *key = cfg->ota.device_key;
    char *down = make_down_topic(cfg->mqtt.down_topic, o->client_id);
    cJSON *mqtt = cJSON_AddObjectToObject(root, "mqtt");
    int rc = 0;

    if (down == NULL || mqtt == NULL) {
        free(down);
        return GW_ENOMEM;
    }
    cJSON_AddStringToObject(mqtt, "endpoint", cfg->ota.mqtt_endpoint);
    cJSON_AddStringToObject(mqtt, "client_id", o->client_id);
    if (o->credentials) {
        rc = gw_device_username_make(peer, (uint64_t)o->binding, username,
                                     sizeof(username));
        if (rc >= 0) {
            rc = gw_credential_password_make(
                key, strlen(key), o->client_id, strlen(o->client_id), username,
                strlen(username), password, sizeof(password));
        }
        if (rc == 0) {
            cJSON_AddStringToObject(mqtt, "username", username);
            cJSON_AddStringToObject(mqtt, "password", password);
        }
        OPENSSL_cleanse(password, sizeof(password));
    }
    cJSON_AddStringToObject(mqtt, "publish_topic", cfg->ota.publish_topic);
    cJSON_AddStringToObject(mqtt, "subscribe_topic", down);
    cJSON_AddNumberToObject(mqtt, "keepalive", cfg->ota.keepalive_s);
    free(down);
    return rc;
}

int gw_ota_answer_offer(const struct gw_config *cfg,
                        const struct gw_ota_request *r, const char *peer,
                        int64_t now_ms, const struct gw_ota_offer *o,
                        char **out)
{
    cJSON *root = cJSON_CreateObject(), *st, *act;
    int rc = 0;

    *out = NULL;
    if (root == NULL) {
        return GW_ENOMEM;
    }
    if (o->client_id != NULL) {
        rc = add_mqtt(root, cfg, o, peer);
    }
    if (rc == 0 && o->challenge != NULL) {
        act = cJSON_AddObjectToObject(root, "activation");
        cJSON_AddStringToObject(act, "message", cfg->ota.activation_message);
        if (o->code != NULL) {
            cJSON_AddStringToObject(act, "code", o->code);
        }
        cJSON_AddStringToObject(act, "challenge", o->challenge);
        cJSON_AddNumberToObject(act, "timeout_ms", (double)o->timeout_ms);
    }
    if (rc == 0) {
        st = cJSON_AddObjectToObject(root, "server_time");
        cJSON_AddNumberToObject(st, "timestamp", (double)now_ms);
        cJSON_AddNumberToObject(st, "timezone_offset",
                                cfg->ota.timezone_offset_min);
        add_firmware(root, cfg, r);
        *out = cJSON_PrintUnformatted(root);
        rc = *out != NULL ? 0 : GW_ENOMEM;
    }
    cJSON_Delete(root);
    return rc;
}

int gw_ota_answer(const struct gw_config *cfg, const struct gw_ota_request *r,
                  const char *peer, int64_t now_ms, char **out, char *client_id)
{
    char id[GW_CLIENT_ID_MAX + 1];
    struct gw_ota_offer o = {.client_id = id, .credentials = true};
    int rc;

    *out = NULL;
    rc = gw_ota_client_id(cfg->ota.group, r->mac, r->uuid, r->board, id);
    if (rc == 0) {
        rc = gw_ota_answer_offer(cfg, r, peer, now_ms, &o, out);
    }
    if (rc == 0 && client_id != NULL) {
        memcpy(client_id, id, strlen(id) + 1);
    }
    return rc;
}

/* ---- the endpoint ------------------------------------------------------ */

/* A refusal: one warning naming the client (at a bounded rate per
 * address), {"error":why}, counted. */
static void refuse(struct gw__api_ota *ota, enum gw_ota_result result,
                   struct gw_http_req *req, int status, const char *why,
                   const char *const *headers)
{
    ota->stats.results[result]++;
    gw__api_ota_refuse(req, status, why, headers);
}

void gw__api_ota_refuse(struct gw_http_req *req, int status, const char *why,
                        const char *const *headers)
{
    cJSON *doc = cJSON_CreateObject();

    gw_log_peer(status == 404 ? GW_LOG_DEBUG : GW_LOG_WARN,
                gw_http_req_peer(req), SUBJECT, "%s %.64s from %s: %d %s",
                gw_http_req_method(req), gw_http_req_path(req),
                gw_http_req_peer(req), status, why);
    cJSON_AddStringToObject(doc, "error", why);
    gw__api_send_json(req, status, doc, headers);
}

bool gw__api_ota_head(const struct gw_config *cfg, struct gw__api_ota *ota,
                      struct gw_http_req *req)
{
    static const char *const allow[] = {"Allow: POST", NULL};

    if (!cfg->ota.enabled) {
        refuse(ota, GW_OTA_OFF, req, 404, "not found", NULL);
        return false;
    }
    if (strcmp(gw_http_req_method(req), "POST") != 0) {
        refuse(ota, GW_OTA_METHOD, req, 405, "method not allowed", allow);
        return false;
    }
    /* Anyone may ask: no more is read than the parser takes. */
    if (gw_http_content_length(gw_http_req_header(req, "content-length")) >
        (gw__api_ota_activate_path(gw_http_req_path(req))
             ? GW_ACTIVATION_BODY_MAX
             : GW_OTA_BODY_MAX)) {
        refuse(ota, GW_OTA_MALFORMED, req, 413, "the body is too large", NULL);
        return false;
    }
    return true;
}

/* Sends text (made by gw_ota_answer_offer), then wipes it: it may hold a
 * password. */
static void send_answer(struct gw_http_req *req, char *text)
{
    (void)gw_http_respond(req, 200, JSON, NULL, text, strlen(text));
    OPENSSL_cleanse(text, strlen(text));
    free(text);
}

/* ota.activation "off": credentials to every check, as before bindings. */
static void serve_lab(const struct gw_config *cfg, struct gw__api_ota *ota,
                      struct gw_http_req *req, const struct gw_ota_request *r)
{
    char id[GW_CLIENT_ID_MAX + 1];
    char *text = NULL;
    int rc =
        gw_ota_answer(cfg, r, gw_http_req_peer(req), gw_wall_ms(), &text, id);

    if (rc == GW_EPROTO) {
        refuse(ota, GW_OTA_RESERVED, req, 403,
               "this device's board makes a client id the broker refuses",
               NULL);
        return;
    }
    if (rc != 0) {
        gw_log(GW_LOG_ERROR, SUBJECT, "answer for %s failed: %s", r->mac,
               gw_strerror(rc));
        refuse(ota, GW_OTA_FAILED, req, 503, "could not make credentials",
               NULL);
        return;
    }
    ota->stats.results[GW_OTA_ISSUED]++;
    gw_log_peer(GW_LOG_INFO, gw_http_req_peer(req), SUBJECT,
                "%s from %s: credentials issued (board %s, firmware %s; "
                "ota.activation off: no binding)",
                id, gw_http_req_peer(req), r->board[0] ? r->board : "?",
                r->version[0] ? r->version : "?");
    send_answer(req, text);
}

int gw__api_ota_reissue_challenge(const struct gw_config *cfg,
                                  const struct gw_binding *b, int64_t window,
                                  char out[33])
{
    char subject[GW_CLIENT_ID_MAX + 32];

    snprintf(subject, sizeof(subject), "reissue|%s|%" PRId64, b->client_id,
             b->id);
    return gw_credential_challenge_make(
        cfg->ota.device_key, strlen(cfg->ota.device_key), subject, window, out);
}

/* A bound identity: its credentials once, then nothing it does not
 * prove again. */
static void serve_bound(const struct gw_config *cfg,
                        const struct gw_http_api_env *env,
                        struct gw__api_ota *ota, struct gw_http_req *req,
                        const struct gw_ota_request *r,
                        const struct gw_binding *b, const char *serial)
{
    int64_t now = gw_wall_ms(), ttl = GW__API_OTA_TTL_MS(cfg);
    struct gw_ota_offer o = {.client_id = b->client_id, .binding = b->id};
    char challenge[33];
    char *text = NULL;
    int rc = gw_binding_claim_issue(env->bindings, b->id, &o.credentials);

    if (rc == 0 && !o.credentials && serial != NULL &&
        strcmp(serial, b->serial_number) == 0 && serial[0] != '\0' &&
        cfg->ota.serial_key[0] != '\0') {
        /* It can prove itself again (docs/protocol.md section 9.3). */
        rc = gw__api_ota_reissue_challenge(cfg, b, now / ttl, challenge);
        o.challenge = challenge;
        o.timeout_ms = ttl - now % ttl;
    }
    if (rc == 0) {
        rc = gw_ota_answer_offer(cfg, r, gw_http_req_peer(req), now, &o, &text);
    }
    if (rc != 0) {
        gw_log(GW_LOG_ERROR, SUBJECT, "answer for %s failed: %s", b->client_id,
               gw_strerror(rc));
        refuse(ota, GW_OTA_FAILED, req, 503, "could not answer", NULL);
        return;
    }
    ota->stats.results[o.credentials ? GW_OTA_ISSUED : GW_OTA_KNOWN]++;
    if (o.credentials) {
        gw_log(GW_LOG_INFO, SUBJECT,
               "%s from %s: credentials issued (binding %" PRId64
               ", board %s, firmware %s)",
               b->client_id, gw_http_req_peer(req), b->id,
               r->board[0] ? r->board : "?", r->version[0] ? r->version : "?");
    } else {
        gw_log_peer(GW_LOG_INFO, gw_http_req_peer(req), SUBJECT,
                    "%s from %s: bound, credentials given before: none "
                    "in this answer%s",
                    b->client_id, gw_http_req_peer(req),
                    o.challenge != NULL ? " (a proof is asked)" : "");
    }
    send_answer(req, text);
}

/* An identity not bound: an activation code, and no credentials. */
static void serve_unknown(const struct gw_config *cfg,
                          const struct gw_http_api_env *env,
                          struct gw__api_ota *ota, struct gw_http_req *req,
                          const struct gw_ota_request *r, const char *serial)
{
    struct gw_binding_pending want = {0}, p;
    char id[GW_CLIENT_ID_MAX + 1];
    int64_t now = gw_wall_ms();
    struct gw_ota_offer o = {0};
    char *text = NULL;
    int rc;

    if (gw_ota_client_id(cfg->ota.group, r->mac, r->uuid, r->board, id) != 0) {
        refuse(ota, GW_OTA_RESERVED, req, 403,
               "this device's board makes a client id the broker refuses",
               NULL);
        return;
    }
    /* A new pending activation costs a row and widens what a guess may
     * hit: so many from one address, and overall. */
    rc = gw_binding_pending_find(env->bindings, r->mac, r->uuid, now, &p);
    if (rc == GW_ENOENT &&
        !gw_ratelimit_take(&ota->newcomers, gw_http_req_peer(req),
                           uv_now(ota->loop), NULL)) {
        refuse(ota, GW_OTA_LIMITED, req, 429,
               "too many new devices from this address: check again later",
               NULL);
        return;
    }
    memcpy(want.mac, r->mac, sizeof(want.mac));
    memcpy(want.uuid, r->uuid, sizeof(want.uuid));
    memcpy(want.board, r->board, sizeof(want.board));
    snprintf(want.serial_number, sizeof(want.serial_number), "%s",
             serial != NULL ? serial : "");
    snprintf(want.peer, sizeof(want.peer), "%s", gw_http_req_peer(req));
    rc = gw_binding_pending_get(env->bindings, &want, now,
                                GW__API_OTA_TTL_MS(cfg), &p);
    if (rc == 0) {
        o.code = p.code;
        o.challenge = p.challenge;
        o.timeout_ms = p.expires_ms > now ? p.expires_ms - now : 0;
        rc = gw_ota_answer_offer(cfg, r, gw_http_req_peer(req), now, &o, &text);
    }
    if (rc != 0) {
        gw_log(GW_LOG_ERROR, SUBJECT, "activation for %s failed: %s", r->mac,
               gw_strerror(rc));
        refuse(ota, GW_OTA_FAILED, req, 503, "could not answer", NULL);
        return;
    }
    ota->stats.results[GW_OTA_ACTIVATION]++;
    gw_log_peer(
        GW_LOG_INFO, gw_http_req_peer(req), SUBJECT,
        "%s %s from %s: not bound, activation pending (board %s, "
        "%s)",
        r->mac, r->uuid, gw_http_req_peer(req), r->board[0] ? r->board : "?",
        want.serial_number[0] ? "serial number given" : "no serial number");
    send_answer(req, text);
}

void gw__api_ota_serve(const struct gw_http_api_env *env,
                       struct gw__api_ota *ota, struct gw_http_req *req)
{
    const struct gw_config *cfg = gw_config_live_get(env->config);
    struct gw_ota_headers h = {
        .device_id = gw_http_req_header(req, "device-id"),
        .client_id = gw_http_req_header(req, "client-id"),
        .user_agent = gw_http_req_header(req, "user-agent"),
    };
    const char *serial = gw_http_req_header(req, "serial-number");
    struct gw_ota_request r;
    struct gw_binding b;
    const char *why = NULL, *body;
    size_t len;
    int rc;

    body = gw_http_req_body(req, &len);
    rc = gw_ota_request_parse(&h, body, len, &r, &why);
    if (rc != 0) {
        /* A body over the check's own bound was refused at its head
         * (gw__api_ota_head); counted with the malformed ones. */
        refuse(ota, GW_OTA_MALFORMED, req, rc == GW_ETOOBIG ? 413 : 400, why,
               NULL);
        return;
    }
    if (r.body_ignored != NULL) {
        char id[GW_CLIENT_ID_MAX + 1];
        ota->stats.bodies_ignored++;
        gw_log_peer(
            GW_LOG_WARN, gw_http_req_peer(req), SUBJECT,
            "%s from %s: body ignored (%s), provisioned from the headers",
            gw_ota_client_id(cfg->ota.group, r.mac, r.uuid, r.board, id) == 0
                ? id
                : r.mac,
            gw_http_req_peer(req), r.body_ignored);
    }
    if (cfg->ota.activation == GW_OTA_ACTIVATION_OFF) {
        serve_lab(cfg, ota, req, &r);
        return;
    }
    if (serial != NULL && !gw__api_ota_serial_ok(serial)) {
        serial = NULL; /* informative here; /activate checks the proof */
    }
    rc = env->bindings != NULL
             ? gw_binding_find(env->bindings, r.mac, r.uuid, &b)
             : GW_EIO;
    if (rc == 0) {
        serve_bound(cfg, env, ota, req, &r, &b, serial);
    } else if (rc == GW_ENOENT) {
        serve_unknown(cfg, env, ota, req, &r, serial);
    } else {
        refuse(ota, GW_OTA_FAILED, req, 503, "the bindings are unavailable",
               NULL);
    }
}

bool gw__api_ota_serial_ok(const char *s)
{
    size_t n = strlen(s);

    return n > 0 && n <= GW_BINDING_SERIAL_MAX &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "0123456789_.-") == n;
}
