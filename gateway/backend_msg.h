/*
 * A backend's incoming WebSocket message put back together from the pieces
 * lws hands over (frame fragments, and frames larger than its read size),
 * bounded by the connection's message limit. Free of lws, so the fuzzer
 * drives the same code as the connection.
 */
#ifndef GW_BACKEND_MSG_H
#define GW_BACKEND_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

#endif /* GW_BACKEND_MSG_H */
