/*
 * The HTTP API's request handling on arbitrary requests, without a socket:
 * the input is a request as a client writes it (request line, header
 * lines, body). Its parts go through the API's own server (detached:
 * Content-Length, the head checks of Host, Origin and the bearer or daily
 * token before any body is read, then the routes), and through the
 * checks alone, which must agree with what the server answered: nothing
 * that fails Host, Origin or the token is ever served.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "config/config.h"
#include "gateway/api/http_api.h"
#include "gateway/core/config_hold.h"
#include "gateway/core/counters.h"
#include "gateway/device/device_table.h"
#include "gateway/device/publish.h"
#include "gateway/http/http_server.h"
#include "gateway/mcp/mcp_server.h"
#include "gateway/session/device_call.h"
#include "gateway/session/session.h"

#define TOKEN       "fuzz-bearer-7c1"
#define MANAGER_KEY "Fuzz-Manager-Q8x"
#define DEVICE      "GID_test@@@02_00_00_00_00_01@@@fuzz-1"
#define MAX_HEADERS 32
#define INPUT_MAX   65536

static const char config_text[] =
    "{\"backends\":[{\"name\":\"main\",\"url\":\"ws://127.0.0.1:9/\"}],"
    "\"http\":{\"listen\":\"127.0.0.1\",\"port\":0,\"token\":\"" TOKEN "\","
    "\"manager_key\":\"" MANAGER_KEY "\","
    "\"allowed_origins\":[\"https://console.example\"],"
    "\"allowed_hosts\":[\"gw.example\"],\"max_body_bytes\":4096},"
    "\"mcp\":{\"discover\":false,\"max_sessions\":8}}";

static struct {
    uv_loop_t loop;
    struct gw_config_live config;
    struct gw_publisher pub;
    struct gw_counters counters;
    struct gw_device_table devices;
    struct gw_sessions sessions;
    struct gw_device_calls calls;
    struct gw_mcp_server *mcp;
    struct gw_http_api *api;
} W;

static void world_init(void)
{
    struct gw_config *cfg = NULL;
    char err[256];
    struct gw_presence online = {.online = true};

    gw_log_set_level(GW_LOG_ERROR);
    if (uv_loop_init(&W.loop) != 0 ||
        gw_config_load_string(config_text, sizeof(config_text) - 1, "fuzz",
                              &cfg, err, sizeof(err)) != 0 ||
        gw_config_live_init(&W.config, cfg) != 0) {
        abort();
    }
    W.pub.config = &W.config; /* no broker link: publishes fail */
    gw_device_table_init(&W.devices, &W.loop, &W.config, &W.pub);
    struct gw_session_env senv = {.loop = &W.loop,
                                  .config = &W.config,
                                  .pub = &W.pub,
                                  .devices = &W.devices,
                                  .counters = &W.counters};
    gw_sessions_init(&W.sessions, &senv);
    struct gw_device_calls_env cenv = {.loop = &W.loop,
                                       .config = &W.config,
                                       .pub = &W.pub,
                                       .devices = &W.devices,
                                       .sessions = &W.sessions};
    gw_device_calls_init(&W.calls, &cenv);
    struct gw_mcp_server_env menv = {
        .loop = &W.loop, .config = &W.config, .devices = &W.devices};
    if (gw_mcp_server_init(&menv, &W.mcp) != 0) {
        abort();
    }
    struct gw_http_api_env aenv = {
        .loop = &W.loop,
        .config = &W.config,
        .devices = &W.devices,
        .sessions = &W.sessions,
        .calls = &W.calls,
        .mcp_server = W.mcp,
        .metrics = {.loop = &W.loop,
                    .counters = &W.counters,
                    .sessions = &W.sessions,
                    .devices = &W.devices,
                    .calls = &W.calls,
                    .mcp_server = W.mcp},
        .detached = true,
    };
    if (gw_http_api_init(&aenv, &W.api) != 0 || W.api == NULL ||
        gw_device_on_presence(&W.devices, DEVICE, &online) < 0) {
        abort();
    }
}

/* A request split as the server's parser would hand it over. */
struct parsed {
    char method[16];
    char *target;
    const char *headers[2 * MAX_HEADERS];
    size_t n_headers;
    const char *body;
    size_t body_len;
};

/* Cuts text (NUL-terminated, writable) into request line, headers, body;
 * false when there is no request line. */
static bool parse(char *text, size_t len, struct parsed *p)
{
    char *line = text, *end, *sp;

    memset(p, 0, sizeof(*p));
    end = strchr(line, '\n');
    if (end == NULL) {
        return false;
    }
    *end = '\0';
    line[strcspn(line, "\r")] = '\0';
    sp = strchr(line, ' ');
    if (sp == NULL || (size_t)(sp - line) >= sizeof(p->method)) {
        return false;
    }
    memcpy(p->method, line, (size_t)(sp - line));
    p->target = sp + 1;
    p->target[strcspn(p->target, " ")] = '\0';
    for (line = end + 1; (end = strchr(line, '\n')) != NULL; line = end + 1) {
        char *colon;
        *end = '\0';
        line[strcspn(line, "\r")] = '\0';
        if (line[0] == '\0') {
            line = end + 1;
            break;
        }
        colon = strchr(line, ':');
        if (colon == NULL || p->n_headers == MAX_HEADERS) {
            continue;
        }
        *colon = '\0';
        for (size_t n = strlen(colon + 1);
             n > 0 && (colon[n] == ' ' || colon[n] == '\t'); n--) {
            colon[n] = '\0'; /* trailing blanks: lws drops them */
        }
        p->headers[2 * p->n_headers] = line;
        p->headers[2 * p->n_headers + 1] = colon + 1 + strspn(colon + 1, " \t");
        p->n_headers++;
    }
    p->body = line;
    p->body_len = len - (size_t)(line - text);
    return true;
}

/* The last value of a header among the parsed ones (any case). */
static const char *header_of(const struct parsed *p, const char *name)
{
    const char *v = NULL;

    for (size_t i = 0; i < p->n_headers; i++) {
        if (strcasecmp(p->headers[2 * i], name) == 0) {
            v = v == NULL ? p->headers[2 * i + 1] : "";
        }
    }
    return v; /* "" for a repeated one: the server joins them */
}

static void upper(char *dst, const char *src, size_t cap)
{
    size_t i = 0;

    for (; src[i] != '\0' && i + 1 < cap; i++) {
        dst[i] = src[i] >= 'a' && src[i] <= 'z' ? (char)(src[i] - 32) : src[i];
    }
    dst[i] = '\0';
}

/* The pure checks on their own: their documented properties. */
static void check_pure(const struct parsed *p)
{
    const struct gw_config *cfg = gw_config_live_get(&W.config);
    char big[512];

    for (size_t i = 0; i < p->n_headers; i++) {
        const char *v = p->headers[2 * i + 1];
        long long n = gw_http_content_length(v);
        if (n == -1 || (n >= 0 && (v[0] == '\0' ||
                                   strspn(v, "0123456789") != strlen(v)))) {
            abort();
        }
        if (n >= 0 && strlen(v) < 13 && n != strtoll(v, NULL, 10)) {
            abort();
        }
        /* Host and Origin: letter case never matters. */
        if (strlen(v) < sizeof(big)) {
            upper(big, v, sizeof(big));
            if (gw_http_api_host_ok(cfg, v) != gw_http_api_host_ok(cfg, big) ||
                gw_http_api_origin_ok(cfg, v) !=
                    gw_http_api_origin_ok(cfg, big)) {
                abort();
            }
        }
        /* A token only ever matches itself, after "Bearer ". */
        if (gw_http_api_token_matches(TOKEN, v) &&
            (strncasecmp(v, "Bearer ", 7) != 0 ||
             strcmp(v + strlen(v) - strlen(TOKEN), TOKEN) != 0)) {
            abort();
        }
        if (gw_http_api_token_matches("", v)) {
            abort();
        }
    }
    if (gw_http_api_host_ok(cfg, "evil.example") ||
        !gw_http_api_host_ok(cfg, NULL)) {
        abort();
    }
}

static bool under(const char *path, const char *base)
{
    size_t n = strlen(base);

    return strncmp(path, base, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool ready;
    static char text[INPUT_MAX + 1];
    struct parsed p;
    const struct gw_config *cfg;
    const char *host, *origin, *auth;
    char path[INPUT_MAX + 1];
    int status;

    if (!ready) {
        world_init();
        ready = true;
    }
    if (size > INPUT_MAX) {
        return 0;
    }
    memcpy(text, data, size);
    text[size] = '\0';
    if (!parse(text, size, &p)) {
        return 0;
    }
    check_pure(&p);
    cfg = gw_config_live_get(&W.config);
    status =
        gw_http_api_inject(W.api, p.method, p.target, p.headers, p.n_headers,
                           p.body, p.body_len, 1 + size % 1500);
    (void)uv_run(&W.loop, UV_RUN_NOWAIT); /* closes what ended */
    if (status == GW_EPROTO) {
        return 0; /* a request line lws would not have passed */
    }
    if (status != 0 && (status < 200 || status > 599)) {
        abort();
    }
    if (status == 400 || status == 411 || status == 413) {
        return 0; /* refused by the server before the head checks */
    }
    host = header_of(&p, "host");
    origin = header_of(&p, "origin");
    auth = header_of(&p, "authorization");
    if ((host != NULL && host[0] == '\0') ||
        (origin != NULL && origin[0] == '\0') ||
        (auth != NULL && auth[0] == '\0')) {
        return 0; /* repeated: joined by the server, not judged here */
    }
    snprintf(path, sizeof(path), "%.*s", (int)strcspn(p.target, "?"), p.target);
    if (!gw_http_api_host_ok(cfg, host) && status != 421) {
        abort(); /* DNS rebinding got through */
    }
    if (gw_http_api_host_ok(cfg, host) && !gw_http_api_origin_ok(cfg, origin) &&
        status != 403) {
        abort();
    }
    if ((status == 200 || status == 202 || status == 0) &&
        (under(path, "/metrics") || under(path, "/mcp") ||
         under(path, "/api/broadcast") ||
         (under(path, "/api/devices") &&
          strcmp(path, "/api/devices/status") != 0)) &&
        !gw_http_api_token_matches(TOKEN, auth)) {
        abort(); /* served without the bearer token */
    }
    return 0;
}
