/*
 * Backend urls (codec/ws_url.c), as the config checks them and the connect
 * splits them. The input is the url. A url that parses must split into
 * parts that lie in order inside it and meet the documented shape, and
 * must rebuild from its parts into a url that parses the same; the config
 * loader must accept exactly the urls the parser accepts, so that a
 * config that loads never names a backend the gateway cannot dial.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/ws_url.h"
#include "config/config.h"

#define URL_MAX 4096

static bool in_set(char c, const char *set)
{
    return c != '\0' && strchr(set, c) != NULL;
}

static void check_host(const struct gw_ws_url *u, bool bracketed)
{
    static const char name[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRST"
                               "UVWXYZ0123456789-._~";
    static const char ipv6[] = "0123456789abcdefABCDEF:.";

    if (u->host_len == 0) {
        abort();
    }
    for (size_t i = 0; i < u->host_len; i++) {
        if (!in_set(u->host[i], bracketed ? ipv6 : name)) {
            abort();
        }
    }
}

/* The parts tile the url: scheme, authority, path, then '#' or the end. */
static void check_parts(const char *url, size_t len, const struct gw_ws_url *u)
{
    size_t skip = u->tls ? 6 : 5;
    size_t end = skip + u->authority_len + u->path_len;
    bool bracketed = u->authority_len > 0 && u->authority[0] == '[';
    size_t host_end;

    if (memcmp(url, u->tls ? "wss://" : "ws://", skip) != 0 ||
        u->authority != url + skip ||
        u->path != u->authority + u->authority_len || end > len ||
        (end < len && url[end] != '#')) {
        abort();
    }
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char)url[i] <= ' ' || (unsigned char)url[i] >= 0x7f) {
            abort();
        }
    }
    for (size_t i = 0; i < u->authority_len; i++) {
        if (in_set(u->authority[i], "/?#@")) {
            abort();
        }
    }
    if (memchr(u->path, '#', u->path_len) != NULL ||
        (u->path_len > 0 && !in_set(u->path[0], "/?"))) {
        abort();
    }
    check_host(u, bracketed);
    if (u->host != u->authority + (bracketed ? 1 : 0)) {
        abort();
    }
    host_end = (size_t)(u->host - u->authority) + u->host_len;
    if (bracketed) {
        if (host_end >= u->authority_len || u->authority[host_end] != ']') {
            abort();
        }
        host_end++;
    }
    /* After the host: nothing (default port) or ':' and the port. */
    if (host_end == u->authority_len) {
        if (u->port != (u->tls ? 443 : 80)) {
            abort();
        }
    } else {
        const char *p = u->authority + host_end + 1;
        size_t n = u->authority_len - host_end - 1;
        long v = 0;
        if (u->authority[host_end] != ':' || n < 1 || n > 5) {
            abort();
        }
        for (size_t i = 0; i < n; i++) {
            if (p[i] < '0' || p[i] > '9') {
                abort();
            }
            v = v * 10 + (p[i] - '0');
        }
        if (v != u->port) {
            abort();
        }
    }
    if (u->port < 1 || u->port > 65535) {
        abort();
    }
}

/* scheme://host:port/path from the parts parses back to the same parts. */
static void check_rebuild(const struct gw_ws_url *u)
{
    static char again[URL_MAX + 64];
    bool bracketed = u->authority[0] == '[';
    struct gw_ws_url v;
    int n = snprintf(again, sizeof(again), "%s://%s%.*s%s:%d%.*s",
                     u->tls ? "wss" : "ws", bracketed ? "[" : "",
                     (int)u->host_len, u->host, bracketed ? "]" : "", u->port,
                     (int)u->path_len, u->path);

    if (n < 0 || (size_t)n >= sizeof(again)) {
        abort();
    }
    if (gw_ws_url_parse(again, (size_t)n, &v, NULL) != 0 || v.tls != u->tls ||
        v.port != u->port || v.host_len != u->host_len ||
        memcmp(v.host, u->host, u->host_len) != 0 ||
        v.path_len != u->path_len ||
        memcmp(v.path, u->path, u->path_len) != 0) {
        abort();
    }
}

/* The loader on a config whose one backend has this url. */
static void check_config(const char *url, size_t len, bool parsed)
{
    static char json[URL_MAX * 6 + 128];
    static char err[1024];
    struct gw_config *cfg = NULL;
    size_t n = 0;
    int rc;

    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)url[i];
        if (c == 0 || c >= 0x80) {
            return; /* not the same string once in JSON */
        }
    }
    n += (size_t)snprintf(json + n, sizeof(json) - n,
                          "{\"backends\":[{\"name\":\"m\",\"url\":\"");
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)url[i];
        if (c < 0x20 || c == '"' || c == '\\') {
            n += (size_t)snprintf(json + n, sizeof(json) - n, "\\u%04x", c);
        } else {
            json[n++] = (char)c;
        }
    }
    n += (size_t)snprintf(json + n, sizeof(json) - n, "\"}]}");
    rc = gw_config_load_string(json, n, "fuzz.json", &cfg, err, sizeof(err));
    if ((rc == 0) != parsed) {
        abort();
    }
    if (rc == 0) {
        if (strlen(cfg->backends[0].url) != len ||
            memcmp(cfg->backends[0].url, url, len) != 0) {
            abort();
        }
        gw_config_destroy(cfg);
    } else if (strstr(err, "backends[0].url: ") == NULL) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_ws_url u;
    const char *why = NULL;
    char *url;
    int rc;

    if (size > URL_MAX) {
        return 0;
    }
    /* Exact size and no NUL after it: an overread is caught. */
    url = malloc(size > 0 ? size : 1);
    if (url == NULL) {
        return 0;
    }
    if (size > 0) {
        memcpy(url, data, size);
    }
    rc = gw_ws_url_parse(url, size, &u, &why);
    if (rc == 0) {
        check_parts(url, size, &u);
        check_rebuild(&u);
    } else if (rc != GW_EINVAL || why == NULL || why[0] == '\0') {
        abort();
    }
    check_config(url, size, rc == 0);
    free(url);
    return 0;
}
