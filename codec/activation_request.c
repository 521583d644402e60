/*
 * The activation request: all of the proof's members or none of them, so
 * that a device is never half-proven.
 */
#include "codec/activation_request.h"

#include <string.h>

#include <cjson/cJSON.h>

#include "codec/envelope.h"
#include "codec/hex.h"

#define SAFE_CHARS                                                             \
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"

static const char *const members[] = {"algorithm", "serial_number", "challenge",
                                      "hmac"};
enum { ALGORITHM, SERIAL, CHALLENGE, HMAC, MEMBERS };

static int fail(struct gw_activation_request *out, const char **why, int rc,
                const char *text)
{
    memset(out, 0, sizeof(*out));
    *why = text;
    return rc;
}

/* A string of 1..max characters of SAFE_CHARS into dst. */
static bool take_safe(const char *s, char *dst, size_t max)
{
    size_t n = strlen(s);

    if (n == 0 || n > max || strspn(s, SAFE_CHARS) != n) {
        return false;
    }
    memcpy(dst, s, n + 1);
    return true;
}

int gw_activation_request_parse(const char *body, size_t len,
                                struct gw_activation_request *out,
                                const char **why)
{
    const cJSON *m[MEMBERS];
    cJSON *root = NULL;
    int present = 0, rc;

    if (out == NULL || why == NULL || (body == NULL && len > 0)) {
        return GW_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    if (len == 0) {
        *why = NULL;
        return 0; /* an empty body is the `{}` of a device without serial */
    }
    rc = gw_json_object_parse(body, len, GW_ACTIVATION_BODY_MAX, &root);
    if (rc == GW_ETOOBIG) {
        return fail(out, why, rc, "the body is too large");
    }
    if (rc != 0) {
        return fail(out, why, GW_EMALFORMED, "the body must be a JSON object");
    }
    for (int i = 0; i < MEMBERS; i++) {
        if (gw_json_unique_member(root, members[i], &m[i]) != 0) {
            cJSON_Delete(root);
            return fail(out, why, GW_EPROTO, "a member is repeated");
        }
        if (m[i] != NULL && !cJSON_IsString(m[i])) {
            cJSON_Delete(root);
            return fail(out, why, GW_EPROTO,
                        "algorithm, serial_number, challenge and hmac must "
                        "be strings");
        }
        present += m[i] != NULL;
    }
    if (present == 0) {
        cJSON_Delete(root);
        *why = NULL;
        return 0;
    }
    if (present != MEMBERS) {
        rc = fail(out, why, GW_EPROTO,
                  "a proof needs algorithm, serial_number, challenge and "
                  "hmac");
    } else if (strcmp(m[ALGORITHM]->valuestring, "hmac-sha256") != 0) {
        rc = fail(out, why, GW_EPROTO, "the algorithm must be hmac-sha256");
    } else if (!take_safe(m[SERIAL]->valuestring, out->serial_number,
                          GW_ACTIVATION_SERIAL_MAX)) {
        rc = fail(out, why, GW_EPROTO, "serial_number is not usable");
    } else if (!take_safe(m[CHALLENGE]->valuestring, out->challenge,
                          GW_ACTIVATION_CHALLENGE_MAX)) {
        rc = fail(out, why, GW_EPROTO, "challenge is not usable");
    } else if (strlen(m[HMAC]->valuestring) != GW_ACTIVATION_HMAC_HEX ||
               gw_hex_decode(m[HMAC]->valuestring, GW_ACTIVATION_HMAC_HEX,
                             out->hmac, sizeof(out->hmac)) != 0) {
        rc = fail(out, why, GW_EPROTO,
                  "hmac must be 64 hex digits (HMAC-SHA256)");
    } else {
        out->proof = true;
        *why = NULL;
        rc = 0;
    }
    cJSON_Delete(root);
    return rc;
}
