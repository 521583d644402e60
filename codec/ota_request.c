/*
 * The OTA check request: headers first (they name the device, and the
 * credentials are bound to them), then the body, which must agree.
 */
#include "codec/ota_request.h"

#include <string.h>

#include <cjson/cJSON.h>

#include "codec/envelope.h"
#include "codec/hex.h"

#define UUID_CHARS                                                             \
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"

/* "aa:bb:cc:dd:ee:ff" in either case into lowercase mac and mac_part. */
static bool take_mac(const char *s, char mac[18], char part[18])
{
    static const char digits[] = "0123456789abcdef";

    if (s == NULL || strlen(s) != 17) {
        return false;
    }
    for (size_t k = 0; k < 6; k++) {
        int hi = gw_hex_nibble(s[3 * k]);
        int lo = gw_hex_nibble(s[3 * k + 1]);
        if (hi < 0 || lo < 0 || (k < 5 && s[3 * k + 2] != ':')) {
            return false;
        }
        mac[3 * k] = part[3 * k] = digits[hi];
        mac[3 * k + 1] = part[3 * k + 1] = digits[lo];
        if (k < 5) {
            mac[3 * k + 2] = ':';
            part[3 * k + 2] = '_';
        }
    }
    mac[17] = part[17] = '\0';
    return true;
}

bool gw_ota_version_valid(const char *s)
{
    size_t digits = 0, n = s != NULL ? strlen(s) : 0;

    if (n == 0 || n > GW_OTA_VERSION_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] >= '0' && s[i] <= '9') {
            if (++digits > 9) {
                return false; /* the firmware's stoi would throw */
            }
        } else if (s[i] == '.' && digits > 0) {
            digits = 0;
        } else {
            return false;
        }
    }
    return digits > 0;
}

/* Copies at most cap - 1 bytes of src[0..n), anything outside
 * [A-Za-z0-9_.-] made '_', so the result can be a client id part. */
static void take_board(char *dst, size_t cap, const char *src, size_t n)
{
    size_t i;

    for (i = 0; i < n && i + 1 < cap; i++) {
        dst[i] =
            strchr(UUID_CHARS, src[i]) != NULL && src[i] != '\0' ? src[i] : '_';
    }
    dst[i] = '\0';
}

/* A string member of obj, or NULL. */
static const char *member(const cJSON *obj, const char *name)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, name);

    return cJSON_IsString(item) ? item->valuestring : NULL;
}

/* board and version from the body, else from "<board>/<version>". */
static void describe(const cJSON *root, const char *ua,
                     struct gw_ota_request *out)
{
    const char *board =
        member(cJSON_GetObjectItemCaseSensitive(root, "board"), "type");
    const char *version = member(
        cJSON_GetObjectItemCaseSensitive(root, "application"), "version");
    const char *slash = ua != NULL ? strrchr(ua, '/') : NULL;

    if (board != NULL && board[0] != '\0') {
        take_board(out->board, sizeof(out->board), board, strlen(board));
    } else if (slash != NULL) {
        take_board(out->board, sizeof(out->board), ua, (size_t)(slash - ua));
    }
    if (version == NULL && slash != NULL) {
        version = slash + 1;
    }
    if (gw_ota_version_valid(version)) {
        memcpy(out->version, version, strlen(version) + 1);
    }
}

static int fail(struct gw_ota_request *out, const char **why, int rc,
                const char *text)
{
    memset(out, 0, sizeof(*out));
    *why = text;
    return rc;
}

int gw_ota_request_parse(const struct gw_ota_headers *h, const char *body,
                         size_t len, struct gw_ota_request *out,
                         const char **why)
{
    static const char *const body_why[] = {
        "the body must be the device's system information, a JSON object",
        "the body is too large",
        "the body is not UTF-8",
    };
    const char *uuid, *s;
    char mac[18], part[18];
    cJSON *root = NULL;
    size_t n;
    int rc;

    if (h == NULL || out == NULL || why == NULL || (body == NULL && len > 0)) {
        return GW_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    if (h->device_id == NULL) {
        return fail(out, why, GW_EPROTO, "Device-Id header missing");
    }
    if (!take_mac(h->device_id, out->mac, out->mac_part)) {
        return fail(out, why, GW_EPROTO,
                    "Device-Id is not a MAC address like aa:bb:cc:dd:ee:ff");
    }
    uuid = h->client_id;
    if (uuid == NULL) {
        return fail(out, why, GW_EPROTO, "Client-Id header missing");
    }
    n = strlen(uuid);
    if (n == 0 || n > GW_OTA_UUID_MAX || strspn(uuid, UUID_CHARS) != n) {
        return fail(out, why, GW_EPROTO,
                    "Client-Id must be 1 to 64 letters, digits, '-', '_' "
                    "or '.' (the device's uuid)");
    }
    memcpy(out->uuid, uuid, n + 1);
    rc = gw_json_object_parse(body, len, GW_OTA_BODY_MAX, &root);
    if (rc == GW_ETOOBIG) {
        return fail(out, why, rc, body_why[1]);
    }
    if (rc != 0) {
        /* The headers suffice (see the header comment): root stays NULL
         * and the User-Agent describes the device. */
        out->body_ignored = body_why[rc == GW_EUTF8 ? 2 : 0];
        root = NULL;
    }
    s = member(root, "mac_address");
    if (s != NULL && (!take_mac(s, mac, part) || strcmp(mac, out->mac) != 0)) {
        cJSON_Delete(root);
        return fail(out, why, GW_EPROTO,
                    "the body's mac_address is not the Device-Id header");
    }
    s = member(root, "uuid");
    if (s != NULL && strcmp(s, out->uuid) != 0) {
        cJSON_Delete(root);
        return fail(out, why, GW_EPROTO,
                    "the body's uuid is not the Client-Id header");
    }
    describe(root, h->user_agent, out);
    cJSON_Delete(root);
    *why = NULL;
    return 0;
}
