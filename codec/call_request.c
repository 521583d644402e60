/*
 * The device-call bodies of the manager-api: two MAC addresses and a
 * nickname, or one MAC. Everything is copied out of the JSON tree into
 * fixed buffers, so the caller keeps no pointer into the body.
 */
#include "codec/call_request.h"

#include <string.h>

#include <cjson/cJSON.h>

#include "codec/envelope.h"
#include "codec/hex.h"

int gw_call_mac_normalize(const char *in, size_t len,
                          char out[GW_CALL_MAC_SIZE])
{
    static const char digits[] = "0123456789abcdef";

    if (in == NULL || len != GW_CALL_MAC_SIZE - 1) {
        return GW_EMALFORMED;
    }
    for (size_t i = 0; i < len; i++) {
        if (i % 3 == 2) {
            /* One separator throughout, as a device id or a MAC writes it. */
            if ((in[i] != ':' && in[i] != '_' && in[i] != '-') ||
                in[i] != in[2]) {
                return GW_EMALFORMED;
            }
            out[i] = ':';
            continue;
        }
        int v = gw_hex_nibble(in[i]);
        if (v < 0) {
            return GW_EMALFORMED;
        }
        out[i] = digits[v];
    }
    out[len] = '\0';
    return 0;
}

/* A string member that is present and non-empty, else NULL. */
static const char *string_of(const cJSON *root, const char *name)
{
    const char *s =
        cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, name));

    return s != NULL && s[0] != '\0' ? s : NULL;
}

/* Copies at most max bytes of the UTF-8 string s, never half a character. */
static void copy_utf8(char *dst, size_t max, const char *s)
{
    size_t n = strlen(s);

    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) {
            n--; /* s[n] continues a character: cut before its start */
        }
    }
    memcpy(dst, s, n);
    dst[n] = '\0';
}

static int parse_root(const char *buf, size_t len, cJSON **root,
                      const char **why)
{
    int err = gw_json_object_parse(buf, len, GW_CALL_BODY_MAX, root);

    if (err != 0) {
        *why = err == GW_ETOOBIG ? "body too large"
                                 : "body must be one JSON object";
    }
    return err;
}

int gw_call_request_parse(const char *buf, size_t len,
                          struct gw_call_request *out, const char **why)
{
    cJSON *root = NULL;
    const char *caller, *target;
    const cJSON *nick;
    int err;

    memset(out, 0, sizeof(*out));
    *why = "";
    if ((err = parse_root(buf, len, &root, why)) != 0) {
        return err;
    }
    caller = string_of(root, "caller_mac");
    target = string_of(root, "target_mac");
    nick = cJSON_GetObjectItemCaseSensitive(root, "caller_nickname");
    if (caller == NULL || target == NULL) {
        *why = "missing required fields: caller_mac, target_mac";
        err = GW_ENOENT;
    } else if (gw_call_mac_normalize(caller, strlen(caller), out->caller_mac) !=
               0) {
        *why = "caller_mac is not a MAC address";
        err = GW_EPROTO;
    } else if (gw_call_mac_normalize(target, strlen(target), out->target_mac) !=
               0) {
        *why = "target_mac is not a MAC address";
        err = GW_EPROTO;
    } else if (nick != NULL && !cJSON_IsNull(nick) && !cJSON_IsString(nick)) {
        *why = "caller_nickname must be a string";
        err = GW_EPROTO;
    } else if (cJSON_IsString(nick)) {
        copy_utf8(out->nickname, GW_CALL_NICKNAME_MAX, nick->valuestring);
    }
    cJSON_Delete(root);
    if (err != 0) {
        memset(out, 0, sizeof(*out));
    }
    return err;
}

int gw_call_accept_parse(const char *buf, size_t len,
                         struct gw_call_accept *out, const char **why)
{
    cJSON *root = NULL;
    const char *mac;
    int err;

    memset(out, 0, sizeof(*out));
    *why = "";
    if ((err = parse_root(buf, len, &root, why)) != 0) {
        return err;
    }
    mac = string_of(root, "mac");
    if (mac == NULL) {
        *why = "missing required field: mac";
        err = GW_ENOENT;
    } else if (gw_call_mac_normalize(mac, strlen(mac), out->mac) != 0) {
        *why = "mac is not a MAC address";
        err = GW_EPROTO;
    }
    cJSON_Delete(root);
    if (err != 0) {
        memset(out, 0, sizeof(*out));
    }
    return err;
}
