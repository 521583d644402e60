/*
 * The head of a WebSocket frame a client sends (RFC 6455 section 5.2):
 * FIN and opcode, the masked length, the 4-byte masking key; and the
 * masking itself. The gateway writes its audio frames to plain ws://
 * backends with these (gateway/backend/backend_io.c, docs/architecture.md
 * section 3); libwebsockets frames everything else.
 */
#ifndef GW_CODEC_WS_FRAME_H
#define GW_CODEC_WS_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define GW_WS_OP_TEXT   0x1
#define GW_WS_OP_BINARY 0x2

/* The longest client head: 2 bytes, 8 of length, 4 of key. */
#define GW_WS_FRAME_HEAD_MAX 14

/*
 * Writes the head of one whole (FIN) client frame of opcode (0x0..0xf)
 * with a payload of len bytes under mask into out, which has cap bytes,
 * using the shortest length form, as RFC 6455 requires. Returns its
 * length (6, 8 or 14), or GW_EINVAL (opcode out of range, len above
 * 2^63 - 1, NULL pointers) or GW_ENOSPC (cap too small).
 */
GW_MUST_CHECK int gw_ws_frame_client_head(uint8_t *out, size_t cap,
                                          unsigned opcode, uint64_t len,
                                          const uint8_t mask[4]);

/*
 * XORs payload[0..len) with the key, byte i with mask[i % 4], in place
 * (masking and unmasking are the same). Any alignment.
 */
void gw_ws_frame_mask(uint8_t *payload, size_t len, const uint8_t mask[4]);

#endif /* GW_CODEC_WS_FRAME_H */
