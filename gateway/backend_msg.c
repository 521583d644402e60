/* Reassembly of a backend's WebSocket messages from lws's pieces. */
#include "gateway/backend_msg.h"

#include <stdlib.h>
#include <string.h>

/* lws reads 4 KiB at a time; a message in pieces is at least two. */
#define FIRST_CAP 8192

static const uint8_t empty[1];

/* Makes room for need bytes in all, doubling, never past max. */
static int reserve(struct gw_backend_msg *msg, size_t need, size_t max)
{
    size_t cap = msg->cap > 0 ? msg->cap : FIRST_CAP;
    uint8_t *grown;

    if (need <= msg->cap) {
        return 0;
    }
    while (cap < need) {
        cap = cap <= SIZE_MAX / 2 ? cap * 2 : SIZE_MAX;
    }
    cap = cap < max ? cap : max;
    grown = realloc(msg->buf, cap);
    if (grown == NULL) {
        return GW_ENOMEM;
    }
    msg->buf = grown;
    msg->cap = cap;
    return 0;
}

/* Drops a partial message; the buffer stays for the next one. */
static int fail(struct gw_backend_msg *msg, int err)
{
    msg->len = 0;
    msg->open = false;
    return err;
}

int gw_backend_msg_add(struct gw_backend_msg *msg, size_t max,
                       const uint8_t *in, size_t len, bool first, bool final,
                       bool binary, struct gw_backend_msg_out *out)
{
    int err;

    if (first) {
        msg->len = 0;
        msg->open = true;
        msg->binary = binary;
    } else if (!msg->open) {
        return fail(msg, GW_EPROTO);
    }
    if (len > max - msg->len) {
        return fail(msg, GW_ETOOBIG);
    }
    if (first && final) {
        /* The common case: the message is the piece, no copy. */
        msg->open = false;
        out->data = len > 0 ? in : empty;
        out->len = len;
        out->binary = msg->binary;
        return 1;
    }
    if (len > 0) {
        err = reserve(msg, msg->len + len, max);
        if (err < 0) {
            return fail(msg, err);
        }
        memcpy(msg->buf + msg->len, in, len);
        msg->len += len;
    }
    if (!final) {
        return 0;
    }
    msg->open = false;
    out->data = msg->len > 0 ? msg->buf : empty;
    out->len = msg->len;
    out->binary = msg->binary;
    msg->len = 0;
    return 1;
}

void gw_backend_msg_release(struct gw_backend_msg *msg)
{
    free(msg->buf);
    memset(msg, 0, sizeof(*msg));
}
