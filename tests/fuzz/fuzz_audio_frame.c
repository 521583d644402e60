/*
 * Backend audio framings. The first input byte picks the framing, the rest
 * is a frame to decode. Invariants: a decoded frame re-encodes to a frame
 * that decodes to the same timestamp and payload (and, where the framing
 * has no ignored bytes, to the same bytes); and any payload encodes, with
 * header-in-place and encode agreeing, and decodes back to itself.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/audio_frame.h"

static const enum gw_framing framings[] = {GW_FRAMING_V2, GW_FRAMING_V3,
                                           GW_FRAMING_RAW};

static uint8_t frame[GW_AUDIO_FRAME_MAX_HEADER_LEN + 70000];

/* Checks decode(encode(ts, payload)) == (ts, payload), if it may encode. */
static void round_trip(enum gw_framing f, uint32_t ts, const uint8_t *payload,
                       size_t len)
{
    const uint8_t *got;
    size_t n, hlen, got_len;
    uint32_t got_ts;
    int err =
        gw_audio_frame_encode(f, ts, payload, len, frame, sizeof(frame), &n);

    if (len > GW_AUDIO_FRAME_MAX_PAYLOAD) {
        if (err != GW_ETOOBIG) {
            abort();
        }
        return;
    }
    if (err != 0 || n != gw_audio_frame_header_len(f) + len) {
        abort();
    }
    if (gw_audio_frame_decode(f, frame, n, &got_ts, &got, &got_len) != 0 ||
        got_len != len || got != frame + n - len ||
        memcmp(got, payload, len) != 0 ||
        got_ts != (f == GW_FRAMING_V2 ? ts : 0)) {
        abort();
    }
    /* The zero-copy header must match what encode wrote. */
    {
        uint8_t hdr[GW_AUDIO_FRAME_MAX_HEADER_LEN];
        if (gw_audio_frame_header(f, ts, len, hdr, sizeof(hdr), &hlen) != 0 ||
            hlen != n - len || memcmp(hdr, frame, hlen) != 0) {
            abort();
        }
    }
}

static int same_but_ignored(enum gw_framing f, const uint8_t *mine,
                            const uint8_t *theirs, size_t size)
{
    size_t skip = f == GW_FRAMING_V2 ? 8 : f == GW_FRAMING_V3 ? 2 : 0;
    static const uint8_t zero[8];

    if (f == GW_FRAMING_V3 && mine[0] != theirs[0]) {
        return 0;
    }
    if (f == GW_FRAMING_V3 && mine[1] != 0) {
        return 0;
    }
    if (f == GW_FRAMING_V2 && memcmp(mine, zero, 8) != 0) {
        return 0;
    }
    return memcmp(mine + skip, theirs + skip, size - skip) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enum gw_framing f;
    const uint8_t *payload;
    size_t plen;
    uint32_t ts;
    uint8_t *copy;
    int err;

    if (size < 1) {
        return 0;
    }
    f = framings[data[0] % 3];
    data++;
    size--;

    /* A heap copy of the exact size, so an overread is always caught. */
    copy = malloc(size > 0 ? size : 1);
    if (copy == NULL) {
        return 0;
    }
    memcpy(copy, data, size);
    err = gw_audio_frame_decode(f, copy, size, &ts, &payload, &plen);
    if (err == 0) {
        size_t hlen = gw_audio_frame_header_len(f);
        if (plen > GW_AUDIO_FRAME_MAX_PAYLOAD || hlen + plen != size ||
            payload != copy + hlen) {
            abort();
        }
        round_trip(f, ts, payload, plen);
        /* Bytes a framing ignores come back as zero, the rest unchanged:
         * raw has none, v3 its reserved byte, v2 its first eight. */
        if (!same_but_ignored(f, frame, copy, size)) {
            abort();
        }
    } else if (err != GW_ETRUNC && err != GW_EMALFORMED && err != GW_ETOOBIG &&
               err != GW_EPROTO) {
        abort();
    }
    free(copy);

    /* The same bytes as a payload: every framing must carry them. */
    ts = size >= 4 ? (uint32_t)data[0] << 24 | (uint32_t)data[1] << 16 |
                         (uint32_t)data[2] << 8 | data[3]
                   : 0;
    for (size_t i = 0; i < 3; i++) {
        round_trip(framings[i], ts, data, size);
    }
    return 0;
}
