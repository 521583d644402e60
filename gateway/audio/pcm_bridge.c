/*
 * pcm16 transcoding with libopus: decode uplink, buffer and cut and encode
 * downlink. Samples go through explicit little-endian byte order so the
 * wire format does not depend on the host.
 */
#include "gateway/audio/pcm_bridge.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <opus/opus.h>

#include "common/log.h"

/* Samples per channel of one frame at 48 kHz and 120 ms: the most either
 * direction handles at once. */
#define MAX_SAMPLES (48 * 120)

struct gw_pcm_bridge {
    OpusDecoder *dec;
    OpusEncoder *enc;
    int up_rate;
    const char *subject;
    size_t frame_samples; /* downlink samples per frame */
    size_t have;          /* downlink samples buffered in frame[] */
    bool warned_up;       /* a decode error was logged */
    bool warned_odd;      /* an odd-length message was logged */
    bool warned_enc;      /* an encode error was logged */
    struct gw_pcm_bridge_stats stats;
    opus_int16 frame[MAX_SAMPLES]; /* the downlink frame being filled */
    opus_int16 scratch[MAX_SAMPLES];
};

static bool opus_rate(int rate)
{
    return rate == 8000 || rate == 12000 || rate == 16000 || rate == 24000 ||
           rate == 48000;
}

/* libopus (1.2 and later) codes frames of these durations in ms. */
static bool opus_duration(int ms)
{
    return ms == 5 || ms == 10 || ms == 20 || ms == 40 || ms == 60 ||
           ms == 80 || ms == 100 || ms == 120;
}

static const char *subject_of(const struct gw_pcm_bridge *b)
{
    return b->subject != NULL ? b->subject : "pcm";
}

int gw_pcm_bridge_create(const struct gw_pcm_bridge_params *p,
                         struct gw_pcm_bridge **out)
{
    struct gw_pcm_bridge *b;
    int err = 0;

    if (p == NULL || out == NULL || !opus_rate(p->up_rate) ||
        !opus_rate(p->down_rate) || !opus_duration(p->frame_ms)) {
        return GW_EINVAL;
    }
    b = calloc(1, sizeof(*b));
    if (b == NULL) {
        return GW_ENOMEM;
    }
    b->up_rate = p->up_rate;
    b->subject = p->subject;
    b->frame_samples = (size_t)p->down_rate / 1000 * (size_t)p->frame_ms;
    b->dec = opus_decoder_create(p->up_rate, 1, &err);
    if (b->dec != NULL) {
        /* Speech from a TTS engine, not a call: AUDIO keeps it natural;
         * VBR at libopus's default bitrate for the rate. */
        b->enc =
            opus_encoder_create(p->down_rate, 1, OPUS_APPLICATION_AUDIO, &err);
    }
    if (b->dec == NULL || b->enc == NULL) {
        gw_pcm_bridge_free(b);
        return err == OPUS_ALLOC_FAIL ? GW_ENOMEM : GW_EOPUS;
    }
    *out = b;
    return 0;
}

void gw_pcm_bridge_free(struct gw_pcm_bridge *b)
{
    if (b == NULL) {
        return;
    }
    /* The first of each was logged; the totals come with the end. */
    if (b->stats.up_errors + b->stats.down_odd + b->stats.down_errors > 0) {
        gw_log(GW_LOG_WARN, subject_of(b),
               "pcm16: %llu uplink packets not decoded, %llu odd-length "
               "backend messages, %llu frames not encoded in this session",
               (unsigned long long)b->stats.up_errors,
               (unsigned long long)b->stats.down_odd,
               (unsigned long long)b->stats.down_errors);
    }
    if (b->dec != NULL) {
        opus_decoder_destroy(b->dec);
    }
    if (b->enc != NULL) {
        opus_encoder_destroy(b->enc);
    }
    free(b);
}

int gw_pcm_bridge_uplink(struct gw_pcm_bridge *b, const uint8_t *opus,
                         size_t len, uint8_t *pcm, size_t cap, size_t *pcm_len)
{
    int n;

    if (opus == NULL || len == 0 || len > INT32_MAX) {
        n = OPUS_INVALID_PACKET;
    } else {
        n = opus_decode(b->dec, opus, (opus_int32)len, b->scratch, MAX_SAMPLES,
                        0);
    }
    if (n < 0) {
        b->stats.up_errors++;
        if (!b->warned_up) {
            b->warned_up = true;
            gw_log(GW_LOG_WARN, subject_of(b),
                   "pcm16: uplink packet of %zu bytes not decoded: %s "
                   "(counted, logged once per session)",
                   len, opus_strerror(n));
        }
        return GW_EOPUS;
    }
    if ((size_t)n * 2 > cap) {
        return GW_ENOSPC;
    }
    for (int i = 0; i < n; i++) {
        uint16_t v = (uint16_t)b->scratch[i];
        pcm[2 * i] = (uint8_t)v;
        pcm[2 * i + 1] = (uint8_t)(v >> 8);
    }
    *pcm_len = (size_t)n * 2;
    b->stats.up_packets++;
    return 0;
}

/* Encodes the full frame buffer and hands the packet on. */
static size_t emit_frame(struct gw_pcm_bridge *b, gw_pcm_bridge_emit emit,
                         void *arg)
{
    uint8_t pkt[1275 * 3]; /* the largest packet libopus writes */
    opus_int32 n = opus_encode(b->enc, b->frame, (int)b->frame_samples, pkt,
                               (opus_int32)sizeof(pkt));

    b->have = 0;
    if (n <= 0) {
        b->stats.down_errors++;
        if (!b->warned_enc) {
            b->warned_enc = true;
            gw_log(GW_LOG_WARN, subject_of(b),
                   "pcm16: downlink frame not encoded: %s (counted, logged "
                   "once per session)",
                   opus_strerror((int)n));
        }
        return 0;
    }
    b->stats.down_frames++;
    emit(arg, pkt, (size_t)n);
    return 1;
}

size_t gw_pcm_bridge_downlink(struct gw_pcm_bridge *b, const uint8_t *pcm,
                              size_t len, gw_pcm_bridge_emit emit, void *arg)
{
    size_t frames = 0;

    b->stats.down_bytes += len;
    if (len % 2 != 0) {
        b->stats.down_odd++;
        if (!b->warned_odd) {
            b->warned_odd = true;
            gw_log(GW_LOG_WARN, subject_of(b),
                   "pcm16: backend message of %zu bytes is not whole 16-bit "
                   "samples: last byte dropped (counted, logged once per "
                   "session)",
                   len);
        }
        len--;
    }
    for (size_t i = 0; i + 1 < len; i += 2) {
        b->frame[b->have++] = (opus_int16)(uint16_t)(pcm[i] | pcm[i + 1] << 8);
        if (b->have == b->frame_samples) {
            frames += emit_frame(b, emit, arg);
        }
    }
    return frames;
}

size_t gw_pcm_bridge_downlink_flush(struct gw_pcm_bridge *b,
                                    gw_pcm_bridge_emit emit, void *arg)
{
    if (b->have == 0) {
        return 0;
    }
    memset(b->frame + b->have, 0,
           (b->frame_samples - b->have) * sizeof(b->frame[0]));
    return emit_frame(b, emit, arg);
}

void gw_pcm_bridge_downlink_reset(struct gw_pcm_bridge *b)
{
    b->stats.down_discarded += b->have * 2;
    b->have = 0;
}

size_t gw_pcm_bridge_pending(const struct gw_pcm_bridge *b)
{
    return b->have * 2;
}

size_t gw_pcm_bridge_frame_bytes(const struct gw_pcm_bridge *b)
{
    return b->frame_samples * 2;
}

void gw_pcm_bridge_get_stats(const struct gw_pcm_bridge *b,
                             struct gw_pcm_bridge_stats *out)
{
    *out = b->stats;
}

int gw_pcm_bridge_hello_rate(const cJSON *hello)
{
    const cJSON *audio =
        cJSON_GetObjectItemCaseSensitive(hello, "audio_params");
    const cJSON *rate = cJSON_GetObjectItemCaseSensitive(audio, "sample_rate");

    static const int rates[] = {8000, 12000, 16000, 24000, 48000};

    /* Compared as doubles: no cast of an arbitrary number to int. */
    for (size_t i = 0;
         cJSON_IsNumber(rate) && i < sizeof(rates) / sizeof(rates[0]); i++) {
        if (rate->valuedouble == (double)rates[i]) {
            return rates[i];
        }
    }
    return 0;
}
