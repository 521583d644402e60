/* The event-stream parser; see sse.h. */
#include "codec/sse.h"

#include <stdlib.h>
#include <string.h>

static const unsigned char bom[3] = {0xef, 0xbb, 0xbf};

void gw_sse_init(struct gw_sse_parser *p, size_t max_line, size_t max_event)
{
    memset(p, 0, sizeof(*p));
    p->max_line = max_line > 0 ? max_line : 1;
    p->max_event = max_event > 0 ? max_event : 1;
}

void gw_sse_free(struct gw_sse_parser *p)
{
    free(p->line);
    free(p->data);
    p->line = p->data = NULL;
    p->line_len = p->line_cap = p->data_len = p->data_cap = 0;
}

bool gw_sse_pending(const struct gw_sse_parser *p)
{
    return p->line_len > 0 || p->has_data || (!p->started && p->bom_len > 0);
}

/* Makes room for need bytes (plus a NUL) in a buffer capped at limit. */
static int reserve(char **buf, size_t *cap, size_t need, size_t limit)
{
    size_t want;
    char *grown;

    if (need + 1 <= *cap) {
        return 0;
    }
    want = *cap > 0 ? *cap : 64;
    while (want < need + 1) {
        want *= 2;
    }
    if (want > limit + 1) {
        want = limit + 1;
    }
    grown = realloc(*buf, want);
    if (grown == NULL) {
        return GW_ENOMEM;
    }
    *buf = grown;
    *cap = want;
    return 0;
}

static int append_line(struct gw_sse_parser *p, const char *s, size_t n)
{
    int rc;

    if (n == 0) {
        return 0;
    }
    if (n > p->max_line - p->line_len) {
        return GW_ETOOBIG;
    }
    rc = reserve(&p->line, &p->line_cap, p->line_len + n, p->max_line);
    if (rc != 0) {
        return rc;
    }
    memcpy(p->line + p->line_len, s, n);
    p->line_len += n;
    return 0;
}

static int add_data(struct gw_sse_parser *p, const char *v, size_t n)
{
    size_t sep = p->has_data ? 1 : 0;
    int rc;

    if (n > p->max_event || sep + n > p->max_event - p->data_len) {
        return GW_ETOOBIG;
    }
    rc = reserve(&p->data, &p->data_cap, p->data_len + sep + n, p->max_event);
    if (rc != 0) {
        return rc;
    }
    if (sep) {
        p->data[p->data_len++] = '\n';
    }
    if (n > 0) {
        memcpy(p->data + p->data_len, v, n);
    }
    p->data_len += n;
    p->data[p->data_len] = '\0';
    p->has_data = true;
    return 0;
}

/* event: or id: into a fixed buffer; NULs would cut a name short. */
static int set_name(char *dst, const char *v, size_t n)
{
    if (n > GW_SSE_NAME_MAX) {
        return GW_ETOOBIG;
    }
    memcpy(dst, v, n);
    dst[n] = '\0';
    return 0;
}

static int dispatch(struct gw_sse_parser *p, gw_sse_event_cb cb, void *arg)
{
    struct gw_sse_event ev;
    int rc = 0;

    if (p->has_data) {
        ev.event = p->event[0] != '\0' ? p->event : "message";
        ev.data = p->data != NULL ? p->data : "";
        ev.data_len = p->data_len;
        ev.id = p->id;
        rc = cb(arg, &ev);
    }
    p->data_len = 0;
    p->has_data = false;
    p->event[0] = '\0';
    return rc;
}

static bool field_is(const char *f, size_t n, const char *name)
{
    return n == strlen(name) && memcmp(f, name, n) == 0;
}

static int end_line(struct gw_sse_parser *p, gw_sse_event_cb cb, void *arg)
{
    const char *line = p->line, *colon, *v;
    size_t n = p->line_len, flen, vlen;
    int rc = 0;

    p->line_len = 0;
    if (n == 0) {
        return dispatch(p, cb, arg);
    }
    if (line[0] == ':') {
        return 0; /* a comment, servers send them to keep streams open */
    }
    colon = memchr(line, ':', n);
    flen = colon != NULL ? (size_t)(colon - line) : n;
    v = colon != NULL ? colon + 1 : line + n;
    vlen = n - (size_t)(v - line);
    if (vlen > 0 && *v == ' ') {
        v++;
        vlen--;
    }
    if (field_is(line, flen, "data")) {
        rc = add_data(p, v, vlen);
    } else if (field_is(line, flen, "event")) {
        rc = set_name(p->event, v, vlen);
    } else if (field_is(line, flen, "id")) {
        /* The standard ignores an id with a NUL in it. */
        if (memchr(v, '\0', vlen) == NULL) {
            rc = set_name(p->id, v, vlen);
        }
    }
    return rc;
}

int gw_sse_feed(struct gw_sse_parser *p, const char *buf, size_t len,
                gw_sse_event_cb cb, void *arg)
{
    size_t i = 0;
    int rc = 0;

    if (p == NULL || (buf == NULL && len > 0) || cb == NULL) {
        return GW_EINVAL;
    }
    if (p->failed != 0) {
        return p->failed;
    }
    /* One byte order mark may open the stream, possibly split. */
    while (!p->started && i < len) {
        if ((unsigned char)buf[i] == bom[p->bom_len]) {
            i++;
            if (++p->bom_len == sizeof(bom)) {
                p->started = true;
            }
            continue;
        }
        p->started = true;
        rc = append_line(p, (const char *)bom, p->bom_len);
    }
    while (rc == 0 && i < len) {
        size_t j = i;
        char c = buf[i];

        if (p->after_cr) {
            p->after_cr = false;
            if (c == '\n') {
                i++; /* the LF of a CRLF: the line already ended */
                continue;
            }
        }
        while (j < len && buf[j] != '\r' && buf[j] != '\n') {
            j++;
        }
        rc = append_line(p, buf + i, j - i);
        i = j;
        if (rc == 0 && i < len) {
            p->after_cr = buf[i] == '\r';
            i++;
            rc = end_line(p, cb, arg);
        }
    }
    if (rc != 0) {
        p->failed = rc;
    }
    return rc;
}
