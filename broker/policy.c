/*
 * Auth, ACL, routing and presence rules of the broker plugin
 * (docs/architecture.md section 2), built on the gateway's own client id, topic
 * and credential code so that broker and gateway agree on every id and
 * password.
 */
#include "broker/policy.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "codec/client_id.h"
#include "codec/device_username.h"
#include "codec/topic.h"
#include "crypto/credential.h"

static size_t text_len(const char *s)
{
    return s != NULL ? strlen(s) : 0;
}

static enum gw_broker_auth gateway_auth(const struct gw_broker_options *o,
                                        const char *password)
{
    if (password == NULL) {
        return GW_BROKER_AUTH_NO_PASSWORD;
    }
    if (!gw_credential_equal(o->gateway_password, strlen(o->gateway_password),
                             password, strlen(password))) {
        return GW_BROKER_AUTH_BAD_GATEWAY_PASSWORD;
    }
    return GW_BROKER_AUTH_GATEWAY;
}

/* A group the gateways' own client ids may start with ("hybridgw-1"). */
static bool reserved_group(const struct gw_client_id *id)
{
    return id->group_len >= 8 && strncasecmp(id->group, "hybridgw", 8) == 0;
}

/* The password held: the username's binding id against the revocation. */
static enum gw_broker_auth device_binding(const struct gw_broker_revoked *r,
                                          const char *client_id,
                                          const char *username,
                                          uint64_t *binding)
{
    uint64_t id, below;

    if (gw_device_username_binding(username, text_len(username), &id) != 0) {
        return GW_BROKER_AUTH_BAD_BINDING;
    }
    /* 0 (no "b": lab credentials) is below every revocation. */
    below = gw_broker_revoked_below(r, client_id);
    if (id < below) {
        return GW_BROKER_AUTH_REVOKED;
    }
    *binding = id;
    return GW_BROKER_AUTH_DEVICE;
}

enum gw_broker_auth
gw_broker_auth_check(const struct gw_broker_options *o,
                     const struct gw_broker_revoked *revoked,
                     const char *client_id, const char *username,
                     const char *password, uint64_t *binding)
{
    struct gw_client_id id;
    size_t id_len = text_len(client_id);
    uint64_t unused;

    if (binding == NULL) {
        binding = &unused;
    }
    *binding = 0;
    if (username != NULL &&
        gw_credential_equal(o->gateway_username, strlen(o->gateway_username),
                            username, strlen(username))) {
        return gateway_auth(o, password);
    }
    /* The id is checked before the password: its refusal says more. */
    int rc =
        gw_client_id_parse(client_id != NULL ? client_id : "", id_len, &id);
    if (rc == GW_EMALFORMED && id_len > 0) {
        return GW_BROKER_AUTH_NOT_DEVICE_ID;
    }
    if (rc != 0) {
        return GW_BROKER_AUTH_UNUSABLE_ID; /* empty, too long, not a level */
    }
    if (reserved_group(&id)) {
        return GW_BROKER_AUTH_RESERVED_GROUP;
    }
    if (password == NULL) {
        return GW_BROKER_AUTH_NO_PASSWORD;
    }
    rc = gw_credential_password_verify(
        o->device_key, o->device_key_len, client_id, id_len, username,
        text_len(username), password, strlen(password));
    if (rc == GW_EAUTH) {
        return GW_BROKER_AUTH_BAD_PASSWORD;
    }
    if (rc != 0) {
        return GW_BROKER_AUTH_FAILED;
    }
    return device_binding(revoked, client_id, username, binding);
}

enum gw_broker_role gw_broker_auth_role(enum gw_broker_auth a)
{
    switch (a) {
    case GW_BROKER_AUTH_GATEWAY:
        return GW_BROKER_ROLE_GATEWAY;
    case GW_BROKER_AUTH_DEVICE:
        return GW_BROKER_ROLE_DEVICE;
    default:
        return GW_BROKER_ROLE_NONE;
    }
}

const char *gw_broker_auth_text(enum gw_broker_auth a)
{
    switch (a) {
    case GW_BROKER_AUTH_GATEWAY:
        return "gateway account";
    case GW_BROKER_AUTH_DEVICE:
        return "device";
    case GW_BROKER_AUTH_NO_PASSWORD:
        return "no password";
    case GW_BROKER_AUTH_BAD_PASSWORD:
        return "bad password";
    case GW_BROKER_AUTH_BAD_GATEWAY_PASSWORD:
        return "bad password for the gateway account";
    case GW_BROKER_AUTH_UNUSABLE_ID:
        return "unusable client id (empty, too long, or not a topic level: "
               "'/', '+', '#', control characters)";
    case GW_BROKER_AUTH_NOT_DEVICE_ID:
        return "not a device client id (GROUP@@@MAC@@@UUID or GROUP@@@MAC)";
    case GW_BROKER_AUTH_FAILED:
        return "password check failed (crypto library)";
    case GW_BROKER_AUTH_RESERVED_GROUP:
        return "client id group reserved for gateways";
    case GW_BROKER_AUTH_BAD_BINDING:
        return "malformed binding id in the username";
    case GW_BROKER_AUTH_REVOKED:
        return "credentials revoked (unbound)";
    }
    return "unknown";
}

/* True if topic is exactly "<prefix>/<client_id>/<channel>". */
static bool is_own(const struct gw_broker_options *o, const char *client_id,
                   const char *channel, const char *topic)
{
    size_t id_len = strlen(client_id);

    if (strncmp(topic, o->topic_prefix, o->prefix_len) != 0) {
        return false;
    }
    topic += o->prefix_len;
    if (topic[0] != '/' || strncmp(topic + 1, client_id, id_len) != 0) {
        return false;
    }
    topic += 1 + id_len;
    return topic[0] == '/' && strcmp(topic + 1, channel) == 0;
}

bool gw_broker_acl_allows(const struct gw_broker_options *o,
                          enum gw_broker_role role, const char *client_id,
                          int access, const char *topic)
{
    if (role == GW_BROKER_ROLE_GATEWAY) {
        return true;
    }
    if (role != GW_BROKER_ROLE_DEVICE || client_id == NULL || topic == NULL) {
        return false;
    }
    switch (access) {
    case GW_BROKER_ACCESS_WRITE:
        return strcmp(topic, o->device_topic) == 0 ||
               is_own(o, client_id, "up", topic);
    case GW_BROKER_ACCESS_READ:
    case GW_BROKER_ACCESS_SUBSCRIBE:
        return is_own(o, client_id, "down", topic);
    case GW_BROKER_ACCESS_UNSUBSCRIBE:
        return true; /* dropping a subscription grants nothing */
    default:
        return false;
    }
}

bool gw_broker_will_allows(const struct gw_broker_options *o,
                           enum gw_broker_role role, int access,
                           const char *topic)
{
    const char *ip = o->gateway_instances_prefix;
    size_t n = ip != NULL ? strlen(ip) : 0;

    if (role != GW_BROKER_ROLE_GATEWAY || access != GW_BROKER_ACCESS_WRITE ||
        topic == NULL) {
        return false;
    }
    /* An instance record: <prefix>/<name>, one level, nothing deeper. */
    if (n > 0 && strncmp(topic, ip, n) == 0 && topic[n] == '/' &&
        topic[n + 1] != '\0' && strchr(topic + n + 1, '/') == NULL) {
        return true;
    }
    return o->gateway_status_topic != NULL &&
           o->gateway_status_topic[0] != '\0' &&
           strcmp(topic, o->gateway_status_topic) == 0;
}

enum gw_broker_route gw_broker_route_publish(const struct gw_broker_options *o,
                                             enum gw_broker_role role,
                                             const char *client_id,
                                             const char *topic, char *out,
                                             size_t cap)
{
    if (role == GW_BROKER_ROLE_DEVICE) {
        if (strcmp(topic, o->device_topic) != 0 ||
            gw_broker_topic_make(o, client_id, "up", out, cap) != 0) {
            return GW_BROKER_ROUTE_PASS;
        }
        return GW_BROKER_ROUTE_REWRITE;
    }
    if (role != GW_BROKER_ROLE_GATEWAY) {
        return GW_BROKER_ROUTE_PASS;
    }
    if (strcmp(topic, o->revoke_topic) == 0) {
        return GW_BROKER_ROUTE_REVOKE;
    }
    const char *target;
    size_t target_len;
    if (gw_topic_capture(o->down_pattern, topic, strlen(topic), &target,
                         &target_len) != 0) {
        return GW_BROKER_ROUTE_PASS;
    }
    if (target_len >= cap || target_len > GW_CLIENT_ID_MAX) {
        return GW_BROKER_ROUTE_DROP; /* longer than any device id */
    }
    memcpy(out, target, target_len);
    out[target_len] = '\0';
    return GW_BROKER_ROUTE_DIRECT;
}

int gw_broker_topic_make(const struct gw_broker_options *o,
                         const char *client_id, const char *channel, char *out,
                         size_t cap)
{
    int n = snprintf(out, cap, "%s/%s/%s", o->topic_prefix, client_id, channel);

    return n >= 0 && (size_t)n < cap ? 0 : GW_ENOSPC;
}

/* JSON string body of s; returns the bytes it needs, like snprintf. */
static size_t json_escape(const char *s, char *out, size_t cap)
{
    size_t n = 0;

    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        char esc[8];
        size_t len = 1;
        esc[0] = (char)*p;
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            len = 2;
        } else if (*p < 0x20) {
            len = (size_t)snprintf(esc, sizeof(esc), "\\u%04x", *p);
        }
        if (n + len < cap) {
            memcpy(out + n, esc, len);
        }
        n += len;
    }
    if (n < cap) {
        out[n] = '\0';
    }
    return n;
}

int gw_broker_presence_format(bool online, const char *address, uint64_t conn,
                              uint64_t run, char *out, size_t cap)
{
    char addr[GW_BROKER_TOPIC_MAX];
    int n;

    if (!online) {
        n = snprintf(out, cap,
                     "{\"state\":\"offline\",\"conn\":%" PRIu64
                     ",\"run\":%" PRIu64 "}",
                     conn, run);
    } else if (json_escape(address != NULL ? address : "", addr,
                           sizeof(addr)) >= sizeof(addr)) {
        return GW_ENOSPC;
    } else {
        n = snprintf(
            out, cap,
            "{\"state\":\"online\",\"address\":\"%s\",\"conn\":%" PRIu64
            ",\"run\":%" PRIu64 "}",
            addr, conn, run);
    }
    return n >= 0 && (size_t)n < cap ? n : GW_ENOSPC;
}
