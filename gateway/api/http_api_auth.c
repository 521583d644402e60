/*
 * Who may drive the HTTP API: the Host a request names (DNS rebinding),
 * the Origin of a browser's page, and the bearer token (http.token).
 */
#include "gateway/api/http_api.h"

#include <string.h>
#include <strings.h>

#include <arpa/inet.h>

#include "crypto/credential.h"
#include "gateway/api/http_api_int.h"

/* scheme://host[:port] with a loopback host, as browsers send it. */
static bool origin_is_local(const char *origin)
{
    static const char *const hosts[] = {"localhost", "127.0.0.1", "[::1]"};
    const char *host;

    if (strncasecmp(origin, "http://", 7) == 0) {
        host = origin + 7;
    } else if (strncasecmp(origin, "https://", 8) == 0) {
        host = origin + 8;
    } else {
        return false;
    }
    for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
        size_t n = strlen(hosts[i]);
        const char *rest = host + n;
        if (strncasecmp(host, hosts[i], n) != 0) {
            continue;
        }
        if (*rest == '\0') {
            return true;
        }
        if (*rest != ':' || rest[1] == '\0') {
            return false;
        }
        return strspn(rest + 1, "0123456789") == strlen(rest + 1) &&
               strlen(rest + 1) <= 5;
    }
    return false;
}

/*
 * Browsers name the page's origin: only local pages and the configured
 * ones may drive the API (DNS rebinding, drive-by requests).
 */
bool gw_http_api_origin_ok(const struct gw_config *cfg, const char *origin)
{
    if (origin == NULL || origin_is_local(origin)) {
        return true;
    }
    for (size_t i = 0; i < cfg->http.n_allowed_origins; i++) {
        if (strcasecmp(origin, cfg->http.allowed_origins[i]) == 0) {
            return true;
        }
    }
    return false;
}

/* An IP literal (IPv6 without its brackets): never a rebound name. */
static bool is_ip_literal(const char *name)
{
    unsigned char addr[16];

    return inet_pton(AF_INET, name, addr) == 1 ||
           inet_pton(AF_INET6, name, addr) == 1;
}

static bool name_is(const char *name, const char *want)
{
    size_t n = strlen(want);

    if (want[0] == '[' && n >= 2 && want[n - 1] == ']') {
        want++; /* "[::1]" as http.listen names "::1" */
        n -= 2;
    }
    return strlen(name) == n && strncasecmp(name, want, n) == 0;
}

/*
 * A DNS rebinding page reaches the API under the attacker's name, which
 * its Host header carries: only IP literals, localhost names, the listen
 * name and http.allowed_hosts ("*" = any) get through.
 */
bool gw_http_api_host_ok(const struct gw_config *cfg, const char *host)
{
    char name[256];
    const char *end, *port;
    size_t n;

    if (host == NULL) {
        return true; /* HTTP/1.0 without one: no browser sends that */
    }
    if (host[0] == '[') {
        end = strchr(host, ']');
        if (end == NULL) {
            return false;
        }
        host++;
        port = end + 1;
    } else {
        end = host + strcspn(host, ":");
        port = end;
    }
    n = (size_t)(end - host);
    if (n == 0 || n >= sizeof(name) ||
        (*port != '\0' &&
         (*port != ':' || port[1] == '\0' || strlen(port + 1) > 5 ||
          strspn(port + 1, "0123456789") != strlen(port + 1)))) {
        return false;
    }
    memcpy(name, host, n);
    name[n] = '\0';
    if (n > 1 && name[n - 1] == '.') {
        name[--n] = '\0'; /* the absolute form of the same name */
    }
    if (is_ip_literal(name) || strcasecmp(name, "localhost") == 0 ||
        (n > 10 && strcasecmp(name + n - 10, ".localhost") == 0) ||
        name_is(name, cfg->http.listen)) {
        return true;
    }
    for (size_t i = 0; i < cfg->http.n_allowed_hosts; i++) {
        const char *h = cfg->http.allowed_hosts[i];
        if (strcmp(h, "*") == 0 || name_is(name, h)) {
            return true;
        }
    }
    return false;
}

/* The credential of an "Authorization: Bearer <credential>" value, or
 * NULL. */
static const char *bearer(const char *auth)
{
    if (auth == NULL || strncasecmp(auth, "Bearer ", 7) != 0) {
        return NULL;
    }
    return auth + 7 + strspn(auth + 7, " ");
}

bool gw_http_api_token_matches(const char *token, const char *auth)
{
    const char *given = bearer(auth);

    return token != NULL && token[0] != '\0' && given != NULL &&
           gw_credential_equal(token, strlen(token), given, strlen(given));
}

const char *gw__api_bearer(const struct gw_http_req *req)
{
    return bearer(gw_http_req_header(req, "authorization"));
}

/* http.token, when set, guards /metrics, /api/devices and /mcp. */
bool gw__api_token_ok(const struct gw_config *cfg, struct gw_http_req *req)
{
    static const char *const challenge[] = {
        "WWW-Authenticate: Bearer realm=\"hybridgw\"", NULL};
    const char *token = cfg->http.token;
    const char *given;

    if (token == NULL || token[0] == '\0') {
        return true;
    }
    given = gw__api_bearer(req);
    if (gw_http_api_token_matches(token,
                                  gw_http_req_header(req, "authorization"))) {
        return true;
    }
    gw__api_refuse(req, 401, false,
                   given == NULL ? "bearer token missing"
                                 : "bearer token wrong",
                   challenge);
    return false;
}
