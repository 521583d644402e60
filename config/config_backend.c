/*
 * What the config says about a backend's upgrade request beyond single
 * keys: the extra headers an operator may add (and the ones the gateway
 * must keep to itself), and the url query the xiaozhi server needs for
 * the v2 framing.
 */
#include "config/config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "codec/ws_url.h"

#define GATEWAY_QUERY "?from=mqtt_gateway"

/* RFC 7230 section 3.2.6: tchar. */
static bool is_token(const char *s)
{
    static const char extra[] = "!#$%&'*+-.^_`|~";

    if (*s == '\0') {
        return false;
    }
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
              (c >= 'A' && c <= 'Z') || strchr(extra, c) != NULL)) {
            return false;
        }
    }
    return true;
}

/*
 * Headers the upgrade already carries (lws, gateway/backend/backend_open.c) or
 * that would change how the request is framed: a second copy would let
 * a config override the device's identity or confuse a proxy.
 */
static bool reserved(const char *name, enum gw_auth_scheme scheme)
{
    static const char *const names[] = {
        "host",           "connection",        "upgrade",
        "content-length", "transfer-encoding", "device-id",
        "client-id",      "protocol-version",  "x-forwarded-for",
    };

    if (strncasecmp(name, "sec-websocket-", 14) == 0) {
        return true;
    }
    if (strcasecmp(name, "authorization") == 0) {
        return scheme != GW_AUTH_NONE;
    }
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcasecmp(name, names[i]) == 0) {
            return true;
        }
    }
    return false;
}

const char *gw_config_header_check(const char *name, const char *value,
                                   enum gw_auth_scheme scheme)
{
    if (!is_token(name)) {
        return "is not a header name (letters, digits and "
               "!#$%&'*+-.^_`|~ only)";
    }
    if (strlen(name) > GW_HEADER_NAME_MAX) {
        return "header name is longer than 64 characters";
    }
    if (reserved(name, scheme)) {
        return strcasecmp(name, "authorization") == 0
                   ? "is set by auth.scheme; use one or the other"
                   : "is set by the gateway itself";
    }
    for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
        /* A CR or LF would end the header and start another; tabs and
         * non-ASCII bytes are refused too, as at connect time. */
        if (*p < 0x20 || *p >= 0x7f) {
            return "must be printable ASCII (no control characters)";
        }
    }
    if (strlen(value) > GW_HEADER_VALUE_MAX) {
        return "is longer than 1024 characters";
    }
    return NULL;
}

static bool has_gateway_query(const char *url)
{
    struct gw_ws_url u;
    size_t q = sizeof(GATEWAY_QUERY) - 1;

    if (gw_ws_url_parse(url, strlen(url), &u, NULL) != 0) {
        return true; /* refused elsewhere */
    }
    return u.path_len >= q &&
           memcmp(u.path + u.path_len - q, GATEWAY_QUERY, q) == 0;
}

/* A loopback name or address: what only this host reaches. */
static bool is_loopback(const char *host, size_t len)
{
    static const char *const names[] = {"localhost", "::1", "[::1]"};

    if (len >= 4 && strncmp(host, "127.", 4) == 0) {
        return true;
    }
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (len == strlen(names[i]) && strncasecmp(host, names[i], len) == 0) {
            return true;
        }
    }
    return false;
}

/* An OTA endpoint devices cannot use, or credentials naming a broker
 * only this host reaches (tests on one machine do this on purpose). */
static size_t ota_warnings(const struct gw_config *cfg, gw_config_warn_cb cb,
                           void *arg)
{
    const char *ep = cfg->ota.mqtt_endpoint;
    const char *listen = cfg->http.listen;
    size_t n = 0;

    if (!cfg->ota.enabled) {
        return 0;
    }
    if (cfg->http.port == 0) {
        n++;
        if (cb != NULL) {
            cb("ota.enabled",
               "the HTTP API is off (http.port 0), so nothing answers "
               "POST /xiaozhi/ota/",
               arg);
        }
    } else if (is_loopback(listen, strlen(listen))) {
        n++;
        if (cb != NULL) {
            cb("ota.enabled",
               "http.listen is a loopback address: devices on the network "
               "cannot reach POST /xiaozhi/ota/ (listen on an address they "
               "reach, e.g. 0.0.0.0)",
               arg);
        }
    }
    if (is_loopback(ep, strcspn(ep, ":"))) {
        n++;
        if (cb != NULL) {
            cb("ota.mqtt_endpoint",
               "a loopback address: a device given it connects to itself, "
               "not to the broker",
               arg);
        }
    }
    return n;
}

/* An unspecified address: the wildcard a socket binds, never a
 * destination. */
static bool is_unspecified(const char *host)
{
    return strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0 ||
           strcmp(host, "[::]") == 0;
}

/* Devices are told udp.public_host: one only this host reaches, while the
 * socket listens beyond it, is the "no audio" of a first deployment. */
static size_t udp_warnings(const struct gw_config *cfg, gw_config_warn_cb cb,
                           void *arg)
{
    const char *pub = cfg->udp.public_host, *bind = cfg->udp.bind;
    char text[320];

    if (is_loopback(bind, strlen(bind)) ||
        (!is_loopback(pub, strlen(pub)) && !is_unspecified(pub))) {
        return 0;
    }
    if (cb != NULL) {
        snprintf(text, sizeof(text),
                 "%s is %s while udp.bind %s is not loopback: devices on the "
                 "network are told to send their audio there and none "
                 "arrives (set the address they reach this gateway at)",
                 pub,
                 is_unspecified(pub) ? "unspecified" : "a loopback address",
                 bind);
        cb("udp.public_host", text, arg);
    }
    return 1;
}

size_t gw_config_warnings(const struct gw_config *cfg, gw_config_warn_cb cb,
                          void *arg)
{
    size_t n = 0;
    char path[64], text[320];

    for (size_t i = 0; i < cfg->n_backends; i++) {
        const struct gw_backend_config *be = &cfg->backends[i];

        if (be->framing != GW_FRAMING_V2 || has_gateway_query(be->url)) {
            continue;
        }
        n++;
        if (cb != NULL) {
            snprintf(path, sizeof(path), "backends[%zu].url", i);
            /* Backend names are short and plain (check_name). */
            snprintf(text, sizeof(text),
                     "backend %s: framing is v2 but the url does not end "
                     "with ?from=mqtt_gateway: xiaozhi-esp32-server then "
                     "sends bare Opus, which the gateway drops (add the "
                     "query, or set framing to raw for a server that "
                     "wants none)",
                     be->name);
            cb(path, text, arg);
        }
    }
    n += udp_warnings(cfg, cb, arg);
    return n + ota_warnings(cfg, cb, arg);
}
