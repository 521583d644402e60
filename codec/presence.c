/* Presence payloads from the broker side; see presence.h. */
#include "codec/presence.h"

#include <arpa/inet.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "codec/envelope.h"

#define MAX_SAFE_INTEGER 9007199254740991.0 /* 2^53 - 1: exact in a double */

static bool ip_literal(const char *s)
{
    unsigned char addr[sizeof(struct in6_addr)];

    return inet_pton(AF_INET, s, addr) == 1 ||
           inet_pton(AF_INET6, s, addr) == 1;
}

/* A member that must be an integer in 0..2^53-1 when present. */
static int read_count(const cJSON *item, bool *has, uint64_t *out)
{
    double v;

    if (item == NULL) {
        return 0;
    }
    v = item->valuedouble;
    if (!cJSON_IsNumber(item) || !(v >= 0 && v <= MAX_SAFE_INTEGER) ||
        v != (double)(uint64_t)v) {
        return GW_EPROTO;
    }
    *has = true;
    *out = (uint64_t)v;
    return 0;
}

static int read_presence(const cJSON *root, struct gw_presence *out)
{
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(root, "state");
    const cJSON *address = cJSON_GetObjectItemCaseSensitive(root, "address");
    const cJSON *conn = cJSON_GetObjectItemCaseSensitive(root, "conn");

    if (!cJSON_IsString(state)) {
        return GW_EPROTO;
    }
    if (strcmp(state->valuestring, "online") == 0) {
        out->online = true;
    } else if (strcmp(state->valuestring, "offline") != 0) {
        return GW_EPROTO;
    }
    if (address != NULL) {
        const char *ip = cJSON_GetStringValue(address);
        size_t len = ip != NULL ? strlen(ip) : 0;
        /* "[v6]", as an EMQX peername gives it, is taken without the
         * brackets. */
        if (len >= 2 && ip[0] == '[' && ip[len - 1] == ']') {
            ip++;
            len -= 2;
        }
        if (ip == NULL || len > GW_PRESENCE_ADDRESS_MAX) {
            return GW_EPROTO;
        }
        memcpy(out->address, ip, len);
        out->address[len] = '\0';
        if (!ip_literal(out->address)) {
            return GW_EPROTO;
        }
    }
    if (read_count(conn, &out->has_conn, &out->conn) != 0 ||
        read_count(cJSON_GetObjectItemCaseSensitive(root, "run"), &out->has_run,
                   &out->run) != 0) {
        return GW_EPROTO;
    }
    return 0;
}

int gw_presence_parse(const char *buf, size_t len, struct gw_presence *out)
{
    cJSON *root = NULL;
    int err;

    if (out == NULL) {
        return GW_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    if (buf == NULL && len != 0) {
        return GW_EINVAL;
    }
    if (len == 0) {
        return 0; /* a cleared retained message: offline */
    }
    err = gw_json_object_parse(buf, len, GW_PRESENCE_MAX_LEN, &root);
    if (err == 0) {
        err = read_presence(root, out);
    }
    cJSON_Delete(root);
    if (err != 0) {
        memset(out, 0, sizeof(*out));
    }
    return err;
}

int gw_presence_run_parse(const char *buf, size_t len, uint64_t *run)
{
    cJSON *root = NULL;
    bool has = false;
    int err;

    *run = 0;
    if (buf == NULL) {
        return GW_EINVAL;
    }
    err = gw_json_object_parse(buf, len, GW_PRESENCE_MAX_LEN, &root);
    if (err == 0 && (read_count(cJSON_GetObjectItemCaseSensitive(root, "run"),
                                &has, run) != 0 ||
                     !has || *run == 0)) {
        err = GW_EPROTO;
    }
    cJSON_Delete(root);
    if (err != 0) {
        *run = 0;
    }
    return err;
}
