/*
 * The broker plugin's rules on arbitrary client ids, topics and
 * credentials: a device is only ever granted its own topics, rewrites and
 * downlinks name the right ones, no device id in the gateways' group gets
 * in, an accepted device is refused once its binding id is revoked, and a
 * presence payload is always JSON that carries the address back unchanged.
 * Input: client_id NUL topic NUL username NUL password.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "broker/policy.h"
#include "broker/revoked.h"
#include "codec/client_id.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct gw_broker_options opts;

static void setup(void)
{
    char err[256];

    if (opts.down_pattern != NULL) {
        return;
    }
    if (gw_broker_options_set(&opts, "device_key", "k", err, sizeof(err)) ||
        gw_broker_options_set(&opts, "gateway_username", "gw", err,
                              sizeof(err)) ||
        gw_broker_options_set(&opts, "gateway_password", "pw", err,
                              sizeof(err)) ||
        gw_broker_options_check(&opts, err, sizeof(err))) {
        abort();
    }
}

/* The fields of the input, each NUL-terminated in a copy; NULL if absent. */
static void split(char *buf, size_t size, const char *f[4])
{
    size_t at = 0;

    for (int i = 0; i < 4; i++) {
        f[i] = at <= size ? buf + at : NULL;
        at += f[i] != NULL ? strlen(buf + at) + 1 : 0;
    }
}

static void own_topic(const char *id, const char *channel, char *out,
                      size_t cap)
{
    if (gw_broker_topic_make(&opts, id, channel, out, cap) != 0) {
        out[0] = '\0';
    }
}

static void check_acl(const char *id, const char *topic)
{
    char up[GW_BROKER_TOPIC_MAX + 1];
    char down[GW_BROKER_TOPIC_MAX + 1];

    own_topic(id, "up", up, sizeof(up));
    own_topic(id, "down", down, sizeof(down));
    for (int access = 1; access <= 8; access <<= 1) {
        bool ok = gw_broker_acl_allows(&opts, GW_BROKER_ROLE_DEVICE, id, access,
                                       topic);
        bool own = (access == GW_BROKER_ACCESS_WRITE &&
                    (strcmp(topic, up) == 0 ||
                     strcmp(topic, opts.device_topic) == 0)) ||
                   ((access == GW_BROKER_ACCESS_READ ||
                     access == GW_BROKER_ACCESS_SUBSCRIBE) &&
                    strcmp(topic, down) == 0) ||
                   access == GW_BROKER_ACCESS_UNSUBSCRIBE;
        if (ok != own ||
            gw_broker_acl_allows(&opts, GW_BROKER_ROLE_NONE, id, access,
                                 topic) ||
            !gw_broker_acl_allows(&opts, GW_BROKER_ROLE_GATEWAY, id, access,
                                  topic)) {
            abort();
        }
    }
}

static void check_route(const char *id, const char *topic)
{
    char out[GW_BROKER_TOPIC_MAX + 1];
    char want[GW_BROKER_TOPIC_MAX + 1];

    switch (gw_broker_route_publish(&opts, GW_BROKER_ROLE_DEVICE, id, topic,
                                    out, sizeof(out))) {
    case GW_BROKER_ROUTE_REWRITE:
        own_topic(id, "up", want, sizeof(want));
        if (strcmp(topic, opts.device_topic) != 0 || strcmp(out, want) != 0) {
            abort();
        }
        break;
    case GW_BROKER_ROUTE_PASS:
        break;
    default:
        abort(); /* devices never send downlinks */
    }
    switch (gw_broker_route_publish(&opts, GW_BROKER_ROLE_GATEWAY, "gw", topic,
                                    out, sizeof(out))) {
    case GW_BROKER_ROUTE_DIRECT:
        own_topic(out, "down", want, sizeof(want));
        if (out[0] == '\0' || strchr(out, '/') != NULL ||
            strcmp(topic, want) != 0) {
            abort();
        }
        break;
    case GW_BROKER_ROUTE_REVOKE:
        /* The revocation topic exactly: taken by the plugin itself. */
        if (strcmp(topic, opts.revoke_topic) != 0) {
            abort();
        }
        break;
    case GW_BROKER_ROUTE_PASS:
    case GW_BROKER_ROUTE_DROP:
        break;
    default:
        abort();
    }
}

/* A broker run as the plugin names it: its start in ms. */
#define RUN UINT64_C(1795958784583)

static void check_presence(const char *address)
{
    char out[GW_BROKER_TOPIC_MAX * 7];
    int n = gw_broker_presence_format(true, address, 42, RUN, out, sizeof(out));

    if (n < 0) {
        return; /* longer than any address the broker reports */
    }
    cJSON *root = cJSON_Parse(out);
    cJSON *addr = cJSON_GetObjectItemCaseSensitive(root, "address");
    cJSON *run = cJSON_GetObjectItemCaseSensitive(root, "run");
    if (root == NULL || !cJSON_IsString(addr) ||
        strcmp(addr->valuestring, address) != 0 || (size_t)n != strlen(out) ||
        !cJSON_IsNumber(run) || run->valuedouble != (double)RUN) {
        abort();
    }
    cJSON_Delete(root);
}

/* An accepted device is refused once its binding id is revoked, and
 * accepted again by a revocation that leaves it. */
static void check_revoked(const char *id, const char *user, const char *pw,
                          uint64_t binding)
{
    struct gw_broker_revoked *r;
    uint64_t b2;

    if (gw_broker_revoked_create(&r) != 0) {
        return;
    }
    if (gw_broker_revoked_raise(r, id, binding + 1) != 1 ||
        gw_broker_auth_check(&opts, r, id, user, pw, &b2) !=
            GW_BROKER_AUTH_REVOKED ||
        b2 != 0) {
        abort();
    }
    gw_broker_revoked_destroy(r);
    if (binding == 0 || gw_broker_revoked_create(&r) != 0) {
        return;
    }
    if (gw_broker_revoked_raise(r, id, binding) != 1 ||
        gw_broker_auth_check(&opts, r, id, user, pw, &b2) !=
            GW_BROKER_AUTH_DEVICE ||
        b2 != binding) {
        abort();
    }
    gw_broker_revoked_destroy(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    const char *f[4];

    if (buf == NULL) {
        return 0;
    }
    setup();
    memcpy(buf, data, size);
    buf[size] = '\0';
    split(buf, size, f);
    const char *id = f[0];
    const char *topic = f[1] != NULL ? f[1] : "";

    uint64_t binding;
    enum gw_broker_auth a =
        gw_broker_auth_check(&opts, NULL, id, f[2], f[3], &binding);
    if (a == GW_BROKER_AUTH_DEVICE &&
        (f[3] == NULL || !gw_client_id_topic_safe(id, strlen(id)) ||
         strncasecmp(id, "hybridgw", 8) == 0)) {
        abort();
    }
    if (a == GW_BROKER_AUTH_DEVICE) {
        check_revoked(id, f[2], f[3], binding);
    } else if (binding != 0) {
        abort();
    }
    if (a == GW_BROKER_AUTH_GATEWAY &&
        (f[2] == NULL || f[3] == NULL || strcmp(f[2], "gw") != 0 ||
         strcmp(f[3], "pw") != 0)) {
        abort();
    }
    if (gw_client_id_topic_safe(id, strlen(id)) && strlen(id) <= 128) {
        check_acl(id, topic);
        check_route(id, topic);
    }
    check_presence(topic);
    free(buf);
    return 0;
}
