/*
 * The pcm16 framing's transcoder (docs/protocol.md section 6.4): one per
 * session whose backend wants PCM, created only then. Uplink Opus from the
 * device is decoded to 16-bit little-endian mono PCM at the device's rate;
 * downlink PCM from the backend is buffered, cut into frames of the
 * device's frame duration and encoded to Opus at the backend's PCM rate,
 * which is the rate promised to the device in the server hello (so the
 * gateway never resamples). No I/O and no loop: a test drives it directly.
 */
#ifndef GW_PCM_BRIDGE_H
#define GW_PCM_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "common/error.h"

/* The largest PCM frame either way: 120 ms at 48 kHz, 2 bytes a sample. */
#define GW_PCM_BRIDGE_MAX_FRAME_BYTES (48 * 120 * 2)

struct gw_pcm_bridge;

struct gw_pcm_bridge_params {
    int up_rate;         /* device uplink rate: 8000..48000 as Opus has them */
    int down_rate;       /* backend PCM rate, the encoder's and the device's */
    int frame_ms;        /* device frame: 5, 10, 20, 40, 60, 80, 100 or 120 */
    const char *subject; /* log prefix (outlives the bridge); NULL = "pcm" */
};

struct gw_pcm_bridge_stats {
    uint64_t up_packets;     /* Opus packets decoded */
    uint64_t up_errors;      /* packets libopus refused */
    uint64_t down_bytes;     /* PCM bytes taken from the backend */
    uint64_t down_frames;    /* Opus frames produced */
    uint64_t down_odd;       /* messages of an odd byte count */
    uint64_t down_errors;    /* frames libopus could not encode */
    uint64_t down_discarded; /* buffered PCM bytes dropped by a reset */
};

/* Called for each encoded downlink frame; opus is valid during the call. */
typedef void (*gw_pcm_bridge_emit)(void *arg, const uint8_t *opus, size_t len);

/*
 * Creates the codec state. Returns 0, GW_EINVAL (a rate or duration libopus
 * does not code), GW_ENOMEM or GW_EOPUS.
 */
GW_MUST_CHECK int gw_pcm_bridge_create(const struct gw_pcm_bridge_params *p,
                                       struct gw_pcm_bridge **out);

/* Frees it, logging the session's error totals if there were any; NULL
 * is fine. */
void gw_pcm_bridge_free(struct gw_pcm_bridge *b);

/*
 * Decodes one uplink Opus packet to PCM16LE mono at up_rate into pcm (cap
 * bytes) and sets *pcm_len. Returns 0, GW_EOPUS (counted; logged once per
 * bridge) or GW_ENOSPC. A DTX packet decodes to the frame's silence.
 */
GW_MUST_CHECK int gw_pcm_bridge_uplink(struct gw_pcm_bridge *b,
                                       const uint8_t *opus, size_t len,
                                       uint8_t *pcm, size_t cap,
                                       size_t *pcm_len);

/*
 * Takes one downlink message of PCM16LE mono at down_rate. Whole frames
 * are encoded and handed to emit at once, the rest waits for the next
 * message. A message of an odd byte count loses its last byte (counted,
 * logged once per bridge), so the samples after it stay aligned. Returns
 * the number of frames emitted.
 */
size_t gw_pcm_bridge_downlink(struct gw_pcm_bridge *b, const uint8_t *pcm,
                              size_t len, gw_pcm_bridge_emit emit, void *arg);

/*
 * Ends a stretch of speech: a partial frame is padded with silence and
 * emitted (the backend's last words are not held until its next reply).
 * Returns 1 if a frame went, else 0.
 */
size_t gw_pcm_bridge_downlink_flush(struct gw_pcm_bridge *b,
                                    gw_pcm_bridge_emit emit, void *arg);

/* Drops buffered downlink PCM (the device aborted). */
void gw_pcm_bridge_downlink_reset(struct gw_pcm_bridge *b);

/* Bytes of downlink PCM waiting for a whole frame. */
size_t gw_pcm_bridge_pending(const struct gw_pcm_bridge *b);

/* Bytes of one downlink PCM frame (down_rate * frame_ms, 2 a sample). */
size_t gw_pcm_bridge_frame_bytes(const struct gw_pcm_bridge *b);

void gw_pcm_bridge_get_stats(const struct gw_pcm_bridge *b,
                             struct gw_pcm_bridge_stats *out);

/*
 * The backend hello's audio_params.sample_rate when it names one libopus
 * codes at, else 0 (then the backend's configured pcm_sample_rate holds).
 */
int gw_pcm_bridge_hello_rate(const cJSON *hello);

#endif /* GW_PCM_BRIDGE_H */
