/*
 * libcurl's multi interface on the loop; see http_client.h. curl tells
 * which sockets to watch (on_socket) and when to call it back (on_timer);
 * the loop tells curl what happened (curl_multi_socket_action). curl
 * forbids adding or removing handles from inside its own callbacks, so
 * work asked for then (a new request, a cancel) waits in a list until
 * curl has returned.
 */
#include "gateway/http/http_client.h"

#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "common/list.h"
#include "common/log.h"

struct gw_http_client {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;
    struct gw_list live;   /* struct gw_http_req added to multi */
    struct gw_list to_add; /* made while curl was running */
    struct gw_list doomed; /* cancelled while curl was running */
    struct gw_list socks;  /* struct sock_ctx being polled */
    int depth;             /* > 0 while inside curl */
    size_t active;
    int handles_open; /* polls and the timer */
    bool closing;
    void (*close_cb)(struct gw_http_client *c, void *arg);
    void *close_arg;
};

struct gw_http_req {
    struct gw_list node; /* in one of the client's lists */
    struct gw_http_client *c;
    CURL *easy;
    struct curl_slist *headers;
    struct gw_http_callbacks cbs;
    int status;
    bool cancelled; /* no callbacks any more */
    bool refused;   /* on_data said stop */
    bool added;     /* in the multi handle */
    char errbuf[CURL_ERROR_SIZE];
};

struct sock_ctx {
    struct gw_list node; /* in the client's socks */
    uv_poll_t poll;
    curl_socket_t fd;
    struct gw_http_client *c;
};

static const char *const result_names[GW_HTTP_RESULT_COUNT_] = {
#define XX(name, text) [GW_HTTP_##name] = text,
    GW_HTTP_RESULT_MAP(XX)
#undef XX
};

const char *gw_http_result_name(enum gw_http_result r)
{
    return (unsigned)r < GW_HTTP_RESULT_COUNT_ ? result_names[r] : "?";
}

static void maybe_closed(struct gw_http_client *c)
{
    if (!c->closing || c->handles_open > 0 || c->multi != NULL) {
        return;
    }
    if (c->close_cb != NULL) {
        c->close_cb(c, c->close_arg);
    }
    free(c);
    curl_global_cleanup();
}

static void on_handle_closed(uv_handle_t *h)
{
    struct gw_http_client *c = h->data;

    c->handles_open--;
    maybe_closed(c);
}

static void on_sock_closed(uv_handle_t *h)
{
    struct sock_ctx *ctx = h->data;
    struct gw_http_client *c = ctx->c;

    free(ctx);
    c->handles_open--;
    maybe_closed(c);
}

static void free_req(struct gw_http_req *r)
{
    if (r->added) {
        curl_multi_remove_handle(r->c->multi, r->easy);
        r->added = false;
        r->c->active--;
    }
    gw_list_unlink(&r->node);
    curl_easy_cleanup(r->easy);
    curl_slist_free_all(r->headers);
    free(r);
}

static enum gw_http_result result_of(const struct gw_http_req *r, CURLcode rc)
{
    switch (rc) {
    case CURLE_OK:
        return GW_HTTP_OK;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
        return GW_HTTP_CONNECT;
    case CURLE_OPERATION_TIMEDOUT:
        return GW_HTTP_TIMEOUT;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CRL_BADFILE:
        return GW_HTTP_TLS;
    case CURLE_WRITE_ERROR:
        return r->refused ? GW_HTTP_ABORTED : GW_HTTP_TRANSFER;
    default:
        return GW_HTTP_TRANSFER;
    }
}

/* A finished transfer: out of curl, its owner told, freed. */
static void finish(struct gw_http_req *r, CURLcode rc)
{
    struct gw_http_callbacks cbs = r->cbs;
    enum gw_http_result result = result_of(r, rc);
    int status = r->status;
    char detail[CURL_ERROR_SIZE];

    if (rc == CURLE_OK) {
        detail[0] = '\0';
    } else {
        snprintf(detail, sizeof(detail), "%s",
                 r->errbuf[0] != '\0' ? r->errbuf : curl_easy_strerror(rc));
    }
    bool told = !r->cancelled;
    free_req(r);
    if (told && cbs.on_done != NULL) {
        cbs.on_done(cbs.arg, result, status, detail);
    }
}

/* What waited for curl to return: removals, completions, additions. */
static void settle(struct gw_http_client *c)
{
    CURLMsg *msg;
    int left;

    if (c->depth > 0 || c->multi == NULL) {
        return;
    }
    while (!gw_list_empty(&c->doomed)) {
        free_req(
            GW_LIST_ENTRY(gw_list_first(&c->doomed), struct gw_http_req, node));
    }
    while ((msg = curl_multi_info_read(c->multi, &left)) != NULL) {
        struct gw_http_req *r = NULL;
        if (msg->msg != CURLMSG_DONE) {
            continue;
        }
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
        if (r != NULL) {
            finish(r, msg->data.result);
        }
    }
    while (!gw_list_empty(&c->to_add)) {
        struct gw_http_req *r =
            GW_LIST_ENTRY(gw_list_first(&c->to_add), struct gw_http_req, node);
        gw_list_unlink(&r->node);
        if (curl_multi_add_handle(c->multi, r->easy) != CURLM_OK) {
            struct gw_http_callbacks cbs = r->cbs;
            free_req(r);
            if (cbs.on_done != NULL) {
                cbs.on_done(cbs.arg, GW_HTTP_TRANSFER, 0, "cannot add");
            }
            continue;
        }
        r->added = true;
        c->active++;
        gw_list_insert_tail(&c->live, &r->node);
    }
}

static void drive(struct gw_http_client *c, curl_socket_t fd, int flags)
{
    int running;

    c->depth++;
    curl_multi_socket_action(c->multi, fd, flags, &running);
    c->depth--;
    settle(c);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    struct sock_ctx *ctx = h->data;
    int flags = 0;

    if (status < 0) {
        flags = CURL_CSELECT_ERR;
    } else {
        flags |= (events & UV_READABLE) ? CURL_CSELECT_IN : 0;
        flags |= (events & UV_WRITABLE) ? CURL_CSELECT_OUT : 0;
    }
    drive(ctx->c, ctx->fd, flags);
}

static void on_timeout(uv_timer_t *t)
{
    struct gw_http_client *c = t->data;

    drive(c, CURL_SOCKET_TIMEOUT, 0);
}

static void close_sock(struct sock_ctx *ctx)
{
    gw_list_unlink(&ctx->node);
    uv_poll_stop(&ctx->poll);
    uv_close((uv_handle_t *)&ctx->poll, on_sock_closed);
}

static int on_socket(CURL *easy, curl_socket_t fd, int what, void *userp,
                     void *socketp)
{
    struct gw_http_client *c = userp;
    struct sock_ctx *ctx = socketp;
    int events = 0;

    (void)easy;
    if (what == CURL_POLL_REMOVE) {
        if (ctx != NULL) {
            curl_multi_assign(c->multi, fd, NULL);
            close_sock(ctx);
        }
        return 0;
    }
    if (ctx == NULL) {
        ctx = calloc(1, sizeof(*ctx));
        if (ctx == NULL) {
            return -1;
        }
        ctx->fd = fd;
        ctx->c = c;
        if (uv_poll_init_socket(c->loop, &ctx->poll, fd) != 0) {
            free(ctx);
            return -1;
        }
        ctx->poll.data = ctx;
        c->handles_open++;
        gw_list_insert_tail(&c->socks, &ctx->node);
        curl_multi_assign(c->multi, fd, ctx);
    }
    events |= (what & CURL_POLL_IN) ? UV_READABLE : 0;
    events |= (what & CURL_POLL_OUT) ? UV_WRITABLE : 0;
    uv_poll_start(&ctx->poll, events, on_poll);
    return 0;
}

static int on_timer(CURLM *multi, long timeout_ms, void *userp)
{
    struct gw_http_client *c = userp;

    (void)multi;
    if (timeout_ms < 0) {
        uv_timer_stop(&c->timer);
    } else {
        /* Even 0 goes through the loop: curl may not be re-entered. */
        uv_timer_start(&c->timer, on_timeout, (uint64_t)timeout_ms, 0);
    }
    return 0;
}

int gw_http_client_init(uv_loop_t *loop, struct gw_http_client **out)
{
    struct gw_http_client *c;

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        return GW_ENOMEM;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL || (c->multi = curl_multi_init()) == NULL) {
        free(c);
        curl_global_cleanup();
        return GW_ENOMEM;
    }
    c->loop = loop;
    gw_list_init(&c->live);
    gw_list_init(&c->to_add);
    gw_list_init(&c->doomed);
    gw_list_init(&c->socks);
    uv_timer_init(loop, &c->timer);
    c->timer.data = c;
    c->handles_open = 1;
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
    *out = c;
    return 0;
}

static size_t on_write(char *p, size_t size, size_t n, void *ud)
{
    struct gw_http_req *r = ud;
    size_t len = size * n;

    if (r->cancelled) {
        return 0;
    }
    if (r->cbs.on_data != NULL && !r->cbs.on_data(r->cbs.arg, p, len)) {
        r->refused = true;
        return 0;
    }
    return r->cancelled ? 0 : len;
}

static size_t on_header_line(char *p, size_t size, size_t n, void *ud)
{
    struct gw_http_req *r = ud;
    size_t len = size * n;
    char line[1024], *colon, *v, *end;

    if (r->cancelled || len == 0) {
        return len;
    }
    if (len >= sizeof(line)) {
        return len; /* no header the caller reads is this long */
    }
    memcpy(line, p, len);
    line[len] = '\0';
    end = line + len;
    while (end > line && (end[-1] == '\r' || end[-1] == '\n' ||
                          end[-1] == ' ' || end[-1] == '\t')) {
        *--end = '\0';
    }
    if (strncmp(line, "HTTP/", 5) == 0) {
        const char *sp = strchr(line, ' ');
        r->status = sp != NULL ? atoi(sp + 1) : 0;
        return len;
    }
    colon = strchr(line, ':');
    if (colon == NULL || r->cbs.on_header == NULL) {
        return len;
    }
    *colon = '\0';
    v = colon + 1;
    while (*v == ' ' || *v == '\t') {
        v++;
    }
    r->cbs.on_header(r->cbs.arg, line, v);
    return len;
}

static int setup_easy(struct gw_http_req *r, const struct gw_http_options *o)
{
    CURL *e = r->easy;
    int bad = 0;

    for (const char *const *h = o->headers; h != NULL && *h != NULL; h++) {
        struct curl_slist *next = curl_slist_append(r->headers, *h);
        if (next == NULL) {
            return GW_ENOMEM;
        }
        r->headers = next;
    }
    /* No "Expect: 100-continue" round trip before a larger body. */
    struct curl_slist *next = curl_slist_append(r->headers, "Expect:");
    if (next == NULL) {
        return GW_ENOMEM;
    }
    r->headers = next;
    bad |= curl_easy_setopt(e, CURLOPT_URL, o->url) != CURLE_OK;
    bad |= curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK;
    bad |= curl_easy_setopt(e, CURLOPT_PRIVATE, r) != CURLE_OK;
    bad |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf) != CURLE_OK;
    bad |= curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers) != CURLE_OK;
    bad |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write) != CURLE_OK;
    bad |= curl_easy_setopt(e, CURLOPT_WRITEDATA, r) != CURLE_OK;
    bad |=
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header_line) != CURLE_OK;
    bad |= curl_easy_setopt(e, CURLOPT_HEADERDATA, r) != CURLE_OK;
    bad |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, o->timeout_ms) != CURLE_OK;
    bad |= curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, o->timeout_ms) !=
           CURLE_OK;
    if (o->ca_file != NULL && o->ca_file[0] != '\0') {
        bad |= curl_easy_setopt(e, CURLOPT_CAINFO, o->ca_file) != CURLE_OK;
    }
    if (strcmp(o->method, "POST") == 0) {
        bad |= curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                                (curl_off_t)o->body_len) != CURLE_OK;
        bad |= curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS,
                                o->body != NULL ? o->body : "") != CURLE_OK;
    } else if (strcmp(o->method, "GET") != 0) {
        bad |=
            curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, o->method) != CURLE_OK;
    }
    return bad ? GW_EINVAL : 0;
}

int gw_http_request(struct gw_http_client *c, const struct gw_http_options *o,
                    const struct gw_http_callbacks *cbs,
                    struct gw_http_req **out)
{
    struct gw_http_req *r;
    int rc;

    if (c == NULL || o == NULL || o->url == NULL || o->method == NULL ||
        o->timeout_ms <= 0 || cbs == NULL) {
        return GW_EINVAL;
    }
    if (c->closing) {
        return GW_ELIMIT;
    }
    r = calloc(1, sizeof(*r));
    if (r == NULL || (r->easy = curl_easy_init()) == NULL) {
        free(r);
        return GW_ENOMEM;
    }
    r->c = c;
    r->cbs = *cbs;
    gw_list_init(&r->node);
    rc = setup_easy(r, o);
    if (rc != 0) {
        free_req(r);
        return rc;
    }
    if (c->depth > 0) {
        gw_list_insert_tail(&c->to_add, &r->node);
    } else if (curl_multi_add_handle(c->multi, r->easy) != CURLM_OK) {
        free_req(r);
        return GW_ENOMEM;
    } else {
        r->added = true;
        c->active++;
        gw_list_insert_tail(&c->live, &r->node);
    }
    if (out != NULL) {
        *out = r;
    }
    return 0;
}

int gw_http_req_status(const struct gw_http_req *r)
{
    return r->status;
}

void gw_http_cancel(struct gw_http_req *r)
{
    struct gw_http_client *c;

    if (r == NULL || r->cancelled) {
        return;
    }
    c = r->c;
    r->cancelled = true;
    if (c->depth > 0) {
        gw_list_unlink(&r->node);
        gw_list_insert_tail(&c->doomed, &r->node);
        return;
    }
    free_req(r);
}

size_t gw_http_client_active(const struct gw_http_client *c)
{
    return c->active + gw_list_count(&c->to_add);
}

void gw_http_client_close(struct gw_http_client *c,
                          void (*cb)(struct gw_http_client *c, void *arg),
                          void *arg)
{
    struct gw_list *lists[] = {&c->to_add, &c->live, &c->doomed};

    if (c->closing) {
        return;
    }
    c->closing = true;
    c->close_cb = cb;
    c->close_arg = arg;
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        while (!gw_list_empty(lists[i])) {
            struct gw_http_req *r = GW_LIST_ENTRY(gw_list_first(lists[i]),
                                                  struct gw_http_req, node);
            struct gw_http_callbacks cbs = r->cbs;
            bool told = !r->cancelled;
            free_req(r);
            if (told && cbs.on_done != NULL) {
                cbs.on_done(cbs.arg, GW_HTTP_SHUTDOWN, 0, "shutting down");
            }
        }
    }
    /* Closes the cached connections: their sockets' polls close too. */
    curl_multi_cleanup(c->multi);
    c->multi = NULL;
    /* Whatever curl did not tell to stop: its sockets are closed now. */
    while (!gw_list_empty(&c->socks)) {
        close_sock(
            GW_LIST_ENTRY(gw_list_first(&c->socks), struct sock_ctx, node));
    }
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}
