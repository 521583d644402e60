/*
 * A backend's incoming WebSocket traffic as the gateway meets it: pieces
 * of messages reassembled under a size limit (gateway/backend/backend_msg.c,
 * what backend_io.c runs for every lws receive), then each binary message
 * unframed in every framing and each text message parsed as an envelope.
 *
 * Input: a settings byte (bit 0 adds 256 to the limit), the u16 limit,
 * then pieces: a control byte (bit 0 first, bit 1 final, bit 2 binary,
 * bit 3 NULL when empty, bits 4..7 the length's high bits), the length's
 * low byte, the bytes. A model of the reassembly checks every answer:
 * messages come back whole and in order, the limit holds exactly, a
 * one-piece message is not copied, a stray continuation is refused.
 * Decoding is checked against an independent reading of each header.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/audio_frame.h"
#include "codec/envelope.h"
#include "codec/hello.h"
#include "gateway/backend/backend_msg.h"

#define MODEL_MAX 70000

static uint8_t
    model[MODEL_MAX]; /* the message under way, as the model has it */

static uint32_t load32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           p[3];
}

/* What a framing's decode must answer, read straight from the header. */
static int expect_decode(enum gw_framing f, const uint8_t *buf, size_t len,
                         size_t *hlen)
{
    size_t declared;

    switch (f) {
    case GW_FRAMING_V2:
        *hlen = 16;
        if (len < 16) {
            return GW_ETRUNC;
        }
        declared = load32(buf + 12);
        break;
    case GW_FRAMING_V3:
        *hlen = 4;
        if (len < 4) {
            return GW_ETRUNC;
        }
        if (buf[0] != 0) {
            return GW_EPROTO;
        }
        declared = (size_t)buf[2] << 8 | buf[3];
        break;
    default:
        *hlen = 0;
        declared = len;
        break;
    }
    if (declared > GW_AUDIO_FRAME_MAX_PAYLOAD) {
        return GW_ETOOBIG;
    }
    if (len - *hlen < declared) {
        return GW_ETRUNC;
    }
    return len - *hlen > declared ? GW_EMALFORMED : 0;
}

static void check_binary(const uint8_t *msg, size_t len)
{
    static const enum gw_framing framings[] = {GW_FRAMING_V2, GW_FRAMING_V3,
                                               GW_FRAMING_RAW};
    /* An exact-size copy: the reassembly buffer has slack that would hide
     * an overread. */
    uint8_t *copy = malloc(len > 0 ? len : 1);

    if (copy == NULL) {
        return;
    }
    if (len > 0) {
        memcpy(copy, msg, len);
    }
    for (size_t i = 0; i < 3; i++) {
        const uint8_t *payload = NULL;
        size_t plen = 0, hlen;
        uint32_t ts = 0;
        int want = expect_decode(framings[i], copy, len, &hlen);
        int got =
            gw_audio_frame_decode(framings[i], copy, len, &ts, &payload, &plen);

        if (got != want) {
            abort();
        }
        if (got == 0 &&
            (payload != copy + hlen || plen != len - hlen ||
             ts != (framings[i] == GW_FRAMING_V2 ? load32(copy + 8) : 0))) {
            abort();
        }
        if (got < 0) {
            /* What the drop warning says of it: bounded, always ended. */
            char head[16 * 3 + 8];
            enum gw_backend_drop why =
                gw_backend_drop_classify(framings[i], copy, len, got);
            if ((unsigned)why >= GW_BACKEND_DROP_COUNT_ ||
                strlen(gw_backend_hex_head(copy, len, 16, head,
                                           sizeof(head))) >= sizeof(head)) {
                abort();
            }
            (void)gw_backend_drop_hint(framings[i], why, len & 1);
        }
    }
    free(copy);
}

/* The session's first look at a backend text message. */
static void check_text(const uint8_t *msg, size_t len, size_t max)
{
    struct gw_envelope env;
    struct gw_audio_params audio;
    char sid[128];

    if (gw_envelope_parse((const char *)msg, len, max, &env) != 0) {
        return;
    }
    if (env.kind == GW_MSG_HELLO &&
        gw_backend_hello_parse(env.root, sid, sizeof(sid), &audio) == 0 &&
        strnlen(sid, sizeof(sid)) == sizeof(sid)) {
        abort();
    }
    gw_envelope_free(&env);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_backend_msg msg = {0};
    size_t max, have = 0; /* model: bytes of the message under way */
    bool open = false, binary = false;

    if (size < 3) {
        return 0;
    }
    /* Limits as configured (256..65536) and the odd small ones. */
    max = (size_t)data[1] << 8 | data[2];
    if (data[0] & 1) {
        max += 256;
    }
    data += 3;
    size -= 3;

    while (size >= 2) {
        uint8_t ctl = data[0];
        size_t len = (size_t)(ctl >> 4) << 8 | data[1];
        bool first = ctl & 1, final = ctl & 2, bin = ctl & 4;
        struct gw_backend_msg_out out = {0};
        uint8_t *piece;
        int rc;

        data += 2;
        size -= 2;
        len = len < size ? len : size;
        piece = malloc(len > 0 ? len : 1);
        if (piece == NULL) {
            break;
        }
        memcpy(piece, data, len);
        data += len;
        size -= len;
        rc = gw_backend_msg_add(&msg, max, len == 0 && (ctl & 8) ? NULL : piece,
                                len, first, final, bin, &out);

        if (first) {
            open = true;
            have = 0;
            binary = bin;
        }
        if (!open) {
            if (rc != GW_EPROTO) {
                abort();
            }
        } else if (len > max - have) {
            if (rc != GW_ETOOBIG) {
                abort();
            }
            open = false;
        } else {
            memcpy(model + have, piece, len);
            have += len;
            if (!final) {
                if (rc != 0) {
                    abort();
                }
            } else {
                if (rc != 1 || out.data == NULL || out.len != have ||
                    out.binary != binary ||
                    (have > 0 && memcmp(out.data, model, have) != 0) ||
                    (first && len > 0 && out.data != piece)) {
                    abort();
                }
                if (out.binary) {
                    check_binary(out.data, out.len);
                } else {
                    check_text(out.data, out.len, max);
                }
                open = false;
            }
        }
        free(piece);
    }
    gw_backend_msg_release(&msg);
    if (msg.buf != NULL || msg.len != 0 || msg.cap != 0 || msg.open) {
        abort();
    }
    return 0;
}
