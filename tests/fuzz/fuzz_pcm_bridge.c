/*
 * The pcm16 transcoder (gateway/audio/pcm_bridge.c) on any traffic: the first
 * two bytes pick the rates and the frame duration (including ones libopus
 * refuses), then each op byte feeds the bridge: an uplink packet of the
 * next n bytes, a downlink message of the next n bytes (any length, odd
 * ones included), a flush, or a reset. Invariants: every emitted frame is
 * a non-empty Opus packet no larger than the encoder's buffer; a message
 * encodes exactly the whole frames the buffered bytes make (each emitted,
 * or counted as failed); what waits stays
 * under one frame; a flush emits at most one frame and empties the
 * buffer; uplink PCM is whole samples within the output buffer; the
 * counters add up.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "gateway/audio/pcm_bridge.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            abort();                                                           \
        }                                                                      \
    } while (0)

static const int rates[] = {8000, 12000, 16000, 24000, 48000, 44100, 0};
static const int frames[] = {5, 10, 20, 40, 60, 80, 100, 120, 7, 0};

static size_t emitted;

static void on_frame(void *arg, const uint8_t *opus, size_t len)
{
    (void)arg;
    CHECK(opus != NULL && len > 0 && len <= 4000);
    emitted++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t pcm[GW_PCM_BRIDGE_MAX_FRAME_BYTES];
    struct gw_pcm_bridge_params p;
    struct gw_pcm_bridge_stats st;
    struct gw_pcm_bridge *b = NULL;
    size_t frame, off = 2, frames_out = 0, bytes_in = 0;

    gw_log_set_level(GW_LOG_ERROR);
    if (size < 2) {
        return 0;
    }
    p.up_rate = rates[data[0] % (sizeof(rates) / sizeof(rates[0]))];
    p.down_rate = rates[(data[0] >> 4) % (sizeof(rates) / sizeof(rates[0]))];
    p.frame_ms = frames[data[1] % (sizeof(frames) / sizeof(frames[0]))];
    p.subject = "fuzz";
    if (gw_pcm_bridge_create(&p, &b) != 0) {
        CHECK(b == NULL);
        return 0;
    }
    frame = gw_pcm_bridge_frame_bytes(b);
    CHECK(frame > 0 && frame <= GW_PCM_BRIDGE_MAX_FRAME_BYTES);
    while (off + 2 <= size) {
        uint8_t op = data[off] & 3;
        size_t n = data[off + 1];
        off += 2;
        if (op < 2) {
            n = n * 16 + (data[off - 2] >> 2); /* up to ~4 KiB a message */
            n = n < size - off ? n : size - off;
        } else {
            n = 0;
        }
        size_t before = gw_pcm_bridge_pending(b);
        struct gw_pcm_bridge_stats s0, s1;
        gw_pcm_bridge_get_stats(b, &s0);
        emitted = 0;
        if (op == 0) {
            size_t got = SIZE_MAX;
            int rc =
                gw_pcm_bridge_uplink(b, data + off, n, pcm, sizeof(pcm), &got);
            CHECK(rc == 0 || rc == GW_EOPUS || rc == GW_ENOSPC);
            if (rc == 0) {
                CHECK(got <= sizeof(pcm) && got % 2 == 0);
            }
        } else if (op == 1) {
            size_t whole = n & ~(size_t)1; /* an odd last byte is dropped */
            size_t out =
                gw_pcm_bridge_downlink(b, data + off, n, on_frame, NULL);
            gw_pcm_bridge_get_stats(b, &s1);
            /* Every whole frame is encoded: emitted, or counted failed. */
            CHECK(out == emitted);
            CHECK(out + (s1.down_errors - s0.down_errors) ==
                  (before + whole) / frame);
            CHECK(gw_pcm_bridge_pending(b) == (before + whole) % frame);
            frames_out += emitted;
            bytes_in += n;
        } else if (op == 2) {
            size_t out = gw_pcm_bridge_downlink_flush(b, on_frame, NULL);
            gw_pcm_bridge_get_stats(b, &s1);
            CHECK(out == emitted);
            CHECK(out + (s1.down_errors - s0.down_errors) ==
                  (before > 0 ? 1u : 0u));
            CHECK(gw_pcm_bridge_pending(b) == 0);
            frames_out += emitted;
        } else {
            gw_pcm_bridge_downlink_reset(b);
            CHECK(gw_pcm_bridge_pending(b) == 0);
        }
        CHECK(gw_pcm_bridge_pending(b) < frame);
        off += n;
    }
    gw_pcm_bridge_get_stats(b, &st);
    CHECK(st.down_bytes == bytes_in);
    CHECK(st.down_frames == frames_out);
    gw_pcm_bridge_free(b);
    return 0;
}
