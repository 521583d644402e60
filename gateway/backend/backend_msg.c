/*
 * Reassembly of a backend's WebSocket messages from lws's pieces, and what
 * to say about a binary one that does not decode.
 */
#include "gateway/backend/backend_msg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <opus.h>

#include "codec/opus_packet.h"

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

void gw_backend_msg_trim(struct gw_backend_msg *msg)
{
    if (!msg->open && msg->cap > FIRST_CAP) {
        gw_backend_msg_release(msg);
    }
}

/* ---- dropped binary messages ------------------------------------------ */

const char *gw_backend_drop_name(enum gw_backend_drop drop)
{
    static const char *const names[] = {
#define XX(_, text) text,
        GW_BACKEND_DROP_MAP(XX)
#undef XX
    };

    return (unsigned)drop < GW_BACKEND_DROP_COUNT_ ? names[drop] : "other";
}

static bool looks_like_opus(const uint8_t *buf, size_t len)
{
    struct gw_opus_info info;

    return gw_opus_packet_inspect(buf, len, &info) == 0 && !info.stereo &&
           info.bandwidth >= OPUS_BANDWIDTH_WIDEBAND && info.samples_48k >= 480;
}

enum gw_backend_drop gw_backend_drop_classify(enum gw_framing framing,
                                              const uint8_t *buf, size_t len,
                                              int err)
{
    if (buf != NULL && gw_audio_frame_header_len(framing) > 0 &&
        looks_like_opus(buf, len)) {
        return GW_BACKEND_DROP_BARE_OPUS;
    }
    switch (err) {
    case GW_ETRUNC:
        return GW_BACKEND_DROP_TRUNCATED;
    case GW_EMALFORMED:
        return GW_BACKEND_DROP_LENGTH;
    case GW_ETOOBIG:
        return GW_BACKEND_DROP_TOO_BIG;
    case GW_EPROTO:
        return GW_BACKEND_DROP_BAD_TYPE;
    default:
        return GW_BACKEND_DROP_OTHER;
    }
}

const char *gw_backend_drop_hint(enum gw_framing framing,
                                 enum gw_backend_drop drop, bool gateway_query)
{
    if (drop == GW_BACKEND_DROP_BARE_OPUS) {
        if (framing == GW_FRAMING_V2 && !gateway_query) {
            return "it looks like a bare Opus packet: xiaozhi-esp32-server "
                   "sends those when the backend url lacks "
                   "?from=mqtt_gateway (it must end the url)";
        }
        return "it looks like a bare Opus packet: the backend sends no "
               "header, so its framing is probably raw";
    }
    if (drop == GW_BACKEND_DROP_TOO_BIG && framing == GW_FRAMING_RAW) {
        return "an Opus packet is at most 1484 bytes: the backend may send "
               "a framing with a header, or another codec";
    }
    if (framing == GW_FRAMING_V2 || framing == GW_FRAMING_V3) {
        return "the backend's framing may not be the configured one";
    }
    return NULL;
}

char *gw_backend_hex_head(const uint8_t *buf, size_t len, size_t max, char *out,
                          size_t cap)
{
    size_t used = 0, n = len < max ? len : max;

    if (cap == 0) {
        return out;
    }
    out[0] = '\0';
    for (size_t i = 0; i < n && used + 4 <= cap; i++) {
        used += (size_t)snprintf(out + used, cap - used, "%s%02x",
                                 i > 0 ? " " : "", buf[i]);
    }
    if (len > n && used + 5 <= cap) {
        snprintf(out + used, cap - used, " ...");
    }
    return out;
}
