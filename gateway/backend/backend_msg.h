/*
 * A backend's incoming WebSocket message put back together from the pieces
 * lws hands over (frame fragments, and frames larger than its read size),
 * bounded by the connection's message limit, and, for a binary message
 * that does not decode in the backend's framing, why and what it likely
 * is. Free of lws, so the fuzzer drives the same code as the connection.
 */
#ifndef GW_BACKEND_MSG_H
#define GW_BACKEND_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec/audio_frame.h"
#include "common/error.h"

/* All zero is an empty reassembler; gw_backend_msg_release frees it. */
struct gw_backend_msg {
    uint8_t *buf; /* the pieces so far; NULL until a message is in pieces */
    size_t len, cap;
    bool binary; /* of the message under way */
    bool open;   /* a first piece came, its final one has not */
};

/* A complete message: data points into the piece or into msg->buf and
 * stays valid until the next gw_backend_msg_add or release. */
struct gw_backend_msg_out {
    const uint8_t *data; /* never NULL, even for an empty message */
    size_t len;
    bool binary;
};

/*
 * Adds one piece of len bytes (in may be NULL when len is 0). first and
 * final say where the piece sits in its message; binary is read from the
 * first piece only. A message that arrives in one piece is handed back in
 * place, without a copy. Returns 1 and fills *out when the piece ends a
 * message, 0 when more pieces are due, GW_ETOOBIG when the message would
 * pass max bytes, GW_EPROTO for a continuation with no message under way,
 * GW_ENOMEM. After an error the partial message is gone and the next piece
 * must be a first one.
 */
GW_MUST_CHECK int gw_backend_msg_add(struct gw_backend_msg *msg, size_t max,
                                     const uint8_t *in, size_t len, bool first,
                                     bool final, bool binary,
                                     struct gw_backend_msg_out *out);

/* Frees the buffer; msg is empty again. */
void gw_backend_msg_release(struct gw_backend_msg *msg);

/*
 * Frees a buffer grown past its first size, once no message is under way
 * and the last one was handed over: a connection holds a large message's
 * bytes (limits.max_downlink_bytes) only while it is relayed.
 */
void gw_backend_msg_trim(struct gw_backend_msg *msg);

/*
 * Why a binary message was dropped (docs/protocol.md section 6.4), the
 * reason label of hybridgw_backend_frames_dropped_total.
 */
#define GW_BACKEND_DROP_MAP(XX)                                                \
    XX(BARE_OPUS, "bare_opus")    /* an Opus packet with no header */          \
    XX(TRUNCATED, "truncated")    /* shorter than its header or length */      \
    XX(LENGTH, "length_mismatch") /* more bytes than its length says */        \
    XX(TOO_BIG, "too_big")        /* declares more than 1484 bytes */          \
    XX(BAD_TYPE, "bad_type")      /* v3 type other than 0 */                   \
    XX(OTHER, "other")

enum gw_backend_drop {
#define XX(name, _) GW_BACKEND_DROP_##name,
    GW_BACKEND_DROP_MAP(XX)
#undef XX
        GW_BACKEND_DROP_COUNT_
};

const char *gw_backend_drop_name(enum gw_backend_drop drop);

/*
 * Classifies a binary message of len bytes that gw_audio_frame_decode
 * refused with err in framing. It is BARE_OPUS, whatever err says, when
 * the framing has a header and the whole message is a well-formed mono
 * Opus packet of wideband or more, 10 to 120 ms: what the xiaozhi server
 * sends without ?from=mqtt_gateway. A v2 frame's first byte (0x00, or
 * 0x01 from the server) reads as a narrowband TOC, so real frames with a
 * broken length are not taken for one.
 */
enum gw_backend_drop gw_backend_drop_classify(enum gw_framing framing,
                                              const uint8_t *buf, size_t len,
                                              int err);

/*
 * The likely cause of a drop, for the warning: a sentence without a
 * final full stop, or NULL when there is nothing better to say than the
 * reason. gateway_query: the backend url ends with ?from=mqtt_gateway.
 */
const char *gw_backend_drop_hint(enum gw_framing framing,
                                 enum gw_backend_drop drop, bool gateway_query);

/*
 * Writes up to max bytes of buf as lowercase hex pairs separated by
 * spaces, with " ..." when len > max, into out (cap bytes, always
 * terminated when cap > 0). Returns out.
 */
char *gw_backend_hex_head(const uint8_t *buf, size_t len, size_t max, char *out,
                          size_t cap);

#endif /* GW_BACKEND_MSG_H */
