/* Device MQTT usernames and the binding id in them; see device_username.h. */
#include "codec/device_username.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "codec/envelope.h"

/* The JSON under the base64: at most this many bytes. */
#define JSON_MAX (GW_DEVICE_USERNAME_MAX / 4 * 3)

static const char alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Standard base64 with padding, as OpenSSL's EVP_EncodeBlock. */
static size_t encode(const unsigned char *in, size_t len, char *out)
{
    size_t n = 0;

    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        size_t left = len - i;
        if (left > 1) {
            v |= (uint32_t)in[i + 1] << 8;
        }
        if (left > 2) {
            v |= in[i + 2];
        }
        out[n++] = alphabet[(v >> 18) & 63];
        out[n++] = alphabet[(v >> 12) & 63];
        out[n++] = left > 1 ? alphabet[(v >> 6) & 63] : '=';
        out[n++] = left > 2 ? alphabet[v & 63] : '=';
    }
    out[n] = '\0';
    return n;
}

static int sextet(char c)
{
    const char *p = c != '\0' ? strchr(alphabet, c) : NULL;

    return p != NULL ? (int)(p - alphabet) : -1;
}

/* Strict decode of padded base64 (len a multiple of 4, at most two '=' at
 * the end, unused bits zero). Returns the bytes written, or -1. */
static int decode(const char *in, size_t len, unsigned char *out)
{
    size_t n = 0;

    if (len == 0 || len % 4 != 0) {
        return -1;
    }
    for (size_t i = 0; i < len; i += 4) {
        bool last = i + 4 == len;
        int pad = last && in[i + 3] == '=' ? (in[i + 2] == '=' ? 2 : 1) : 0;
        int s[4];
        for (int k = 0; k < 4; k++) {
            s[k] = k >= 4 - pad ? 0 : sextet(in[i + (size_t)k]);
            if (s[k] < 0) {
                return -1;
            }
        }
        uint32_t v = (uint32_t)s[0] << 18 | (uint32_t)s[1] << 12 |
                     (uint32_t)s[2] << 6 | (uint32_t)s[3];
        if ((pad == 1 && (v & 0xff) != 0) || (pad == 2 && (v & 0xffff) != 0)) {
            return -1; /* bits that the padding says are not there */
        }
        out[n++] = (unsigned char)(v >> 16);
        if (pad < 2) {
            out[n++] = (unsigned char)(v >> 8);
        }
        if (pad < 1) {
            out[n++] = (unsigned char)v;
        }
    }
    return (int)n;
}

int gw_device_username_make(const char *peer, uint64_t binding_id, char *out,
                            size_t cap)
{
    char json[JSON_MAX + 1];
    size_t len;
    int n;

    if (peer == NULL || out == NULL ||
        binding_id > GW_DEVICE_USERNAME_BINDING_MAX) {
        return GW_EINVAL;
    }
    if (strncmp(peer, "::ffff:", 7) == 0 && strchr(peer + 7, '.') != NULL) {
        peer += 7; /* an IPv4 client on a dual-stack socket */
    }
    len = strnlen(peer, GW_DEVICE_USERNAME_PEER_MAX + 1);
    if (len > GW_DEVICE_USERNAME_PEER_MAX) {
        return GW_EINVAL;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)peer[i];
        /* Addresses are ASCII; anything else would need escaping or
         * would not read back as UTF-8. */
        if (c < 0x20 || c > 0x7e || c == '"' || c == '\\') {
            return GW_EINVAL;
        }
    }
    if (binding_id == 0) {
        n = snprintf(json, sizeof(json), "{\"ip\":\"%s\"}", peer);
    } else {
        n = snprintf(json, sizeof(json), "{\"ip\":\"%s\",\"b\":%" PRIu64 "}",
                     peer, binding_id);
    }
    if (n < 0 || (size_t)n >= sizeof(json)) {
        return GW_EINVAL; /* cannot happen: both are bounded above */
    }
    if (cap < ((size_t)n + 2) / 3 * 4 + 1) {
        return GW_ENOSPC;
    }
    return (int)encode((const unsigned char *)json, (size_t)n, out);
}

int gw_device_username_binding(const char *username, size_t len, uint64_t *id)
{
    unsigned char json[JSON_MAX + 1];
    const cJSON *b;
    cJSON *root;
    int n, rc = 0;

    if (id == NULL || (username == NULL && len > 0)) {
        return GW_EINVAL;
    }
    *id = 0;
    if (len > GW_DEVICE_USERNAME_MAX || (n = decode(username, len, json)) < 0 ||
        gw_json_object_parse((const char *)json, (size_t)n, JSON_MAX, &root) !=
            0) {
        return 0; /* not one of ours: a manager's username, or none */
    }
    if (gw_json_unique_member(root, "b", &b) != 0) {
        rc = GW_EMALFORMED; /* two ids: which one? */
    } else if (b != NULL) {
        double v = cJSON_IsNumber(b) ? b->valuedouble : 0;
        /* The range first: a cast of a double out of range is undefined. */
        if (v >= 1 && v <= (double)GW_DEVICE_USERNAME_BINDING_MAX &&
            v == (double)(uint64_t)v) {
            *id = (uint64_t)v;
        } else {
            rc = GW_EMALFORMED;
        }
    }
    cJSON_Delete(root);
    return rc;
}
