/*
 * Opening a backend connection: the url split as configured, the upgrade
 * headers and the auth scheme, the client vhost of a backend's own CA,
 * and the connect call itself.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libwebsockets.h>

#include "codec/ws_url.h"
#include "common/cacheline.h"
#include "common/log.h"
#include "crypto/credential.h"
#include "gateway/backend/backend_ws_int.h"

#define DEFAULT_MAX_MESSAGE (64 * 1024)
#define AUTH_MAX            2048 /* "Bearer <token>" */
#define GATEWAY_QUERY       "?from=mqtt_gateway"

/* ---- opening ---------------------------------------------------------- */

/* Header values are peer- or config-supplied: no CR, LF or controls. */
static bool header_safe(const char *s)
{
    for (; *s != '\0'; s++) {
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f) {
            return false;
        }
    }
    return true;
}

/* The config checked them; a config built in code is checked here. */
static bool extra_headers_safe(const struct gw_backend_config *be)
{
    for (size_t i = 0; i < be->n_headers; i++) {
        if (gw_config_header_check(be->headers[i].name, be->headers[i].value,
                                   be->auth.scheme) != NULL) {
            return false;
        }
    }
    return true;
}

static int make_authorization(const struct gw_backend_connect *params,
                              const char *client_id, char *out, size_t cap)
{
    const struct gw_backend_config *be = params->backend;
    char token[GW_CREDENTIAL_BACKEND_TOKEN_MAX];
    int rc;

    switch (be->auth.scheme) {
    case GW_AUTH_NONE:
        out[0] = '\0';
        return 0;
    case GW_AUTH_BEARER:
        if (be->auth.token == NULL || be->auth.token[0] == '\0' ||
            !header_safe(be->auth.token) ||
            (size_t)snprintf(out, cap, "Bearer %s", be->auth.token) >= cap) {
            return GW_EINVAL;
        }
        return 0;
    case GW_AUTH_XIAOZHI_HMAC:
        if (be->auth.secret == NULL) {
            return GW_EINVAL;
        }
        rc = gw_credential_backend_token_make(
            be->auth.secret, strlen(be->auth.secret), client_id,
            strlen(client_id), params->device_id, strlen(params->device_id),
            (int64_t)time(NULL), token, sizeof(token));
        if (rc != 0) {
            return rc;
        }
        snprintf(out, cap, "Bearer %s", token);
        return 0;
    }
    return GW_EINVAL;
}

/* Copies n bytes and a NUL to *arena, returns the copy. */
static const char *arena_put(char **arena, const char *s, size_t n)
{
    char *copy = *arena;

    memcpy(copy, s, n);
    copy[n] = '\0';
    *arena += n + 1;
    return copy;
}

/* The config's extra headers as "name:" NUL value NUL, one pair each. */
static size_t headers_size(const struct gw_backend_config *be)
{
    size_t n = 0;

    for (size_t i = 0; i < be->n_headers; i++) {
        n += strlen(be->headers[i].name) + strlen(be->headers[i].value) + 3;
    }
    return n;
}

static void headers_put(struct gw_backend_conn *conn,
                        const struct gw_backend_config *be, char **arena)
{
    conn->extra_headers = *arena;
    conn->n_extra_headers = be->n_headers;
    for (size_t i = 0; i < be->n_headers; i++) {
        size_t len = strlen(be->headers[i].name);
        memcpy(*arena, be->headers[i].name, len);
        (*arena)[len] = ':';
        *arena += len + 1;
        arena_put(arena, "", 0);
        arena_put(arena, be->headers[i].value, strlen(be->headers[i].value));
    }
}

static struct gw_backend_conn *
conn_create(const struct gw_backend_connect *params, const struct gw_ws_url *u,
            const char *client_id, const char *authorization)
{
    const struct gw_backend_config *be = params->backend;
    const char *fwd = params->forwarded_for;
    bool bare = u->path_len == 0 || u->path[0] == '?'; /* needs a '/' */
    size_t need = strlen(be->name) + strlen(params->device_id) +
                  strlen(client_id) + (fwd != NULL ? strlen(fwd) : 0) +
                  strlen(authorization) + u->host_len + u->authority_len +
                  u->path_len + 1 + 9 + headers_size(be);
    /* The fields a frame reads, first in the struct, on one line. */
    struct gw_backend_conn *conn = gw_calloc_lines(sizeof(*conn) + need);
    char *arena;

    if (conn == NULL) {
        return NULL;
    }
    conn->fd = -1; /* known once open */
    arena = (char *)(conn + 1);
    headers_put(conn, be, &arena);
    conn->name = arena_put(&arena, be->name, strlen(be->name));
    /* Not copied: the owner updates it once the session has its id. */
    conn->subject =
        params->log_subject != NULL ? params->log_subject : "backend";
    conn->device_id =
        arena_put(&arena, params->device_id, strlen(params->device_id));
    conn->client_id = arena_put(&arena, client_id, strlen(client_id));
    if (fwd != NULL && fwd[0] != '\0') {
        conn->forwarded_for = arena_put(&arena, fwd, strlen(fwd));
    }
    if (authorization[0] != '\0') {
        conn->authorization =
            arena_put(&arena, authorization, strlen(authorization));
    }
    conn->address = arena_put(&arena, u->host, u->host_len);
    conn->host = arena_put(&arena, u->authority, u->authority_len);
    /* A url with no path, or only a query, still needs the leading '/'. */
    conn->path = arena;
    if (bare) {
        *arena++ = '/';
    }
    memcpy(arena, u->path, u->path_len);
    arena[u->path_len] = '\0';
    /* As the xiaozhi server tests it: the request ends with the query. */
    conn->gateway_query =
        u->path_len >= sizeof(GATEWAY_QUERY) - 1 &&
        memcmp(u->path + u->path_len - (sizeof(GATEWAY_QUERY) - 1),
               GATEWAY_QUERY, sizeof(GATEWAY_QUERY) - 1) == 0;
    conn->port = u->port;
    conn->tls = u->tls;
    conn->framing = be->framing;
    conn->pcm_sample_rate = be->pcm_sample_rate;
    conn->connect_timeout_ms =
        be->connect_timeout_ms > 0 ? be->connect_timeout_ms : 5000;
    conn->max_message = params->max_message_bytes > 0
                            ? params->max_message_bytes
                            : DEFAULT_MAX_MESSAGE;
    return conn;
}

/* The client vhost trusting ca_file, created on first use. */
static struct lws_vhost *ca_vhost(struct gw_backend_ws *bws,
                                  const char *ca_file)
{
    struct lws_context_creation_info info;
    struct ca_vhost *ca;

    for (ca = bws->ca; ca != NULL; ca = ca->next) {
        if (strcmp(ca->path, ca_file) == 0) {
            return ca->vh;
        }
    }
    ca = calloc(1, sizeof(*ca) + strlen(ca_file) + 1);
    if (ca == NULL) {
        return NULL;
    }
    strcpy(ca->path, ca_file);
    snprintf(ca->name, sizeof(ca->name), "ca-%u", bws->n_ca);
    memset(&info, 0, sizeof(info));
    info.options = LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
    info.port = CONTEXT_PORT_NO_LISTEN;
    info.protocols = gw__backend_protocols;
    info.vhost_name = ca->name;
    info.client_ssl_ca_filepath = ca->path;
    info.connect_timeout_secs = LWS_STAGE_TIMEOUT_S;
    ca->vh = lws_create_vhost(bws->lws.ctx, &info);
    if (ca->vh == NULL) {
        free(ca);
        return NULL;
    }
    ca->next = bws->ca;
    bws->ca = ca;
    bws->n_ca++;
    return ca->vh;
}

/* Hands the connection to lws, the address already numeric. */
static void conn_connect(struct gw_backend_conn *conn)
{
    struct gw_backend_ws *bws = conn->bws;
    struct lws_client_connect_info ci;

    memset(&ci, 0, sizeof(ci));
    ci.context = bws->lws.ctx;
    ci.vhost = conn->vh;
    /*
     * lws connects to the IP; the name stays in ci.host, which lws sends
     * as the Host header and also uses for SNI and the certificate's
     * name check (it strips the port). Any callback lws makes from
     * inside this call can only gw__backend_finish() the connection,
     * which defers on_close to the loop.
     */
    ci.address = conn->ip;
    ci.port = conn->port;
    ci.path = conn->path;
    ci.host = conn->host;
    ci.ssl_connection = conn->tls ? LCCSCF_USE_SSL : 0;
    ci.local_protocol_name = PROTOCOL_NAME;
    ci.userdata = conn;
    ci.pwsi = &conn->wsi;
    ci.retry_and_idle_policy = &bws->retry; /* ping/pong when idle */
    if (lws_client_connect_via_info(&ci) == NULL) {
        gw__backend_finish(conn, "connect failed: could not start", false);
    }
}

static void resolve_failed(struct gw_backend_conn *conn, int status)
{
    gw_log(GW_LOG_WARN, conn->subject, "backend %s: cannot resolve %s: %s",
           conn->name, conn->address, gw_dns_strerror(status));
    gw__backend_set_reason(conn, "connect failed: cannot resolve %s: %s",
                           conn->address, gw_dns_strerror(status));
    gw__backend_finish(conn, conn->reason, false);
}

/* The resolver's answer, from the loop; never after gw__backend_finish
 * (which cancels the request), so the connection is still connecting. */
static void on_resolved(void *arg, int status, const char *ip)
{
    struct gw_backend_conn *conn = arg;

    conn->dns_req = NULL;
    if (status != 0) {
        resolve_failed(conn, status);
        return;
    }
    snprintf(conn->ip, sizeof(conn->ip), "%s", ip);
    conn_connect(conn);
}

/*
 * Resolves the url's host off the loop (common/dns_cache.h): an IP
 * literal or a name answered from the cache connects at once, any other
 * name when its lookup is back. The connect timeout, already running,
 * counts the lookup too.
 */
static void conn_start(struct gw_backend_conn *conn)
{
    int rc = gw_dns_resolve(conn->bws->dns, conn->address, on_resolved, conn,
                            conn->ip, sizeof(conn->ip), &conn->dns_req);

    if (rc == 1) {
        conn_connect(conn);
    } else if (rc < 0) {
        resolve_failed(conn, rc);
    }
}

int gw_backend_conn_open(struct gw_backend_ws *bws,
                         const struct gw_backend_connect *params,
                         const struct gw_backend_events *ev, void *owner,
                         struct gw_backend_conn **out)
{
    char authorization[AUTH_MAX]; /* static tokens may be long JWTs */
    struct lws_vhost *vh = NULL;
    struct gw_backend_conn *conn;
    struct gw_ws_url url;
    const char *client_id;
    int rc;

    if (bws == NULL || params == NULL || params->backend == NULL ||
        params->backend->url == NULL || params->backend->name == NULL ||
        ev == NULL || out == NULL || params->device_id == NULL ||
        params->device_id[0] == '\0') {
        return GW_EINVAL;
    }
    if (bws->phase != BWS_RUNNING) {
        return GW_EPROTO;
    }
    client_id = params->client_id != NULL && params->client_id[0] != '\0'
                    ? params->client_id
                    : GW_CREDENTIAL_DEFAULT_CLIENT_ID;
    if (!header_safe(params->device_id) || !header_safe(client_id) ||
        (params->forwarded_for != NULL &&
         !header_safe(params->forwarded_for)) ||
        !extra_headers_safe(params->backend) ||
        gw_ws_url_parse(params->backend->url, strlen(params->backend->url),
                        &url, NULL) != 0) {
        return GW_EINVAL;
    }
    rc = make_authorization(params, client_id, authorization,
                            sizeof(authorization));
    if (rc != 0) {
        return rc;
    }
    if (url.tls && params->backend->ca_file != NULL &&
        params->backend->ca_file[0] != '\0') {
        vh = ca_vhost(bws, params->backend->ca_file);
        if (vh == NULL) {
            return GW_ECONFIG;
        }
    }
    conn = conn_create(params, &url, client_id, authorization);
    if (conn == NULL) {
        return GW_ENOMEM;
    }
    conn->bws = bws;
    conn->drops = gw__backend_drops_get(bws, conn->name);
    conn->ev = *ev;
    conn->owner = owner;
    conn->state = CONN_CONNECTING;
    /* The loop's clock is as old as this loop turn: the timeout counts
     * from now, whatever ran before us in the turn. */
    uv_update_time(bws->loop);
    conn->started_ms = uv_now(bws->loop);
    gw_list_insert_head(&bws->conns, &conn->link);
    gw_list_init(&conn->held);
    gw_list_init(&conn->quiet);
    bws->stats.live++;
    uv_timer_init(bws->loop, &conn->timer);
    conn->timer.data = conn;
    uv_timer_start(&conn->timer, gw__backend_on_timer,
                   (uint64_t)conn->connect_timeout_ms, 0);
    conn->vh = vh;
    conn_start(conn);
    *out = conn;
    return 0;
}

/* ---- the upgrade, as lws calls back ---------------------------------- */

int gw__backend_append_headers(struct gw_backend_conn *conn, struct lws *wsi,
                               void *in, size_t len)
{
    unsigned char **p = in;
    unsigned char *end = *p + len;
    const char *names[] = {"device-id:", "client-id:", "protocol-version:",
                           "authorization:", "x-forwarded-for:"};
    const char *values[] = {conn->device_id, conn->client_id, "2",
                            conn->authorization, conn->forwarded_for};
    const char *extra = conn->extra_headers;

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (values[i] == NULL) {
            continue;
        }
        if (lws_add_http_header_by_name(wsi, (const unsigned char *)names[i],
                                        (const unsigned char *)values[i],
                                        (int)strlen(values[i]), p, end)) {
            gw__backend_set_reason(conn,
                                   "connect failed: upgrade headers too long");
            return -1;
        }
    }
    /* backends[].headers, after the gateway's own; never logged. */
    for (size_t i = 0; i < conn->n_extra_headers; i++) {
        const char *name = extra, *value = extra + strlen(extra) + 1;
        extra = value + strlen(value) + 1;
        if (lws_add_http_header_by_name(wsi, (const unsigned char *)name,
                                        (const unsigned char *)value,
                                        (int)strlen(value), p, end)) {
            gw__backend_set_reason(conn,
                                   "connect failed: upgrade headers too long");
            return -1;
        }
    }
    return 0;
}

void gw__backend_on_connect_error(struct gw_backend_conn *conn, struct lws *wsi,
                                  const char *in)
{
    char what[96] = "unknown error";
    int status = lws_http_client_http_response(wsi);

    if (in != NULL && in[0] != '\0') {
        size_t n = strnlen(in, sizeof(what) - 1);
        memcpy(what, in, n);
        while (n > 0 && (what[n - 1] == '\n' || what[n - 1] == ' ')) {
            n--;
        }
        what[n] = '\0';
    }
    if (status > 0 && status != 101) {
        gw__backend_set_reason(conn, "connect failed: %s (HTTP %d)", what,
                               status);
    } else {
        gw__backend_set_reason(conn, "connect failed: %s", what);
    }
    gw__backend_finish(conn, conn->reason, false);
}
