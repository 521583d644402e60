/*
 * WebSocket client frame heads and masking (RFC 6455 section 5.2, 5.3).
 */
#include "codec/ws_frame.h"

#include <string.h>

int gw_ws_frame_client_head(uint8_t *out, size_t cap, unsigned opcode,
                            uint64_t len, const uint8_t mask[4])
{
    size_t n = 2;

    if (out == NULL || mask == NULL || opcode > 0xf || len >> 63 != 0) {
        return GW_EINVAL;
    }
    size_t need = (len < 126 ? 2 : len < 65536 ? 4 : 10) + 4;
    if (cap < need) {
        return GW_ENOSPC;
    }
    out[0] = (uint8_t)(0x80 | opcode); /* FIN: never fragmented */
    if (len < 126) {
        out[1] = (uint8_t)(0x80 | len); /* MASK: a client's frames are */
    } else if (len < 65536) {
        out[1] = 0x80 | 126;
        out[2] = (uint8_t)(len >> 8);
        out[3] = (uint8_t)len;
        n = 4;
    } else {
        out[1] = 0x80 | 127;
        for (int i = 0; i < 8; i++) {
            out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
        }
        n = 10;
    }
    memcpy(out + n, mask, 4);
    return (int)(n + 4);
}

void gw_ws_frame_mask(uint8_t *payload, size_t len, const uint8_t mask[4])
{
    uint8_t key8[8];
    uint64_t key;
    size_t i = 0;

    /* Eight bytes at a time: the key repeats every 4, so twice over is
     * the key for any 8 bytes starting at a multiple of 4. */
    memcpy(key8, mask, 4);
    memcpy(key8 + 4, mask, 4);
    memcpy(&key, key8, 8);
    for (; i + 8 <= len; i += 8) {
        uint64_t v;
        memcpy(&v, payload + i, 8);
        v ^= key;
        memcpy(payload + i, &v, 8);
    }
    for (; i < len; i++) {
        payload[i] ^= mask[i % 4];
    }
}
