/*
 * A backend url split into what the connect needs: ws[s]://host[:port]
 * [/path][?query][#fragment]. One parser for the config's check and the
 * connect, so a url that loads is a url that connects.
 */
#ifndef GW_CODEC_WS_URL_H
#define GW_CODEC_WS_URL_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* The parts point into the parsed url; nothing is copied or decoded. */
struct gw_ws_url {
    bool tls;              /* wss:// */
    const char *authority; /* host[:port] as written: the Host header */
    size_t authority_len;
    const char *host; /* without IPv6 brackets: what to connect to */
    size_t host_len;
    int port;         /* as written, else 80 or 443 */
    const char *path; /* verbatim up to '#': may be empty or start '?' */
    size_t path_len;
};

/*
 * Splits url[0..len) (no NUL needed, none allowed). The scheme is
 * lowercase ws:// or wss://; every byte is printable ASCII (the host and
 * path go into request headers as they are); the host is a name of
 * letters, digits, '-', '.', '_' and '~', or an IPv6 literal of hex
 * digits, ':' and '.' in brackets; the port, if written, is 1 to 5 digits
 * of 1..65535; no user@ part. A fragment is cut, never sent. Returns 0 or
 * GW_EINVAL; on GW_EINVAL *why (if why is not NULL) says what is wrong,
 * and *out is left unchanged.
 */
GW_MUST_CHECK int gw_ws_url_parse(const char *url, size_t len,
                                  struct gw_ws_url *out, const char **why);

#endif /* GW_CODEC_WS_URL_H */
