/*
 * The validators the key tables name (config_schema.c): each checks, and
 * may normalise, one value already stored, and says what is wrong in a
 * few words, never the value (the key's path says which one it is).
 */
#include "config/config_int.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "codec/ota_request.h"
#include "codec/ws_url.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

const char *gw__config_check_nonempty(void *field)
{
    return **(char **)field == '\0' ? "must not be empty" : NULL;
}

/* A rate libopus codes at directly (no resampling in the gateway). */
const char *gw__config_check_opus_rate(void *field)
{
    int v = *(int *)field;

    return v == 8000 || v == 12000 || v == 16000 || v == 24000 || v == 48000
               ? NULL
               : "must be 8000, 12000, 16000, 24000 or 48000";
}

/* Names appear in logs, metrics and MQTT client ids: keep them plain. */
const char *gw__config_check_name(void *field)
{
    const char *s = *(char **)field;
    size_t len = strlen(s);

    if (len == 0) {
        return "must not be empty";
    }
    if (len > 64) {
        return "is longer than 64 characters";
    }
    if (strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                  "0123456789._-") != len) {
        return "may contain only letters, digits, '.', '_' and '-'";
    }
    return NULL;
}

/* A URL used verbatim: one of two scheme prefixes (bad_scheme otherwise),
 * no spaces or control characters, and a host. */
static const char *url_shape(const char *s, const char *plain,
                             const char *secure, const char *bad_scheme)
{
    const char *host;

    if (strncmp(s, plain, strlen(plain)) == 0) {
        host = s + strlen(plain);
    } else if (strncmp(s, secure, strlen(secure)) == 0) {
        host = s + strlen(secure);
    } else {
        return bad_scheme;
    }
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p <= ' ' || *p == 0x7f) {
            return "must not contain spaces or control characters";
        }
    }
    if (*host == '\0' || strchr(":/?#@", *host) != NULL) {
        return "has no host";
    }
    return NULL;
}

/* The URL is used verbatim (docs/protocol.md section 6), so only its shape. */
const char *gw__config_check_url(void *field)
{
    const char *s = *(char **)field;
    const char *why;
    struct gw_ws_url parts;

    why = url_shape(s, "ws://", "wss://", "scheme must be ws:// or wss://");
    if (why != NULL) {
        return why;
    }
    /* What the connect will make of it: a url that loads must connect. */
    if (gw_ws_url_parse(s, strlen(s), &parts, &why) != 0) {
        return why;
    }
    return NULL;
}

/* An MCP server's Streamable HTTP endpoint, used verbatim by the client. */
const char *gw__config_check_http_url(void *field)
{
    return url_shape(*(char **)field, "http://", "https://",
                     "scheme must be http:// or https://");
}

/*
 * An MCP server's endpoint goes to libcurl as written: credentials in it
 * would go out as Basic auth (and into logs), a byte over 0x7e is not a
 * URL's.
 */
const char *gw__config_check_mcp_server_url(void *field)
{
    const char *s = *(char **)field;
    const char *why = gw__config_check_http_url(field);

    if (why != NULL) {
        return why;
    }
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p > 0x7e) {
            return "must be ASCII (no byte over 0x7e)";
        }
    }
    const char *host = strstr(s, "://") + 3;
    if (memchr(host, '@', strcspn(host, "/?#")) != NULL) {
        return "must not contain user:password@ (use auth.token)";
    }
    return NULL;
}

/* A URL handed to devices, or "" for none. */
const char *gw__config_check_optional_http_url(void *field)
{
    return **(char **)field == '\0' ? NULL : gw__config_check_http_url(field);
}

/* Sent in an HTTP header: a CR or LF would end it and start another. */
const char *gw__config_check_header_value(void *field)
{
    for (const unsigned char *p = *(unsigned char **)field; *p; p++) {
        if (*p < 0x20 || *p == 0x7f) {
            return "must not contain control characters";
        }
    }
    return NULL;
}

/* Subscription filters with one '+' level standing for the client id. */
const char *gw__config_check_level_topic(void *field)
{
    const char *s = *(char **)field;
    size_t plus = 0;

    if (strchr(s, '#') != NULL) {
        return "must not contain '#'";
    }
    for (const char *level = s;; level++) {
        size_t len = strcspn(level, "/");
        if (memchr(level, '+', len) != NULL) {
            if (len != 1) {
                return "'+' must be a whole topic level";
            }
            plus++;
        }
        level += len;
        if (*level == '\0') {
            break;
        }
    }
    return plus == 1 ? NULL : "needs exactly one '+' level (the client id)";
}

/* The gateway's own state topic: "" (none) or a plain topic. */
const char *gw__config_check_status_topic(void *field)
{
    const char *s = *(char **)field;

    return strpbrk(s, "+#") != NULL ? "must not contain '+' or '#'" : NULL;
}

/* cluster.topic_prefix: records go to <prefix>/<name>, one level below. */
const char *gw__config_check_cluster_prefix(void *field)
{
    const char *s = *(char **)field;
    size_t len = strlen(s);

    if (len == 0) {
        return "must not be empty";
    }
    if (strpbrk(s, "+#") != NULL) {
        return "must not contain '+' or '#'";
    }
    if (s[len - 1] == '/' || s[0] == '/') {
        return "must not begin or end with '/'";
    }
    return len > 128 ? "is longer than 128 characters" : NULL;
}

/* cluster.instance: "" (take mqtt.client_id) or a name. */
const char *gw__config_check_cluster_name(void *field)
{
    return **(char **)field == '\0' ? NULL : gw__config_check_name(field);
}

/* A topic the gateway publishes to: no wildcards, one placeholder. */
const char *gw__config_check_down_topic(void *field)
{
    static const char hole[] = "{client_id}";
    const char *s = *(char **)field;
    const char *at = strstr(s, hole);

    if (strpbrk(s, "+#") != NULL) {
        return "must not contain '+' or '#'";
    }
    if (at == NULL || strstr(at + 1, hole) != NULL) {
        return "must contain {client_id} exactly once";
    }
    return NULL;
}

/* Accepts either case and stores lowercase, as devices are matched. */
const char *gw__config_check_mac(void *field)
{
    char *s = *(char **)field;

    if (strlen(s) != 17) {
        return "is not a MAC address like aa:bb:cc:dd:ee:ff";
    }
    for (size_t i = 0; i < 17; i++) {
        char c = s[i];
        if (i % 3 == 2) {
            if (c != ':') {
                return "is not a MAC address like aa:bb:cc:dd:ee:ff";
            }
        } else if (c >= 'A' && c <= 'F') {
            s[i] = (char)(c - 'A' + 'a');
        } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return "is not a MAC address like aa:bb:cc:dd:ee:ff";
        }
    }
    return NULL;
}

/* A client id is a topic level (docs/protocol.md section 1). */
const char *gw__config_check_client_id(void *field)
{
    const char *s = *(char **)field;

    if (*s == '\0') {
        return "must not be empty";
    }
    return strpbrk(s, "/+#") ? "must not contain '/', '+' or '#'" : NULL;
}

/* The group is part 1 of GROUP@@@MAC@@@UUID. */
const char *gw__config_check_group(void *field)
{
    const char *why = gw__config_check_client_id(field);

    if (why == NULL && strstr(*(char **)field, "@@@") != NULL) {
        why = "must not contain '@@@'";
    }
    return why;
}

/*
 * The Node gateway refuses to start its API with a guessable key; here a
 * weak key is a config error instead, named by its path.
 */
const char *gw__config_check_manager_key(void *field)
{
    static const char *const weak[] = {"test",     "1234",   "admin",
                                       "password", "qwerty", "xiaozhi"};
    const char *s = *(char **)field;
    bool upper = false, lower = false;

    if (s[0] == '\0') {
        return NULL; /* off */
    }
    if (strlen(s) < 8) {
        return "must be at least 8 characters";
    }
    for (const char *p = s; *p != '\0'; p++) {
        upper = upper || (*p >= 'A' && *p <= 'Z');
        lower = lower || (*p >= 'a' && *p <= 'z');
    }
    if (!upper || !lower) {
        return "must mix upper and lower case letters";
    }
    for (size_t i = 0; i < COUNT(weak); i++) {
        if (strcasestr(s, weak[i]) != NULL) {
            return "contains a guessable word";
        }
    }
    return NULL;
}

/* An Origin header value: scheme "://" host [":" port], nothing else. */
const char *gw__config_check_origin(void *field)
{
    const char *s = *(char **)field;
    const char *host = strstr(s, "://");

    if (host == NULL || host == s || host[3] == '\0') {
        return "must look like scheme://host[:port]";
    }
    for (const char *p = host + 3; *p != '\0'; p++) {
        if (*p == '/' || *p == ' ' || (unsigned char)*p < 0x21) {
            return "must look like scheme://host[:port]";
        }
    }
    return NULL;
}

/* http.ui_dir: opened for each request, so relative to nothing. */
const char *gw__config_check_ui_dir(void *field)
{
    const char *s = *(char **)field;

    if (s[0] == '\0') {
        return NULL; /* the page is off */
    }
    if (s[0] != '/') {
        return "must be an absolute path (or \"\" to turn the page off)";
    }
    if (strlen(s) > 1024) {
        return "is longer than 1024 characters";
    }
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f) {
            return "must not contain control characters";
        }
    }
    return NULL;
}

/* A Host header name: a DNS name or IP literal without port, or "*". */
const char *gw__config_check_host(void *field)
{
    const char *s = *(char **)field;

    if (s[0] == '\0' || strlen(s) > 253 ||
        strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                  "0123456789.-_:[]*") != strlen(s) ||
        (strchr(s, '*') != NULL && strcmp(s, "*") != 0)) {
        return "must be a host name or IP address (no port), or \"*\"";
    }
    return NULL;
}

/* ota.mqtt_endpoint: the firmware splits "host[:port]" at the first ':'
 * and reads the port with stoi, so one colon at most and a plain port. */
const char *gw__config_check_ota_endpoint(void *field)
{
    const char *s = *(char **)field;
    const char *colon = strchr(s, ':');
    long port = 0;

    if (s[0] == '\0') {
        return NULL; /* checked with ota.enabled */
    }
    if (colon == s || strlen(s) > 253 ||
        strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                  "0123456789.-_:") != strlen(s)) {
        return "must be host or host:port (no scheme, no IPv6 literal)";
    }
    if (colon != NULL) {
        if (colon[1] == '\0' || strlen(colon + 1) > 5 ||
            strspn(colon + 1, "0123456789") != strlen(colon + 1)) {
            return "must be host or host:port (no scheme, no IPv6 literal)";
        }
        port = strtol(colon + 1, NULL, 10);
        if (port < 1 || port > 65535) {
            return "port must be 1..65535";
        }
    }
    return NULL;
}

/* ota.group: part 1 of the client id, where "{board}" stands for the
 * device's board type. No '@' at all: "GID@@" would join the separator
 * into "@@@@@" and move the parts. Not "hybridgw...": the broker plugin
 * keeps that prefix for the gateways. */
const char *gw__config_check_ota_group(void *field)
{
    const char *why = gw__config_check_group(field);

    if (why == NULL && strncasecmp(*(char **)field, "hybridgw", 8) == 0) {
        why = "must not start with \"hybridgw\" (the broker keeps that "
              "prefix for gateways)";
    }
    if (why == NULL && strchr(*(char **)field, '@') != NULL) {
        why = "must not contain '@'";
    }
    if (why == NULL && strlen(*(char **)field) > 32) {
        why = "must be at most 32 characters";
    }
    return why;
}

/* ota.publish_topic: the topic devices publish to, a plain topic. */
const char *gw__config_check_publish_topic(void *field)
{
    const char *s = *(char **)field;

    if (s[0] == '\0') {
        return "must not be empty (a device with none sends nothing)";
    }
    return strpbrk(s, "+#") != NULL ? "must not contain '+' or '#'" : NULL;
}

/* ota.serial_key: every device key derives from it, so it must not be
 * guessable; the value is a secret and never appears in a message. */
const char *gw__config_check_serial_key(void *field)
{
    const char *s = *(char **)field;

    return s[0] != '\0' && strlen(s) < 16
               ? "must be at least 16 characters (or \"\": no device binds "
                 "itself)"
               : NULL;
}

/* ota.revoke_topic: a plain topic the gateway publishes to. */
const char *gw__config_check_revoke_topic(void *field)
{
    const char *s = *(char **)field;

    if (s[0] == '\0') {
        return "must not be empty (the broker plugin's "
               "plugin_opt_revoke_topic)";
    }
    return strpbrk(s, "+#") != NULL ? "must not contain '+' or '#'" : NULL;
}

/* The firmware compares versions as dot-separated numbers (stoi). */
const char *gw__config_check_fw_version(void *field)
{
    const char *s = *(char **)field;

    return s[0] == '\0' || gw_ota_version_valid(s)
               ? NULL
               : "must be dot-separated numbers like 2.4.2";
}

const char *gw__config_check_fw_url(void *field)
{
    return **(char **)field == '\0' ? NULL : gw__config_check_http_url(field);
}
