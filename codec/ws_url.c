/* Backend urls: ws[s]://host[:port][/path][?query], checked and split. */
#include "codec/ws_url.h"

#include <string.h>

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_alnum(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_hex(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool name_char(char c)
{
    return is_alnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

static bool ipv6_char(char c)
{
    return is_hex(c) || c == ':' || c == '.';
}

/* 1..5 digits, 1..65535. */
static bool parse_port(const char *s, size_t n, int *port)
{
    int v = 0;

    if (n == 0 || n > 5) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_digit(s[i])) {
            return false;
        }
        v = v * 10 + (s[i] - '0');
    }
    if (v < 1 || v > 65535) {
        return false;
    }
    *port = v;
    return true;
}

static int refuse(const char **why, const char *reason)
{
    if (why != NULL) {
        *why = reason;
    }
    return GW_EINVAL;
}

int gw_ws_url_parse(const char *url, size_t len, struct gw_ws_url *out,
                    const char **why)
{
    struct gw_ws_url u = {0};
    size_t skip, auth_end, frag;
    const char *port = NULL;
    size_t port_len = 0;

    if (url == NULL || out == NULL) {
        return refuse(why, "is missing");
    }
    if (len >= 5 && memcmp(url, "ws://", 5) == 0) {
        skip = 5;
        u.port = 80;
    } else if (len >= 6 && memcmp(url, "wss://", 6) == 0) {
        skip = 6;
        u.tls = true;
        u.port = 443;
    } else {
        return refuse(why, "scheme must be ws:// or wss://");
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)url[i];
        if (c <= ' ' || c >= 0x7f) {
            return refuse(why, "must be printable ASCII without spaces");
        }
    }
    auth_end = skip;
    while (auth_end < len && strchr("/?#", url[auth_end]) == NULL) {
        auth_end++;
    }
    u.authority = url + skip;
    u.authority_len = auth_end - skip;
    if (memchr(u.authority, '@', u.authority_len) != NULL) {
        return refuse(why, "must not carry user@ credentials");
    }
    if (u.authority_len > 0 && u.authority[0] == '[') {
        const char *close = memchr(u.authority, ']', u.authority_len);
        size_t after;
        if (close == NULL) {
            return refuse(why, "has an unclosed '['");
        }
        u.host = u.authority + 1;
        u.host_len = (size_t)(close - u.host);
        after = (size_t)(close + 1 - u.authority);
        if (after < u.authority_len) {
            if (close[1] != ':') {
                return refuse(why, "has text after ']'");
            }
            port = close + 2;
            port_len = u.authority_len - after - 1;
        }
        for (size_t i = 0; i < u.host_len; i++) {
            if (!ipv6_char(u.host[i])) {
                return refuse(why, "has a bad IPv6 address");
            }
        }
    } else {
        const char *colon = memchr(u.authority, ':', u.authority_len);
        u.host = u.authority;
        u.host_len =
            colon != NULL ? (size_t)(colon - u.authority) : u.authority_len;
        if (colon != NULL) {
            port = colon + 1;
            port_len = u.authority_len - u.host_len - 1;
        }
        for (size_t i = 0; i < u.host_len; i++) {
            if (!name_char(u.host[i])) {
                return refuse(why, "has a bad character in the host");
            }
        }
    }
    if (u.host_len == 0) {
        return refuse(why, "has no host");
    }
    if (port != NULL && !parse_port(port, port_len, &u.port)) {
        return refuse(why, "port must be 1-65535");
    }
    /* The path goes out exactly as configured: the xiaozhi server picks
     * its framing from the query. Only a fragment, never sent, is cut. */
    frag = auth_end;
    while (frag < len && url[frag] != '#') {
        frag++;
    }
    u.path = url + auth_end;
    u.path_len = frag - auth_end;
    *out = u;
    return 0;
}
