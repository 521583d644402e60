/*
 * The OTA endpoint: the device's check parsed by codec/ota_request.c, its
 * credentials made with crypto/credential.c under the key the broker
 * plugin verifies, the answer in the shape the firmware stores.
 */
#include "gateway/api/ota.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "codec/client_id.h"
#include "common/log.h"
#include "crypto/credential.h"
#include "gateway/api/http_api_int.h"
#include "gateway/http/http_server.h"

#define SUBJECT "ota"
#define JSON    "application/json"
#define BOARD   "{board}"
/* base64 of {"ip":"<45-char IPv6>"}: 4 * ceil(53 / 3) + NUL. */
#define USERNAME_CAP 80

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

/*
 * GROUP@@@MAC@@@UUID with "{board}" in the group replaced by the board
 * (cut so that the id stays within GW_CLIENT_ID_MAX; "unknown" when the
 * device named none). Checked as the broker will check it.
 */
static int make_client_id(const char *group, const struct gw_ota_request *r,
                          char out[GW_CLIENT_ID_MAX + 1])
{
    const char *hole = strstr(group, BOARD);
    const char *board = r->board[0] != '\0' ? r->board : "unknown";
    size_t fixed = strlen(group) + 6 + strlen(r->mac_part) + strlen(r->uuid);
    struct gw_client_id parsed;
    int board_len = 0, n;

    if (hole != NULL) {
        size_t rest = fixed - strlen(BOARD);
        size_t room = rest < GW_CLIENT_ID_MAX ? GW_CLIENT_ID_MAX - rest : 0;
        board_len = (int)(strlen(board) < room ? strlen(board) : room);
    } else {
        hole = group + strlen(group);
    }
    n = snprintf(out, GW_CLIENT_ID_MAX + 1, "%.*s%.*s%s@@@%s@@@%s",
                 (int)(hole - group), group, board_len, board,
                 *hole != '\0' ? hole + strlen(BOARD) : "", r->mac_part,
                 r->uuid);
    if (n < 0 || n > GW_CLIENT_ID_MAX ||
        gw_client_id_parse(out, (size_t)n, &parsed) != 0) {
        return GW_EPROTO;
    }
    return 0;
}

/* base64 of {"ip":"<peer>"}, as the xiaozhi manager makes it. */
static int make_username(const char *peer, char out[USERNAME_CAP])
{
    char json[64];
    int n;

    if (strncmp(peer, "::ffff:", 7) == 0 && strchr(peer + 7, '.') != NULL) {
        peer += 7; /* an IPv4 client on a dual-stack socket */
    }
    n = snprintf(json, sizeof(json), "{\"ip\":\"%s\"}", peer);
    if (n < 0 || (size_t)n >= sizeof(json)) {
        return GW_EINVAL;
    }
    EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)json, n);
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

int gw_ota_answer(const struct gw_config *cfg, const struct gw_ota_request *r,
                  const char *peer, int64_t now_ms, char **out, char *client_id)
{
    char id[GW_CLIENT_ID_MAX + 1];
    char username[USERNAME_CAP];
    char password[GW_CREDENTIAL_PASSWORD_LEN + 1];
    const char *key = cfg->ota.device_key;
    char *down = NULL, *text = NULL;
    cJSON *root = NULL, *mqtt, *st;
    int rc;

    *out = NULL;
    if ((rc = make_client_id(cfg->ota.group, r, id)) != 0 ||
        (rc = make_username(peer, username)) != 0 ||
        (rc = gw_credential_password_make(key, strlen(key), id, strlen(id),
                                          username, strlen(username), password,
                                          sizeof(password))) != 0) {
        goto out;
    }
    rc = GW_ENOMEM;
    down = make_down_topic(cfg->mqtt.down_topic, id);
    root = cJSON_CreateObject();
    mqtt = cJSON_AddObjectToObject(root, "mqtt");
    if (down == NULL || mqtt == NULL) {
        goto out;
    }
    cJSON_AddStringToObject(mqtt, "endpoint", cfg->ota.mqtt_endpoint);
    cJSON_AddStringToObject(mqtt, "client_id", id);
    cJSON_AddStringToObject(mqtt, "username", username);
    cJSON_AddStringToObject(mqtt, "password", password);
    cJSON_AddStringToObject(mqtt, "publish_topic", cfg->ota.publish_topic);
    cJSON_AddStringToObject(mqtt, "subscribe_topic", down);
    cJSON_AddNumberToObject(mqtt, "keepalive", cfg->ota.keepalive_s);
    st = cJSON_AddObjectToObject(root, "server_time");
    cJSON_AddNumberToObject(st, "timestamp", (double)now_ms);
    cJSON_AddNumberToObject(st, "timezone_offset",
                            cfg->ota.timezone_offset_min);
    add_firmware(root, cfg, r);
    text = cJSON_PrintUnformatted(root);
    if (text != NULL) {
        *out = text;
        if (client_id != NULL) {
            memcpy(client_id, id, strlen(id) + 1);
        }
        rc = 0;
    }
out:
    OPENSSL_cleanse(password, sizeof(password));
    cJSON_Delete(root);
    free(down);
    return rc;
}

/* ---- the endpoint ------------------------------------------------------ */

/* A refusal: one warning naming the client, {"error":why}, counted. */
static void refuse(struct gw_ota_stats *st, enum gw_ota_result result,
                   struct gw_http_req *req, int status, const char *why,
                   const char *const *headers)
{
    cJSON *doc = cJSON_CreateObject();
    char *text;

    st->results[result]++;
    gw_log_peer(status == 404 ? GW_LOG_DEBUG : GW_LOG_WARN,
                gw_http_req_peer(req), SUBJECT, "%s %.64s from %s: %d %s",
                gw_http_req_method(req), gw_http_req_path(req),
                gw_http_req_peer(req), status, why);
    cJSON_AddStringToObject(doc, "error", why);
    text = cJSON_PrintUnformatted(doc);
    cJSON_Delete(doc);
    if (text == NULL) {
        (void)gw_http_respond(req, 503, NULL, NULL, "", 0);
        return;
    }
    (void)gw_http_respond(req, status, JSON, headers, text, strlen(text));
    free(text);
}

bool gw__api_ota_head(const struct gw_config *cfg, struct gw_ota_stats *st,
                      struct gw_http_req *req)
{
    static const char *const allow[] = {"Allow: POST", NULL};

    if (!cfg->ota.enabled) {
        refuse(st, GW_OTA_OFF, req, 404, "not found", NULL);
        return false;
    }
    if (strcmp(gw_http_req_method(req), "POST") != 0) {
        refuse(st, GW_OTA_METHOD, req, 405, "method not allowed", allow);
        return false;
    }
    /* Anyone may ask: no more is read than the check's parser takes. */
    if (gw_http_content_length(gw_http_req_header(req, "content-length")) >
        GW_OTA_BODY_MAX) {
        refuse(st, GW_OTA_MALFORMED, req, 413, "the body is too large", NULL);
        return false;
    }
    return true;
}

static int64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void gw__api_ota_serve(const struct gw_config *cfg, struct gw_ota_stats *st,
                       struct gw_http_req *req)
{
    struct gw_ota_headers h = {
        .device_id = gw_http_req_header(req, "device-id"),
        .client_id = gw_http_req_header(req, "client-id"),
        .user_agent = gw_http_req_header(req, "user-agent"),
    };
    struct gw_ota_request r;
    char id[GW_CLIENT_ID_MAX + 1];
    const char *why = NULL, *body;
    char *text = NULL;
    size_t len;
    int rc;

    body = gw_http_req_body(req, &len);
    rc = gw_ota_request_parse(&h, body, len, &r, &why);
    if (rc != 0) {
        /* A body over the check's own bound was refused at its head
         * (gw__api_ota_head); counted with the malformed ones. */
        refuse(st, GW_OTA_MALFORMED, req, rc == GW_ETOOBIG ? 413 : 400, why,
               NULL);
        return;
    }
    rc = gw_ota_answer(cfg, &r, gw_http_req_peer(req), wall_ms(), &text, id);
    if (rc != 0) {
        gw_log(GW_LOG_ERROR, SUBJECT, "answer for %s failed: %s", r.mac,
               gw_strerror(rc));
        refuse(st, GW_OTA_FAILED, req, 503, "could not make credentials", NULL);
        return;
    }
    st->results[GW_OTA_ISSUED]++;
    if (r.body_ignored != NULL) {
        st->bodies_ignored++;
        gw_log_peer(
            GW_LOG_WARN, gw_http_req_peer(req), SUBJECT,
            "%s from %s: body ignored (%s), provisioned from the headers", id,
            gw_http_req_peer(req), r.body_ignored);
    }
    gw_log_peer(GW_LOG_INFO, gw_http_req_peer(req), SUBJECT,
                "%s from %s: credentials issued (board %s, firmware %s)", id,
                gw_http_req_peer(req), r.board[0] != '\0' ? r.board : "?",
                r.version[0] != '\0' ? r.version : "?");
    (void)gw_http_respond(req, 200, JSON, NULL, text, strlen(text));
    /* The password is in the text: wipe it before it goes back to the
     * allocator. */
    OPENSSL_cleanse(text, strlen(text));
    free(text);
}
