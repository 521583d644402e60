/*
 * One HTTP request: what lws parsed, copied out (method, path, query,
 * headers, peer, body), and the answer or stream queued for the server
 * to write (http_server.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <arpa/inet.h>
#include <sys/socket.h>

#include "common/log.h"
#include "gateway/http/http_server_int.h"

#define SUBJECT "http"
/* gw_http_req_add_header: the lines of one answer, in all. */
#define EXTRA_MAX 1024

/* Not standard headers for lws, but read after the handler returns. */
static const char *const kept_custom[] = {
    "mcp-session-id", "mcp-protocol-version", "last-event-id"};

/* ---- requests ---------------------------------------------------------- */

void gw__http_req_destroy(struct gw_http_req *req)
{
    gw__http_watch_stop(req);
    if (req->wsi != NULL) {
        lws_set_wsi_user(req->wsi, NULL); /* lws never sees req again */
    }
    gw_list_unlink(&req->link);
    while (req->hdrs != NULL) {
        struct hdr *next = req->hdrs->next;
        free(req->hdrs);
        req->hdrs = next;
    }
    while (req->out_head != NULL) {
        struct out_buf *next = req->out_head->next;
        free(req->out_head);
        req->out_head = next;
    }
    free(req->path);
    free(req->query);
    free(req->extra);
    req->srv->stats.body_bytes -= req->body_cap;
    free(req->body);
    free(req);
}

/*
 * The connection is gone (or the server closes): a request the handler
 * still owes an answer, or a stream not ended, is reported once.
 */
void gw__http_req_lost(struct gw_http_req *req)
{
    bool owed = req->state == REQ_WAITING || req->state == REQ_STREAMING;

    if (req->wsi != NULL) {
        lws_set_wsi_user(req->wsi, NULL);
        req->wsi = NULL;
    }
    req->state = REQ_FINISHING; /* no answer is taken from here on */
    if (owed && req->gone_cb != NULL) {
        req->srv->busy++;
        req->gone_cb(req, req->gone_arg);
        req->srv->busy--;
    }
    gw__http_req_destroy(req);
}

/* Drops the connection from the loop; lws reports its close later. */
static void req_kill(struct gw_http_req *req)
{
    if (!req->killed && req->wsi != NULL) {
        req->killed = true;
        gw__http_conn_kill(req->wsi);
    }
}

static struct hdr *hdr_add(struct gw_http_req *req, const char *name,
                           size_t name_len, size_t value_len)
{
    struct hdr *h = malloc(sizeof(*h) + name_len + value_len + 2);

    if (h == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < name_len; i++) {
        char c = name[i];
        h->name[i] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
    }
    h->name[name_len] = '\0';
    h->value = h->name + name_len + 1;
    h->value[0] = '\0';
    h->next = req->hdrs;
    req->hdrs = h;
    return h;
}

/* lws leaves trailing blanks on some values. */
static void trim_right(char *s)
{
    size_t n = strlen(s);

    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) {
        s[--n] = '\0';
    }
}

/* A custom (not lws-known) header, e.g. "mcp-session-id", or 0 / error. */
static int copy_custom(struct gw_http_req *req, const char *name)
{
    char key[64];
    size_t n = strlen(name);
    int vlen;
    struct hdr *h;

    if (n + 2 > sizeof(key)) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        key[i] = name[i] >= 'A' && name[i] <= 'Z' ? (char)(name[i] - 'A' + 'a')
                                                  : name[i];
    }
    key[n] = ':';
    key[n + 1] = '\0';
    vlen = lws_hdr_custom_length(req->wsi, key, (int)n + 1);
    if (vlen < 0) {
        return 0;
    }
    h = hdr_add(req, key, n, (size_t)vlen);
    if (h == NULL) {
        return GW_ENOMEM;
    }
    if (lws_hdr_custom_copy(req->wsi, h->value, vlen + 1, key, (int)n + 1) <
        0) {
        h->value[0] = '\0';
    }
    trim_right(h->value);
    return 1;
}

/* Every header lws knows by name, and the custom ones kept for later. */
static int copy_headers(struct gw_http_req *req)
{
    for (int t = 0; t < WSI_TOKEN_COUNT; t++) {
        const char *name = (const char *)lws_token_to_string(t);
        size_t nlen = name != NULL ? strlen(name) : 0;
        int vlen = lws_hdr_total_length(req->wsi, t);
        struct hdr *h;

        /* Methods ("get "), pseudo headers and uri-args have no ':' */
        if (vlen <= 0 || nlen < 2 || name[nlen - 1] != ':' || name[0] == ':') {
            continue;
        }
        h = hdr_add(req, name, nlen - 1, (size_t)vlen);
        if (h == NULL) {
            return GW_ENOMEM;
        }
        if (lws_hdr_copy(req->wsi, h->value, vlen + 1, t) < 0) {
            h->value[0] = '\0';
        }
        trim_right(h->value);
    }
    for (size_t i = 0; i < sizeof(kept_custom) / sizeof(kept_custom[0]); i++) {
        if (copy_custom(req, kept_custom[i]) < 0) {
            return GW_ENOMEM;
        }
    }
    return 0;
}

/* The query's arguments as lws split them, joined by '&'. */
static int copy_query(struct gw_http_req *req)
{
    int total = lws_hdr_total_length(req->wsi, WSI_TOKEN_HTTP_URI_ARGS);
    size_t pos = 0;

    req->query = malloc((size_t)(total > 0 ? total : 0) + 1);
    if (req->query == NULL) {
        return GW_ENOMEM;
    }
    req->query[0] = '\0';
    for (int i = 0; total > 0; i++) {
        int n = lws_hdr_copy_fragment(req->wsi, req->query + pos,
                                      total + 1 - (int)pos,
                                      WSI_TOKEN_HTTP_URI_ARGS, i);
        if (n < 0) {
            break;
        }
        pos += (size_t)n;
        if (pos >= (size_t)total) {
            break;
        }
        req->query[pos++] = '&';
        req->query[pos] = '\0';
    }
    return 0;
}

static const struct {
    enum lws_token_indexes token;
    const char *name;
} methods[] = {
    {WSI_TOKEN_GET_URI, "GET"},       {WSI_TOKEN_POST_URI, "POST"},
    {WSI_TOKEN_PUT_URI, "PUT"},       {WSI_TOKEN_PATCH_URI, "PATCH"},
    {WSI_TOKEN_DELETE_URI, "DELETE"}, {WSI_TOKEN_OPTIONS_URI, "OPTIONS"},
    {WSI_TOKEN_HEAD_URI, "HEAD"},
};

static int copy_request_line(struct gw_http_req *req)
{
    char version[16];
    int n = -1;

    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        n = lws_hdr_total_length(req->wsi, methods[i].token);
        if (n > 0) {
            snprintf(req->method, sizeof(req->method), "%s", methods[i].name);
            req->path = malloc((size_t)n + 1);
            if (req->path == NULL || lws_hdr_copy(req->wsi, req->path, n + 1,
                                                  methods[i].token) < 0) {
                return GW_ENOMEM;
            }
            break;
        }
    }
    if (req->path == NULL) {
        return GW_EPROTO;
    }
    req->head = strcmp(req->method, "HEAD") == 0;
    /* As lws decides it: "HTTP/1.1" unless told otherwise. */
    req->http11 =
        lws_hdr_copy(req->wsi, version, sizeof(version), WSI_TOKEN_HTTP) > 7 &&
        version[5] == '1' && version[7] == '1';
    return 0;
}

/* The peer's address; IPv4 clients of a dual-stack socket lose "::ffff:". */
static void copy_peer(struct gw_http_req *req)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    const void *addr = NULL;

    snprintf(req->peer, sizeof(req->peer), "?");
    if (getpeername(lws_get_socket_fd(req->wsi), (struct sockaddr *)&ss,
                    &len) != 0) {
        return;
    }
    if (ss.ss_family == AF_INET) {
        addr = &((struct sockaddr_in *)&ss)->sin_addr;
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&ss;
        if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
            inet_ntop(AF_INET, &s6->sin6_addr.s6_addr[12], req->peer,
                      sizeof(req->peer));
            return;
        }
        addr = &s6->sin6_addr;
    }
    if (addr != NULL) {
        inet_ntop(ss.ss_family, addr, req->peer, sizeof(req->peer));
    }
}

static bool has_token(const char *list, const char *token)
{
    size_t n = strlen(token);

    for (const char *p = list; p != NULL && *p != '\0';) {
        p += strspn(p, " \t,");
        size_t len = strcspn(p, ",");
        size_t tl = len;
        while (tl > 0 && (p[tl - 1] == ' ' || p[tl - 1] == '\t')) {
            tl--;
        }
        if (tl == n && strncasecmp(p, token, n) == 0) {
            return true;
        }
        p += len;
    }
    return false;
}

struct gw_http_req *gw__http_req_create(struct gw_http_server *srv,
                                        struct lws *wsi)
{
    struct gw_http_req *req = calloc(1, sizeof(*req));

    if (req == NULL) {
        return NULL;
    }
    req->srv = srv;
    req->wsi = wsi;
    req->state = REQ_READING;
    gw_list_insert_head(&srv->reqs, &req->link);
    lws_set_wsi_user(wsi, req);
    copy_peer(req);
    if (copy_request_line(req) != 0 || copy_query(req) != 0 ||
        copy_headers(req) != 0) {
        gw__http_req_destroy(req);
        return NULL;
    }
    req->keep_alive =
        req->http11 &&
        !has_token(gw_http_req_header(req, "connection"), "close");
    return req;
}

/* A header as lws would give it: a repeated one joined by ','. */
static int add_header(struct gw_http_req *req, const char *name,
                      const char *value)
{
    size_t nlen = strlen(name);
    struct hdr *old = NULL, *h;
    size_t vlen = strlen(value);

    if (nlen == 0 || strcspn(name, ": \t\r\n") != nlen) {
        return GW_EINVAL;
    }
    for (h = req->hdrs; h != NULL; h = h->next) {
        if (strcasecmp(h->name, name) == 0) {
            old = h;
            break;
        }
    }
    h = hdr_add(req, name, nlen,
                vlen + (old != NULL ? strlen(old->value) + 1 : 0));
    if (h == NULL) {
        return GW_ENOMEM;
    }
    if (old != NULL) {
        sprintf(h->value, "%s,%s", old->value, value);
        old->name[0] = '\0'; /* never found again; freed with the rest */
    } else {
        memcpy(h->value, value, vlen + 1);
    }
    trim_right(h->value);
    return 0;
}

struct gw_http_req *gw__http_req_create_detached(struct gw_http_server *srv,
                                                 const char *method,
                                                 const char *target,
                                                 const char *const *headers,
                                                 size_t n_headers)
{
    struct gw_http_req *req;
    size_t mlen = strlen(method);
    size_t plen = strcspn(target, "?");

    if (mlen == 0 || mlen >= sizeof(req->method) ||
        strspn(method, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != mlen ||
        target[0] != '/') {
        return NULL;
    }
    if ((req = calloc(1, sizeof(*req))) == NULL) {
        return NULL;
    }
    req->srv = srv;
    req->state = REQ_READING;
    gw_list_insert_head(&srv->reqs, &req->link);
    snprintf(req->peer, sizeof(req->peer), "127.0.0.1");
    memcpy(req->method, method, mlen + 1);
    req->path = strndup(target, plen);
    req->query = strdup(target[plen] == '?' ? target + plen + 1 : "");
    for (size_t i = 0; i < n_headers && req->path != NULL; i++) {
        if (add_header(req, headers[2 * i], headers[2 * i + 1]) != 0) {
            free(req->path);
            req->path = NULL;
        }
    }
    if (req->path == NULL || req->query == NULL) {
        gw__http_req_destroy(req);
        return NULL;
    }
    req->head = strcmp(req->method, "HEAD") == 0;
    req->http11 = true;
    req->keep_alive =
        !has_token(gw_http_req_header(req, "connection"), "close");
    return req;
}

/* ---- responses --------------------------------------------------------- */

static const char *reason_phrase(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 406:
        return "Not Acceptable";
    case 409:
        return "Conflict";
    case 411:
        return "Length Required";
    case 413:
        return "Content Too Large";
    case 415:
        return "Unsupported Media Type";
    case 421:
        return "Misdirected Request";
    case 429:
        return "Too Many Requests";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return "";
    }
}

/* No CR, LF or other controls: nothing the caller passes splits lines. */
static bool value_ok(const char *s)
{
    for (; *s != '\0'; s++) {
        if (((unsigned char)*s < 0x20 && *s != '\t') || *s == 0x7f) {
            return false;
        }
    }
    return true;
}

/* A header line of the caller's: "Name: value". */
static bool header_line_ok(const char *line)
{
    const char *colon = strchr(line, ':');

    return colon != NULL && colon != line && value_ok(line);
}

static struct out_buf *out_alloc(size_t len)
{
    struct out_buf *o = malloc(sizeof(*o) + len);

    if (o != NULL) {
        o->next = NULL;
        o->len = len;
        o->off = 0;
        o->detach_after = false;
    }
    return o;
}

static void out_push(struct gw_http_req *req, struct out_buf *o)
{
    if (req->out_tail != NULL) {
        req->out_tail->next = o;
    } else {
        req->out_head = o;
    }
    req->out_tail = o;
    req->out_bytes += o->len;
    gw__http_watch_write(req);
}

/*
 * Status line and headers; body_len < 0 for a stream (chunked on
 * HTTP/1.1, else delimited by the close). Returns the length or an error.
 */
static int format_head(struct gw_http_req *req, int status, const char *ctype,
                       const char *const *headers, long long body_len,
                       char *buf, size_t cap)
{
    size_t n;

    if (status < 200 || status > STATUS_MAX ||
        (ctype != NULL && !value_ok(ctype))) {
        return GW_EINVAL;
    }
    n = (size_t)snprintf(buf, cap, "HTTP/1.1 %d %s\r\n", status,
                         reason_phrase(status));
    if (ctype != NULL && n < cap) {
        n += (size_t)snprintf(buf + n, cap - n, "Content-Type: %s\r\n", ctype);
    }
    if (body_len >= 0 && status != 204 && n < cap) {
        n += (size_t)snprintf(buf + n, cap - n, "Content-Length: %lld\r\n",
                              body_len);
    } else if (body_len < 0 && req->http11 && n < cap) {
        n += (size_t)snprintf(buf + n, cap - n,
                              "Transfer-Encoding: chunked\r\n");
    }
    if (!req->keep_alive && n < cap) {
        n += (size_t)snprintf(buf + n, cap - n, "Connection: close\r\n");
    }
    for (size_t i = 0; headers != NULL && headers[i] != NULL && n < cap; i++) {
        if (!header_line_ok(headers[i])) {
            return GW_EINVAL;
        }
        n += (size_t)snprintf(buf + n, cap - n, "%s\r\n", headers[i]);
    }
    if (req->extra != NULL && n < cap) {
        n += (size_t)snprintf(buf + n, cap - n, "%s", req->extra);
    }
    if (n + 2 >= cap) {
        return GW_ENOSPC;
    }
    memcpy(buf + n, "\r\n", 2);
    return (int)(n + 2);
}

static void count(struct gw_http_server *srv, int status)
{
    if (status >= STATUS_MIN && status <= STATUS_MAX) {
        srv->responses[status - STATUS_MIN]++;
    }
}

/* Queues the whole answer; the request is the server's from here on. */
static int answer(struct gw_http_req *req, int status, const char *ctype,
                  const char *const *headers, const char *body, size_t len)
{
    char head[HEAD_MAX];
    int n;
    struct out_buf *o;

    if (status == 204 || req->head) {
        len = req->head ? len : 0;
        body = NULL;
    }
    n = format_head(req, status, ctype, headers, (long long)len, head,
                    sizeof(head));
    req->state = REQ_FINISHING;
    if (n < 0) {
        req_kill(req);
        return n;
    }
    o = out_alloc((size_t)n + (body != NULL ? len : 0));
    if (o == NULL) {
        req_kill(req);
        return GW_ENOMEM;
    }
    memcpy(o->data, head, (size_t)n);
    if (body != NULL && len > 0) {
        memcpy(o->data + n, body, len);
    }
    count(req->srv, status);
    out_push(req, o);
    return 0;
}

int gw_http_respond(struct gw_http_req *req, int status,
                    const char *content_type, const char *const *headers,
                    const char *body, size_t len)
{
    if (req == NULL || req->state != REQ_WAITING || (body == NULL && len > 0)) {
        return GW_EINVAL;
    }
    return answer(req, status, content_type, headers, body, len);
}

/* An answer of the server's own, before any handler saw the request. */
void gw__http_req_refuse(struct gw_http_req *req, int status, const char *why)
{
    char body[160];
    int n = snprintf(body, sizeof(body), "{\"error\":\"%s\"}", why);

    gw_log_peer(GW_LOG_WARN, req->peer, SUBJECT, "%s %.128s from %s: %d %s",
                req->method, req->path, req->peer, status, why);
    req->keep_alive = false; /* what is left of the body is not read */
    (void)answer(req, status, "application/json", NULL, body, (size_t)n);
}

int gw_http_stream_begin(struct gw_http_req *req, int status,
                         const char *content_type, const char *const *headers)
{
    char head[HEAD_MAX];
    struct out_buf *o;
    int n;

    if (req == NULL || req->state != REQ_WAITING) {
        return GW_EINVAL;
    }
    if (!req->http11) {
        req->keep_alive = false; /* the close ends the stream */
    }
    n = format_head(req, status, content_type, headers, -1, head, sizeof(head));
    if (n < 0 || (o = out_alloc((size_t)n)) == NULL) {
        req->state = REQ_FINISHING;
        req_kill(req);
        return n < 0 ? n : GW_ENOMEM;
    }
    memcpy(o->data, head, (size_t)n);
    o->detach_after = true;
    req->state = REQ_STREAMING;
    count(req->srv, status);
    out_push(req, o);
    return 0;
}

int gw_http_stream_write(struct gw_http_req *req, const char *data, size_t len)
{
    struct out_buf *o;
    size_t n = 0;

    if (req == NULL || req->state != REQ_STREAMING || (data == NULL && len)) {
        return GW_EINVAL;
    }
    if (req->killed) {
        return GW_ENOSPC;
    }
    if (len == 0 || req->head) {
        return 0;
    }
    if (req->out_bytes + len > MAX_QUEUED) {
        /* A reader this slow would hold any amount of memory. */
        gw_log_peer(GW_LOG_WARN, req->peer, SUBJECT,
                    "%s %.128s: stream reader too slow (%zu bytes queued); "
                    "closing",
                    req->peer, req->path, req->out_bytes);
        req_kill(req);
        return GW_ENOSPC;
    }
    o = out_alloc(len + 24);
    if (o == NULL) {
        req_kill(req);
        return GW_ENOMEM;
    }
    if (req->http11) {
        n = (size_t)snprintf((char *)o->data, 20, "%zx\r\n", len);
    }
    memcpy(o->data + n, data, len);
    n += len;
    if (req->http11) {
        memcpy(o->data + n, "\r\n", 2);
        n += 2;
    }
    o->len = n;
    out_push(req, o);
    return 0;
}

void gw_http_stream_end(struct gw_http_req *req)
{
    struct out_buf *o;

    if (req == NULL || req->state != REQ_STREAMING) {
        return;
    }
    req->state = REQ_FINISHING;
    if (req->killed) {
        return;
    }
    if (!req->http11 || req->head) {
        req->keep_alive = req->keep_alive && req->head;
        gw__http_watch_write(req); /* completes once the queue is out */
        return;
    }
    o = out_alloc(5);
    if (o == NULL) {
        req_kill(req);
        return;
    }
    memcpy(o->data, "0\r\n\r\n", 5);
    out_push(req, o);
}

/* ---- request accessors ------------------------------------------------- */

const char *gw_http_req_method(const struct gw_http_req *req)
{
    return req->method;
}

const char *gw_http_req_path(const struct gw_http_req *req)
{
    return req->path;
}

const char *gw_http_req_query(const struct gw_http_req *req)
{
    return req->query;
}

const char *gw_http_req_header(const struct gw_http_req *req, const char *name)
{
    /* A lookup that copies a header does not change the request. */
    struct gw_http_req *r = (struct gw_http_req *)req;

    for (const struct hdr *h = req->hdrs; h != NULL; h = h->next) {
        if (strcasecmp(h->name, name) == 0) {
            return h->value;
        }
    }
    if (req->live_headers && req->wsi != NULL && copy_custom(r, name) > 0) {
        return r->hdrs->value;
    }
    return NULL;
}

const char *gw_http_req_body(const struct gw_http_req *req, size_t *len)
{
    if (len != NULL) {
        *len = req->body_len;
    }
    return req->body != NULL ? req->body : "";
}

const char *gw_http_req_peer(const struct gw_http_req *req)
{
    return req->peer;
}

int gw_http_req_add_header(struct gw_http_req *req, const char *line)
{
    size_t have = req->extra != NULL ? strlen(req->extra) : 0;
    size_t n = strlen(line);
    char *grown;

    if (!header_line_ok(line) || have + n + 2 > EXTRA_MAX) {
        return GW_EINVAL;
    }
    grown = realloc(req->extra, have + n + 3);
    if (grown == NULL) {
        return GW_ENOMEM;
    }
    memcpy(grown + have, line, n);
    memcpy(grown + have + n, "\r\n", 3);
    req->extra = grown;
    return 0;
}

void gw_http_req_on_gone(struct gw_http_req *req,
                         void (*cb)(struct gw_http_req *req, void *arg),
                         void *arg)
{
    req->gone_cb = cb;
    req->gone_arg = arg;
}
