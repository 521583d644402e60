/*
 * A raw HTTP/1.1 client for the loop tests: one TCP connection on the
 * test's loop, requests written verbatim, responses taken apart by
 * Content-Length, chunks or the end of the connection.
 */
#ifndef GW_TEST_HTTP_CLIENT_H
#define GW_TEST_HTTP_CLIENT_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <uv.h>

#include "fixture.h"

#define HC_RX_MAX (256 * 1024)

struct hc_client {
    uv_tcp_t tcp;
    uv_connect_t connect;
    uv_loop_t *loop;
    const bool *timed_out; /* the test's guard */
    bool connected, eof, closed;
    char rx[HC_RX_MAX + 1];
    size_t rx_len;
    size_t used; /* bytes of rx taken by earlier responses */
};

struct hc_resp {
    int status;
    char head[4096];
    char body[HC_RX_MAX + 1];
    size_t body_len;
};

/* Runs c's loop until cond holds; the guard timer fails the test. */
#define HC_RUN_UNTIL(c, cond) GW_LOOP_RUN_UNTIL((c)->loop, (c)->timed_out, cond)

static inline void hc_on_alloc(uv_handle_t *handle, size_t size, uv_buf_t *buf)
{
    struct hc_client *c = handle->data;

    (void)size;
    buf->base = c->rx + c->rx_len;
    buf->len = HC_RX_MAX - c->rx_len;
}

static inline void hc_on_read(uv_stream_t *stream, ssize_t n,
                              const uv_buf_t *buf)
{
    struct hc_client *c = stream->data;

    (void)buf;
    if (n > 0) {
        c->rx_len += (size_t)n;
        c->rx[c->rx_len] = '\0';
    } else if (n < 0) {
        c->eof = true;
        uv_read_stop(stream);
    }
}

static inline void hc_on_connect(uv_connect_t *req, int status)
{
    struct hc_client *c = req->data;

    assert_int_equal(status, 0);
    c->connected = true;
    uv_read_start((uv_stream_t *)&c->tcp, hc_on_alloc, hc_on_read);
}

static inline void hc_open(struct hc_client *c, uv_loop_t *loop,
                           const bool *timed_out, const char *ip, int port)
{
    struct sockaddr_storage sa;

    memset(c, 0, sizeof(*c));
    c->loop = loop;
    c->timed_out = timed_out;
    if (strchr(ip, ':') != NULL) {
        assert_int_equal(uv_ip6_addr(ip, port, (struct sockaddr_in6 *)&sa), 0);
    } else {
        assert_int_equal(uv_ip4_addr(ip, port, (struct sockaddr_in *)&sa), 0);
    }
    uv_tcp_init(loop, &c->tcp);
    c->tcp.data = c;
    c->connect.data = c;
    assert_int_equal(uv_tcp_connect(&c->connect, &c->tcp,
                                    (struct sockaddr *)&sa, hc_on_connect),
                     0);
    HC_RUN_UNTIL(c, c->connected);
}

static inline void hc_on_written(uv_write_t *req, int status)
{
    (void)status;
    free(req);
}

static inline void hc_send(struct hc_client *c, const char *text)
{
    size_t len = strlen(text);
    uv_write_t *w = malloc(sizeof(*w) + len);
    uv_buf_t buf;

    assert_non_null(w);
    memcpy(w + 1, text, len);
    buf = uv_buf_init((char *)(w + 1), (unsigned)len);
    assert_int_equal(
        uv_write(w, (uv_stream_t *)&c->tcp, &buf, 1, hc_on_written), 0);
}

static inline void hc_on_closed(uv_handle_t *handle)
{
    ((struct hc_client *)handle->data)->closed = true;
}

static inline void hc_close(struct hc_client *c)
{
    uv_close((uv_handle_t *)&c->tcp, hc_on_closed);
    HC_RUN_UNTIL(c, c->closed);
}

/* A header's value in a response head, or NULL. */
static inline const char *hc_header(const char *head, const char *name,
                                    char *out, size_t cap)
{
    size_t n = strlen(name);

    for (const char *p = strstr(head, "\r\n"); p != NULL;
         p = strstr(p + 2, "\r\n")) {
        if (strncasecmp(p + 2, name, n) == 0 && p[2 + n] == ':') {
            const char *v = p + 3 + n + strspn(p + 3 + n, " ");
            size_t len = strcspn(v, "\r");
            snprintf(out, cap, "%.*s", (int)(len < cap ? len : cap - 1), v);
            return out;
        }
    }
    return NULL;
}

/* Decodes a chunked body; *done once the last chunk came. */
static inline size_t hc_dechunk(const char *p, size_t avail, struct hc_resp *r,
                                bool *done)
{
    size_t used = 0;

    *done = false;
    r->body_len = 0;
    for (;;) {
        const char *eol = memchr(p + used, '\n', avail - used);
        size_t size;
        if (eol == NULL) {
            return used;
        }
        size = strtoul(p + used, NULL, 16);
        if ((size_t)(eol + 1 - p) + size + 2 > avail) {
            return used;
        }
        memcpy(r->body + r->body_len, eol + 1, size);
        r->body_len += size;
        r->body[r->body_len] = '\0';
        used = (size_t)(eol + 1 - p) + size + 2;
        if (size == 0) {
            *done = true;
            return used;
        }
    }
}

/*
 * The next response on c, if complete (or, with partial, as far as it
 * came): by Content-Length, chunks, or the end of the connection.
 */
static inline bool hc_take(struct hc_client *c, struct hc_resp *r, bool partial)
{
    const char *start = c->rx + c->used;
    const char *end = strstr(start, "\r\n\r\n");
    size_t head_len, avail = c->rx_len - c->used;
    char v[32];
    bool done;

    if (end == NULL) {
        return false;
    }
    head_len = (size_t)(end + 4 - start);
    snprintf(r->head, sizeof(r->head), "%.*s", (int)head_len, start);
    r->status = atoi(start + 9);
    if (hc_header(r->head, "content-length", v, sizeof(v)) != NULL) {
        r->body_len = strtoul(v, NULL, 10);
        if (avail < head_len + r->body_len) {
            return false;
        }
        memcpy(r->body, start + head_len, r->body_len);
        r->body[r->body_len] = '\0';
        c->used += head_len + r->body_len;
        return true;
    }
    if (hc_header(r->head, "transfer-encoding", v, sizeof(v)) != NULL) {
        size_t used = hc_dechunk(start + head_len, avail - head_len, r, &done);
        if (done) {
            c->used += head_len + used;
        }
        return done || partial;
    }
    r->body_len = avail - head_len;
    memcpy(r->body, start + head_len, r->body_len);
    r->body[r->body_len] = '\0';
    if (c->eof) {
        c->used = c->rx_len;
    }
    return c->eof || partial;
}

static inline void hc_get(struct hc_client *c, const char *request,
                          struct hc_resp *r)
{
    hc_send(c, request);
    HC_RUN_UNTIL(c, hc_take(c, r, false));
}

#endif /* GW_TEST_HTTP_CLIENT_H */
